// The compressed protocol (CLIENT_COMPRESS, zlib): a transport layer below the ordinary packets.
//
// A compressed frame is a 7-byte header (3-byte length of what follows, 1-byte compressed sequence id,
// 3-byte length before compression, 0 when what follows is not compressed) and a complete zlib stream
// (or the raw bytes). What the frames carry, concatenated, is the ordinary packet stream, headers
// included: one frame may hold several packets, and a packet may span frames. The compressed sequence
// id counts frames on its own; like the ordinary one it restarts at 0 with each command.
//
// Every frame is an independent zlib stream, so the zlib state is per thread (reset for each frame),
// not per connection: a compressed session holds no zlib memory between frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire.hpp"

namespace claimguard::protocol {

inline constexpr std::size_t compressed_header_size = 7;
// Senders leave smaller payloads uncompressed (MIN_COMPRESS_LENGTH in the server and libmariadb).
inline constexpr std::size_t min_compress_length = 50;
// The largest payload one frame carries: its lengths are 3 bytes.
inline constexpr std::size_t max_compressed_payload = 0xFFFFFF;

struct compressed_frame {
    std::size_t raw_size = 0;  // header and what follows it; 0: more bytes are needed
    std::uint8_t seq = 0;
    std::size_t payload_size = 0;  // the bytes it carries once inflated
};

// The frame at the front of `buf`, without inflating it: raw_size 0 when it is not all there yet. As
// soon as its header is there: errc::bad_sequence unless its id is `expected_seq`, and
// errc::packet_too_large when it announces more than `max_payload` bytes (checked before its body is
// read, so a peer cannot make the reader buffer more than a frame of that size).
[[nodiscard]] result<compressed_frame> scan_compressed_frame(bytes_view buf, std::uint8_t expected_seq,
                                                             std::size_t max_payload);

// Inflates the frame `raw` (all of it, as scan_compressed_frame sized it) into `out`, which holds
// frame.payload_size bytes. errc::bad_compression when the zlib stream is broken or does not inflate
// to exactly the length its header announced.
[[nodiscard]] result<void> inflate_frame(bytes_view raw, const compressed_frame& frame, std::span<std::uint8_t> out);

// Appends `payload` as compressed frames numbered from `seq` (advanced past them): pieces shorter than
// min_compress_length, or that zlib does not make smaller, go uncompressed (length before compression 0).
void write_compressed(byte_buffer& out, std::uint8_t& seq, bytes_view payload);

// Compressed, a client need not number the frames of an ordinary packet split at 16 MiB (libmariadb
// sends them all as 0: the server ignores these ids when compressed). Renumbers the continuation frames
// of the packet at the front of `buf` on from its first frame, as far as their headers are there;
// the ordinary checks (scan_packet) then apply as without compression.
void renumber_continuations(std::span<std::uint8_t> buf);

// Compressed, the server's ordinary sequence ids are not those of the uncompressed protocol: after each
// compressed frame it writes, the server takes its compressed id as the next ordinary one (net_flush), so
// a reply of several frames (a CALL's result sets, a large result) jumps. Clients ignore them when
// compressed; the proxy's reply parsing checks them. This numbers the ordinary packets of an inflated
// stream consecutively, as the server numbers them uncompressed, from restart()'s id: the one after the
// last packet the proxy wrote. Fed the inflated bytes in order, in pieces of any size.
class sequence_renumbering {
public:
    void restart(std::uint8_t next) {
        next_ = next;
        body_left_ = 0;
        header_have_ = 0;
    }
    void apply(std::span<std::uint8_t> inflated);

private:
    std::size_t body_left_ = 0;    // bytes of the current packet's frame still to pass
    std::uint8_t header_[3] = {};  // the length bytes of a header split across pieces
    std::size_t header_have_ = 0;
    std::uint8_t next_ = 0;
};

// The sequence id after the last frame of the ordinary packets in `raw` (the first's when it is cut short).
[[nodiscard]] std::uint8_t next_sequence_id(bytes_view raw);

}  // namespace claimguard::protocol
