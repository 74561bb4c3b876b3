// ASCII helpers shared by the lexer, parser and pre-filter: case folding and byte classes.
#pragma once

#include <cstddef>
#include <string_view>

namespace claimguard::rules::sql {

[[nodiscard]] constexpr char ascii_lower(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
}

// Case-insensitive (ASCII only) equality, as MySQL compares keywords and column names.
[[nodiscard]] constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}

[[nodiscard]] constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

[[nodiscard]] constexpr bool is_hex_digit(char c) noexcept {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A byte that can be part of an unquoted identifier: [A-Za-z0-9_$] and every byte >= 0x80
// (the server's ident_map).
[[nodiscard]] constexpr bool is_ident_byte(char c) noexcept {
    const auto u = static_cast<unsigned char>(c);
    return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '_' || u == '$' ||
           u >= 0x80;
}

// Whitespace as MySQL's lexer sees it.
[[nodiscard]] constexpr bool is_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Space or control character: what must follow "--" for it to open a comment.
[[nodiscard]] constexpr bool is_space_or_control(char c) noexcept {
    const auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f;
}

}  // namespace claimguard::rules::sql
