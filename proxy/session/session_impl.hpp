// The session class: one client connection and its backend connection. Shared by the
// files that implement it (the relay core and the claim interception).
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include <optional>

#include "backend_stream.hpp"
#include "claim_metrics.hpp"
#include "packet_buffer.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/engine/admission_gate.hpp"
#include "proxy/engine/claim_operation.hpp"
#include "proxy/engine/command_end.hpp"
#include "proxy/engine/connection_state.hpp"
#include "proxy/engine/decide.hpp"
#include "proxy/engine/prepared_statements.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "proxy/engine/transaction_tracker.hpp"
#include "proxy/protocol/binary_value.hpp"
#include "proxy/protocol/packets.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/parser.hpp"
#include "session.hpp"

namespace claimguard::session {

namespace asio = boost::asio;
namespace proto = claimguard::protocol;
using asio::awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
inline constexpr std::size_t read_chunk_bytes = 64 * 1024;
inline constexpr std::size_t idle_buffer_bytes = 64 * 1024;  // buffers shrink back to this after big packets
// How long the session waits for the rest of what an idle database sent (its ERR, its close).
inline constexpr std::chrono::seconds idle_backend_read_timeout{1};

// The MySQL errors the proxy itself answers with.
namespace er {
inline constexpr std::uint16_t handshake = 1043;              // 08S01 Bad handshake
inline constexpr std::uint16_t unknown_command = 1047;        // 08S01
inline constexpr std::uint16_t packet_too_large = 1153;       // 08S01
inline constexpr std::uint16_t packets_out_of_order = 1156;   // 08S01
inline constexpr std::uint16_t read_timeout = 1159;           // 08S01 timeout reading communication packets
inline constexpr std::uint16_t malformed_packet = 1835;       // HY000
// The database is unreachable or went away: server-range codes with SQLSTATE 08S01, which drivers and
// pools read as "this connection is dead". Never a client-library code (2001-2061): libmariadb 3.3 turns
// an ERR carrying one (2003, 2013, 2027, ...) into 2027 "Received malformed packet" and loses the message.
inline constexpr std::uint16_t backend_gone = 1927;           // 08S01 (ER_CONNECTION_KILLED)
inline constexpr const char* backend_gone_state = "08S01";
}  // namespace er

enum class deadline_kind { none, connect, idle, packet, drain };

class session : public std::enable_shared_from_this<session> {
public:
    session(client_socket client, const session_context& ctx, guards::redis_guard* redis)
        : client_(std::move(client)),
          backend_(client_.get_executor()),
          timer_(client_.get_executor()),
          admission_timer_(client_.get_executor()),
          ctx_(ctx),
          opt_(*ctx.options),
          id_(ctx.next_session_id ? ctx.next_session_id->fetch_add(1) : 0),
          redis_(redis) {
        peer_ = client_peer(client_, client_is_unix_);
    }

    ~session();
    awaitable<void> run();
    void close();
    // Shutdown: stop waiting for a next command when idle outside a transaction (or at
    // once when `everyone`). True while the session stays open.
    bool drain(bool everyone);

private:
    // ---- deadlines: one timer per session, re-armed lazily -------------------------------

    awaitable<void> watchdog();

    void set_deadline(deadline_kind kind, clock_type::duration after);

    // ---- raw I/O ---------------------------------------------------------------------------

    // Reads until a whole packet is at the front of `buf`.
    template <class ReadSome>
    awaitable<std::pair<error_code, proto::packet_span>> read_packet(packet_buffer& buf, ReadSome read_some) {
        for (;;) {
            auto scan = proto::scan_packet(buf.readable(), opt_.max_packet_bytes);
            if (!scan) co_return std::pair{error_code(scan.error()), proto::packet_span{}};
            if (scan->raw_size) co_return std::pair{error_code{}, *scan};
            auto space = buf.prepare(std::max(read_chunk_bytes, buf.size()));
            auto [ec, n] = co_await read_some(asio::buffer(space.data(), space.size()));
            if (ec) co_return std::pair{ec, proto::packet_span{}};
            buf.commit(n);
        }
    }

    awaitable<std::pair<error_code, proto::packet_span>> read_client_packet(bool between_commands);

    // While the client is idle, the database may close the connection (wait_timeout, KILL,
    // MySQL 8.0.24+'s ERR 4031 first). One readiness wait on the backend socket per idle
    // period (no read, no copy) wakes the session so it can do what a TCP relay does.
    void watch_backend_while_idle();
    // The database spoke while the client was idle: relays an unsolicited ERR, if any.
    // True when the backend is still open (e.g. TLS records with no data) and the session goes on.
    awaitable<bool> backend_spoke_while_idle();

    awaitable<std::pair<error_code, proto::packet_span>> read_backend_packet();

    awaitable<bool> write_client(proto::bytes_view bytes);

    awaitable<bool> write_backend(proto::bytes_view bytes);

    awaitable<void> answer_error(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                                 std::string_view message);

    // A client read failed: say why (when the client can still hear it) and count it.
    awaitable<void> client_read_failed(error_code ec, std::uint8_t seq);

    // The database went away or broke the protocol mid-command: the client gets an ERR.
    awaitable<void> backend_failed(error_code ec, std::uint8_t seq);

    // ---- connection phase ------------------------------------------------------------------

    awaitable<bool> connect_backend();

    awaitable<bool> relay_handshake();

    awaitable<bool> start_backend_tls(const proto::handshake_response& response,
                                      const proto::packet_span& response_packet);

    // ---- command phase -----------------------------------------------------------------------

    awaitable<void> command_loop();
    // The end of a command: runs engine::command_end (the transaction asked about after ERR 1205,
    // its end, the Redis keys and admission slots, the give-backs after a rollback) and counts the
    // command's duration. False when the backend connection failed under the proxy's own statement.
    // The end of each client command (engine::command_end): carried out at once, without a coroutine
    // frame, unless the engine asks the database something first (after ERR 1205 in a transaction,
    // give-backs after a rollback): then false, and end_command() goes on with it. end_command() is
    // false when the database connection failed under it (the session ends).
    bool end_command_now(bool was_in_transaction, clock_type::time_point started);
    awaitable<bool> end_command(clock_type::time_point started);
    // Carries out and reports what the end of the command settled (Redis keys, dropped deferred takes,
    // admission slots) and counts the command's duration.
    void settle_command(engine::command_end& end, clock_type::time_point started);

    // Forwards the server's reply to the client until the exchange says it is over.
    // Complete packets are parsed in place and written in large batches straight
    // from the read buffer; nothing is copied.
    awaitable<bool> relay_reply(proto::command_exchange& exchange);

    // ---- orphaned transactions (orphan_kill.cpp) ----------------------------------------------
    // The backend link was lost inside a transaction: remember the server's thread for a KILL.
    void note_orphan();
    // Right after the handshake, before the app's first command: KILL CONNECTION the orphans of
    // this user. False when this backend connection failed under it (the session ends).
    awaitable<bool> end_orphans();
    // Sends one COM_QUERY of the proxy's own and reads its whole reply, never forwarded: every packet's
    // payload. nullopt when the backend connection failed.
    awaitable<std::optional<std::vector<proto::byte_buffer>>> own_query(std::string_view sql);
    std::uint16_t own_query_status_ = 0;  // the server's status flags after the last own_query

    // ---- claim interception (claims.cpp) ----------------------------------------------------
    enum class intercepted { forward, handled, failed };
    // The whole reply to a command the proxy sent itself, not yet forwarded.
    struct captured_reply {
        proto::byte_buffer raw;    // every frame, as the server sent them
        std::uint8_t command = 0;  // the command it answers
        bool is_err = false;
        std::uint16_t err_code = 0;
        std::uint16_t status = 0;
        proto::command_exchange exchange{0, 0, 0};
    };

    awaitable<intercepted> intercept(const proto::packet_span& packet, std::uint8_t command);
    awaitable<intercepted> intercept_query(const proto::packet_span& packet, std::string_view sql);
    awaitable<intercepted> intercept_prepare(const proto::packet_span& packet, std::string_view sql);
    awaitable<intercepted> intercept_execute(const proto::packet_span& packet);
    // `forward_bytes`: what to send when the statement goes to the database as the client
    // wrote it (the client's frames, or an execute re-encoded with its parameter types).
    awaitable<intercepted> apply(const engine::decision& d, const rules::sql::parsed_statement& st,
                                 std::uint8_t command, proto::bytes_view forward_bytes, std::uint8_t last_seq,
                                 const std::vector<proto::binary_value>* params,
                                 const std::vector<proto::value_type>* types);
    awaitable<std::optional<captured_reply>> roundtrip(proto::bytes_view raw, std::uint8_t command,
                                                       std::uint8_t last_seq);

    awaitable<std::optional<captured_reply>> run_sql(const rules::match::rewritten_sql& sql,
                                                     const std::vector<proto::binary_value>* params,
                                                     const std::vector<proto::value_type>* types);
    awaitable<bool> answer(const rules::answer& a, std::uint16_t status, std::uint64_t ok_rows = 0);
    // Counts, audits and logs what one step of a statement operation reported (reporting.cpp):
    // admission notes, events, deferred takes' events, read cache notes, in that order.
    void report_step(const engine::statement_report& r, const engine::decision& d,
                     const rules::sql::parsed_statement& st);
    // Counts and audits what a claim operation reports.
    void report_events(const std::vector<engine::event>& events, const engine::decision& d,
                const rules::sql::parsed_statement& st);
    // Counts what the read cache did for a read.
    void report_reads(const std::vector<engine::read_note>& notes, const engine::decision& d);
    // Counts and audits what the admission gate did for a statement.
    void report_admission(const std::vector<engine::admission_note>& notes, const engine::decision& d,
                          const rules::sql::parsed_statement& st);
    // ... and what became of deferred takes (defer_decrement), each under its own rule.
    void report_deferred(const std::vector<std::pair<engine::event, engine::deferred_take>>& events,
                         const rules::sql::parsed_statement* st);
    // The transaction is gone without a reply saying how (COM_RESET_CONNECTION, COM_CHANGE_USER, the
    // connection's end): its Redis keys go, its deferred takes are dropped (engine::abandon_transaction).
    void abandon_transaction();
    void report_dropped(std::vector<engine::deferred_take> dropped, bool committed);
    // What the engine's front (connection_state_) needs to know for the command being handled.
    [[nodiscard]] engine::statement_inputs engine_inputs();
    // recognition::needs_columns: asks this backend connection for the claim table's columns
    // (information_schema) and gives the reply to the engine. nullopt: the backend connection failed.
    awaitable<std::optional<engine::recognition>> look_up_columns(engine::recognised_statement& rs,
                                                                  engine::recognition step);
    void audit(const engine::decision& d, std::string_view action, const rules::sql::parsed_statement& st);
    void forget_statements();
    // A command that carries a prepared statement's rows outside COM_STMT_EXECUTE's values
    // (COM_STMT_BULK_EXECUTE, an execute with COM_STMT_SEND_LONG_DATA parameters): when the
    // statement writes a protected table, its rules' unmodeled policy applies.
    awaitable<intercepted> unmodeled_execute(const engine::prepared_statement& ps, const proto::packet_span& packet,
                                             std::uint8_t command, engine::unread_rows why);
    // Claims' Redis keys that did not commit go (compare-and-delete, in the background), or a user
    // whose claim was rolled back would hear "already claimed" for the key's ttl. The database's
    // unique index stays the guarantee either way.
    void release_redis_keys(std::vector<engine::redis_hold> keys);
    // Claims that committed: their keys say so (in the background), so a later claim of the key is
    // answered "already claimed" without the database.
    void commit_redis_keys(std::vector<engine::redis_hold> keys);

    // ---- per-key admission (admission.cpp) -------------------------------------------------------
    // Waits for the turn a statement operation asked for (engine::statement_action::wait_turn) in
    // the sidecar's admission gate: what the gate said, or closing when the client went away or
    // the session closes while it waited (the ticket is gone then).
    awaitable<engine::statement_input> wait_turn(const engine::turn_request& turn);
    // Gives back every slot this session holds (outside a transaction, at the session's end).
    void release_admission();
    // While queued: a client that hangs up (EOF) wakes the waiter so it leaves the queue.
    void watch_client_while_queued();

    client_socket client_;
    bool client_is_unix_ = false;  // came through listen_unix: no TCP options
    backend_stream backend_;
    asio::steady_timer timer_;
    asio::steady_timer admission_timer_;  // the admission wait (woken by the gate, or its deadline); the read cache's wait for a refresh
    const session_context& ctx_;
    const config::proxy_options& opt_;
    std::uint64_t id_;
    std::string peer_;
    std::string user_;
    packet_buffer client_in_;
    packet_buffer backend_in_;
    std::uint32_t server_caps_ = 0;
    std::uint32_t caps_ = 0;  // what both sides agreed on
    std::uint32_t mariadb_caps_ = 0;
    std::uint16_t status_ = 0;
    clock_type::time_point deadline_ = clock_type::time_point::max();
    clock_type::time_point armed_ = clock_type::time_point::max();
    deadline_kind deadline_kind_ = deadline_kind::none;
    deadline_kind timed_out_ = deadline_kind::none;
    bool closed_ = false;
    bool idle_ = false;  // waiting for the client's next command
    std::uint32_t backend_thread_id_ = 0;  // the server's connection id (greeting)
    clock_type::time_point backend_ready_at_{};  // the backend handshake completed
    bool backend_lost_ = false;            // the backend link failed (not a cancel, not a protocol error)
    bool user_changed_ = false;            // COM_CHANGE_USER was relayed: user_ may not own the connection
    bool waiting_idle_ = false;         // suspended in the socket read for the next command
    bool backend_watch_armed_ = false;  // watch_backend_while_idle()'s wait is pending
    bool backend_woke_ = false;         // that wait fired while the client was idle

    // claim state
    guards::redis_guard* redis_ = nullptr;
    std::shared_ptr<const engine::rules_snapshot> snapshot_;  // for the command being handled
    engine::session_memory memory_;
    // The lexer's sql_mode and character set, the current database, SQL-level prepared statements
    // and claim tables' columns: what earlier statements set up for the next ones.
    engine::connection_state connection_state_;
    engine::prepared_statements prepared_;  // the client's that a rule may concern
    engine::own_statements own_statements_;  // the proxy's own, by SQL
    std::uint8_t command_seq_ = 0;  // last sequence id of the command being handled
    bool forwarded_statement_ = false;  // apply() sent the client's statement to the database
    // The end of each command for the transaction's claim bookkeeping (COMMIT or not, savepoints,
    // XA) and the Redis keys its claims hold.
    engine::transaction_tracker transaction_;
    session_counters counters_;  // the per-rule metric children of the command's rules snapshot
    bool command_failed_ = false;                 // the server answered the command being handled with ERR
    std::uint16_t command_error_ = 0;             // ... its code
    std::optional<engine::command_end> ending_;  // the command's end, while end_command() goes on with it
    engine::command_end_action ending_next_;     // ... from this action
    engine::admission_slots admission_held_;  // slots held until the reply / the transaction's end
    bool client_gone_ = false;                    // the client hung up while its statement was queued
    std::uint64_t client_watch_ = 0;              // generation of watch_client_while_queued()'s wait
};

}  // namespace claimguard::session
