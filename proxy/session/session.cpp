// The session coroutine: after the connection phase (handshake.cpp), every command and its whole reply,
// forwarding bytes unchanged while parsing enough to know where each reply ends.
#include "session_impl.hpp"

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
#include <sys/socket.h>
#include <unordered_set>
#include <spdlog/spdlog.h>

#include "backend_stream.hpp"
#include "packet_buffer.hpp"
#include "proxy/admin/health.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "rules/sql/charset.hpp"

namespace claimguard::session {

namespace {


// The ERR a client gets for a client-side protocol error.
std::pair<std::uint16_t, const char*> client_error_answer(error_code ec) {
    if (ec == proto::errc::packet_too_large) return {er::packet_too_large, "08S01"};
    if (ec == proto::errc::bad_sequence) return {er::packets_out_of_order, "08S01"};
    return {er::malformed_packet, "HY000"};
}

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
    if (everyone || (idle_ && !(status_ & proto::status::in_trans))) {
        timed_out_ = deadline_kind::drain;
        admission_timer_.cancel();  // a statement waiting for its key's turn leaves the queue
        error_code ignored;
        client_.cancel(ignored);
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
    asio::co_spawn(client_.get_executor(), [self = shared_from_this()] { return self->watchdog(); },
                   asio::detached);
    spdlog::debug("session {} from {}: open", id_, peer_);
    if (co_await connect_backend() && co_await relay_handshake() && co_await end_orphans()) {
        co_await command_loop();
        note_orphan();  // the backend link lost inside a transaction: the server may still hold it
    }
    abandon_transaction();  // a transaction still open dies with the connection
    release_admission();    // ... and so does its turn at the hot rows
    close();
    spdlog::debug("session {} from {}: closed", id_, peer_);
}

void session::close() {
    closed_ = true;
    timer_.cancel();
    admission_timer_.cancel();
    error_code ignored;
    client_.shutdown(asio::socket_base::shutdown_both, ignored);
    client_.close(ignored);
    backend_.close();
}

awaitable<void> session::watchdog() {
    while (!closed_) {
        armed_ = deadline_;
        timer_.expires_at(deadline_);
        co_await timer_.async_wait(nothrow);
        if (closed_) co_return;
        if (deadline_kind_ != deadline_kind::none && clock_type::now() >= deadline_) {
            timed_out_ = deadline_kind_;
            deadline_ = clock_type::time_point::max();
            deadline_kind_ = deadline_kind::none;
            error_code ignored;
            client_.cancel(ignored);
            backend_.cancel();
        }
    }
}

void session::set_deadline(deadline_kind kind, clock_type::duration after) {
    deadline_kind_ = kind;
    deadline_ = kind == deadline_kind::none || after.count() <= 0 ? clock_type::time_point::max()
                                                                   : clock_type::now() + after;
    if (deadline_ < armed_) timer_.cancel();  // an earlier deadline: wake the watchdog
}

awaitable<std::pair<error_code, proto::packet_span>> session::read_client_packet(bool between_commands) {
    co_return co_await read_packet(client_in_, [&](asio::mutable_buffer b) -> awaitable<backend_stream::result_type> {
        bool idle = between_commands && client_in_.size() == 0;
        set_deadline(idle ? deadline_kind::idle : deadline_kind::packet,
                     idle ? clock_type::duration(opt_.idle_timeout) : clock_type::duration(opt_.packet_timeout));
        if (idle) watch_backend_while_idle();
        waiting_idle_ = idle;
        auto r = co_await client_.async_read_some(b, nothrow);
        waiting_idle_ = false;
        set_deadline(deadline_kind::none, {});
        co_return r;
    });
}

void session::watch_backend_while_idle() {
    if (backend_watch_armed_ || closed_) return;
    backend_watch_armed_ = true;
    // Completes when the backend socket is readable: normally with the reply to the next
    // command (then it is ignored), or with what the database sent on its own while idle.
    backend_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
        self->backend_watch_armed_ = false;
        if (ec || self->closed_ || !self->waiting_idle_) return;
        self->backend_woke_ = true;
        error_code ignored;
        self->client_.cancel(ignored);
    });
}

awaitable<bool> session::backend_spoke_while_idle() {
    backend_woke_ = false;
    for (;;) {
        auto scan = proto::scan_packet(backend_in_.readable(), opt_.max_packet_bytes);
        if (scan && scan->raw_size) {
            // The only packet a server sends unprompted is an ERR before it closes (MySQL
            // 8.0.24+: 4031 "disconnected by the server because of inactivity"): relay it as is.
            bool err = !scan->first_payload.empty() && scan->first_payload[0] == proto::err_header;
            if (err && !co_await write_client(backend_in_.readable().first(scan->raw_size))) co_return false;
            backend_in_.consume(scan->raw_size);
            if (!err) {
                admin::metrics().backend_errors("protocol").inc();
                spdlog::warn("session {} from {}: the database sent a packet between commands; closing",
                             id_, peer_);
                co_return false;
            }
            continue;
        }
        if (!scan) co_return false;
        set_deadline(deadline_kind::packet, idle_backend_read_timeout);
        auto space = backend_in_.prepare(read_chunk_bytes);
        auto [ec, n] = co_await backend_.read_some(asio::buffer(space.data(), space.size()));
        set_deadline(deadline_kind::none, {});
        if (ec) {
            if (timed_out_ == deadline_kind::packet && backend_in_.size() == 0) {
                timed_out_ = deadline_kind::none;  // no data after all (TLS records): stay open
                co_return true;
            }
            // Closed by the database: close the client too, as a TCP relay would, so the app's
            // pool sees a dead connection now rather than an error on its next query. A reset (not
            // the server's own close) may leave its transaction open there: an orphan (issue 13).
            if (ec != asio::error::eof && ec != asio::error::operation_aborted) backend_lost_ = true;
            admin::metrics().backend_errors("closed").inc();
            spdlog::info("session {} from {}: the database closed the idle connection ({}); closing the client",
                         id_, peer_, ec.message());
            co_return false;
        }
        backend_in_.commit(n);
    }
}

awaitable<std::pair<error_code, proto::packet_span>> session::read_backend_packet() {
    co_return co_await read_packet(backend_in_, [&](asio::mutable_buffer b) { return backend_.read_some(b); });
}

awaitable<bool> session::write_client(proto::bytes_view bytes) {
    // Asynchronous on purpose (unlike write_backend's direct send): the trip through the scheduler
    // gives the client time to send its next command before the session reads, so the next read
    // seldom comes back empty (measured: a direct send here added 0.4 EAGAIN reads per statement).
    auto [ec, n] = co_await asio::async_write(client_, asio::buffer(bytes.data(), bytes.size()), nothrow);
    admin::metrics().bytes_backend_to_client.inc(n);
    if (ec) {
        admin::metrics().client_errors("io").inc();
        spdlog::debug("session {} from {}: client write failed: {}", id_, peer_, ec.message());
    }
    co_return !ec;
}

awaitable<bool> session::write_backend(proto::bytes_view bytes) {
    auto [ec, n] = co_await backend_.write(asio::buffer(bytes.data(), bytes.size()));
    admin::metrics().bytes_client_to_backend.inc(n);
    if (ec) {
        admin::metrics().backend_errors("io").inc();
        spdlog::warn("session {} from {}: write to the database failed: {}", id_, peer_, ec.message());
    }
    co_return !ec;
}

awaitable<void> session::answer_error(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                             std::string_view message) {
    auto frame = proto::make_err_frame(seq, code, sql_state, message);
    co_await write_client(frame);
}

awaitable<void> session::client_read_failed(error_code ec, std::uint8_t seq) {
    if (ec == asio::error::eof || ec == asio::error::connection_reset) co_return;  // client left
    if (timed_out_ == deadline_kind::idle) {
        admin::metrics().client_errors("idle_timeout").inc();
        spdlog::info("session {} from {}: closed after {}s idle", id_, peer_, opt_.idle_timeout.count());
        co_return;
    }
    if (timed_out_ == deadline_kind::packet) {
        admin::metrics().client_errors("timeout").inc();
        co_await answer_error(seq, er::read_timeout, "08S01", "Got timeout reading communication packets");
        co_return;
    }
    if (ec.category() == proto::protocol_category()) {
        admin::metrics().client_errors(ec == proto::errc::packet_too_large ? "packet_too_large" : "protocol").inc();
        spdlog::warn("session {} from {}: bad packet from the client: {}", id_, peer_, ec.message());
        auto [code, state] = client_error_answer(ec);
        // Named, never a temporary inside co_await: GCC 12 can destroy such temporaries twice.
        const std::string message = "claimguard: " + ec.message();
        co_await answer_error(seq, code, state, message);
        co_return;
    }
    admin::metrics().client_errors("io").inc();
}

awaitable<void> session::backend_failed(error_code ec, std::uint8_t seq) {
    bool protocol = ec.category() == proto::protocol_category();
    // Lost, not ended: our own cancel, a protocol error (we close, the server hears it) and a clean close
    // by the server (it ended the transaction itself) leave no orphan behind; an RST or a timeout may.
    if (!protocol && ec != asio::error::operation_aborted && ec != asio::error::eof) backend_lost_ = true;
    admin::metrics().backend_errors(protocol ? "protocol" : ec == asio::error::eof ? "closed" : "io").inc();
    spdlog::warn("session {} from {}: database connection failed: {}", id_, peer_, ec.message());
    // The message is built before the co_await: GCC 12 destroys temporaries of a conditional
    // expression inside a co_await argument twice (a double free, found by it_faults).
    std::string message;
    if (protocol) {
        message = "claimguard: malformed packet from the database: " + ec.message();
    } else {
        message = "Lost connection to the database during query (claimguard: " + ec.message() + ")";
    }
    co_await answer_error(seq, er::backend_gone, er::backend_gone_state, message);
}

awaitable<void> session::command_loop() {
    for (;;) {
        client_in_.shrink_if_idle(idle_buffer_bytes);
        backend_in_.shrink_if_idle(idle_buffer_bytes);
        if (ctx_.draining && ctx_.draining->load() && !(status_ & proto::status::in_trans)) co_return;
        idle_ = true;
        backend_woke_ = false;
        auto [ec, packet] = co_await read_client_packet(true);
        idle_ = false;
        if (ec && backend_woke_ && timed_out_ == deadline_kind::none) {
            if (co_await backend_spoke_while_idle()) continue;
            co_return;
        }
        if (ec) {
            if (timed_out_ != deadline_kind::drain) co_await client_read_failed(ec, 1);
            co_return;
        }
        if (packet.first_seq != 0) {
            co_await client_read_failed(proto::errc::bad_sequence, static_cast<std::uint8_t>(packet.last_seq + 1));
            co_return;
        }
        if (packet.payload_size == 0) {  // MariaDB answers "Unknown command" and keeps the session
            client_in_.consume(packet.raw_size);
            co_await answer_error(1, er::unknown_command, "08S01", "Unknown command");
            continue;
        }
        const std::uint8_t command = packet.first_payload[0];
        const std::uint8_t reply_seq = static_cast<std::uint8_t>(packet.last_seq + 1);
        admin::metrics().commands(command).inc();
        if (command == proto::com::change_user) user_changed_ = true;
        if (proto::is_refused_command(command)) {
            client_in_.consume(packet.raw_size);
            co_await answer_error(reply_seq, er::unknown_command, "08S01",
                                  "claimguard: command not supported through the proxy");
            continue;
        }
        const auto started = clock_type::now();
        const bool was_in_transaction = status_ & proto::status::in_trans;

        // Decision point (claim engine): a command may be forwarded, rewritten or answered here.
        auto verdict = co_await intercept(packet, command);
        if (verdict == intercepted::failed) co_return;
        if (verdict == intercepted::handled) {
            client_in_.consume(packet.raw_size);
            if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
            continue;
        }
        if (!co_await write_backend(client_in_.readable().first(packet.raw_size))) {
            co_await backend_failed(asio::error::broken_pipe, reply_seq);
            co_return;
        }
        client_in_.consume(packet.raw_size);
        if (command == proto::com::quit) co_return;

        proto::command_exchange exchange(command, caps_, status_);
        if (exchange.start(packet.last_seq) == proto::next_step::done) {
            if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
            continue;
        }
        if (!co_await relay_reply(exchange)) co_return;
        status_ = exchange.status();
        if (command == proto::com::stmt_prepare && !exchange.failed()) prepared_.relayed(exchange.statement_id());
        command_failed_ = exchange.failed();
        if (command_failed_) command_error_ = exchange.error_code();
        if (!end_command_now(was_in_transaction, started) && !co_await end_command(started)) co_return;
    }
}

awaitable<bool> session::relay_reply(proto::command_exchange& exchange) {
    std::size_t parsed = 0;  // bytes at the front of backend_in_ parsed, not yet sent
    auto flush = [&]() -> awaitable<bool> {
        if (parsed == 0) co_return true;
        bool ok = co_await write_client(backend_in_.readable().first(parsed));
        backend_in_.consume(parsed);
        parsed = 0;
        co_return ok;
    };
    auto step = proto::next_step::read_server;
    while (step != proto::next_step::done) {
        if (step == proto::next_step::read_server) {
            auto scan = proto::scan_packet(backend_in_.readable().subspan(parsed), opt_.max_packet_bytes);
            if (scan && scan->raw_size) {
                auto next = exchange.on_server_packet(*scan);
                if (!next) {
                    if (!co_await flush()) co_return false;
                    co_await backend_failed(next.error(), exchange.next_seq());
                    co_return false;
                }
                parsed += scan->raw_size;
                step = *next;
                continue;
            }
            if (!co_await flush()) co_return false;
            if (!scan) {
                co_await backend_failed(scan.error(), exchange.next_seq());
                co_return false;
            }
            auto space = backend_in_.prepare(std::max(read_chunk_bytes, backend_in_.size()));
            auto [ec, n] = co_await backend_.read_some(asio::buffer(space.data(), space.size()));
            if (ec) {
                co_await backend_failed(ec, exchange.next_seq());
                co_return false;
            }
            backend_in_.commit(n);
        } else {
            // LOCAL INFILE data or an authentication answer from the client.
            if (!co_await flush()) co_return false;
            auto [ec, packet] = co_await read_client_packet(false);
            if (ec) {
                co_await client_read_failed(ec, exchange.next_seq());
                co_return false;
            }
            auto next = exchange.on_client_packet(packet);
            if (!next) {
                co_await client_read_failed(next.error(), exchange.next_seq());
                co_return false;
            }
            if (!co_await write_backend(client_in_.readable().first(packet.raw_size))) {
                co_await backend_failed(asio::error::broken_pipe, exchange.next_seq());
                co_return false;
            }
            client_in_.consume(packet.raw_size);
            step = *next;
        }
    }
    co_return co_await flush();
}

bool session::end_command_now(bool was_in_transaction, clock_type::time_point started) {
    auto& end = ending_.emplace(engine::command_outcome{was_in_transaction, status_, command_failed_, command_error_},
                                memory_, ctx_.ledger, transaction_, admission_held_, id_);
    command_failed_ = false;
    command_error_ = 0;
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
                co_return ok;
            }

            case kind::ask_transaction:
            case kind::give_back: {
                const auto reply = co_await own_query(end.sql());
                act = end.resume(reply ? engine::command_end_input::of_reply(
                                             own_reply_summary(*reply, caps_, mariadb_caps_, own_query_status_))
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
    if (s.release_admission) release_admission();
    admin::metrics().command_duration.observe(std::chrono::duration<double>(clock_type::now() - started).count());
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
