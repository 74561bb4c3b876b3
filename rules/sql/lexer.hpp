// The MySQL lexer: turns statement text into tokens that tile it, as the server would split it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "rules/sql/token.hpp"

namespace claimguard::rules::sql {

// Streams tokens over a view of the statement; never allocates. Every byte of the text
// belongs to exactly one token, trivia included, in order; then `end` tokens follow.
class lexer {
public:
    lexer(std::string_view sql, const lexer_options& options) noexcept : sql_(sql), options_(options) {}

    [[nodiscard]] token next() noexcept;

    // The text ended inside a versioned comment (the server rejects that statement).
    [[nodiscard]] bool unterminated_version() const noexcept { return in_version_; }
    [[nodiscard]] std::uint32_t placeholder_count() const noexcept { return placeholders_; }

private:
    [[nodiscard]] token make(token_kind kind, std::size_t begin, std::uint8_t flags = 0,
                             std::uint32_t aux = 0) noexcept;
    [[nodiscard]] token lex_whitespace(std::size_t begin) noexcept;
    [[nodiscard]] token lex_line_comment(std::size_t begin) noexcept;
    [[nodiscard]] token lex_block_comment(std::size_t begin) noexcept;
    [[nodiscard]] token lex_quoted(std::size_t begin, std::size_t body, char quote, token_kind kind,
                                   bool backslash, std::uint8_t flags) noexcept;
    [[nodiscard]] token lex_prefixed_binary(std::size_t begin, bool hex) noexcept;
    [[nodiscard]] token lex_number(std::size_t begin) noexcept;
    [[nodiscard]] token lex_word(std::size_t begin) noexcept;
    [[nodiscard]] token lex_variable(std::size_t begin) noexcept;
    [[nodiscard]] token lex_punct(std::size_t begin) noexcept;

    // Skips identifier bytes from pos_, a whole multibyte character at a time.
    void skip_ident_bytes() noexcept;
    // pos_ just past the opening quote: finds the closing one. False when the text ends first.
    [[nodiscard]] bool skip_quoted_body(char quote, bool backslash, std::uint8_t& flags) noexcept;
    [[nodiscard]] std::size_t mb_length(std::size_t at) const noexcept {
        return multibyte_length(options_.client_charset, sql_.data() + at, sql_.data() + sql_.size());
    }
    [[nodiscard]] char at(std::size_t i) const noexcept { return i < sql_.size() ? sql_[i] : '\0'; }

    std::string_view sql_;
    lexer_options options_;
    std::size_t pos_ = 0;
    std::uint32_t placeholders_ = 0;
    bool in_version_ = false;
    // The last significant token was an identifier ending right here: a following "." is a
    // qualifier separator and what follows it is a name even if it starts with a digit.
    token_kind last_kind_ = token_kind::end;
    std::size_t last_end_ = 0;
    bool name_follows_dot_ = false;
};

}  // namespace claimguard::rules::sql
