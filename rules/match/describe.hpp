// What `claimguard explain` prints: the facts, the decision and the SQL that would be sent.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "rules/match/facts.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/sql/token.hpp"

namespace claimguard::rules::match {

struct explain_options {
    std::optional<std::int64_t> read_value;  // --read: the counter value this session read before
    sql::lexer_options lexer;
    match_context context;
};

// One value as a DBA reads it: the literal as written, "?1" for the second placeholder, ...
[[nodiscard]] std::string describe_value(const value_ref& v);

// One fact on one line.
[[nodiscard]] std::string describe_fact(const fact& f);

// Writes, one "label: text" per line: the pre-filter verdict, how the statement was read,
// each fact, the decision, and the SQL claimguard would send instead (if any). This is a
// dry run of the rules, not the engine: it assumes the session read --read before.
void explain(const rule_index& rules, std::string_view sql, const explain_options& options, std::ostream& out);

}  // namespace claimguard::rules::match
