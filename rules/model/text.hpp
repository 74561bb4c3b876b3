// Text helpers of the rules model: UTF-8, MySQL identifiers, case-insensitive names, FNV-1a.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace claimguard::rules {

// Offset of the first byte that does not start a valid UTF-8 sequence (overlongs, surrogates
// and code points past U+10FFFF are invalid), or nullopt when `s` is valid UTF-8.
[[nodiscard]] std::optional<std::size_t> first_invalid_utf8(std::string_view s);

// Number of code points in valid UTF-8 `s` (continuation bytes are not counted).
[[nodiscard]] std::size_t utf8_length(std::string_view s);

// At most `max_chars` code points of valid UTF-8 `s`, never cutting a sequence in half.
[[nodiscard]] std::string_view utf8_prefix(std::string_view s, std::size_t max_chars);

// Why `id` cannot be a MySQL identifier (a phrase such as "is empty"), or an empty string
// when it can. MySQL allows any BMP character but NUL, at most 64 characters, no trailing
// space; claimguard also refuses control characters so names stay printable in SQL comments.
[[nodiscard]] std::string identifier_problem(std::string_view id);

// MySQL compares column names (and, on most servers, table names) without regard to case.
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);
[[nodiscard]] std::string ascii_lower(std::string_view s);

// 64-bit FNV-1a, stable across platforms and runs.
inline constexpr std::uint64_t fnv1a_offset_basis = 0xcbf29ce484222325ULL;
[[nodiscard]] std::uint64_t fnv1a64(std::string_view data, std::uint64_t state = fnv1a_offset_basis);

// Lower-case hex of `value`, `digits` long (the low digits when shorter than 16).
[[nodiscard]] std::string to_hex(std::uint64_t value, std::size_t digits = 16);

// `s` with control characters replaced by '?', safe inside a one-line SQL comment or a log line.
[[nodiscard]] std::string printable(std::string_view s);

}  // namespace claimguard::rules
