// The session class: one client connection and its backend connection. Shared by the
// files that implement it (the relay core and the claim interception).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_link.hpp"
#include "claim_metrics.hpp"
#include "client_link.hpp"
#include "command_state.hpp"
#include "deadline.hpp"
#include "proxy/engine/admission_gate.hpp"
#include "proxy/engine/claim_operation.hpp"
#include "proxy/engine/command_end.hpp"
#include "proxy/engine/connection_state.hpp"
#include "proxy/engine/decide.hpp"
#include "proxy/engine/prepared_statements.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "proxy/engine/transaction_tracker.hpp"
#include "proxy/engine/unlisted_watch.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/binary_value.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/packets.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/parser.hpp"
#include "session.hpp"

namespace claimguard::session {

struct audit_event;

using asio::ip::tcp;

class session : public std::enable_shared_from_this<session> {
public:
    session(client_socket client, const session_context& ctx, guards::redis_guard* redis)
        : ctx_(ctx),
          opt_(*ctx.options),
          id_(ctx.next_session_id ? ctx.next_session_id->fetch_add(1) : 0),
          deadline_(client.get_executor()),
          client_(std::move(client), id_, deadline_, opt_),
          backend_(client_, deadline_, opt_, caps_, status_, command_),
          admission_timer_(client_.socket().get_executor()),
          redis_(redis) {}

    ~session();
    awaitable<void> run();
    void close();
    // Shutdown: stop waiting for a next command when idle outside a transaction (or at
    // once when `everyone`). True while the session stays open.
    bool drain(bool everyone);

private:
    // The client's next command: its read, with the database's idle watch while the client is idle.
    awaitable<packet_read> read_command();

    // ---- connection phase ------------------------------------------------------------------

    // Right after start-up, until the first schema check reached the database (bounded by the
    // schema watch: health_state::schema_pending): no session is decided without what it finds.
    awaitable<void> wait_for_first_schema_check();
    awaitable<bool> connect_backend();

    awaitable<bool> relay_handshake();

    awaitable<bool> start_backend_tls(const proto::handshake_response& response,
                                      const proto::packet_span& response_packet);

    // ---- command phase -----------------------------------------------------------------------

    awaitable<void> command_loop();
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

    // ---- claim interception (claims.cpp) ----------------------------------------------------
    enum class intercepted { forward, handled, failed };

    awaitable<intercepted> intercept(const proto::packet_span& packet, std::uint8_t command);
    awaitable<intercepted> intercept_query(const proto::packet_span& packet, std::string_view sql);
    awaitable<intercepted> intercept_prepare(const proto::packet_span& packet, std::string_view sql);
    awaitable<intercepted> intercept_execute(const proto::packet_span& packet);
    // COM_STMT_BULK_EXECUTE of a tracked statement: a claim INSERT's rows of values as one claim per row;
    // anything else the rules' unmodeled policy (bulk_execute).
    awaitable<intercepted> intercept_bulk_execute(engine::prepared_statement& ps, const proto::packet_span& packet);
    // A query of several statements (several_statements.cpp): each statement decided and carried out
    // in order like a query of its own, the replies stitched into one; false when `sql` does not split
    // (then the query is read as one statement, as before).
    [[nodiscard]] bool multi_statements() const;
    awaitable<intercepted> intercept_several(const proto::packet_span& packet,
                                             const std::vector<std::string_view>& statements);
    awaitable<intercepted> run_one_of_several(std::string_view sql);
    // `forward_bytes`: what to send when the statement goes to the database as the client
    // wrote it (the client's frames, or an execute re-encoded with its parameter types).
    awaitable<intercepted> apply(const engine::decision& d, const rules::sql::parsed_statement& st,
                                 std::uint8_t command, proto::bytes_view forward_bytes, std::uint8_t last_seq,
                                 const std::vector<proto::binary_value>* params,
                                 const std::vector<proto::value_type>* types);
    // The prepared statement's rules trust the session's current user (trusted_users).
    [[nodiscard]] bool trusted(const engine::prepared_statement& ps) const;
    // A trusted user's bulk execute, or one too large to read: forwarded, and followed as a write of
    // every key of the rule when it writes a stock table.
    awaitable<intercepted> trusted_execute(const engine::prepared_statement& ps, const proto::packet_span& packet,
                                           std::uint8_t command);
    // decision::trusted_write: sent as written; after its OK the read cache and the admission gate
    // follow it (engine::follow_trusted_write); counted and audited whatever the answer.
    awaitable<intercepted> forward_trusted_write(const engine::decision& d, const rules::sql::parsed_statement& st,
                                                 std::uint8_t command, proto::bytes_view forward_bytes,
                                                 std::uint8_t last_seq);
    // A rule's answer to the command being handled.
    awaitable<bool> answer(const rules::answer& a, std::uint16_t status, std::uint64_t ok_rows = 0) {
        command_.answered = true;
        command_.answered_error = a.type == rules::answer::kind::error ? a.code : 0;
        return client_.answer(a, proto::reply_seq(command_.seq), status, caps_, ok_rows);
    }
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
    // reserve: the transaction's takes served from the reserved block, settled at its end (consumed
    // when it committed or may have, back to the block otherwise), and those a ROLLBACK TO SAVEPOINT undid.
    void settle_reserved(std::vector<engine::deferred_take>& takes, bool committed);
    // reserve: before a take in a transaction the reserved block may serve, a refill of the key when
    // the block is empty (on the reserve connection; this session waits on its own executor).
    awaitable<void> fill_reserve(const engine::decision& d);
    // What the engine's front (connection_state_) needs to know for the command being handled.
    [[nodiscard]] engine::statement_inputs engine_inputs();
    // recognition::needs_sql_mode / needs_columns: asks this backend connection for the session's
    // sql_mode, the claim table's columns (information_schema), and gives each reply to the engine.
    // nullopt: the backend connection failed.
    awaitable<std::optional<engine::recognition>> look_up_columns(engine::recognised_statement& rs,
                                                                  engine::recognition step);
    void audit(const engine::decision& d, std::string_view action, const rules::sql::parsed_statement& st,
               std::string_view note = {});
    // watch_unlisted_tables: a statement the rules ignore, forwarded as it is, looked at for
    // /digests' unlisted shapes (reporting.cpp). Never called when the setting is 0.
    void watch_unlisted(std::string_view sql);
    // An audit line of the command being handled: kept until its answer is known (flush_audit).
    void keep_audit_line(const audit_event& e);
    // The kept lines go to the audit log with the command's answer (audit_answer_; none: the session
    // ended without one). Called at the command's end, after its settlement, and at the session's end.
    void flush_audit();
    // The answer the client got for the command ending now (command_: the sidecar's own, or the
    // database's relayed), for its audit lines.
    void note_command_answer();
    // The line's context: the rules version, this host, the session's database and backend thread.
    void fill_audit_context(audit_event& e) const;
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

    const session_context& ctx_;
    const config::proxy_options& opt_;
    std::uint64_t id_;
    std::string user_;
    std::uint32_t server_caps_ = 0;
    std::uint32_t caps_ = 0;  // what both sides agreed on
    std::uint32_t mariadb_caps_ = 0;
    std::uint16_t status_ = 0;  // the server's status flags, as its last reply said
    command_state command_;     // the client command being handled
    std::vector<std::string> audit_pending_;     // its audit lines (audit_line()), waiting for the answer
    std::optional<std::uint16_t> audit_answer_;  // the answer flush_audit() writes (ERR code, 0: OK)
    link_deadline deadline_;
    client_link client_;
    backend_link backend_;
    asio::steady_timer admission_timer_;  // the admission wait (woken by the gate, or its deadline); the read cache's
                                          // wait for a refresh
    bool closed_ = false;
    bool idle_ = false;          // waiting for the client's next command
    bool user_changed_ = false;  // COM_CHANGE_USER was relayed: user_ may not own the connection
    std::optional<bool> multi_statements_option_;  // COM_SET_OPTION's, after the handshake's capability

    // claim state
    guards::redis_guard* redis_ = nullptr;
    engine::session_memory memory_;
    // The lexer's sql_mode and character set, the current database, SQL-level prepared statements
    // and claim tables' columns: what earlier statements set up for the next ones.
    engine::connection_state connection_state_;
    engine::prepared_statements prepared_;  // the client's that a rule may concern
    // The end of each command for the transaction's claim bookkeeping (COMMIT or not, savepoints,
    // XA) and the Redis keys its claims hold.
    engine::transaction_tracker transaction_;
    session_counters counters_;                  // the per-rule metric children of the command's rules snapshot
    std::optional<engine::command_end> ending_;  // the command's end, while end_command() goes on with it
    engine::command_end_action ending_next_;     // ... from this action
    engine::admission_slots admission_held_;     // slots held until the reply / the transaction's end
    // watch_unlisted_tables: made at its first statement (nothing when the setting is 0).
    std::unique_ptr<engine::unlisted_watch> unlisted_;
};

}  // namespace claimguard::session
