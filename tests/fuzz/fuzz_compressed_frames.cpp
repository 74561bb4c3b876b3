// libFuzzer target: the compressed protocol's reader, as a compressed client's session reads (client_link):
// frames scanned with their sequence ids and a size limit, inflated, continuation frames renumbered,
// ordinary packets scanned from what they carry.
//
// Input: byte 0 picks the size limit (small or large), the rest is the compressed stream. Properties
// checked: no crash or sanitizer report; a frame inflates to exactly the length it announced; what is
// inflated compresses and inflates back to the same bytes (write_compressed), frames numbered on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "proxy/protocol/compression.hpp"
#include "proxy/protocol/frame.hpp"

namespace cg = claimguard::protocol;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

// Inflates every whole frame of `stream`, ids from `seq`; false at the first error.
bool inflate_stream(cg::bytes_view stream, std::uint8_t seq, std::size_t max_payload, cg::byte_buffer& plain) {
    while (!stream.empty()) {
        auto frame = cg::scan_compressed_frame(stream, seq, max_payload);
        if (!frame) return false;
        if (frame->raw_size == 0) return true;
        check(frame->raw_size <= stream.size() && frame->seq == seq);
        check(frame->payload_size <= max_payload);
        const std::size_t at = plain.size();
        plain.resize(at + frame->payload_size);
        if (!cg::inflate_frame(stream.first(frame->raw_size), *frame, std::span(plain).subspan(at))) {
            plain.resize(at);
            return false;
        }
        stream = stream.subspan(frame->raw_size);
        ++seq;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::size_t max_payload = (data[0] & 1) ? 4096 : std::size_t{1} << 20;
    const cg::bytes_view stream(data + 1, size - 1);

    cg::byte_buffer plain;
    inflate_stream(stream, 0, max_payload, plain);

    // What was inflated round-trips through the writer.
    cg::byte_buffer again;
    std::uint8_t seq = 7;
    cg::write_compressed(again, seq, plain);
    cg::byte_buffer back;
    check(inflate_stream(again, 7, std::size_t{1} << 24, back));
    check(back == plain);

    // The ordinary packets it carries, as the session scans them.
    std::size_t pos = 0;
    while (pos < plain.size()) {
        cg::renumber_continuations(std::span(plain).subspan(pos));
        auto packet = cg::scan_packet(cg::bytes_view(plain).subspan(pos), max_payload);
        if (!packet || packet->raw_size == 0) break;
        check(packet->raw_size <= plain.size() - pos);
        pos += packet->raw_size;
    }
    return 0;
}
