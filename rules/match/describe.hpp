// How `claimguard explain` describes a statement and its facts (the decision comes from the engine).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "rules/match/facts.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rewriter.hpp"
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

// An answer as the client would see it: "ERROR 1644 (45000): ..." or "OK (0 rows affected)".
[[nodiscard]] std::string describe_answer(const answer& a);

// SQL claimguard sends, with the client's placeholders it binds.
[[nodiscard]] std::string describe_sql(const rewritten_sql& r);

struct described_statement {
    sql::parsed_statement statement;  // views the text given to describe_statement
    match_result facts;               // views the same text
};

// The first part of `claimguard explain`, one "label: text" per line: the pre-filter verdict,
// how the statement was read, each fact. The decision is the engine's (engine/explain.hpp).
[[nodiscard]] described_statement describe_statement(const rule_index& rules, std::string_view sql,
                                                     const explain_options& options, std::ostream& out);

}  // namespace claimguard::rules::match
