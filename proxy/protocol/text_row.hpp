// Text-protocol result rows (COM_QUERY): one length-encoded string or 0xFB (NULL) per column.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "wire.hpp"

namespace claimguard::protocol {

// One value of a text row; nullopt is SQL NULL.
using text_value = std::optional<std::string_view>;
using text_row = std::vector<text_value>;

// Decodes a row of exactly `column_count` values; trailing bytes are an error.
// Views point into the payload.
[[nodiscard]] result<text_row> parse_text_row(bytes_view payload, std::size_t column_count);
void serialize_text_row(std::span<const text_value> values, byte_buffer& out);

}  // namespace claimguard::protocol
