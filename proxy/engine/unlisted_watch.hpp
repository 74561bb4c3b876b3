// Watching tables no rule names yet (watch_unlisted_tables): what a DBA needs to draft the first rules
// (`claimguard suggest --digests`) from a sidecar in front of the app, without a general log. Pure
// observation: the statements are forwarded untouched, never audited as actions on rules; only the
// shapes a rule would protect are filed in /digests under a pseudo-rule `unlisted:<db>.<table>`.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/sql/statement.hpp"

namespace claimguard::engine {

// One statement the watcher files, in the vocabulary of observe mode (what enforce would do if a rule
// named the table the way the notes say).
struct unlisted_shape {
    std::string table;   // "<db>.<table>": the schema as written, else the session's database
    std::string action;  // "would-rewritten" (a counter write: the take) or "would-claimed" (the INSERT after it)
    // The evidence `claimguard suggest --digests` reads, one "name: value" each: counter, key_columns,
    // version, units (a take); after, consumes (claim column=stock key column), columns (a claim).
    std::vector<std::string> notes;
};

// Whether a statement's first word (after whitespace and plain comments) may start a shape the watcher
// files: SELECT, UPDATE, INSERT, REPLACE. Everything else is not tokenised.
[[nodiscard]] bool may_watch(std::string_view sql) noexcept;

// One client connection's view: the read-then-write flow happens on one connection (the pool's, for
// the length of one request), so what it read and took last is remembered per connection.
class unlisted_watch {
public:
    // The reads remembered per connection (one per table, the oldest forgotten first).
    static constexpr std::size_t max_reads = 8;

    // `st`: a statement the rules ignore; `database`: the session's current one. A SELECT only
    // remembers what it read; an UPDATE of a counter (SET c = c - n, or SET c = <value> after this
    // connection read c) is a take; the next INSERT into another table is its claim.
    [[nodiscard]] std::optional<unlisted_shape> observe(const rules::sql::parsed_statement& st,
                                                        std::string_view database);
    void reset();

private:
    struct read {
        std::string table;                 // lower case "<db>.<table>"
        std::vector<std::string> columns;  // lower case
        bool all = false;                  // SELECT *
    };
    struct take {
        std::string table;                                            // lower case "<db>.<table>"
        std::vector<std::pair<std::string, std::string>> key_values;  // key column, value as written
    };
    [[nodiscard]] const read* last_read(std::string_view table) const;

    std::vector<read> reads_;
    std::optional<take> last_take_;
};

}  // namespace claimguard::engine
