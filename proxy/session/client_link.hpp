// The client's side of a session: its socket and read buffer, each read under its deadline, what the
// proxy answers itself (ERRs, a rule's answer), and the hang-up watch while a statement is queued.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "compressed_stream.hpp"
#include "deadline.hpp"
#include "packet_buffer.hpp"
#include "proxy/config/proxy_options.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/frame.hpp"
#include "session.hpp"

namespace claimguard::rules {
struct answer;
}

namespace claimguard::session {

namespace asio = boost::asio;
namespace proto = claimguard::protocol;
using asio::awaitable;
using boost::system::error_code;

inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
inline constexpr std::size_t read_chunk_bytes = packet_buffer::standard_bytes;
// Between commands the client's buffer shrinks back to this (a larger one goes back after a large packet).
inline constexpr std::size_t idle_buffer_bytes = packet_buffer::small_bytes;

// The MySQL errors the proxy itself answers with.
namespace er {
inline constexpr std::uint16_t handshake = 1043;             // 08S01 Bad handshake
inline constexpr std::uint16_t unknown_command = 1047;       // 08S01
inline constexpr std::uint16_t packet_too_large = 1153;      // 08S01
inline constexpr std::uint16_t packets_out_of_order = 1156;  // 08S01
inline constexpr std::uint16_t uncompress_error = 1157;      // 08S01 Couldn't uncompress communication packet
inline constexpr std::uint16_t read_timeout = 1159;          // 08S01 timeout reading communication packets
inline constexpr std::uint16_t malformed_packet = 1835;      // HY000
// The database is unreachable or went away: server-range codes with SQLSTATE 08S01, which drivers and
// pools read as "this connection is dead". Never a client-library code (2001-2061): libmariadb 3.3 turns
// an ERR carrying one (2003, 2013, 2027, ...) into 2027 "Received malformed packet" and loses the message.
inline constexpr std::uint16_t backend_gone = 1927;  // 08S01 (ER_CONNECTION_KILLED)
inline constexpr const char* backend_gone_state = "08S01";
}  // namespace er

// A read of one whole packet: an error, or where it lies at the front of the link's buffer.
using packet_read = std::pair<error_code, proto::packet_span>;

class client_link {
public:
    client_link(client_socket socket, std::uint64_t session_id, link_deadline& deadline,
                const config::proxy_options& opt);

    client_socket& socket() { return socket_; }
    packet_buffer& in() { return in_; }
    [[nodiscard]] const std::string& peer() const { return peer_; }
    [[nodiscard]] bool is_unix() const { return is_unix_; }  // came through listen_unix: no TCP options
    [[nodiscard]] std::uint64_t session_id() const { return session_id_; }

    // Reads until a whole packet is at the front of in(), under packet_timeout; between commands, the
    // wait for the first byte is under idle_timeout, holds only a small buffer (packet_buffer::small_bytes),
    // and waiting_idle() says it is pending.
    awaitable<packet_read> read_packet(bool between_commands);
    [[nodiscard]] bool waiting_idle() const { return waiting_idle_; }

    awaitable<bool> write(proto::bytes_view bytes);

    // From the first command on, the client's stream is compressed (it asked for CLIENT_COMPRESS):
    // read_packet() inflates it and write() deflates, so the rest of the session sees ordinary packets.
    void start_compression();
    [[nodiscard]] bool compressed() const { return compressed_ != nullptr; }
    awaitable<void> answer_error(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                                 std::string_view message);
    // A rule's answer (its ERR, or an OK with `ok_rows` affected) in the reply numbered from `seq`.
    awaitable<bool> answer(const rules::answer& a, std::uint8_t seq, std::uint16_t status, std::uint32_t caps,
                           std::uint64_t ok_rows);
    // A query of several statements (session::intercept_several): while stitching, each write is one
    // statement's whole reply, renumbered on from `next_seq` and, with `more_results`, flagged so the
    // client reads on (protocol::stitch_reply); stitched() says how the last one ended.
    void stitch(std::uint8_t next_seq, bool more_results) {
        stitching_ = true;
        stitched_ = {};
        stitched_.next_seq = next_seq;
        more_results_ = more_results;
    }
    void stop_stitching() { stitching_ = false; }
    [[nodiscard]] const proto::stitched_reply& stitched() const { return stitched_; }

    // A read failed: say why (when the client can still hear it) and count it.
    awaitable<void> read_failed(error_code ec, std::uint8_t seq);

    // While a statement is queued: a client that hangs up (EOF, reset) sets hung_up() and cancels
    // `wake`; one that pipelines its next command is left alone. `keep` keeps the watcher alive.
    void watch_while_queued(std::shared_ptr<void> keep, asio::steady_timer& wake);
    // The queue wait is over: the watch's answer, if it comes, is stale.
    void stop_watching();
    [[nodiscard]] bool hung_up() const { return hung_up_; }

    void cancel() {
        error_code ignored;
        socket_.cancel(ignored);
    }
    void close();

    // After a protocol error's ERR (read_failed), the session closes through linger_close (linger.hpp):
    // the ERR, a FIN, and the client's remaining bytes read and dropped, within bounds, before the close.
    [[nodiscard]] bool wants_linger() const { return linger_ && !closed_; }
    awaitable<void> linger_close();
    [[nodiscard]] bool lingering() const { return lingering_; }  // inside linger_close

private:
    // Inflates frames from compressed_->raw into in_ until a whole packet is at its front (or an error);
    // nullopt when more compressed bytes must be read first.
    std::optional<packet_read> inflate_front();
    awaitable<bool> send(proto::bytes_view bytes);

    client_socket socket_;
    packet_buffer in_;
    std::unique_ptr<compressed_stream> compressed_;
    link_deadline& deadline_;
    const config::proxy_options& opt_;
    std::uint64_t session_id_;
    std::string peer_;
    bool is_unix_ = false;
    bool closed_ = false;
    bool waiting_idle_ = false;           // suspended in the read of the next command
    bool hung_up_ = false;                // the client hung up while its statement was queued
    std::uint64_t watch_generation_ = 0;  // of watch_while_queued()'s wait
    bool stitching_ = false;              // see stitch()
    bool more_results_ = false;
    proto::stitched_reply stitched_;  // the last stitched write, without its bytes

    bool linger_ = false;  // a protocol error was answered: close through linger_close
    bool lingering_ = false;
};

}  // namespace claimguard::session
