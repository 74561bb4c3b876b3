// Claim interception: where the session asks the engine about a statement and carries
// out its decision on the same backend connection (rewrites, answers, claims,
// compensations), for text queries and prepared statements alike.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <algorithm>
#include <spdlog/spdlog.h>

#include "audit_log.hpp"
#include "claim_metrics.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/column.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "proxy/protocol/prepared.hpp"
#include "proxy/protocol/reply_summary.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rewriter.hpp"
#include "proxy/engine/bound_values.hpp"
#include "proxy/engine/read_shape.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace match = rules::match;
namespace sqlns = rules::sql;
using engine::verdict;

void session::forget_statements() {
    prepared_.clear();  // the server dropped them too (COM_RESET_CONNECTION, COM_CHANGE_USER)
    own_statements_.clear();
}

awaitable<session::intercepted> session::intercept(const proto::packet_span& packet, std::uint8_t command) {
    // A read is evidence for the statement that comes next: statements and session changes count,
    // preparing, closing or fetching one does not.
    if (command == proto::com::query || command == proto::com::stmt_execute || command == proto::com::stmt_bulk_execute ||
        command == proto::com::init_db || command == proto::com::change_user || command == proto::com::reset_connection)
        memory_.next_command();
    if (command == proto::com::change_user) {
        // Trust follows the session's current user: COM_CHANGE_USER names the next one (a failed
        // change ends the connection on the server's side).
        auto payload = proto::as_chars(packet.first_payload.subspan(1));
        user_ = std::string(payload.substr(0, payload.find('\0')));
    }
    if (!ctx_.rules) co_return intercepted::forward;
    command_seq_ = packet.last_seq;
    if (packet.frames != 1) {
        // A packet of 16 MiB or more: looked at as a whole like any other (the recognizer refuses
        // to read statements past its limit, and the policy of the rules it names applies).
        if (command != proto::com::query && command != proto::com::stmt_prepare && command != proto::com::stmt_execute)
            co_return intercepted::forward;
        snapshot_ = engine::current_on_this_thread(*ctx_.rules);
        if (!snapshot_) co_return intercepted::forward;
        const auto joined = proto::join_payload(client_in_.readable().first(packet.raw_size));
        const std::string text(proto::as_chars(proto::bytes_view(joined).subspan(1)));
        if (command == proto::com::query) co_return co_await intercept_query(packet, text);
        if (command == proto::com::stmt_prepare) co_return co_await intercept_prepare(packet, text);
        auto id = proto::peek_statement_id(joined);
        auto* ps = id ? prepared_.find(*id) : nullptr;
        if (!ps) co_return intercepted::forward;
        co_return co_await unmodeled_execute(*ps, packet, command, engine::unread_rows::large_execute);
    }
    auto payload = packet.first_payload;
    switch (command) {
    case proto::com::query:
        snapshot_ = engine::current_on_this_thread(*ctx_.rules);  // no lock unless reloaded
        if (!snapshot_) co_return intercepted::forward;
        // Most statements name no rule's table: forwarded before a statement is built or a frame allocated.
        if (connection_state_.query_passes_untouched(proto::as_chars(payload.subspan(1)), engine_inputs()))
            co_return intercepted::forward;
        co_return co_await intercept_query(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_prepare:
        snapshot_ = engine::current_on_this_thread(*ctx_.rules);  // no lock unless reloaded
        if (!snapshot_) co_return intercepted::forward;
        co_return co_await intercept_prepare(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_execute:
        co_return co_await intercept_execute(packet);
    case proto::com::stmt_close:
        if (auto id = proto::peek_statement_id(payload)) prepared_.close(*id);
        co_return intercepted::forward;
    case proto::com::stmt_bulk_execute: {
        // MariaDB's array binding (Connector/J and node-mariadb batches): many rows in one command.
        auto id = proto::peek_statement_id(payload);
        auto* ps = id ? prepared_.find(*id) : nullptr;
        if (!ps) co_return intercepted::forward;
        co_return co_await unmodeled_execute(*ps, packet, command, engine::unread_rows::bulk_execute);
    }
    case proto::com::init_db:
        if (auto db = proto::parse_init_db(payload)) connection_state_.use_database(std::string(*db));
        co_return intercepted::forward;
    case proto::com::reset_connection:
    case proto::com::change_user:
        abandon_transaction();  // the server rolls back an open transaction
        forget_statements();
        connection_state_.reset();
        co_return intercepted::forward;
    default:
        co_return intercepted::forward;
    }
}

engine::statement_inputs session::engine_inputs() {
    return {snapshot_->rules, snapshot_->index, user_, status_, memory_, transaction_};
}

awaitable<std::optional<engine::recognition>> session::look_up_columns(engine::recognised_statement& rs,
                                                                       engine::recognition step) {
    if (step != engine::recognition::needs_columns) co_return step;
    auto reply = co_await run_sql(rs.lookup->sql, nullptr, nullptr);
    if (!reply) co_return std::nullopt;
    auto view = proto::read_reply(reply->raw, caps_, mariadb_caps_, opt_.max_packet_bytes);
    co_return connection_state_.columns_arrived(view ? &*view : nullptr, engine_inputs(), rs);
}

awaitable<session::intercepted> session::intercept_query(const proto::packet_span& packet, std::string_view sql) {
    engine::recognised_statement rs;
    auto step = connection_state_.recognise_query(sql, engine_inputs(), rs);
    if (step == engine::recognition::needs_columns) {
        const auto looked_up = co_await look_up_columns(rs, step);
        if (!looked_up) co_return intercepted::failed;
        step = *looked_up;
    }
    if (step == engine::recognition::forward) co_return intercepted::forward;
    if (rs.sql_prepared_full)
        spdlog::warn(
            "session {}: more than {} SQL-level prepared statements on protected tables; the first by name is "
            "no longer tracked",
            id_, engine::connection_state::max_sql_prepared);
    co_return co_await apply(rs.decided, rs.parsed, proto::com::query, client_in_.readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::unmodeled_execute(const engine::prepared_statement& ps,
                                                           const proto::packet_span& packet, std::uint8_t command,
                                                           engine::unread_rows why) {
    if (!ps.snapshot) co_return intercepted::forward;
    match::match_result facts;  // what the decision views
    auto d = engine::decide_unread_rows(ps, why, ps.snapshot->rules, connection_state_, memory_, facts);
    if (!d) co_return intercepted::forward;
    snapshot_ = ps.snapshot;
    co_return co_await apply(*d, ps.statement.parsed, command, client_in_.readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::intercept_prepare(const proto::packet_span& packet, std::string_view sql) {
    if (engine::connection_state::passes_untouched(sql, engine_inputs(), false)) co_return intercepted::forward;
    auto ps = std::make_unique<engine::prepared_statement>();
    ps->sql = std::make_unique<std::string>(sql);
    auto& rs = ps->statement;
    const auto first = connection_state_.recognise_prepare(*ps->sql, engine_inputs(), rs);
    const auto step = co_await look_up_columns(rs, first);
    if (!step) co_return intercepted::failed;
    if (*step == engine::recognition::forward) co_return intercepted::forward;
    if (*step == engine::recognition::decided)  // refused by the policy of what the rules do not model
        co_return co_await apply(rs.decided, rs.parsed, proto::com::stmt_prepare,
                                 client_in_.readable().first(packet.raw_size), packet.last_seq, nullptr, nullptr);
    ps->snapshot = snapshot_;
    auto reply = co_await roundtrip(client_in_.readable().first(packet.raw_size), proto::com::stmt_prepare,
                                    packet.last_seq);
    if (!reply) co_return intercepted::failed;
    if (!reply->is_err) {
        auto id = reply->exchange.statement_id();
        ps->params = reply->exchange.param_count();
        if (!prepared_.add(id, std::move(ps))) {  // past the limit: undone on the server and refused
            if (!co_await write_backend(engine::prepared_statements::close_frames(id))) co_return intercepted::failed;
            (void)co_await answer(engine::prepared_statements::too_many(), status_);
            co_return intercepted::handled;
        }
    }
    co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
}

awaitable<session::intercepted> session::intercept_execute(const proto::packet_span& packet) {
    auto id = proto::peek_statement_id(packet.first_payload);
    auto* found = id ? prepared_.find(*id) : nullptr;
    if (!found) co_return intercepted::forward;
    auto& ps = *found;
    proto::execute_context ectx{ps.params, ps.types, {}};
    auto exec = proto::parse_stmt_execute(packet.first_payload, ectx);
    if (!exec) co_return intercepted::forward;  // the server will answer it
    ps.bind(*exec);
    for (const auto& p : exec->params)
        if (std::holds_alternative<proto::long_data_value>(p))
            co_return co_await unmodeled_execute(ps, packet, proto::com::stmt_execute,
                                                 engine::unread_rows::long_data_execute);
    snapshot_ = ps.snapshot;
    auto d = connection_state_.decide_statement(ps.statement.parsed, ps.statement.facts, ps.snapshot->rules,
                                                engine::bound_resolver(exec->params), memory_, transaction_);
    const auto patched = ps.frames_for_server(*exec, packet.first_seq);
    proto::bytes_view bytes = patched.empty() ? client_in_.readable().first(packet.raw_size) : proto::bytes_view(patched);
    forwarded_statement_ = false;
    auto result = co_await apply(d, ps.statement.parsed, proto::com::stmt_execute, bytes, packet.last_seq,
                                 &exec->params, &exec->param_types);
    if (result == intercepted::forward && !patched.empty()) {
        auto reply = co_await roundtrip(bytes, proto::com::stmt_execute, packet.last_seq);
        if (!reply) co_return intercepted::failed;
        forwarded_statement_ = true;
        result = co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
    }
    if (result == intercepted::forward || forwarded_statement_) ps.reached_server(*exec, !patched.empty());
    co_return result;
}

awaitable<session::intercepted> session::apply(const engine::decision& d, const sqlns::parsed_statement& st,
                                               std::uint8_t command, proto::bytes_view forward_bytes,
                                               std::uint8_t last_seq, const std::vector<proto::binary_value>* params,
                                               const std::vector<proto::value_type>* types) {
    if (d.what == verdict::forward && !d.unmodeled && d.deferred == engine::deferred_step::none)
        co_return intercepted::forward;
    const engine::read_origin origin{command, forward_bytes.subspan(proto::frame_header_size),
                                     caps_, mariadb_caps_, static_cast<int>(connection_state_.lexer().client_charset),
                                     connection_state_.database(), status_, snapshot_ ? &snapshot_->rules : nullptr};
    const auto read = ctx_.read_cache ? engine::cached_read_of(d, st, origin) : std::nullopt;
    engine::statement_context sctx{{id_, status_, redis_ != nullptr}, ctx_.admission,
                                   snapshot_ ? &snapshot_->rules : nullptr, ctx_.read_cache, read ? &*read : nullptr};
    engine::statement_operation op(d, st, memory_, *ctx_.ledger, transaction_, admission_held_, sctx);
    op.set_database(connection_state_.database());
    counters_.follow(snapshot_);  // the counters of the command's rules snapshot
    std::optional<captured_reply> kept;
    std::optional<proto::byte_buffer> rebuilt;  // a read answered from the read cache
    auto act = op.resume(engine::statement_input::start());
    for (;;) {
        if (const auto& r = op.report(); !r.empty()) report_step(r, d, st);
        using kind = engine::statement_action::kind;
        switch (act.type) {
        case kind::relay: co_return intercepted::forward;
        case kind::fail: co_return intercepted::failed;
        case kind::reply_kept:
            if (!kept) co_return intercepted::failed;
            co_return co_await write_client(kept->raw) ? intercepted::handled : intercepted::failed;
        case kind::answer: {
            const auto& a = op.claim_action();
            co_return co_await answer(a.answer, a.status, a.ok_rows) ? intercepted::handled : intercepted::failed;
        }

        case kind::reply_rebuilt:
            if (!rebuilt) co_return intercepted::failed;
            co_return co_await write_client(*rebuilt) ? intercepted::handled : intercepted::failed;

        case kind::serve_cached:
            rebuilt = proto::rebuild_counter_reply(*op.cached_reply(), op.cached_value(), status_,
                                                   proto::reply_seq(command_seq_));
            act = op.resume(engine::statement_input::of_rebuilt(rebuilt.has_value()));
            break;

        case kind::wait_refresh:
            admission_timer_.expires_after(engine::read_cache::refresh_poll_interval);
            co_await admission_timer_.async_wait(nothrow);
            act = op.resume(closed_ ? engine::statement_input::closing() : engine::statement_input::refresh_done());
            break;

        case kind::wait_turn: {
            auto turn = co_await wait_turn(op.turn());
            act = op.resume(turn);
            break;
        }

        case kind::send_statement:
        case kind::send_sql: {
            const auto& a = op.claim_action();
            const bool own = act.type == kind::send_sql;
            if (!own) forwarded_statement_ = true;
            // Not `own ? co_await a : co_await b`: GCC 12 mishandles temporaries of a conditional
            // around co_await (a double free seen before in this code base).
            std::optional<captured_reply> reply;
            if (own)
                reply = co_await run_sql(a.sql, params, types);
            else
                reply = co_await roundtrip(forward_bytes, command, last_seq);
            if (!reply) {
                act = op.resume(engine::statement_input::lost());
                break;
            }
            if (act.keep_template) {
                auto read_template = engine::read_template(d, reply->raw, reply->is_err, caps_, mariadb_caps_,
                                                           command == proto::com::stmt_execute);
                kept = std::move(*reply);
                act = op.resume(engine::statement_input::of_read({}, std::move(read_template)));
                break;
            }
            const auto counter = a.read_counter ? engine::counter_column(d, own, reply->command == proto::com::stmt_execute)
                                                : std::nullopt;
            const auto summary = proto::summarize_reply(reply->command, reply->exchange, reply->raw, caps_,
                                                        mariadb_caps_, opt_.max_packet_bytes, counter);
            if (a.keep_reply) kept = std::move(*reply);
            act = op.resume(engine::statement_input::of_server(summary));
            break;
        }

        case kind::redis_acquire: {
            auto token = guards::random_token();
            auto got = co_await redis_->acquire(d.redis_key, token, op.claim_action().ttl);
            act = op.resume(engine::statement_input::of_redis(
                got == guards::acquire_result::held       ? engine::redis_reply::held
                : got == guards::acquire_result::acquired ? engine::redis_reply::acquired
                : got == guards::acquire_result::pending  ? engine::redis_reply::pending
                                                          : engine::redis_reply::unavailable,
                std::move(token)));
            break;
        }

        case kind::redis_release: {
            auto keys = op.take_keys();
            if (act.wait && redis_) {
                for (const auto& k : keys) (void)co_await redis_->release(k.key, k.token);
            } else {
                release_redis_keys(std::move(keys));
            }
            act = op.resume(engine::statement_input::redis_carried_out());
            break;
        }

        case kind::redis_commit:
            commit_redis_keys(op.take_keys());
            act = op.resume(engine::statement_input::redis_carried_out());
            break;
        }
    }
}

awaitable<std::optional<session::captured_reply>> session::roundtrip(proto::bytes_view raw, std::uint8_t command,
                                                                      std::uint8_t last_seq) {
    if (!co_await write_backend(raw)) {
        co_await backend_failed(asio::error::broken_pipe, static_cast<std::uint8_t>(last_seq + 1));
        co_return std::nullopt;
    }
    captured_reply r;
    r.command = command;
    r.exchange = proto::command_exchange(command, caps_, status_);
    auto step = r.exchange.start(last_seq);
    while (step != proto::next_step::done) {
        if (step == proto::next_step::read_client) {  // never for the statements the engine sends
            co_await backend_failed(proto::errc::unexpected_packet, r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto [ec, packet] = co_await read_backend_packet();
        if (ec) {
            co_await backend_failed(ec, r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto next = r.exchange.on_server_packet(packet);
        if (!next) {
            co_await backend_failed(next.error(), r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto bytes = backend_in_.readable().first(packet.raw_size);
        r.raw.insert(r.raw.end(), bytes.begin(), bytes.end());
        backend_in_.consume(packet.raw_size);
        step = *next;
    }
    // An ERR ends the reply: the statement's own, or one after a result set's column definitions (an
    // INSERT ... RETURNING whose row is a duplicate: Django's create() on MariaDB 10.5+). Either way
    // the statement failed, and if the transaction ended here it ended without a commit.
    if (r.exchange.failed()) {
        r.is_err = true;
        r.err_code = r.exchange.error_code();
        command_failed_ = true;
        command_error_ = r.err_code;
    }
    r.status = r.exchange.status();
    status_ = r.status;
    co_return r;
}

awaitable<std::optional<session::captured_reply>> session::run_sql(const match::rewritten_sql& sql,
                                                                   const std::vector<proto::binary_value>* params,
                                                                   const std::vector<proto::value_type>* types) {
    // What engine::own_statements says to send: the statement, or the proxy's own prepared
    // statement executed with the client's bound values (prepared first when it is new).
    auto step = own_statements_.start(sql, params, types);
    if (step && step->command == proto::com::stmt_prepare) {
        auto prepared = co_await roundtrip(step->frames, proto::com::stmt_prepare, 0);
        if (!prepared || prepared->is_err) co_return prepared;
        auto next = own_statements_.prepared(sql, prepared->exchange.statement_id(), *params, *types);
        if (!next.close.empty() && !co_await write_backend(next.close)) co_return std::nullopt;  // no reply
        step = std::move(next.execute);
    }
    if (!step) {
        spdlog::warn("session {}: cannot encode an execute for the rewritten statement: {}", id_, step.error().message());
        co_return std::nullopt;
    }
    co_return co_await roundtrip(step->frames, step->command, 0);
}

awaitable<bool> session::answer(const rules::answer& a, std::uint16_t status, std::uint64_t ok_rows) {
    auto seq = proto::reply_seq(command_seq_);
    if (a.type == rules::answer::kind::error) {
        co_return co_await write_client(proto::make_err_frame(seq, a.code, a.sql_state, a.message));
    }
    co_return co_await write_client(proto::make_ok_frame(seq, ok_rows, status, caps_));
}

namespace {
awaitable<void> release_lock(guards::redis_guard* redis, std::string key, std::string token) {
    (void)co_await redis->release(key, token);
}
awaitable<void> commit_lock(guards::redis_guard* redis, std::string key, std::string token,
                            std::chrono::milliseconds ttl) {
    (void)co_await redis->commit(key, token, ttl);
}
}  // namespace

void session::commit_redis_keys(std::vector<engine::redis_hold> keys) {
    if (!redis_) return;
    for (auto& k : keys)
        asio::co_spawn(client_.get_executor(), commit_lock(redis_, std::move(k.key), std::move(k.token), k.ttl),
                       asio::detached);
}

void session::release_redis_keys(std::vector<engine::redis_hold> keys) {
    if (!redis_) return;
    for (auto& k : keys)
        asio::co_spawn(client_.get_executor(), release_lock(redis_, std::move(k.key), std::move(k.token)), asio::detached);
}

void session::abandon_transaction() {
    auto steps = engine::abandon_transaction(transaction_, memory_, ctx_.ledger, id_);
    release_redis_keys(std::move(steps.release));
    report_dropped(std::move(steps.dropped), false);
}

}  // namespace claimguard::session
