// Binary-protocol result rows (COM_STMT_EXECUTE, COM_STMT_FETCH): 0x00, a NULL
// bitmap with a 2-bit offset, then each non-NULL value encoded by its column type.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "binary_value.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

inline constexpr std::uint8_t binary_row_header = 0x00;
// The first two bits of a binary row's NULL bitmap are reserved.
inline constexpr std::size_t binary_row_null_offset = 2;

inline constexpr std::size_t null_bitmap_size(std::size_t count, std::size_t offset) {
    return (count + offset + 7) / 8;
}

using binary_row = std::vector<binary_value>;

// Decodes one row given the columns' types (from their definitions, see
// value_type_of). NULL columns give std::monostate. Trailing bytes are an error.
[[nodiscard]] result<binary_row> parse_binary_row(bytes_view payload,
                                                  std::span<const value_type> columns);

// Encodes one row; errc::bad_value when the counts differ or a value does not
// fit its column type (nothing useful is left in `out` then).
[[nodiscard]] boost::system::error_code serialize_binary_row(std::span<const value_type> columns,
                                                             std::span<const binary_value> values,
                                                             byte_buffer& out);

// NULL bitmap helpers shared with COM_STMT_EXECUTE (offset 0 there).
[[nodiscard]] inline bool null_bit(bytes_view bitmap, std::size_t i, std::size_t offset) {
    const std::size_t bit = i + offset;
    return (bitmap[bit / 8] >> (bit % 8)) & 1;
}
inline void set_null_bit(std::span<std::uint8_t> bitmap, std::size_t i, std::size_t offset) {
    const std::size_t bit = i + offset;
    bitmap[bit / 8] = static_cast<std::uint8_t>(bitmap[bit / 8] | 1u << (bit % 8));
}

}  // namespace claimguard::protocol
