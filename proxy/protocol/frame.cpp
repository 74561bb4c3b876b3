// Frame scanning and splitting for packets of any size.
#include "frame.hpp"

namespace claimguard::protocol {

result<packet_span> scan_packet(bytes_view buf, std::size_t max_payload) {
    packet_span span;
    std::size_t pos = 0;
    for (;;) {
        if (buf.size() - pos < frame_header_size) return packet_span{};
        auto h = parse_frame_header(buf.data() + pos);
        if (span.frames == 0) {
            span.first_seq = h.seq;
        } else if (h.seq != static_cast<std::uint8_t>(span.last_seq + 1)) {
            return errc::bad_sequence;
        }
        span.last_seq = h.seq;
        span.payload_size += h.size;
        if (span.payload_size > max_payload) return errc::packet_too_large;
        if (buf.size() - pos - frame_header_size < h.size) return packet_span{};
        if (span.frames == 0) span.first_payload = buf.subspan(frame_header_size, h.size);
        ++span.frames;
        pos += frame_header_size + h.size;
        if (h.size < max_frame_payload) {
            span.raw_size = pos;
            return span;
        }
    }
}

byte_buffer join_payload(bytes_view raw) {
    byte_buffer out;
    std::size_t pos = 0;
    while (raw.size() - pos >= frame_header_size) {
        auto h = parse_frame_header(raw.data() + pos);
        pos += frame_header_size;
        std::size_t n = std::min<std::size_t>(h.size, raw.size() - pos);
        out.insert(out.end(), raw.begin() + pos, raw.begin() + pos + n);
        pos += n;
    }
    return out;
}

void write_packet(byte_buffer& out, std::uint8_t& seq, bytes_view payload) {
    writer w(out);
    std::size_t pos = 0;
    for (;;) {
        std::size_t n = std::min(max_frame_payload, payload.size() - pos);
        w.u24(static_cast<std::uint32_t>(n));
        w.u8(seq++);
        w.bytes(payload.subspan(pos, n));
        pos += n;
        if (n < max_frame_payload) return;
    }
}

}  // namespace claimguard::protocol
