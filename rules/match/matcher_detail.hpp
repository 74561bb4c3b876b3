// Internal to the matcher's files (matcher.cpp, other_statements.cpp): the statement kinds match()
// hands to other_statements.cpp.
#pragma once

#include "rules/match/facts.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/sql/statement.hpp"

namespace claimguard::rules::match {

struct match_context;

void match_transaction(const sql::parsed_statement& st, match_result& out);
void match_set(const sql::parsed_statement& st, const rule_index& rules, match_result& out);
void match_not_ours(const sql::parsed_statement& st, const rule_index& rules, const match_context& ctx,
                    match_result& out);
// UPDATE ... SET c = <a value with a subquery> (parse reason subquery_in_set): whether c is the
// counter of a stock rule whose table the UPDATE writes.
[[nodiscard]] bool sets_counter_from_subquery(const sql::parsed_statement& st, const rule_index& rules,
                                              const match_context& ctx);
// INSERT [IGNORE] INTO claims (...) SELECT ... FROM stock WHERE <key> [AND <counter bounds>] in the one
// form whose meaning is certain (docs/SQL.md): adds its claim_insert fact (from_select) and returns true;
// false leaves `out` as it was (the statement keeps its insert_select refusal).
[[nodiscard]] bool match_insert_select(const sql::parsed_statement& st, const rule_index& rules,
                                       const match_context& ctx, match_result& out);
// UPDATE stock SET counter = N - (SELECT COUNT(*) FROM claims WHERE <stock key>) WHERE <stock key>, the
// count's WHERE naming only the claim columns that hold the stock key, the UPDATE's only the key: adds its
// counter_write fact (recomputed) and returns true; false leaves `out` as it was.
[[nodiscard]] bool match_counter_recompute(const sql::parsed_statement& st, const rule_index& rules,
                                           const match_context& ctx, match_result& out);
// Database code (issue 17): a statement naming a routine, a view or a table whose trigger reaches a
// rule's table gets that rule's unmodeled policy.
void match_database_code(const sql::parsed_statement& st, const rule_index& rules, match_result& out);

}  // namespace claimguard::rules::match
