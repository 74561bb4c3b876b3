// The database's side of a session: its connection and read buffer, the replies to what the proxy
// sends itself (captured, never forwarded), what it says when it fails (the client hears it), and
// the readiness watch while the client is idle.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "backend_stream.hpp"
#include "client_link.hpp"
#include "command_state.hpp"
#include "proxy/engine/prepared_statements.hpp"
#include "proxy/protocol/binary_value.hpp"
#include "proxy/protocol/exchange.hpp"
#include "rules/match/rewriter.hpp"

namespace claimguard::session {

// How long the link waits for the rest of what an idle database sent (its ERR, its close).
inline constexpr std::chrono::seconds idle_backend_read_timeout{1};

// The whole reply to a command the proxy sent itself, not yet forwarded.
struct captured_reply {
    proto::byte_buffer raw;    // every frame, as the server sent them
    std::uint8_t command = 0;  // the command it answers
    bool is_err = false;
    std::uint16_t err_code = 0;
    std::uint16_t status = 0;
    proto::command_exchange exchange{0, 0, 0};
};

class backend_link {
public:
    // `caps` (what both sides agreed on) and `status` (the server's status flags, kept up to date from
    // the replies read here) are the session's; an ERR marks `command` failed.
    backend_link(client_link& client, link_deadline& deadline, const config::proxy_options& opt,
                 const std::uint32_t& caps, std::uint16_t& status, command_state& command)
        : stream_(client.socket().get_executor()),
          client_(client),
          deadline_(deadline),
          opt_(opt),
          caps_(caps),
          status_(status),
          command_(command) {}

    backend_stream& stream() { return stream_; }
    packet_buffer& in() { return in_; }

    // Reads until a whole packet is at the front of in().
    awaitable<packet_read> read_packet();
    // One read from the database into in(); compressed, the whole frames read so far are inflated into
    // it (possibly none yet: the rest of a frame is still to come).
    awaitable<error_code> read_more();
    awaitable<bool> write(proto::bytes_view bytes);

    // From the first command on, the database link is compressed as the client's is (the client asked
    // for CLIENT_COMPRESS, which the proxy offers only when the database does): read_more() inflates,
    // write() deflates.
    void start_compression() { compressed_ = std::make_unique<compressed_stream>(); }
    // The database went away or broke the protocol mid-command: the client gets an ERR numbered `seq`.
    awaitable<void> failed(error_code ec, std::uint8_t seq);

    // Sends `raw` (a command numbered up to `last_seq`) and reads its whole reply. nullopt when the
    // connection failed (the client has heard it).
    awaitable<std::optional<captured_reply>> roundtrip(proto::bytes_view raw, std::uint8_t command,
                                                       std::uint8_t last_seq);
    // What engine::own_statements says to send for the proxy's SQL: the statement, or the proxy's own
    // prepared statement executed with the client's bound values (prepared first when it is new).
    awaitable<std::optional<captured_reply>> run_sql(const rules::match::rewritten_sql& sql,
                                                     const std::vector<proto::binary_value>* params,
                                                     const std::vector<proto::value_type>* types);
    engine::own_statements& own_statements() { return own_statements_; }
    // One COM_QUERY of the proxy's own, outside any client command, and its whole reply, never
    // forwarded: every packet's payload. nullopt when the connection failed (nobody is told).
    awaitable<std::optional<std::vector<proto::byte_buffer>>> own_query(std::string_view sql);
    [[nodiscard]] std::uint16_t own_query_status() const { return own_query_status_; }  // after the last one

    // While the client is idle, the database may close the connection (wait_timeout, KILL, MySQL
    // 8.0.24+'s ERR 4031 first). One readiness wait per idle period (no read, no copy): when it fires
    // while the client's read waits for the next command, woke() and that read is cancelled.
    void watch_while_idle(std::shared_ptr<void> keep);
    [[nodiscard]] bool woke() const { return woke_; }
    void forget_wake() { woke_ = false; }
    // The database spoke while the client was idle: relays an unsolicited ERR, if any. True when the
    // connection is still open (e.g. TLS records with no data) and the session goes on.
    awaitable<bool> spoke_while_idle();

    // The link failed (not a cancel, not a protocol error, not the server's clean close): the server
    // may still hold its transaction.
    [[nodiscard]] bool lost() const { return lost_; }
    void mark_lost() { lost_ = true; }
    // The server's connection id (its greeting) and when the handshake completed.
    [[nodiscard]] std::uint32_t thread_id() const { return thread_id_; }
    [[nodiscard]] clock_type::time_point ready_at() const { return ready_at_; }
    void greeted(std::uint32_t thread_id) { thread_id_ = thread_id; }
    void ready() { ready_at_ = clock_type::now(); }

    void cancel() { stream_.cancel(); }
    void close() {
        closed_ = true;
        stream_.close();
    }

private:
    backend_stream stream_;
    packet_buffer in_;
    std::unique_ptr<compressed_stream> compressed_;
    client_link& client_;
    link_deadline& deadline_;
    const config::proxy_options& opt_;
    const std::uint32_t& caps_;
    std::uint16_t& status_;
    command_state& command_;
    engine::own_statements own_statements_;  // the proxy's own prepared statements, by SQL
    std::uint16_t own_query_status_ = 0;
    std::uint32_t thread_id_ = 0;
    clock_type::time_point ready_at_{};
    bool lost_ = false;
    bool closed_ = false;
    bool watch_armed_ = false;  // watch_while_idle()'s wait is pending
    bool woke_ = false;         // that wait fired while the client was idle
};

}  // namespace claimguard::session
