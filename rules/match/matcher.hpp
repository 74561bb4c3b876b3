// The matcher: parsed statement + rules -> typed facts (reads, writes, claims, boundaries).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/match/facts.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/sql/statement.hpp"

namespace claimguard::rules::match {

struct match_context {
    // The session's current database (unquoted). Empty: unknown, and then an unqualified
    // table name matches a rule of any schema (protecting too much rather than too little).
    std::optional<std::string_view> current_database;
    // The columns of a claim table in table order, for INSERTs without a column list. Null, or
    // an empty result: not known (the insert stays unmodeled until they are). `schema` is the
    // statement's qualifier of the table as written (empty when unqualified): the table that is
    // written may be in another database than the session's.
    const std::vector<std::string>* (*table_columns)(const void* owner, const claim_rule& rule,
                                                     std::string_view schema) = nullptr;
    const void* table_columns_owner = nullptr;
    // The stock and claim rules a SQL-level prepared statement of this session reaches (PREPARE
    // name FROM '...' forwarded earlier), by name as the server compares it; null: none.
    const std::vector<std::string>* (*sql_prepared)(const void* owner, std::string_view name) = nullptr;
};

// PREPARE / EXECUTE / DEALLOCATE PREPARE (DROP PREPARE) of a SQL-level prepared statement.
struct sql_prepared_use {
    enum class kind : std::uint8_t { none, prepare, execute, deallocate };
    kind what = kind::none;
    std::string name;  // unquoted, lower case (the server compares these names without case)
};
[[nodiscard]] sql_prepared_use sql_prepared_of(const sql::parsed_statement& st);

// Every rule the facts would write or refuse (a counter write or change, a claim, an unmodeled
// statement), each once, in the facts' order, as unmodeled facts saying `why` and `code`: how a
// statement the engine cannot follow here (a batch, a PREPARE in SQL) gets those rules' policy.
[[nodiscard]] match_result as_unmodeled(const match_result& facts, std::string_view why, std::string_view code);

// Facts about `st` under `rules`. Pure; the facts view `st.sql` and the rules.
[[nodiscard]] match_result match(const sql::parsed_statement& st, const rule_index& rules,
                                 const match_context& context = {});

// The stock rule whose table an UPDATE (its joined tables too), INSERT, REPLACE or DELETE writes;
// null: none (or not one of those kinds). For a trusted user's write (trusted_users), which has no
// fact when it sets other columns or inserts a row.
[[nodiscard]] const stock_rule* stock_written(const sql::parsed_statement& st, const rule_index& rules,
                                              const match_context& context = {});

// A value as the statement wrote it (exposed for the engine: bound prepared-statement
// values are compared against these).
[[nodiscard]] value_ref make_value(const sql::parsed_statement& st, const sql::operand& op);

}  // namespace claimguard::rules::match
