// The rewriter: facts + what the session read -> the SQL claimguard sends instead.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "rules/match/errors.hpp"
#include "rules/match/facts.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/statement.hpp"

namespace claimguard::rules::match {

// New SQL and, for each "?" in it in order, the 0-based index of the original statement's
// placeholder whose bound value it takes (a prepared statement's parameters, reordered).
// User data is never re-quoted: literals are the original tokens, byte for byte.
struct rewritten_sql {
    std::string sql;
    small_vector<std::uint32_t, 4> parameters;
};

// Units a conditional decrement takes: a number claimguard computed, or the bound value of
// one of the statement's placeholders (then used twice: "c = c - ?" and "c >= ?"; only with
// a floor of 0, since "c >= floor + ?" is not a shape the recognizer reads back).
struct decrement_amount {
    std::int64_t units = 0;
    std::optional<std::uint32_t> placeholder;
    // Also "AND c > <this value as the app wrote it>": the take happens only if the app's absolute
    // write lowers the counter (a literal's original token, or the app's bound "?").
    const value_ref* lower_than = nullptr;
};

// UPDATE <table as written> SET c = c - N [, version = version + 1] WHERE <the original
// WHERE clause> AND c >= floor + N, keeping every other assignment and the LIMIT as written.
[[nodiscard]] result<rewritten_sql> conditional_decrement(const sql::parsed_statement& st, const stock_rule& rule,
                                                          std::uint32_t counter_assignment,
                                                          std::optional<std::uint32_t> version_assignment,
                                                          const decrement_amount& amount);

// The incident's absolute write (SET remain = V after reading R) as a decrement of R - V units.
// `only_if_lower`: the take also requires the counter above the written value.
[[nodiscard]] result<rewritten_sql> rewrite_write(const sql::parsed_statement& st, const counter_write& fact,
                                                  std::int64_t units, bool only_if_lower = false);

// A relative decrement (SET remain = remain - N) with the guard added. `units`: the amount
// when the caller knows it (a bound placeholder at COM_STMT_EXECUTE); it is then printed as a
// number, which also works with a non-zero floor. Without it, a "?" amount stays a "?".
[[nodiscard]] result<rewritten_sql> rewrite_change(const sql::parsed_statement& st, const counter_change& fact,
                                                   std::optional<std::int64_t> units = std::nullopt);

// Gives `units` back to the stock row of `key` (the claim's duplicate or failure):
// UPDATE t SET c = c + units [, version = version + 1] WHERE k1 = <original token> AND ...
// `schema`: the database the take's table was in (a rule table without a schema of its own), so the
// unit goes back to the row it came from whatever the session's default database is.
[[nodiscard]] result<rewritten_sql> compensation(const stock_rule& rule, std::span<const value_ref> key,
                                                 std::int64_t units = 1, std::string_view schema = {});

// A key value for SQL claimguard sends later, after the statement (and its bound values) is
// gone: an integer in canonical decimal, anything else as a hex literal of its bytes (never
// spliced text; it compares byte for byte, as a binary string).
struct key_literal {
    std::string value;  // canonical decimal, or the bytes
    bool integer = false;
};

// A take deferred to COMMIT, self-contained: UPDATE t SET c = c - N [, version = version + 1]
// WHERE k1 = <literal> AND ... AND c >= floor + N. `database`: the session's current database when
// the take was deferred, for a rule table without a schema (a later USE must not move the take).
[[nodiscard]] result<rewritten_sql> deferred_decrement(const stock_rule& rule, std::span<const key_literal> key,
                                                       std::int64_t units, std::string_view database = {});

// Several takes of one key in one statement (group_update): the same as deferred_decrement() of their
// summed `units`, the version column bumped by `takes` (once per take, as if they ran one by one).
[[nodiscard]] result<rewritten_sql> group_decrement(const stock_rule& rule, std::span<const key_literal> key,
                                                    std::int64_t units, std::int64_t takes,
                                                    std::string_view database = {});

// The same give-back as compensation(), self-contained (the key as literals): sent after the
// statement is gone (a give-back that a transaction's ROLLBACK undid, for a take committed before it).
[[nodiscard]] result<rewritten_sql> literal_give_back(const stock_rule& rule, std::span<const key_literal> key,
                                                      std::int64_t units, std::string_view database = {});

// reserve: the key's counter read with its row lock, in the refill's own transaction on the sidecar's
// connection: SELECT c FROM t WHERE k1 = <literal> AND ... FOR UPDATE
[[nodiscard]] result<rewritten_sql> reserve_read(const stock_rule& rule, std::span<const key_literal> key,
                                                 std::string_view database = {});

// The counter of the key's row, read on the same connection after a take changed no row:
// SELECT c FROM t WHERE k1 = <original token> AND ...
[[nodiscard]] result<rewritten_sql> counter_probe(const stock_rule& rule, std::span<const value_ref> key,
                                                  std::string_view schema = {});

// The claim rows a DELETE of claim rows is about to delete, read with their row lock in its
// transaction (a cancellation by row id under on_cancel: return_stock):
// SELECT <the claim columns holding the stock key, in key_columns order>, <the idempotency columns>
// FROM <the table as written> WHERE <the DELETE's WHERE as written> LIMIT max_rows + 1 FOR UPDATE.
// Not for a DELETE with ORDER BY or LIMIT, or without WHERE (not_an_update), nor when the claim rule
// does not map every stock key column (key_not_bindable).
[[nodiscard]] result<rewritten_sql> cancel_claim_read(const sql::parsed_statement& st, const claim_rule& claim,
                                                      const stock_rule& stock, std::size_t max_rows);

// A REPLACE or INSERT ... ON DUPLICATE KEY UPDATE as the plain INSERT of the same row, so a
// duplicate shows as ERR 1062 instead of a changed existing row: REPLACE becomes INSERT, the
// ON DUPLICATE KEY UPDATE clause goes.
[[nodiscard]] result<rewritten_sql> plain_insert(const sql::parsed_statement& st);

// A claim by INSERT [IGNORE] ... SELECT from its stock row (claim_insert::from_select) as the INSERT of
// its one row: the statement up to SELECT as written, then VALUES (<each column's value as written: the
// select item, or the WHERE's value of the stock key column it names>). Sent after the claim's own take
// took the unit, so the app's counter bounds in the SELECT's WHERE (remain > 0) no longer apply.
[[nodiscard]] result<rewritten_sql> insert_select_values(const sql::parsed_statement& st, const claim_insert& fact);

}  // namespace claimguard::rules::match
