// The session coroutine: after the connection phase (handshake.cpp), every command and its whole reply,
// forwarding bytes unchanged while parsing enough to know where each reply ends.
#include "session_impl.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <unordered_set>

#include "backend_stream.hpp"
#include "packet_buffer.hpp"
#include "proxy/admin/health.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "rules/sql/charset.hpp"

namespace claimguard::session {

namespace {

// The reply to one of the proxy's own statements (own_query), as the end of a command reads it.
engine::reply_summary own_reply_summary(const std::vector<proto::byte_buffer>& payloads, std::uint32_t caps,
                                        std::uint32_t mariadb_caps, std::uint16_t status) {
    engine::reply_summary r;
    r.status = status;
    const proto::reply_view view(payloads, caps, mariadb_caps);
    if (view.kind() == proto::reply_kind::ok) {
        if (auto ok = proto::parse_ok(view.first(), caps)) {
            r.ok = true;
            r.affected_rows = ok->affected_rows;
        }
    } else if (view.kind() == proto::reply_kind::err) {
        r.err = true;
    }
    return r;
}

// The sessions of this I/O thread (each io_context runs on one thread), for shutdown.
thread_local std::unordered_set<session*> live_sessions;

}  // namespace

session::~session() { live_sessions.erase(this); }

bool session::drain(bool everyone) {
    if (closed_) return false;
    if (client_.lingering()) {  // shutdown does not wait for a lingering close (linger.hpp)
        deadline_.time_out(deadline_kind::drain);
        client_.cancel();
        return false;
    }
    if (everyone || (idle_ && !(status_ & proto::status::in_trans))) {
        deadline_.time_out(deadline_kind::drain);
        admission_timer_.cancel();  // a statement waiting for its key's turn leaves the queue
        client_.cancel();
        if (everyone) backend_.cancel();
        return false;
    }
    return true;
}

std::size_t drain_sessions_on_this_thread(bool everyone) {
    std::size_t open = 0;
    auto sessions = std::vector<session*>(live_sessions.begin(), live_sessions.end());
    for (auto* s : sessions)
        if (s->drain(everyone)) ++open;
    return open;
}

awaitable<void> session::run() {
    live_sessions.insert(this);
    asio::co_spawn(
        client_.socket().get_executor(),
        [self = shared_from_this()] { return self->deadline_.watch(self->client_, self->backend_); }, asio::detached);
    spdlog::debug("session {} from {}: open", id_, client_.peer());
    co_await wait_for_first_schema_check();
    if (co_await connect_backend() && co_await relay_handshake() && co_await end_orphans()) {
        // The server's default sql_mode (or init_connect's) is in force: asked when a statement first needs it.
        connection_state_.forget_sql_mode();
        co_await command_loop();
        note_orphan();  // the backend link lost inside a transaction: the server may still hold it
    }
    abandon_transaction();  // a transaction still open dies with the connection
    release_admission();    // ... and so does its turn at the hot rows
    audit_answer_.reset();  // lines of a command that got no answer, or of the connection's end
    flush_audit();

    // After a protocol error's ERR (linger.hpp); the database connection is not held meanwhile.
    if (client_.wants_linger()) {
        backend_.close();
        co_await client_.linger_close();
    }
    close();
    spdlog::debug("session {} from {}: closed", id_, client_.peer());
}

void session::close() {
    closed_ = true;
    deadline_.close();
    admission_timer_.cancel();
    client_.close();
    backend_.close();
}

awaitable<packet_read> session::read_command() {
    if (client_.in().size() == 0) {  // the client may be idle
        backend_.watch_while_idle(shared_from_this());
        // Between commands the database has nothing to say (the watch reads nothing): its reply takes a
        // buffer again, from the thread's spares.
        backend_.in().release();
    }
    return client_.read_packet(true);
}

awaitable<void> session::command_loop() {
    for (;;) {
        client_.in().shrink_if_idle(idle_buffer_bytes);
        backend_.in().shrink_if_idle(idle_buffer_bytes);
        if (ctx_.draining && ctx_.draining->load() && !(status_ & proto::status::in_trans)) co_return;
        idle_ = true;
        backend_.forget_wake();
        auto [ec, packet] = co_await read_command();
        idle_ = false;
        if (ec && backend_.woke() && deadline_.timed_out() == deadline_kind::none) {
            if (co_await backend_.spoke_while_idle()) continue;
            co_return;
        }
        if (ec) {
            if (deadline_.timed_out() != deadline_kind::drain) co_await client_.read_failed(ec, 1);
            co_return;
        }
        command_ = {};
        if (packet.first_seq != 0) {
            co_await client_.read_failed(proto::errc::bad_sequence, static_cast<std::uint8_t>(packet.last_seq + 1));
            co_return;
        }
        if (packet.payload_size == 0) {  // MariaDB answers "Unknown command" and keeps the session
            client_.in().consume(packet.raw_size);
            co_await client_.answer_error(1, er::unknown_command, "08S01", "Unknown command");
            continue;
        }
        const std::uint8_t command = packet.first_payload[0];
        const std::uint8_t reply_seq = static_cast<std::uint8_t>(packet.last_seq + 1);
        admin::metrics().commands(command).inc();
        if (command == proto::com::change_user) user_changed_ = true;
        if (proto::is_refused_command(command)) {
            client_.in().consume(packet.raw_size);
            co_await client_.answer_error(reply_seq, er::unknown_command, "08S01",
                                          "claimguard: command not supported through the proxy");
            continue;
        }
        const auto started = clock_type::now();
        const bool was_in_transaction = status_ & proto::status::in_trans;

        // Decision point (claim engine): a command may be forwarded, rewritten or answered here.
        auto verdict = co_await intercept(packet, command);
        if (verdict == intercepted::failed) co_return;
        if (verdict == intercepted::handled) {
            client_.in().consume(packet.raw_size);
            if (command_.ended) continue;  // a query of several statements: ended one by one
            if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
            continue;
        }
        if (!co_await backend_.write(client_.in().readable().first(packet.raw_size))) {
            co_await backend_.failed(asio::error::broken_pipe, reply_seq);
            co_return;
        }
        client_.in().consume(packet.raw_size);
        if (command == proto::com::quit) co_return;

        proto::command_exchange exchange(command, caps_, status_);
        if (exchange.start(packet.last_seq) == proto::next_step::done) {
            if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
            continue;
        }
        if (!co_await relay_reply(exchange)) co_return;
        status_ = exchange.status();
        if (command == proto::com::stmt_prepare && !exchange.failed()) prepared_.relayed(exchange.statement_id());
        command_.failed = exchange.failed();
        if (command_.failed) command_.error = exchange.error_code();
        if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
    }
}

awaitable<bool> session::relay_reply(proto::command_exchange& exchange) {
    std::size_t parsed = 0;  // bytes at the front of backend_.in() parsed, not yet sent
    auto flush = [&]() -> awaitable<bool> {
        if (parsed == 0) co_return true;
        bool ok = co_await client_.write(backend_.in().readable().first(parsed));
        backend_.in().consume(parsed);
        parsed = 0;
        co_return ok;
    };
    auto step = proto::next_step::read_server;
    while (step != proto::next_step::done) {
        if (step == proto::next_step::read_server) {
            auto scan = proto::scan_packet(backend_.in().readable().subspan(parsed), opt_.max_packet_bytes);
            if (scan && scan->raw_size) {
                auto next = exchange.on_server_packet(*scan);
                if (!next) {
                    if (!co_await flush()) co_return false;
                    co_await backend_.failed(next.error(), exchange.next_seq());
                    co_return false;
                }
                parsed += scan->raw_size;
                step = *next;
                continue;
            }
            if (!co_await flush()) co_return false;
            if (!scan) {
                co_await backend_.failed(scan.error(), exchange.next_seq());
                co_return false;
            }
            if (auto ec = co_await backend_.read_more()) {
                co_await backend_.failed(ec, exchange.next_seq());
                co_return false;
            }
        } else {
            // LOCAL INFILE data or an authentication answer from the client.
            if (!co_await flush()) co_return false;
            auto [ec, packet] = co_await client_.read_packet(false);
            if (ec) {
                co_await client_.read_failed(ec, exchange.next_seq());
                co_return false;
            }
            auto next = exchange.on_client_packet(packet);
            if (!next) {
                co_await client_.read_failed(next.error(), exchange.next_seq());
                co_return false;
            }
            if (!co_await backend_.write(client_.in().readable().first(packet.raw_size))) {
                co_await backend_.failed(asio::error::broken_pipe, exchange.next_seq());
                co_return false;
            }
            client_.in().consume(packet.raw_size);
            step = *next;
        }
    }
    co_return co_await flush();
}

bool session::end_command_now(bool was_in_transaction, clock_type::time_point started) {
    note_command_answer();
    flush_audit();
    connection_state_.command_ended(command_.failed);
    auto& end = ending_.emplace(engine::command_outcome{was_in_transaction, status_, command_.failed, command_.error},
                                memory_, ctx_.ledger, transaction_, admission_held_, id_);
    command_.failed = false;
    command_.error = 0;
    auto act = end.resume(engine::command_end_input::start());
    if (act.type == engine::command_end_action::kind::settle) {
        settle_command(end, started);
        act = end.resume(engine::command_end_input::carried_out());
    }
    if (act.needs_server()) {
        ending_next_ = act;
        return false;
    }
    ending_.reset();
    flush_audit();  // lines of the settlement (deferred takes dropped at a commit)
    return true;  // done: only the database's answers can make the end fail
}

awaitable<bool> session::end_command(clock_type::time_point started) {
    auto& end = *ending_;
    auto act = ending_next_;
    for (;;) {
        using kind = engine::command_end_action::kind;
        switch (act.type) {
            case kind::done:
            case kind::fail: {
                const bool ok = act.type == kind::done;
                ending_.reset();
                flush_audit();
                co_return ok;
            }

            case kind::ask_transaction:
            case kind::give_back: {
                const auto reply = co_await backend_.own_query(end.sql());
                act = end.resume(reply ? engine::command_end_input::of_reply(own_reply_summary(
                                             *reply, caps_, mariadb_caps_, backend_.own_query_status()))
                                       : engine::command_end_input::lost());
                for (const auto& r : end.take_results()) {
                    counters_.of(r.rule).of(r.what)->inc();
                    if (r.what == engine::event::compensation_failed)
                        spdlog::error("session {}: rule {}: a give-back after a rollback changed no row", id_, r.rule);
                }
                break;
            }

            case kind::settle:
                settle_command(end, started);
                act = end.resume(engine::command_end_input::carried_out());
                break;
        }
    }
}

void session::settle_command(engine::command_end& end, clock_type::time_point started) {
    auto& s = end.settlement();
    status_ = end.status();
    if (s.timeout_rolled_back)
        spdlog::info("session {}: the lock wait timeout rolled the whole transaction back (innodb_rollback_on_timeout)",
                     id_);
    if (!s.release.empty()) release_redis_keys(std::move(s.release));
    if (!s.committed_keys.empty()) commit_redis_keys(std::move(s.committed_keys));
    if (!s.dropped.empty()) report_dropped(std::move(s.dropped), s.committed);
    settle_reserved(memory_.reserve_undone, false);  // ROLLBACK TO SAVEPOINT undid them: back to the block
    if (s.release_admission) release_admission();
    const double seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    admin::metrics().command_duration.observe(seconds);
    counters_.command_ended(seconds);  // claimguard_claim_duration_seconds of the rule that acted
}

void session::release_redis_keys(std::vector<engine::redis_hold> keys) {
    if (!redis_) return;
    for (auto& k : keys) redis_->release_in_background(std::move(k.key), std::move(k.token));
}

void session::commit_redis_keys(std::vector<engine::redis_hold> keys) {
    if (!redis_) return;
    for (auto& k : keys) redis_->commit_in_background(std::move(k.key), std::move(k.token), k.ttl);
}

void session::abandon_transaction() {
    auto steps = engine::abandon_transaction(transaction_, memory_, ctx_.ledger, id_);
    release_redis_keys(std::move(steps.release));
    // reserve: the database link lost under a command (a COMMIT perhaps): whether the transaction
    // committed is unknown, so its reserved units count as consumed (a leak, never an over-issue).
    // Otherwise the server rolls the open transaction back: they go back to the block.
    settle_reserved(steps.dropped, backend_.lost());
    report_dropped(std::move(steps.dropped), false);
}

void session::forget_statements() {
    prepared_.clear();  // the server dropped them too (COM_RESET_CONNECTION, COM_CHANGE_USER)
    backend_.own_statements().clear();
}

std::string client_peer(client_socket& socket, bool& is_unix) {
    error_code ec;
    auto local = socket.local_endpoint(ec);
    is_unix = !ec && local.protocol().family() == AF_UNIX;
    if (is_unix) {
        // The peer of an accepted unix connection is unnamed: the listener's path says where it came in.
        asio::local::stream_protocol::endpoint path;
        path.resize(std::min(local.size(), path.capacity()));
        std::memcpy(path.data(), local.data(), path.size());
        return "unix:" + path.path();
    }
    auto remote = socket.remote_endpoint(ec);
    if (ec) return "unknown";
    tcp::endpoint ep;
    if (remote.size() > ep.capacity()) return "unknown";
    std::memcpy(ep.data(), remote.data(), remote.size());
    ep.resize(remote.size());
    return ep.address().to_string() + ":" + std::to_string(ep.port());
}

awaitable<void> run_session(client_socket client, const session_context& ctx, guards::redis_guard* redis) {
    std::shared_ptr<session> s;
    try {
        s = std::make_shared<session>(std::move(client), ctx, redis);
        co_await s->run();
    } catch (const std::exception& e) {  // the one catch per session: nothing escapes to the I/O loop
        spdlog::error("session ended by an unexpected error: {}", e.what());
        if (s) s->close();
    }
}

}  // namespace claimguard::session
