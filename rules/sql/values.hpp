// Decoding what a statement wrote: literal values for comparison, identifiers for matching.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rules/sql/statement.hpp"

namespace claimguard::rules::sql {

enum class literal_kind : std::uint8_t { null, boolean, integer, decimal, real, string, hex, bit };

// A literal's value as the server reads it. Only for comparisons and messages: SQL is never
// rebuilt from it (the rewriter copies the original token bytes).
struct literal_value {
    literal_kind kind = literal_kind::null;
    // string: the decoded bytes; hex and bit: the bytes they spell; numbers and booleans:
    // canonical decimal text ("-7", "1.5", "0").
    std::string bytes;
    std::optional<std::int64_t> integer;  // a whole number that fits in 64 bits
};

// The value of a literal operand (operand_kind::literal or null); empty literal_value otherwise.
[[nodiscard]] literal_value decode_literal(const parsed_statement& st, const operand& op);

// The bytes of one string token ('x', "x", N'x') under the statement's sql_mode and charset.
[[nodiscard]] std::string decode_string(std::string_view token_text, const lexer_options& options);

// Whether two literals name the same key value: numbers by value ('7' = 7 = 7.0), strings
// byte for byte. NULL never equals anything.
[[nodiscard]] bool same_value(const literal_value& a, const literal_value& b);

// Canonical decimal text of a number written as text ("  007.50 " -> "7.5"), if it is one.
[[nodiscard]] std::optional<std::string> canonical_number(std::string_view text);

// `a``b` -> a`b; "x" (ANSI_QUOTES) -> x; bare words unchanged.
[[nodiscard]] std::string unquote_identifier(std::string_view raw);

// Whether an identifier token (quoted or not) names `name`, ignoring ASCII case as MySQL
// does for column names (and, conservatively, for table names).
[[nodiscard]] bool identifier_equals(std::string_view raw, std::string_view name) noexcept;

// `name` in backticks, inner backticks doubled: for names taken from the rules file.
[[nodiscard]] std::string quote_identifier(std::string_view name);

// The sql_mode flags that change lexing, from a sql_mode value ("ANSI,NO_BACKSLASH_ESCAPES"), with
// the combination modes expanded as the server expands them (ANSI, and MariaDB's DB2, MAXDB, MSSQL,
// ORACLE, POSTGRESQL: each includes ANSI_QUOTES and PIPES_AS_CONCAT).
struct sql_mode_flags {
    bool ansi_quotes = false;
    bool no_backslash_escapes = false;
    // `||` concatenates instead of meaning OR. The lexer reads `||` as one token either way, and the
    // parser never reads it as part of a value or a guard (an expression in SET, not ours in WHERE),
    // so the decision is the same in both modes: decoded for the record only.
    bool pipes_as_concat = false;
};
[[nodiscard]] sql_mode_flags parse_sql_mode(std::string_view value) noexcept;

}  // namespace claimguard::rules::sql
