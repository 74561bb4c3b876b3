// Claim interception: where the session asks the engine about a statement and carries
// out its decision on the same backend connection (rewrites, answers, claims,
// compensations), for text queries and prepared statements alike.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <algorithm>
#include <charconv>
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
#include "rules/sql/values.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace match = rules::match;
namespace sqlns = rules::sql;
using engine::verdict;

namespace {

constexpr std::uint16_t er_dup_entry = 1062;
constexpr std::uint32_t last_prepared_statement = 0xFFFFFFFF;  // MariaDB: "the statement just prepared"

std::optional<std::int64_t> to_int(std::string_view text) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

// A bound parameter made comparable with literals: integers in decimal, doubles and floats (the
// codec widens FLOAT) as the server compares them with an integer column, strings as bytes
// (numeric strings canonicalised as numbers, as the server compares them).
std::optional<engine::resolved_value> resolve_bound(const proto::binary_value& v) {
    engine::resolved_value out;
    if (auto* i = std::get_if<std::int64_t>(&v)) {
        out.integer = *i;
        out.canonical = std::to_string(*i);
        return out;
    }
    if (auto* u = std::get_if<std::uint64_t>(&v)) {
        if (*u <= static_cast<std::uint64_t>(INT64_MAX)) out.integer = static_cast<std::int64_t>(*u);
        out.canonical = std::to_string(*u);
        return out;
    }
    if (auto* b = std::get_if<proto::bytes_view>(&v)) {
        out.canonical = std::string(proto::as_chars(*b));
        if (auto n = sqlns::canonical_number(out.canonical)) {
            out.canonical = *n;
            out.integer = to_int(*n);
        }
        return out;
    }
    if (auto* d = std::get_if<double>(&v)) return engine::resolve_double(*d);  // Node's numbers are doubles
    return std::nullopt;  // NULL, temporals, long data: never a key we track
}

}  // namespace

void session::forget_statements() {
    prepared_.clear();
    derived_.clear();  // the server dropped them too (COM_RESET_CONNECTION, COM_CHANGE_USER)
    last_prepared_id_ = 0;
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
        auto it = id ? prepared_.find(*id == last_prepared_statement ? last_prepared_id_ : *id) : prepared_.end();
        if (it == prepared_.end()) co_return intercepted::forward;
        co_return co_await unmodeled_execute(*it->second, packet, command,
                                             "an execute of 16 MiB or more of a statement that writes the rule's table",
                                             "large_execute");
    }
    auto payload = packet.first_payload;
    switch (command) {
    case proto::com::query:
        snapshot_ = engine::current_on_this_thread(*ctx_.rules);  // no lock unless reloaded
        if (!snapshot_) co_return intercepted::forward;
        co_return co_await intercept_query(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_prepare:
        snapshot_ = engine::current_on_this_thread(*ctx_.rules);  // no lock unless reloaded
        if (!snapshot_) co_return intercepted::forward;
        co_return co_await intercept_prepare(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_execute:
        co_return co_await intercept_execute(packet);
    case proto::com::stmt_close:
        if (auto id = proto::peek_statement_id(payload)) prepared_.erase(*id);
        co_return intercepted::forward;
    case proto::com::stmt_bulk_execute: {
        // MariaDB's array binding (Connector/J and node-mariadb batches): many rows in one command.
        auto id = proto::peek_statement_id(payload);
        auto it = id ? prepared_.find(*id == last_prepared_statement ? last_prepared_id_ : *id) : prepared_.end();
        if (it == prepared_.end()) co_return intercepted::forward;
        co_return co_await unmodeled_execute(*it->second, packet, command,
                                             "COM_STMT_BULK_EXECUTE (array binding) of a statement that writes the rule's table",
                                             "bulk_execute");
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
    const auto first = connection_state_.recognise_query(sql, engine_inputs(), rs);
    const auto step = co_await look_up_columns(rs, first);
    if (!step) co_return intercepted::failed;
    if (*step == engine::recognition::forward) co_return intercepted::forward;
    if (rs.sql_prepared_full)
        spdlog::warn(
            "session {}: more than {} SQL-level prepared statements on protected tables; the first by name is "
            "no longer tracked",
            id_, engine::connection_state::max_sql_prepared);
    co_return co_await apply(rs.decided, rs.parsed, proto::com::query, client_in_.readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::unmodeled_execute(const prepared_statement& ps, const proto::packet_span& packet,
                                                           std::uint8_t command, std::string_view why,
                                                           std::string_view code) {
    if (!ps.snapshot) co_return intercepted::forward;
    auto facts = match::as_unmodeled(ps.statement.facts, why, code);
    if (facts.facts.empty()) co_return intercepted::forward;
    snapshot_ = ps.snapshot;
    auto d = connection_state_.decide(facts, ps.snapshot->rules, engine::resolve_literal, memory_);
    co_return co_await apply(d, ps.statement.parsed, command, client_in_.readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::intercept_prepare(const proto::packet_span& packet, std::string_view sql) {
    if (engine::connection_state::passes_untouched(sql, engine_inputs(), false)) co_return intercepted::forward;
    auto ps = std::make_unique<prepared_statement>();
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
        last_prepared_id_ = id;
        if (prepared_.size() >= max_tracked_statements) {
            // Never forget one: an execute of a statement the session no longer knows would pass
            // unseen. The prepare is undone on the server and refused (a named, enforced limit).
            proto::byte_buffer close_payload;
            proto::serialize(proto::stmt_close{id}, close_payload);
            proto::byte_buffer close;
            std::uint8_t seq = 0;
            proto::write_packet(close, seq, close_payload);
            if (!co_await write_backend(close)) co_return intercepted::failed;  // COM_STMT_CLOSE has no reply
            co_await answer_error(proto::reply_seq(packet.last_seq), 1461, "42000",
                                  "claimguard: this connection holds " + std::to_string(max_tracked_statements) +
                                      " prepared statements on protected tables (max_tracked_statements); close some");
            co_return intercepted::handled;
        }
        prepared_[id] = std::move(ps);
    }
    co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
}

awaitable<session::intercepted> session::intercept_execute(const proto::packet_span& packet) {
    auto id = proto::peek_statement_id(packet.first_payload);
    if (!id) co_return intercepted::forward;
    auto it = prepared_.find(*id == last_prepared_statement ? last_prepared_id_ : *id);
    if (it == prepared_.end()) co_return intercepted::forward;
    auto& ps = *it->second;
    proto::execute_context ectx{ps.params, ps.types, {}};
    auto exec = proto::parse_stmt_execute(packet.first_payload, ectx);
    if (!exec) co_return intercepted::forward;  // the server will answer it
    if (exec->new_params_bound) ps.types = exec->param_types;
    for (const auto& p : exec->params)
        if (std::holds_alternative<proto::long_data_value>(p))
            co_return co_await unmodeled_execute(ps, packet, proto::com::stmt_execute,
                                                 "an execute whose values came by COM_STMT_SEND_LONG_DATA, of a "
                                                 "statement that writes the rule's table",
                                                 "long_data_execute");
    snapshot_ = ps.snapshot;
    const auto& params = exec->params;
    engine::value_resolver resolver = [&](const match::value_ref& v) -> std::optional<engine::resolved_value> {
        if (v.type == match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            return resolve_bound(params[v.placeholder_index]);
        }
        return engine::resolve_literal(v);
    };
    auto d = connection_state_.decide_statement(ps.statement.parsed, ps.statement.facts, ps.snapshot->rules, resolver,
                                                memory_, transaction_);

    // Types the server has not seen yet (an earlier execute carrying them was answered by the
    // proxy): send this execute re-encoded with them, or the server answers ERR 1210.
    const bool carries_types = exec->new_params_bound || ps.params == 0;
    proto::byte_buffer patched;
    if (!carries_types && !ps.server_has_types) {
        proto::stmt_execute with_types = *exec;
        with_types.new_params_bound = true;
        proto::byte_buffer payload;
        if (!proto::serialize(with_types, payload)) {
            std::uint8_t seq = packet.first_seq;
            proto::write_packet(patched, seq, payload);
        }
    }
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
    if (result == intercepted::forward || forwarded_statement_) ps.server_has_types = ps.server_has_types || carries_types || !patched.empty();
    co_return result;
}

awaitable<session::intercepted> session::apply(const engine::decision& d, const sqlns::parsed_statement& st,
                                               std::uint8_t command, proto::bytes_view forward_bytes,
                                               std::uint8_t last_seq, const std::vector<proto::binary_value>* params,
                                               const std::vector<proto::value_type>* types) {
    if (d.what == verdict::forward && !d.unmodeled && d.deferred == engine::deferred_step::none)
        co_return intercepted::forward;
    const auto read = cached_read_of(d, st, command, forward_bytes);
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
                auto read_template = kept_read(d, *reply, command);
                kept = std::move(*reply);
                act = op.resume(engine::statement_input::of_read({}, std::move(read_template)));
                break;
            }
            std::optional<proto::counter_request> counter;
            if (a.read_counter) {
                const bool binary =
                    own ? (!a.sql.parameters.empty() && params && types) : command == proto::com::stmt_execute;
                if (own)
                    counter = proto::counter_request{0, {}, binary};
                else if (const auto* r = std::get_if<match::counter_read>(d.fact))
                    counter = proto::counter_request{r->counter_position, r->counter_label, binary};
            }
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
    proto::byte_buffer payload, frame;
    std::uint8_t seq = 0;  // the proxy's own commands start at 0, as the client's did
    if (sql.parameters.empty() || !params || !types) {
        proto::serialize_query(sql.sql, payload);
        proto::write_packet(frame, seq, payload);
        co_return co_await roundtrip(frame, proto::com::query, 0);
    }
    // A prepared statement of the proxy's own on this backend connection, executed with
    // the client's bound values: user data never enters SQL text.
    std::uint32_t statement_id = 0;
    if (auto it = derived_.find(sql.sql); it != derived_.end()) {
        statement_id = it->second;
    } else {
        proto::serialize_stmt_prepare(sql.sql, payload);
        proto::write_packet(frame, seq, payload);
        auto prepared = co_await roundtrip(frame, proto::com::stmt_prepare, 0);
        if (!prepared) co_return std::nullopt;
        if (prepared->is_err) co_return prepared;
        statement_id = prepared->exchange.statement_id();
        if (derived_.size() >= max_derived_statements) {
            proto::byte_buffer close_payload, close_frame;
            proto::serialize(proto::stmt_close{derived_.begin()->second}, close_payload);
            std::uint8_t close_seq = 0;
            proto::write_packet(close_frame, close_seq, close_payload);
            if (!co_await write_backend(close_frame)) co_return std::nullopt;  // COM_STMT_CLOSE has no reply
            derived_.erase(derived_.begin());
        }
        derived_[sql.sql] = statement_id;
    }
    proto::stmt_execute exec;
    exec.statement_id = statement_id;
    exec.new_params_bound = true;
    for (auto index : sql.parameters) {
        if (index >= params->size() || index >= types->size()) co_return std::nullopt;
        exec.params.push_back((*params)[index]);
        exec.param_types.push_back((*types)[index]);
    }
    payload.clear();
    frame.clear();
    if (auto ec = proto::serialize(exec, payload)) {
        spdlog::warn("session {}: cannot encode an execute for the rewritten statement: {}", id_, ec.message());
        co_return std::nullopt;
    }
    seq = 0;
    proto::write_packet(frame, seq, payload);
    co_return co_await roundtrip(frame, proto::com::stmt_execute, 0);
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
