// Decoder and encoder for text-protocol rows.
#include "text_row.hpp"

namespace claimguard::protocol {

result<text_row> parse_text_row(bytes_view payload, std::size_t column_count) {
    // Every value takes at least one byte: refuse counts the payload cannot hold
    // before allocating for them.
    if (column_count > payload.size()) return errc::truncated;
    reader r(payload);
    text_row row;
    row.reserve(column_count);
    for (std::size_t i = 0; i < column_count && r.ok(); ++i) {
        if (r.peek() == null_value_marker) {
            r.skip(1);
            row.emplace_back(std::nullopt);
        } else {
            row.emplace_back(r.lenenc_str());
        }
    }
    if (!r.ok()) return r.error();
    if (!r.empty()) return errc::unexpected_packet;
    return row;
}

void serialize_text_row(std::span<const text_value> values, byte_buffer& out) {
    writer w(out);
    for (const auto& v : values) {
        if (v) {
            w.lenenc_str(*v);
        } else {
            w.u8(null_value_marker);
        }
    }
}

}  // namespace claimguard::protocol
