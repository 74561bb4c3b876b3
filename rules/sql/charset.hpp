// Client character sets as the SQL lexer sees them: where a multibyte character starts and ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace claimguard::rules::sql {

// Only the sets in which a trail byte can be 0x5c (backslash), 0x27 (quote), 0x22 or
// 0x60 need their own entry: in every other MySQL client character set (latin1, utf8,
// utf8mb4, ujis, euckr, gb2312, ...) trail bytes never look like ASCII punctuation,
// so reading them byte by byte finds the same string ends as the server does.
enum class charset : std::uint8_t {
    single_byte,  // utf8mb4, utf8, latin1, binary, ascii and every other safe set
    gbk,
    big5,
    sjis,
    cp932,
    gb18030,
};

// Length (2 or 4) of the valid multibyte character starting at `p`, or 0 when the
// byte at `p` does not start one: the server's my_ismbchar() for `cs`.
[[nodiscard]] std::size_t multibyte_length(charset cs, const char* p, const char* end) noexcept;

// The lexer's view of a character set by its MySQL name (`SET NAMES gbk`), case-insensitive.
// Empty for a name MySQL does not know as a client character set.
[[nodiscard]] std::optional<charset> charset_from_name(std::string_view name) noexcept;

// The lexer's view of a collation id (handshake or session tracking). MariaDB's NO PAD
// collations (id + 1024) map like their base collation.
[[nodiscard]] charset charset_from_collation(std::uint16_t collation_id) noexcept;

// A short name for messages ("gbk", "utf8mb4 or another safe set").
[[nodiscard]] std::string_view charset_label(charset cs) noexcept;

}  // namespace claimguard::rules::sql
