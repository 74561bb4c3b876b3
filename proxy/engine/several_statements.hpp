// A COM_QUERY of several statements (CLIENT_MULTI_STATEMENTS: MyBatis <foreach> with allowMultiQueries,
// `UPDATE ...; INSERT ...`): split where the server splits it, so that each statement is decided and
// carried out in order like a query of its own, and the replies stitched into the one the server gives.
#pragma once

#include <string_view>
#include <vector>

#include "rules/sql/token.hpp"

namespace claimguard::engine {

// The statements of `sql`, in order, each without its `;`: split at the `;` tokens (never inside a
// string, a quoted name or a comment). A `;` followed only by whitespace and comments ends the text.
// Empty when the text is not one the session splits, and the query keeps the policy of its first
// statement's reading: fewer than two statements; an empty statement between two `;` (the server stops
// there with "Query was empty"); a `;` inside a versioned comment; text that does not lex; a statement
// whose reply needs the client (LOAD DATA ... LOCAL INFILE sends a file); a SET of sql_mode or of the
// character set before the last statement (the server reads the statements after it another way).
[[nodiscard]] std::vector<std::string_view> split_statements(std::string_view sql,
                                                             const rules::sql::lexer_options& options);

}  // namespace claimguard::engine
