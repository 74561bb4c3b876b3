// Packet framing: 4-byte headers, sequence ids, and 16 MiB frame splitting.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire.hpp"

namespace claimguard::protocol {

inline constexpr std::size_t frame_header_size = 4;
// A frame of exactly this payload size means "the packet continues in the next frame".
inline constexpr std::size_t max_frame_payload = 0xFFFFFF;

struct frame_header {
    std::uint32_t size;
    std::uint8_t seq;
};

inline frame_header parse_frame_header(const std::uint8_t* p) {
    return {load_u24(p), p[3]};
}

// Where the first logical packet in a buffer ends, without copying it.
struct packet_span {
    std::size_t raw_size = 0;      // header and payload bytes of every frame
    std::size_t payload_size = 0;  // payload bytes summed over frames
    std::size_t frames = 0;
    std::uint8_t first_seq = 0;
    std::uint8_t last_seq = 0;
    // The first frame's payload (the whole payload when frames == 1).
    bytes_view first_payload;
};

// Scans the frames at the start of `buf`. Returns a packet_span with raw_size 0
// when more bytes are needed, errc::packet_too_large past `max_payload`, and
// errc::bad_sequence when continuation frames do not number consecutively.
[[nodiscard]] result<packet_span> scan_packet(bytes_view buf, std::size_t max_payload);

// The concatenated payload of a (possibly multi-frame) packet's raw bytes.
[[nodiscard]] byte_buffer join_payload(bytes_view raw);

// Appends `payload` framed as one packet starting at sequence id `seq`; `seq`
// is advanced past the frames written (a payload of a multiple of 0xFFFFFF
// bytes ends with an empty frame, as the protocol requires).
void write_packet(byte_buffer& out, std::uint8_t& seq, bytes_view payload);

}  // namespace claimguard::protocol
