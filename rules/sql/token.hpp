// SQL tokens: a kind and an exact byte range [offset, offset + length) in the statement text.
#pragma once

#include <cstdint>
#include <string_view>

#include "rules/sql/charset.hpp"

namespace claimguard::rules::sql {

// The session settings that change where a literal ends.
struct lexer_options {
    charset client_charset = charset::single_byte;
    bool ansi_quotes = false;           // sql_mode ANSI_QUOTES: "x" is an identifier
    bool no_backslash_escapes = false;  // sql_mode NO_BACKSLASH_ESCAPES: only doubled quotes escape
    // Versioned comments /*!NNNNN ... */ whose version is above this are plain comments,
    // as on that server. 0: every versioned comment is executed.
    std::uint32_t server_version = 0;
    bool mariadb = false;  // MariaDB also executes /*M!NNNNNN ... */
};

enum class token_kind : std::uint8_t {
    // Trivia: between the tokens the parser reads.
    whitespace,
    comment,        // # ..., -- ..., /* ... */ and versioned comments above the server version
    hint,           // /*+ ... */ optimizer hint
    version_open,   // "/*!50700": what follows, up to version_close, is SQL
    version_close,  // the "*/" closing a versioned comment
    // Significant tokens.
    word,          // unquoted identifier or keyword
    quoted_ident,  // `x` (doubled backticks inside), or "x" under ANSI_QUOTES
    string,        // 'x' or "x", with N'x' flagged national
    hex_string,    // X'4142'
    hex_number,    // 0x4142
    bit_string,    // b'0101'
    bit_number,    // 0b0101
    integer,       // 42
    decimal,       // 4.2, .5, 4.
    real,          // 4e2, 1.5E-3
    placeholder,   // ? (aux: its 0-based position among the statement's placeholders)
    user_var,      // @x, @'x', @`x`
    system_var,    // @@x (a scope prefix like @@session is followed by "." and the name)
    punct,         // an operator or punctuation: = <=> <> != <= >= := || && -> ->> ( ) , ; ...
    invalid,       // an unterminated literal or comment, or a malformed X''/b'' literal
    end,           // the end of the text (length 0)
};

namespace token_flag {
constexpr std::uint8_t gap_before = 1;   // trivia precedes this token (set by lex_statement)
constexpr std::uint8_t national = 2;     // N'...'
constexpr std::uint8_t has_escape = 4;   // a backslash escape or doubled quote inside
constexpr std::uint8_t comment_before = 8;  // the trivia before this token holds a comment or marker
}  // namespace token_flag

struct token {
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
    std::uint32_t aux = 0;  // placeholder index; version number of version_open
    token_kind kind = token_kind::end;
    std::uint8_t flags = 0;

    [[nodiscard]] std::uint32_t end_offset() const noexcept { return offset + length; }
    [[nodiscard]] std::string_view text(std::string_view sql) const noexcept { return sql.substr(offset, length); }
};

[[nodiscard]] constexpr bool is_trivia(token_kind k) noexcept {
    return k == token_kind::whitespace || k == token_kind::comment || k == token_kind::hint ||
           k == token_kind::version_open || k == token_kind::version_close;
}

[[nodiscard]] std::string_view token_kind_name(token_kind k) noexcept;

}  // namespace claimguard::rules::sql
