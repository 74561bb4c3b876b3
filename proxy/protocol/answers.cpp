// Framed OK replies synthesized by the proxy.
#include "answers.hpp"

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

}  // namespace claimguard::protocol
