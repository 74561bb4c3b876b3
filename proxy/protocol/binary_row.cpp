// Decoder and encoder for binary-protocol rows.
#include "binary_row.hpp"

namespace claimguard::protocol {

result<binary_row> parse_binary_row(bytes_view payload, std::span<const value_type> columns) {
    reader r(payload);
    if (r.u8() != binary_row_header) return r.ok() ? errc::unexpected_packet : r.error();
    const auto bitmap = r.fixed(null_bitmap_size(columns.size(), binary_row_null_offset));
    if (!r.ok()) return r.error();
    binary_row row;
    row.reserve(columns.size());
    for (std::size_t i = 0; i < columns.size() && r.ok(); ++i) {
        if (null_bit(bitmap, i, binary_row_null_offset)) {
            row.emplace_back(std::monostate{});
        } else {
            row.push_back(read_binary_value(r, columns[i]));
        }
    }
    if (!r.ok()) return r.error();
    if (!r.empty()) return errc::unexpected_packet;
    return row;
}

boost::system::error_code serialize_binary_row(std::span<const value_type> columns,
                                               std::span<const binary_value> values,
                                               byte_buffer& out) {
    if (columns.size() != values.size()) return errc::bad_value;
    out.push_back(binary_row_header);
    const std::size_t bitmap_at = out.size();
    out.resize(out.size() + null_bitmap_size(columns.size(), binary_row_null_offset), 0);
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (std::holds_alternative<std::monostate>(values[i])) {
            set_null_bit(std::span(out).subspan(bitmap_at), i, binary_row_null_offset);
            continue;
        }
        if (auto ec = write_binary_value(out, columns[i], values[i])) return ec;
    }
    return {};
}

}  // namespace claimguard::protocol
