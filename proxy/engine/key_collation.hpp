// String keys compared the way the key column's collation compares them: which collation compares
// how, and the canonical form of a key value under it (so a take and a claim on one row pair up).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memory.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

// How a column of `data_type` (information_schema DATA_TYPE) with `collation` (COLLATION_NAME,
// nullopt for NULL) compares its values. Only collations whose rules are known exactly for ASCII
// are folded; anything else keeps the safe answer: bytes (never merges two spellings).
[[nodiscard]] rules::key_comparison classify_collation(std::string_view data_type,
                                                       std::optional<std::string_view> collation);

// "bytes", "bytes_pad", "ci_pad", "ci_nopad", "unknown": for reports and logs.
[[nodiscard]] std::string_view to_string(rules::key_comparison k) noexcept;

// One key value in the form two spellings share exactly when the database takes them for one row.
struct canonical_value {
    std::string value;
    // A case-insensitive collation, but the value holds a non-ASCII byte whose folding is not known
    // exactly here (and in a multi-byte client character set an ASCII byte may be half a character):
    // kept as written, trailing spaces aside. It then pairs only with the same bytes; it never meets
    // a folded value, which holds ASCII bytes only.
    bool kept_as_written = false;
};

// PAD SPACE: trailing spaces dropped. Case-insensitive: ASCII letters to lower case when every byte
// is ASCII. Numbers and bytes/unknown: unchanged.
[[nodiscard]] canonical_value canonical_key_value(std::string_view value, rules::key_comparison compare);

// The stock key of `rule` (rule.key_columns order) in canonical form, column by column as
// rule.key_compare says (nothing changes when it is empty). Values past the key columns are left
// alone. Returns how many values were kept as written (see canonical_value).
std::size_t canonicalize_key(key_tuple& key, const rules::stock_rule& rule);

// What the schema check found for one stock rule: per key column, in key_columns order.
struct rule_key_compare {
    std::string rule;
    std::vector<rules::key_comparison> columns;
    friend bool operator==(const rule_key_compare&, const rule_key_compare&) = default;
};

// `rules` with each stock rule's key_compare set from `found` (matched by name; an entry whose
// column count differs from the rule's key_columns is ignored: byte for byte).
[[nodiscard]] rules::rule_set with_key_compare(rules::rule_set rules, const std::vector<rule_key_compare>& found);

}  // namespace claimguard::engine
