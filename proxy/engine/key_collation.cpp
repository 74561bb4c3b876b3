// Collations by name, and key values in the canonical form of their column's comparison.
#include "key_collation.hpp"

#include <algorithm>

namespace claimguard::engine {
namespace {

std::string lower_ascii(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Character string types: compared by their collation. Everything else (numbers, BINARY,
// VARBINARY, BLOB, ENUM, SET, dates) is compared byte for byte here.
bool is_character_type(std::string_view data_type) {
    constexpr std::string_view types[] = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"};
    return std::find(std::begin(types), std::end(types), data_type) != std::end(types);
}

// Case-insensitive collations whose equality on ASCII-only strings is exactly "the same letters
// ignoring case": no contractions or tailorings of ASCII letters (czech_ci takes "ch" as one
// letter but not "cH"; turkish_ci keeps "I" apart from "i"), no per-byte table surprises. Named
// without the charset prefix and with MariaDB's "nopad_" removed.
constexpr std::string_view ascii_folding[] = {
    "general_ci",      // MariaDB's default (utf8mb4_general_ci, utf8mb3_, latin1_, ascii_, ucs2_ ...)
    "unicode_ci",      // UCA 4.0.0, untailored
    "unicode_520_ci",  // UCA 5.2.0, untailored
    "0900_ai_ci",      // MySQL 8's default (UCA 9.0.0, untailored, NO PAD)
    "0900_as_ci",      // the same, accent-sensitive
    "uca1400_ai_ci",   // MariaDB 11's UCA 14.0.0, untailored
    "uca1400_as_ci",
};

}  // namespace

rules::key_comparison classify_collation(std::string_view data_type, std::optional<std::string_view> collation) {
    using k = rules::key_comparison;
    const auto type = lower_ascii(data_type);
    if (type.empty()) return k::unknown;
    if (!is_character_type(type)) return k::bytes;
    if (!collation || collation->empty()) return k::unknown;
    const auto name = lower_ascii(*collation);
    const auto underscore = name.find('_');
    if (name == "binary") return k::bytes;
    if (underscore == std::string::npos) return k::unknown;
    // NO PAD: MariaDB's *_nopad_* and every MySQL 8 *_0900_* collation; all others are PAD SPACE.
    std::string rest = name.substr(underscore + 1);
    bool no_pad = rest.find("0900_") != std::string::npos;
    if (const auto at = rest.find("nopad_"); at != std::string::npos) {
        no_pad = true;
        rest.erase(at, 6);
    }
    if (ends_with(rest, "_bin") || rest == "bin" || ends_with(rest, "_cs")) return no_pad ? k::bytes : k::bytes_pad;
    if (!ends_with(rest, "_ci")) return k::unknown;
    const bool folds = std::find(std::begin(ascii_folding), std::end(ascii_folding), rest) != std::end(ascii_folding) ||
                       (name.starts_with("latin1_") && rest == "swedish_ci");  // latin1's default: a weight per byte
    if (!folds) return no_pad ? k::bytes : k::bytes_pad;  // a case-insensitive collation we do not fold
    return no_pad ? k::ci_nopad : k::ci_pad;
}

std::string_view to_string(rules::key_comparison k) noexcept {
    switch (k) {
        case rules::key_comparison::unknown: return "unknown";
        case rules::key_comparison::bytes: return "bytes";
        case rules::key_comparison::bytes_pad: return "bytes_pad";
        case rules::key_comparison::ci_pad: return "ci_pad";
        case rules::key_comparison::ci_nopad: return "ci_nopad";
    }
    return "unknown";
}

canonical_value canonical_key_value(std::string_view value, rules::key_comparison compare) {
    using k = rules::key_comparison;
    canonical_value out;
    if (compare == k::bytes_pad || compare == k::ci_pad) {
        // PAD SPACE: a shorter string compares as if padded with spaces. 0x20 is a space in every
        // character set a client may use (never the second byte of a gbk, sjis or big5 character).
        while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    }
    out.value = std::string(value);
    if (compare != k::ci_pad && compare != k::ci_nopad) return out;
    const bool ascii =
        std::all_of(value.begin(), value.end(), [](char c) { return (static_cast<unsigned char>(c) & 0x80) == 0; });
    if (!ascii) {
        out.kept_as_written = true;
        return out;
    }
    out.value = lower_ascii(value);
    return out;
}

std::size_t canonicalize_key(key_tuple& key, const rules::stock_rule& rule) {
    std::size_t kept = 0;
    const auto n = std::min(key.size(), rule.key_compare.size());
    for (std::size_t i = 0; i < n; ++i) {
        auto c = canonical_key_value(key[i], rule.key_compare[i]);
        key[i] = std::move(c.value);
        kept += c.kept_as_written ? 1 : 0;
    }
    return kept;
}

rules::rule_set with_key_compare(rules::rule_set rules, const std::vector<rule_key_compare>& found) {
    for (auto& s : rules.stocks) {
        s.key_compare.clear();
        for (const auto& f : found)
            if (f.rule == s.name && f.columns.size() == s.key_columns.size()) s.key_compare = f.columns;
    }
    return rules;
}

}  // namespace claimguard::engine
