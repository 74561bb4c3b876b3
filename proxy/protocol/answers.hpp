// Replies the proxy writes itself (the engine's "sold out" / "already claimed"
// answers): an OK or an ERR, framed with the sequence id the client expects.
//
// The same packets answer COM_QUERY (text protocol) and COM_STMT_EXECUTE (binary
// protocol): an OK or ERR reply has one format in both; only result sets differ.
#pragma once

#include <cstdint>
#include <string_view>

#include "packets.hpp"

namespace claimguard::protocol {

// The sequence id of the first reply packet to a command sent with `command_seq`
// (commands start at 0, so replies at 1).
[[nodiscard]] inline std::uint8_t reply_seq(std::uint8_t command_seq) {
    return static_cast<std::uint8_t>(command_seq + 1);
}

// An OK reply, framed at `seq`. The header is always 0x00 (0xFE only ends a
// result set) and SERVER_MORE_RESULTS_EXISTS is cleared: the answer ends the
// reply. `ok.status` should carry the session's current status flags
// (autocommit, in transaction) so the client's view of the session stays true.
[[nodiscard]] byte_buffer make_ok_frame(std::uint8_t seq, ok_packet ok, std::uint32_t capabilities);

// Shorthand: affected rows and status only.
[[nodiscard]] byte_buffer make_ok_frame(std::uint8_t seq, std::uint64_t affected_rows,
                                        std::uint16_t status, std::uint32_t capabilities);

// An ERR reply is packets.hpp's make_err_frame(seq, code, sql_state, message).

}  // namespace claimguard::protocol
