// Framed OK replies synthesized by the proxy.
#include "answers.hpp"

#include "capabilities.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

byte_buffer make_ok_frame(std::uint8_t seq, ok_packet ok, std::uint32_t capabilities) {
    ok.header = ok_header;
    ok.status = static_cast<std::uint16_t>(ok.status & ~status::more_results_exist);
    if (ok.session_state.empty())
        ok.status = static_cast<std::uint16_t>(ok.status & ~status::session_state_changed);
    byte_buffer payload;
    serialize(ok, capabilities, payload);
    byte_buffer out;
    write_packet(out, seq, payload);
    return out;
}

byte_buffer make_ok_frame(std::uint8_t seq, std::uint64_t affected_rows, std::uint16_t status,
                          std::uint32_t capabilities) {
    ok_packet ok;
    ok.affected_rows = affected_rows;
    ok.status = status;
    return make_ok_frame(seq, ok, capabilities);
}

std::optional<byte_buffer> ok_with_status(bytes_view raw, std::uint16_t flags, std::uint32_t capabilities) {
    constexpr std::size_t header = 4;
    if (raw.size() < header + 1) return std::nullopt;
    const std::size_t length = raw[0] | (std::size_t{raw[1]} << 8) | (std::size_t{raw[2]} << 16);
    if (raw.size() != header + length || raw[header] != ok_header) return std::nullopt;
    auto ok = parse_ok(raw.subspan(header), capabilities);
    if (!ok) return std::nullopt;
    // The session state block is there only when its flag is: keep the flag as the packet has it.
    ok->status = static_cast<std::uint16_t>((flags & ~status::session_state_changed) |
                                            (ok->status & status::session_state_changed));
    return make_ok_frame(raw[3], *ok, capabilities);
}

stitched_reply stitch_reply(bytes_view raw, std::uint8_t first_seq, bool more_results) {
    constexpr std::size_t header = 4;
    constexpr std::size_t max_frame = 0xFFFFFF;
    stitched_reply out;
    out.raw.assign(raw.begin(), raw.end());
    out.next_seq = first_seq;
    std::size_t last_packet = raw.size();  // where the last packet's first frame starts
    bool continues = false;                // the frame before was full: this one continues its packet
    for (std::size_t at = 0; at < raw.size();) {
        if (raw.size() - at < header) {
            out.ok = false;
            return out;
        }
        const std::size_t length = raw[at] | (raw[at + 1] << 8) | (raw[at + 2] << 16);
        if (raw.size() - at - header < length) {
            out.ok = false;
            return out;
        }
        if (!continues) last_packet = at;
        out.raw[at + 3] = out.next_seq++;
        continues = length == max_frame;
        at += header + length;
    }
    if (last_packet >= raw.size()) return out;
    auto payload = std::span<std::uint8_t>(out.raw).subspan(last_packet + header);
    if (payload.empty()) return out;
    out.err = payload[0] == 0xFF;
    if (!more_results || out.err) return out;
    std::size_t status_at = 0;
    if (payload[0] == 0xFE && payload.size() < 9) {
        status_at = 3;  // EOF: header, warnings, status
    } else if (payload[0] == 0x00 || payload[0] == 0xFE) {
        reader r(payload);  // OK: header, affected rows, insert id, status
        r.u8();
        r.lenenc();
        r.lenenc();
        if (!r.ok()) return out;
        status_at = r.position();
    } else {
        return out;  // not an end of reply the client reads flags from
    }
    if (payload.size() < status_at + 2) return out;
    payload[status_at] |= static_cast<std::uint8_t>(status::more_results_exist & 0xFF);
    return out;
}

}  // namespace claimguard::protocol
