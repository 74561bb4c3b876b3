// Replies the proxy writes itself (the engine's "sold out" / "already claimed"
// answers): an OK or an ERR, framed with the sequence id the client expects.
//
// The same packets answer COM_QUERY (text protocol) and COM_STMT_EXECUTE (binary
// protocol): an OK or ERR reply has one format in both; only result sets differ.
#pragma once

#include <cstdint>
#include <optional>
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

// One statement's whole reply (every frame, as read or built) made part of the reply to a query of
// several statements (CLIENT_MULTI_STATEMENTS): its frames numbered on from `first_seq`, and, when
// more results follow (`more_results`), SERVER_MORE_RESULTS_EXISTS set in the OK or EOF packet that
// ends it. `next_seq` is the sequence id after it; `err` says the reply ends with an ERR (the server
// runs no statement after one). A reply whose frames do not parse is copied as it is (`ok` false).
struct stitched_reply {
    byte_buffer raw;
    std::uint8_t next_seq = 0;
    bool err = false;
    bool ok = true;
};
[[nodiscard]] stitched_reply stitch_reply(bytes_view raw, std::uint8_t first_seq, bool more_results);

// A database's OK reply (one frame, as read) with its status flags replaced by `flags`, everything
// else kept (affected rows, insert id, warnings, info, session state): the reply of a statement the
// proxy wrapped in a transaction of its own, answered after that transaction's COMMIT. Empty when
// `raw` is not one frame holding an OK packet.
[[nodiscard]] std::optional<byte_buffer> ok_with_status(bytes_view raw, std::uint16_t flags,
                                                        std::uint32_t capabilities);

// Shorthand: affected rows and status only.
[[nodiscard]] byte_buffer make_ok_frame(std::uint8_t seq, std::uint64_t affected_rows,
                                        std::uint16_t status, std::uint32_t capabilities);

// An ERR reply is packets.hpp's make_err_frame(seq, code, sql_state, message).

}  // namespace claimguard::protocol
