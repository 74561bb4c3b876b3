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
// Database code (issue 17): a statement naming a routine, a view or a table whose trigger reaches a
// rule's table gets that rule's unmodeled policy.
void match_database_code(const sql::parsed_statement& st, const rule_index& rules, match_result& out);

}  // namespace claimguard::rules::match
