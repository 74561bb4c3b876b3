// Claim interception: where the session asks the engine about a statement and carries
// out its decision on the same backend connection (rewrites, answers, claims,
// compensations), for text queries and prepared statements alike.
#include <spdlog/spdlog.h>
#include <algorithm>

#include "audit_log.hpp"
#include "claim_metrics.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/engine/bound_values.hpp"
#include "proxy/engine/bulk_claims.hpp"
#include "proxy/engine/read_shape.hpp"
#include "proxy/engine/several_statements.hpp"
#include "proxy/engine/trusted_writes.hpp"
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
#include "session_impl.hpp"

namespace claimguard::session {

namespace match = rules::match;
namespace sqlns = rules::sql;
namespace com = proto::com;
using engine::verdict;

awaitable<session::intercepted> session::intercept(const proto::packet_span& packet, std::uint8_t command) {
    // A read is evidence for the statement that comes next: statements and session changes count,
    // preparing, closing or fetching one does not.
    if (command == com::query || command == com::stmt_execute || command == com::stmt_bulk_execute ||
        command == com::init_db || command == com::change_user || command == com::reset_connection)
        memory_.next_command();
    if (command == com::change_user) {
        // Trust follows the session's current user: COM_CHANGE_USER names the next one (a failed
        // change ends the connection on the server's side).
        auto payload = proto::as_chars(packet.first_payload.subspan(1));
        user_ = std::string(payload.substr(0, payload.find('\0')));
    }
    if (!ctx_.rules) co_return intercepted::forward;
    command_.seq = packet.last_seq;
    // A packet of 16 MiB or more is looked at as a whole like any other (the recognizer refuses to
    // read statements past its limit, and the policy of the rules it names applies); an execute that
    // large is not read for its values.
    const bool large = packet.frames != 1;
    // (A bulk execute that large is refused like an execute: its rows are not read.)
    if (large && command != com::query && command != com::stmt_prepare && command != com::stmt_execute &&
        command != com::stmt_bulk_execute)
        co_return intercepted::forward;
    if (large || command == com::query || command == com::stmt_prepare) {
        command_.snapshot = engine::current_on_this_thread(*ctx_.rules);  // no lock unless reloaded
        if (!command_.snapshot) co_return intercepted::forward;
    }
    proto::byte_buffer joined;
    if (large) joined = proto::join_payload(client_.in().readable().first(packet.raw_size));
    const auto payload = large ? proto::bytes_view(joined) : packet.first_payload;
    const auto text = proto::as_chars(payload.subspan(1));
    switch (command) {
        case com::query:
            // Most statements name no rule's table: forwarded before a statement is built or a frame allocated.
            if (!large && connection_state_.query_passes_untouched(text, engine_inputs())) {
                if (opt_.watch_unlisted_tables != 0) watch_unlisted(text);
                co_return intercepted::forward;
            }
            co_return co_await intercept_query(packet, text);
        case com::stmt_prepare: co_return co_await intercept_prepare(packet, text);
        case com::stmt_execute:
            if (!large) co_return co_await intercept_execute(packet);
            [[fallthrough]];
        case com::stmt_bulk_execute: {  // MariaDB's array binding (Connector/J and node-mariadb batches)
            auto id = proto::peek_statement_id(payload);
            auto* ps = id ? prepared_.find(*id) : nullptr;
            if (!ps) co_return intercepted::forward;
            if (trusted(*ps)) co_return co_await trusted_execute(*ps, packet, command);
            if (!large && command == com::stmt_bulk_execute) co_return co_await intercept_bulk_execute(*ps, packet);
            co_return co_await unmodeled_execute(*ps, packet, command, engine::unread_rows::large_execute);
        }
        case com::set_option:
            // MYSQL_OPTION_MULTI_STATEMENTS_ON (0) / _OFF (1): whether the server splits a query at `;`.
            if (payload.size() >= 3 && payload[2] == 0 && payload[1] <= 1) multi_statements_option_ = payload[1] == 0;
            co_return intercepted::forward;
        case com::stmt_close:
            if (auto id = proto::peek_statement_id(payload)) prepared_.close(*id);
            co_return intercepted::forward;
        case com::init_db:
            if (auto db = proto::parse_init_db(payload)) connection_state_.use_database(std::string(*db));
            co_return intercepted::forward;
        case com::reset_connection:
        case com::change_user:
            abandon_transaction();  // the server rolls back an open transaction
            forget_statements();
            if (unlisted_) unlisted_->reset();
            connection_state_.reset();
            connection_state_.forget_sql_mode();  // the session's variables are the global ones again
            co_return intercepted::forward;
        default: co_return intercepted::forward;
    }
}

engine::statement_inputs session::engine_inputs() {
    return {command_.snapshot->rules, command_.snapshot->index, user_, status_, memory_, transaction_};
}

awaitable<std::optional<engine::recognition>> session::look_up_columns(engine::recognised_statement& rs,
                                                                       engine::recognition step) {
    // The sql_mode first (its answer may change how the statement reads), then the columns; each at
    // most once per statement (the engine never asks again for the same statement).
    while (step == engine::recognition::needs_sql_mode || step == engine::recognition::needs_columns) {
        const bool mode = step == engine::recognition::needs_sql_mode;
        match::rewritten_sql question;
        if (mode) question.sql = engine::connection_state::sql_mode_question;
        auto reply = co_await backend_.run_sql(mode ? question : rs.lookup->sql, nullptr, nullptr);
        if (!reply) co_return std::nullopt;
        auto view = proto::read_reply(reply->raw, caps_, mariadb_caps_, opt_.max_packet_bytes);
        if (mode && !(view && view->kind() == proto::reply_kind::result_set))
            spdlog::warn(
                "session {}: the database did not answer {}: statements naming a protected table with a '\"' "
                "get their rules' unmodeled policy until the sql_mode is known",
                id_, engine::connection_state::sql_mode_question);
        step = mode ? connection_state_.sql_mode_arrived(view ? &*view : nullptr, engine_inputs(), rs)
                    : connection_state_.columns_arrived(view ? &*view : nullptr, engine_inputs(), rs);
    }
    co_return step;
}

awaitable<session::intercepted> session::intercept_query(const proto::packet_span& packet, std::string_view sql) {
    engine::recognised_statement rs;
    auto step = connection_state_.recognise_query(sql, engine_inputs(), rs);
    if (step == engine::recognition::needs_columns || step == engine::recognition::needs_sql_mode) {
        const auto looked_up = co_await look_up_columns(rs, step);
        if (!looked_up) co_return intercepted::failed;
        step = *looked_up;
    }
    // Several statements, when the server splits them (CLIENT_MULTI_STATEMENTS): each one in turn. Split
    // after the reading above, which asked the server for its sql_mode if it was not known (where a
    // string ends depends on it).
    // A query that names no protected table goes as it is, as one, whatever it holds (compound
    // statements, procedure bodies). One that names one is split even when its first word is a session
    // word (START TRANSACTION; UPDATE ...; COMMIT), so every statement in it is decided.
    if (packet.frames == 1 && multi_statements() && sql.find(';') != std::string_view::npos &&
        (step != engine::recognition::forward || engine_inputs().index.filter().names_protected(sql))) {
        if (auto statements = engine::split_statements(sql, connection_state_.lexer()); !statements.empty())
            co_return co_await intercept_several(packet, statements);
    }
    if (step == engine::recognition::forward) co_return intercepted::forward;
    // Several statements without CLIENT_MULTI_STATEMENTS: the server refuses the text (a syntax error at
    // the `;`), so it changes nothing and goes as it is.
    if (rs.parsed.reason == sqlns::not_ours_reason::several_statements && !multi_statements())
        co_return intercepted::forward;
    if (rs.sql_prepared_full)
        spdlog::warn(
            "session {}: more than {} SQL-level prepared statements on protected tables; the first by name is "
            "no longer tracked",
            id_, engine::connection_state::max_sql_prepared);
    co_return co_await apply(rs.decided, rs.parsed, com::query, client_.in().readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::unmodeled_execute(const engine::prepared_statement& ps,
                                                           const proto::packet_span& packet, std::uint8_t command,
                                                           engine::unread_rows why) {
    if (!ps.snapshot) co_return intercepted::forward;
    match::match_result facts;  // what the decision views
    auto d = engine::decide_unread_rows(ps, why, ps.snapshot->rules, connection_state_, memory_, facts);
    if (!d) co_return intercepted::forward;
    command_.snapshot = ps.snapshot;
    co_return co_await apply(*d, ps.statement.parsed, command, client_.in().readable().first(packet.raw_size),
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
        co_return co_await apply(rs.decided, rs.parsed, com::stmt_prepare,
                                 client_.in().readable().first(packet.raw_size), packet.last_seq, nullptr, nullptr);
    ps->snapshot = command_.snapshot;
    auto reply =
        co_await backend_.roundtrip(client_.in().readable().first(packet.raw_size), com::stmt_prepare, packet.last_seq);
    if (!reply) co_return intercepted::failed;
    if (!reply->is_err) {
        auto id = reply->exchange.statement_id();
        ps->params = reply->exchange.param_count();
        if (!prepared_.add(id, std::move(ps))) {  // past the limit: undone on the server and refused
            if (!co_await backend_.write(engine::prepared_statements::close_frames(id))) co_return intercepted::failed;
            (void)co_await answer(engine::prepared_statements::too_many(), status_);
            co_return intercepted::handled;
        }
    }
    co_return co_await client_.write(reply->raw) ? intercepted::handled : intercepted::failed;
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
            co_return co_await unmodeled_execute(ps, packet, com::stmt_execute, engine::unread_rows::long_data_execute);
    command_.snapshot = ps.snapshot;
    auto d = trusted(ps)
                 ? connection_state_.decide_trusted(ps.statement.parsed, ps.statement.facts, ps.snapshot->index,
                                                    engine::bound_resolver(exec->params), memory_)
                 : connection_state_.decide_statement(ps.statement.parsed, ps.statement.facts, ps.snapshot->rules,
                                                      engine::bound_resolver(exec->params), memory_, transaction_);
    const auto patched = ps.frames_for_server(*exec, packet.first_seq);
    proto::bytes_view bytes =
        patched.empty() ? client_.in().readable().first(packet.raw_size) : proto::bytes_view(patched);
    auto result = co_await apply(d, ps.statement.parsed, com::stmt_execute, bytes, packet.last_seq, &exec->params,
                                 &exec->param_types);
    if (result == intercepted::forward && !patched.empty()) {
        auto reply = co_await backend_.roundtrip(bytes, com::stmt_execute, packet.last_seq);
        if (!reply) co_return intercepted::failed;
        command_.forwarded_statement = true;
        result = co_await client_.write(reply->raw) ? intercepted::handled : intercepted::failed;
    }
    if (result == intercepted::forward || command_.forwarded_statement) ps.reached_server(*exec, !patched.empty());
    co_return result;
}

awaitable<session::intercepted> session::intercept_bulk_execute(engine::prepared_statement& ps,
                                                                const proto::packet_span& packet) {
    proto::execute_context ectx{ps.params, ps.types, {}};
    auto bulk = proto::parse_stmt_bulk_execute(packet.first_payload, ectx, engine::max_bulk_claim_rows);
    // Per-row results (SEND_UNIT_RESULTS, MariaDB 11.5+) answer with a result set the claim rows do not read.
    std::optional<match::match_result> facts;
    if (bulk && (bulk->flags & proto::bulk_flag::send_unit_results) == 0 && ps.snapshot)
        facts = engine::bulk_claim_facts(ps.statement.facts, ps.params, bulk->rows(ps.params));
    if (!facts)
        co_return co_await unmodeled_execute(ps, packet, com::stmt_bulk_execute, engine::unread_rows::bulk_execute);
    // The server keeps a bulk's types for the statement's next bulk or execute (libmariadb sends them once).
    const bool types_sent = (bulk->flags & proto::bulk_flag::send_types_to_server) != 0;
    if (types_sent) ps.types = bulk->param_types;
    // Each value with its type, laid end to end as the values are: a give-back binds a row's key.
    std::vector<proto::value_type> types;
    types.reserve(bulk->values.size());
    for (std::size_t k = 0; k < bulk->values.size(); ++k) types.push_back(bulk->param_types[k % ps.params]);
    // A bulk without types the server never saw (the one that carried them was answered by the sidecar)
    // goes with them, as an execute does (prepared_statement::frames_for_server).
    proto::byte_buffer patched;
    std::uint8_t last_seq = packet.last_seq;
    if (!types_sent && !ps.server_has_types) {
        auto with_types = *bulk;
        with_types.flags |= proto::bulk_flag::send_types_to_server;
        proto::byte_buffer payload;
        if (!proto::serialize(with_types, payload)) {
            std::uint8_t seq = packet.first_seq;
            proto::write_packet(patched, seq, payload);
            last_seq = static_cast<std::uint8_t>(seq - 1);
        }
    }
    const proto::bytes_view bytes =
        patched.empty() ? client_.in().readable().first(packet.raw_size) : proto::bytes_view(patched);
    command_.snapshot = ps.snapshot;
    auto d = connection_state_.decide_statement(ps.statement.parsed, *facts, ps.snapshot->rules,
                                                engine::bound_resolver(bulk->values), memory_, transaction_);
    auto result =
        co_await apply(d, ps.statement.parsed, com::stmt_bulk_execute, bytes, last_seq, &bulk->values, &types);
    if (result == intercepted::forward && !patched.empty()) {
        auto reply = co_await backend_.roundtrip(bytes, com::stmt_bulk_execute, last_seq);
        if (!reply) co_return intercepted::failed;
        command_.forwarded_statement = true;
        result = co_await client_.write(reply->raw) ? intercepted::handled : intercepted::failed;
    }
    const bool reached = result == intercepted::forward || command_.forwarded_statement;
    if (reached && (types_sent || !patched.empty()))
        ps.server_has_types = true;
    else if (!reached && types_sent)
        ps.server_has_types = false;  // the server may hold other types than the ones the client now means
    co_return result;
}

bool session::trusted(const engine::prepared_statement& ps) const {
    return ps.snapshot && ps.snapshot->rules.is_trusted(user_);
}

awaitable<session::intercepted> session::trusted_execute(const engine::prepared_statement& ps,
                                                         const proto::packet_span& packet, std::uint8_t command) {
    // A bulk execute, or one too large to read its values: the key is not known, every key of the
    // rule is followed.
    command_.snapshot = ps.snapshot;
    const auto d = connection_state_.decide_trusted(ps.statement.parsed, ps.statement.facts, ps.snapshot->index,
                                                    engine::resolve_literal, memory_);
    if (!d.trusted_write) co_return intercepted::forward;
    co_return co_await apply(d, ps.statement.parsed, command, client_.in().readable().first(packet.raw_size),
                             packet.last_seq, nullptr, nullptr);
}

awaitable<session::intercepted> session::forward_trusted_write(const engine::decision& d,
                                                               const sqlns::parsed_statement& st, std::uint8_t command,
                                                               proto::bytes_view forward_bytes, std::uint8_t last_seq) {
    auto reply = co_await backend_.roundtrip(forward_bytes, command, last_seq);
    if (!reply) co_return intercepted::failed;
    command_.forwarded_statement = true;
    if (!reply->is_err) engine::follow_trusted_write(d, ctx_.read_cache, ctx_.admission);
    counters_.follow(command_.snapshot);
    counters_.dynamic(claim_metrics::get().trusted_writes, d.stock->name, {}).inc();
    audit(d, "trusted-write", st);  // written with the answer at the command's end
    co_return co_await client_.write(reply->raw) ? intercepted::handled : intercepted::failed;
}

awaitable<session::intercepted> session::apply(const engine::decision& d, const sqlns::parsed_statement& st,
                                               std::uint8_t command, proto::bytes_view forward_bytes,
                                               std::uint8_t last_seq, const std::vector<proto::binary_value>* params,
                                               const std::vector<proto::value_type>* types) {
    // A trusted user's write: as written, whatever the rules say; followed, audited, counted.
    if (d.trusted_write) co_return co_await forward_trusted_write(d, st, command, forward_bytes, last_seq);
    if (d.what == verdict::forward && !d.unmodeled && d.deferred == engine::deferred_step::none)
        co_return intercepted::forward;
    const engine::read_origin origin{command,
                                     forward_bytes.subspan(proto::frame_header_size),
                                     caps_,
                                     mariadb_caps_,
                                     static_cast<int>(connection_state_.lexer().client_charset),
                                     connection_state_.database(),
                                     status_,
                                     command_.snapshot ? &command_.snapshot->rules : nullptr};
    const auto read = ctx_.read_cache ? engine::cached_read_of(d, st, origin) : std::nullopt;
    engine::statement_context sctx{{id_, status_, redis_ != nullptr},
                                   ctx_.admission,
                                   command_.snapshot ? &command_.snapshot->rules : nullptr,
                                   ctx_.read_cache,
                                   read ? &*read : nullptr,
                                   backend_.thread_id()};
    // Every statement's operation sees the reserved stock: a take may be served from it, and a claim
    // that did not happen, or a COMMIT turned ROLLBACK, gives a served unit back to it.
    sctx.op.reserve = ctx_.reserve;
    if (ctx_.reserve != nullptr && !d.observe && d.stock && d.stock->reserve && d.what == verdict::take &&
        d.key_literals.size() == d.stock->key_columns.size())
        co_await fill_reserve(d);
    engine::statement_operation op(d, st, memory_, *ctx_.ledger, transaction_, admission_held_, sctx);
    op.set_database(connection_state_.database());
    counters_.follow(command_.snapshot);  // the counters of the command's rules snapshot
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
                if (op.claim_action().kept_status)
                    if (auto patched = proto::ok_with_status(kept->raw, op.claim_action().status, caps_))
                        kept->raw = std::move(*patched);
                co_return co_await client_.write(kept->raw) ? intercepted::handled : intercepted::failed;
            case kind::answer: {
                const auto& a = op.claim_action();
                co_return co_await answer(a.answer, a.status, a.ok_rows) ? intercepted::handled : intercepted::failed;
            }

            case kind::reply_rebuilt:
                if (!rebuilt) co_return intercepted::failed;
                co_return co_await client_.write(*rebuilt) ? intercepted::handled : intercepted::failed;

            case kind::serve_cached:
                rebuilt = proto::rebuild_counter_reply(*op.cached_reply(), op.cached_value(), status_,
                                                       proto::reply_seq(command_.seq));
                act = op.resume(engine::statement_input::of_rebuilt(rebuilt.has_value()));
                break;

            case kind::wait_refresh:
                admission_timer_.expires_after(engine::read_cache::refresh_poll_interval);
                co_await admission_timer_.async_wait(nothrow);
                act = op.resume(closed_ ? engine::statement_input::closing() : engine::statement_input::refresh_done());
                break;

            case kind::wait_group:  // a leader gives followers max_wait to queue behind it
                admission_timer_.expires_after(op.group_wait());
                co_await admission_timer_.async_wait(nothrow);
                act = op.resume(closed_ ? engine::statement_input::closing() : engine::statement_input::gather_done());
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
                if (!own) command_.forwarded_statement = true;
                // Not `own ? co_await a : co_await b`: GCC 12 mishandles temporaries of a conditional
                // around co_await (a double free seen before in this code base).
                std::optional<captured_reply> reply;
                if (own)
                    reply = co_await backend_.run_sql(a.sql, params, types);
                else
                    reply = co_await backend_.roundtrip(forward_bytes, command, last_seq);
                if (!reply) {
                    act = op.resume(engine::statement_input::lost());
                    break;
                }
                if (act.keep_template) {
                    auto read_template = engine::read_template(d, reply->raw, reply->is_err, caps_, mariadb_caps_,
                                                               command == com::stmt_execute);
                    kept = std::move(*reply);
                    act = op.resume(engine::statement_input::of_read({}, std::move(read_template)));
                    break;
                }
                const auto counter =
                    a.read_counter ? engine::counter_column(d, own, reply->command == com::stmt_execute) : std::nullopt;
                auto summary = proto::summarize_reply(reply->command, reply->exchange, reply->raw, caps_, mariadb_caps_,
                                                      opt_.max_packet_bytes, counter);
                if (a.read_rows && !summary.err)  // the claim rows a cancellation is about to delete
                    summary.values = proto::row_values(reply->raw, caps_, mariadb_caps_, opt_.max_packet_bytes,
                                                       reply->command == com::stmt_execute, engine::max_cancel_rows);
                if (a.keep_reply) kept = std::move(*reply);
                act = op.resume(engine::statement_input::of_server(summary));
                break;
            }

            case kind::redis_acquire: {
                auto token = guards::random_token();
                // One row's key of a claim of several rows, or the claim's.
                const auto& key = op.claim_action().redis_key.empty() ? d.redis_key : op.claim_action().redis_key;
                auto got = co_await redis_->acquire(key, token, op.claim_action().ttl);
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

}  // namespace claimguard::session
