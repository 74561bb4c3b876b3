// Drives a command_exchange with a recorded sequence of frames, checking at each step that
// the next frame comes from the side the exchange asked for.
#pragma once

#include <optional>
#include <string>

#include "proxy/protocol/exchange.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {

inline constexpr std::uint32_t caps_eof_off =
    cap::long_flag | cap::protocol_41 | cap::transactions | cap::secure_connection |
    cap::multi_statements | cap::multi_results | cap::ps_multi_results | cap::plugin_auth |
    cap::plugin_auth_lenenc_data | cap::session_track | cap::local_files | cap::connect_with_db;
inline constexpr std::uint32_t caps_eof_on = caps_eof_off | cap::deprecate_eof;
inline constexpr std::size_t test_max_packet = std::size_t{1} << 26;

struct drive_result {
    command_exchange exchange;
    boost::system::error_code error;  // the first error the exchange returned
    std::size_t consumed = 0;         // frames fed, including the command
    std::string trouble;              // a frame came from the wrong side, or frames ran out
};

inline drive_result drive(const std::vector<frame>& fs, std::uint32_t caps,
                          std::uint16_t status = status::autocommit) {
    drive_result out{command_exchange(fs.at(0).payload.at(0), caps, status), {}, 1, {}};
    auto step = out.exchange.start(fs[0].seq);
    while (step != next_step::done) {
        if (out.consumed == fs.size()) {
            out.trouble = "frames ran out while the exchange waits";
            return out;
        }
        const auto& f = fs[out.consumed];
        const char want = step == next_step::read_server ? 's' : 'c';
        if (f.from != want) {
            out.trouble = "frame " + std::to_string(out.consumed) + " came from the wrong side";
            return out;
        }
        auto span = scan_packet(f.raw, test_max_packet);
        if (!span || span->raw_size != f.raw.size()) {
            out.trouble = "frame " + std::to_string(out.consumed) + " is not one whole packet";
            return out;
        }
        auto r = step == next_step::read_server ? out.exchange.on_server_packet(*span)
                                                : out.exchange.on_client_packet(*span);
        ++out.consumed;
        if (!r) {
            out.error = r.error();
            return out;
        }
        step = *r;
    }
    return out;
}

}  // namespace claimguard::protocol::test
