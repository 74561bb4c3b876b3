// Entry point of the recognizer: statement text -> parsed_statement (or "not ours").
#pragma once

#include <string_view>

#include "rules/sql/lexer.hpp"
#include "rules/sql/statement.hpp"

namespace claimguard::rules::sql {

// Reads one statement. Never throws, never fails: a statement outside the shapes listed in
// docs/SQL.md comes back with kind == not_ours and a reason, decided at the first token
// that does not fit. The result views `sql`, which must outlive it.
[[nodiscard]] parsed_statement parse(std::string_view sql, const lexer_options& options);

// Lexes into significant tokens (trivia dropped, gap_before set). Returns the first lex error.
[[nodiscard]] boost::system::error_code lex_statement(std::string_view sql, const lexer_options& options,
                                                      token_vector& out, std::uint32_t& placeholder_count);

}  // namespace claimguard::rules::sql
