// Claim interception: where the session asks the engine about a statement and carries
// out its decision on the same backend connection (rewrites, answers, claims,
// compensations), for text queries and prepared statements alike.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <charconv>
#include <spdlog/spdlog.h>

#include "audit_log.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/column.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/prepared.hpp"
#include "proxy/protocol/text_row.hpp"
#include "proxy/protocol/binary_row.hpp"
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

// Per-rule metrics of the claim engine (claimguard_*_total{rule=...}).
struct claim_metrics {
    admin::family<admin::counter>& rewrites;
    admin::family<admin::counter>& exhausted;
    admin::family<admin::counter>& blocked;
    admin::family<admin::counter>& duplicates;
    admin::family<admin::counter>& compensations;
    admin::family<admin::counter>& would;
    admin::family<admin::counter>& untracked;
    admin::family<admin::counter>& claims;
    admin::family<admin::counter>& unbacked;

    static claim_metrics& get() {
        auto& r = admin::default_registry();
        static claim_metrics m{
            r.counter_family("claimguard_rewrites_total", "Decrements rewritten into conditional updates that took stock",
                             {"rule"}),
            r.counter_family("claimguard_exhausted_total", "Decrements refused at the floor, answered with the exhausted answer",
                             {"rule"}),
            r.counter_family("claimguard_blocked_claims_total",
                             "Claim inserts answered exhausted without reaching the database", {"rule"}),
            r.counter_family("claimguard_duplicates_total", "Claims refused as already claimed, by the guard that saw it",
                             {"rule", "guard"}),
            r.counter_family("claimguard_compensations_total", "Stock units given back after a claim did not happen",
                             {"rule"}),
            r.counter_family("claimguard_would_rewrite_total", "Observe mode: what enforce mode would have done",
                             {"rule", "action"}),
            r.counter_family("claimguard_untracked_writes_total",
                             "Writes or claims on protected tables the engine could not follow (forwarded unchanged)",
                             {"rule"}),
            r.counter_family("claimguard_claims_total", "Claim rows inserted through the claim protocol", {"rule"}),
            r.counter_family("claimguard_claims_before_decrement_total",
                             "Claim rows inserted before this session's decrement of their stock "
                             "(autocommit: committed at once, not backed by stock)",
                             {"rule", "in"}),
        };
        return m;
    }
};

std::string_view rule_name(const engine::decision& d) {
    if (d.claim) return d.claim->name;
    if (d.stock) return d.stock->name;
    return "";
}

std::optional<std::int64_t> to_int(std::string_view text) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

// A bound parameter made comparable with literals: integers in decimal, strings as bytes
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
    return std::nullopt;  // NULL, doubles, temporals, long data: never a key we track
}

}  // namespace

rules::sql::lexer_options session::lexer_options() const {
    auto o = lexer_;
    o.no_backslash_escapes = (status_ & proto::status::no_backslash_escapes) != 0;
    return o;
}

void session::forget_statements() {
    prepared_.clear();
    derived_.clear();  // the server dropped them too (COM_RESET_CONNECTION, COM_CHANGE_USER)
    last_prepared_id_ = 0;
}

awaitable<session::intercepted> session::intercept(const proto::packet_span& packet, std::uint8_t command) {
    if (!ctx_.rules || packet.frames != 1) co_return intercepted::forward;
    command_seq_ = packet.last_seq;
    auto payload = packet.first_payload;
    switch (command) {
    case proto::com::query:
        snapshot_ = ctx_.rules->current();
        if (!snapshot_) co_return intercepted::forward;
        co_return co_await intercept_query(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_prepare:
        snapshot_ = ctx_.rules->current();
        if (!snapshot_) co_return intercepted::forward;
        co_return co_await intercept_prepare(packet, proto::as_chars(payload.subspan(1)));
    case proto::com::stmt_execute:
        co_return co_await intercept_execute(packet);
    case proto::com::stmt_close:
        if (auto id = proto::peek_statement_id(payload)) prepared_.erase(*id);
        co_return intercepted::forward;
    case proto::com::init_db:
        if (auto db = proto::parse_init_db(payload)) database_ = std::string(*db);
        co_return intercepted::forward;
    case proto::com::reset_connection:
    case proto::com::change_user:
        release_transaction_locks();  // the server rolls back an open transaction
        forget_statements();
        engine::after_transaction_end(memory_);
        co_return intercepted::forward;
    default:
        co_return intercepted::forward;
    }
}

void session::learn_session_changes(const match::match_result& facts) {
    for (const auto& f : facts.facts) {
        if (auto* t = std::get_if<match::transaction_boundary>(&f)) {
            using ev = match::transaction_event;
            if (t->event == ev::commit || t->event == ev::rollback || t->event == ev::autocommit_on ||
                t->event == ev::begin)
                reset_after_reply_ = true;
            if (t->event == ev::rollback) rollback_requested_ = true;
        } else if (auto* c = std::get_if<match::session_change>(&f)) {
            switch (c->setting) {
            case match::session_setting::sql_mode:
                if (c->sql_mode) lexer_.ansi_quotes = c->sql_mode->ansi_quotes;
                break;
            case match::session_setting::client_charset:
                if (c->charset) lexer_.client_charset = *c->charset;
                break;
            case match::session_setting::database:
                database_ = sqlns::unquote_identifier(c->database);
                break;
            }
        }
    }
}

awaitable<session::intercepted> session::intercept_query(const proto::packet_span& packet, std::string_view sql) {
    const auto& index = snapshot_->index;
    if (index.filter().classify(sql) == sqlns::prefilter_verdict::irrelevant) co_return intercepted::forward;
    auto st = sqlns::parse(sql, lexer_options());
    if (!st.ours()) co_return intercepted::forward;
    match::match_context mctx;
    if (!database_.empty()) mctx.current_database = database_;
    auto facts = match::match(st, index, mctx);
    learn_session_changes(facts);
    auto d = engine::decide(facts, snapshot_->rules, engine::resolve_literal, memory_);
    co_return co_await apply(d, st, proto::com::query, client_in_.readable().first(packet.raw_size), packet.last_seq,
                             nullptr, nullptr);
}

awaitable<session::intercepted> session::intercept_prepare(const proto::packet_span& packet, std::string_view sql) {
    const auto& index = snapshot_->index;
    if (index.filter().classify(sql) == sqlns::prefilter_verdict::irrelevant) co_return intercepted::forward;
    auto ps = std::make_unique<prepared_statement>();
    ps->sql = std::make_unique<std::string>(sql);
    ps->parsed = sqlns::parse(*ps->sql, lexer_options());
    if (!ps->parsed.ours()) co_return intercepted::forward;
    match::match_context mctx;
    if (!database_.empty()) mctx.current_database = database_;
    ps->facts = match::match(ps->parsed, index, mctx);
    if (ps->facts.facts.empty()) co_return intercepted::forward;
    ps->snapshot = snapshot_;
    auto reply = co_await roundtrip(client_in_.readable().first(packet.raw_size), proto::com::stmt_prepare,
                                    packet.last_seq);
    if (!reply) co_return intercepted::failed;
    if (!reply->is_err) {
        auto id = reply->exchange.statement_id();
        ps->params = reply->exchange.param_count();
        last_prepared_id_ = id;
        if (prepared_.size() >= max_tracked_statements) prepared_.erase(prepared_.begin());
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
        if (std::holds_alternative<proto::long_data_value>(p)) co_return intercepted::forward;
    snapshot_ = ps.snapshot;
    const auto& params = exec->params;
    engine::value_resolver resolver = [&](const match::value_ref& v) -> std::optional<engine::resolved_value> {
        if (v.type == match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            return resolve_bound(params[v.placeholder_index]);
        }
        return engine::resolve_literal(v);
    };
    learn_session_changes(ps.facts);
    auto d = engine::decide(ps.facts, ps.snapshot->rules, resolver, memory_);

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
    auto result = co_await apply(d, ps.parsed, proto::com::stmt_execute, bytes, packet.last_seq, &exec->params,
                                 &exec->param_types);
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
    auto& m = claim_metrics::get();
    // The client's statement, sent as written; the reply is kept for the engine to read.
    auto forward_captured = [&]() -> awaitable<std::optional<captured_reply>> {
        forwarded_statement_ = true;
        co_return co_await roundtrip(forward_bytes, command, last_seq);
    };
    if (d.untracked) {
        m.untracked.with(rule_name(d)).inc();
        spdlog::debug("session {}: untracked statement on rule {}: {}", id_, rule_name(d), d.note);
    }
    if (d.observe) {
        m.would.with(rule_name(d), engine::verdict_name(d.what)).inc();
        audit(d, "would-" + std::string(engine::verdict_name(d.what)), st);
        // Keep the session's memory as enforce mode would have it (the decrement took its unit,
        // the claim used it), so the next decision is the one enforce mode would make: a claim
        // after a decrement is would-claim, not would-exhausted under require_decrement.
        const bool in_trans = status_ & proto::status::in_trans;
        if (d.what == verdict::restock) engine::after_restock(memory_, d, true);
        if (d.what == verdict::decrement || d.what == verdict::track_decrement)
            engine::after_decrement(memory_, d, true, in_trans);
        if (d.what == verdict::claim) (void)engine::after_claim(memory_, d, engine::claim_outcome::inserted, in_trans);
        co_return intercepted::forward;
    }
    switch (d.what) {
    case verdict::forward:
        co_return intercepted::forward;

    case verdict::remember_read: {
        auto reply = co_await forward_captured();
        if (!reply) co_return intercepted::failed;
        if (auto counter = read_counter(*reply, d, command == proto::com::stmt_execute))
            engine::after_read(memory_, d, *counter);
        co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
    }

    case verdict::decrement: {
        auto rewritten = std::holds_alternative<match::counter_write>(*d.fact)
                             ? match::rewrite_write(st, std::get<match::counter_write>(*d.fact), d.units)
                             : match::rewrite_change(st, std::get<match::counter_change>(*d.fact), d.units);
        if (!rewritten) {
            spdlog::warn("session {}: rule {}: cannot rewrite a decrement ({}): forwarded unchanged", id_,
                         rule_name(d), rewritten.error().message());
            m.untracked.with(rule_name(d)).inc();
            co_return intercepted::forward;
        }
        auto reply = co_await run_sql(*rewritten, params, types);
        if (!reply) co_return intercepted::failed;
        if (!reply->is_ok) co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
        const bool took = reply->affected_rows > 0;
        engine::after_decrement(memory_, d, took, reply->status & proto::status::in_trans);
        if (took) {
            m.rewrites.with(rule_name(d)).inc();
            audit(d, "rewritten", st);
            co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
        }
        m.exhausted.with(rule_name(d)).inc();
        audit(d, "exhausted", st);
        co_return co_await answer(d.stock->exhausted, reply->status) ? intercepted::handled : intercepted::failed;
    }

    case verdict::track_decrement:
    case verdict::restock: {
        auto reply = co_await forward_captured();
        if (!reply) co_return intercepted::failed;
        if (reply->is_ok) {
            if (d.what == verdict::restock) {
                engine::after_restock(memory_, d, true);
            } else {
                engine::after_decrement(memory_, d, reply->affected_rows > 0, reply->status & proto::status::in_trans);
            }
        }
        co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
    }

    case verdict::exhausted:
        m.blocked.with(rule_name(d)).inc();
        audit(d, "blocked", st);
        co_return co_await answer(d.stock->exhausted, status_) ? intercepted::handled : intercepted::failed;

    case verdict::claim: {
        const bool in_trans = status_ & proto::status::in_trans;
        std::string token;
        bool locked = false;
        if (d.claim->redis && redis_) {
            token = guards::random_token();
            auto got = co_await redis_->acquire(d.redis_key, token, d.claim->redis->ttl);
            if (got == guards::acquire_result::held) {
                m.duplicates.with(rule_name(d), "redis").inc();
                audit(d, "duplicate-redis", st);
                if (engine::after_claim(memory_, d, engine::claim_outcome::duplicate, in_trans) > 0 &&
                    !co_await compensate(d, st, params, types))
                    co_return intercepted::failed;
                co_return co_await answer(d.claim->duplicate, status_) ? intercepted::handled : intercepted::failed;
            }
            locked = got == guards::acquire_result::acquired;
        }
        auto reply = co_await forward_captured();
        if (!reply) co_return intercepted::failed;
        if (!reply->is_err) {
            const bool now_in_trans = reply->status & proto::status::in_trans;
            if (!engine::claim_backed(memory_, d)) {
                // The app inserts first. In a transaction the decrement that follows backs the
                // row (or the COMMIT becomes a ROLLBACK); in autocommit it is already committed.
                m.unbacked.with(rule_name(d), now_in_trans ? "transaction" : "autocommit").inc();
                if (!now_in_trans) audit(d, "claim-before-decrement", st);
            }
            (void)engine::after_claim(memory_, d, engine::claim_outcome::inserted, now_in_trans);
            if (locked && now_in_trans) transaction_locks_.push_back({d.redis_key, token});
            m.claims.with(rule_name(d)).inc();
            co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
        }
        const bool duplicate = reply->err_code == er_dup_entry;
        auto units = engine::after_claim(memory_, d, duplicate ? engine::claim_outcome::duplicate
                                                               : engine::claim_outcome::failed, in_trans);
        if (units > 0 && !co_await compensate(d, st, params, types)) co_return intercepted::failed;
        if (locked) (void)co_await redis_->release(d.redis_key, token);
        if (!duplicate) co_return co_await write_client(reply->raw) ? intercepted::handled : intercepted::failed;
        m.duplicates.with(rule_name(d), "db").inc();
        audit(d, "duplicate-db", st);
        co_return co_await answer(d.claim->duplicate, status_) ? intercepted::handled : intercepted::failed;
    }

    case verdict::rollback_instead: {
        match::rewritten_sql rollback{"ROLLBACK", {}};
        auto reply = co_await run_sql(rollback, nullptr, nullptr);
        if (!reply) co_return intercepted::failed;
        const std::string poisoned = memory_.poisoned_rule;  // before the reset clears it
        engine::after_transaction_end(memory_);
        release_transaction_locks();
        const rules::stock_rule* stock = snapshot_->rules.find_stock(poisoned);
        if (!stock && !snapshot_->rules.stocks.empty()) stock = &snapshot_->rules.stocks.front();
        audit(d, "rolled-back", st);
        // The app asked to COMMIT and nothing was committed: that is never answered with an OK,
        // even when the rule answers a refused decrement with one (exhausted: {type: ok}).
        const rules::answer fallback{rules::answer::kind::error, 1644, "45000",
                               "claimguard: transaction rolled back: it holds a claim without stock"};
        const rules::answer& chosen =
            stock && stock->exhausted.type == rules::answer::kind::error ? stock->exhausted : fallback;
        co_return co_await answer(chosen, reply->status) ? intercepted::handled : intercepted::failed;
    }
    }
    co_return intercepted::forward;
}

awaitable<std::optional<session::captured_reply>> session::roundtrip(proto::bytes_view raw, std::uint8_t command,
                                                                      std::uint8_t last_seq) {
    if (!co_await write_backend(raw)) {
        co_await backend_failed(asio::error::broken_pipe, static_cast<std::uint8_t>(last_seq + 1));
        co_return std::nullopt;
    }
    captured_reply r;
    r.exchange = proto::command_exchange(command, caps_, status_);
    auto step = r.exchange.start(last_seq);
    bool first = true;
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
        if (first && !packet.first_payload.empty()) {
            auto head = packet.first_payload[0];
            if (head == proto::err_header) {
                r.is_err = true;
                command_failed_ = true;  // if the transaction ended here, it ended without a commit
                if (auto e = proto::parse_err(packet.first_payload)) r.err_code = e->code;
            } else if (head == proto::ok_header && command != proto::com::stmt_prepare && *next == proto::next_step::done) {
                if (auto ok = proto::parse_ok(packet.first_payload, caps_)) {
                    r.is_ok = true;
                    r.affected_rows = ok->affected_rows;
                }
            }
        }
        first = false;
        auto bytes = backend_in_.readable().first(packet.raw_size);
        r.raw.insert(r.raw.end(), bytes.begin(), bytes.end());
        backend_in_.consume(packet.raw_size);
        step = *next;
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
        payload.push_back(proto::com::query);
        payload.insert(payload.end(), sql.sql.begin(), sql.sql.end());
        proto::write_packet(frame, seq, payload);
        co_return co_await roundtrip(frame, proto::com::query, 0);
    }
    // A prepared statement of the proxy's own on this backend connection, executed with
    // the client's bound values: user data never enters SQL text.
    std::uint32_t statement_id = 0;
    if (auto it = derived_.find(sql.sql); it != derived_.end()) {
        statement_id = it->second;
    } else {
        payload.push_back(proto::com::stmt_prepare);
        payload.insert(payload.end(), sql.sql.begin(), sql.sql.end());
        proto::write_packet(frame, seq, payload);
        auto prepared = co_await roundtrip(frame, proto::com::stmt_prepare, 0);
        if (!prepared) co_return std::nullopt;
        if (prepared->is_err) co_return prepared;
        statement_id = prepared->exchange.statement_id();
        if (derived_.size() >= max_derived_statements) {
            proto::byte_buffer close_payload{proto::com::stmt_close, 0, 0, 0, 0}, close_frame;
            for (int i = 0; i < 4; ++i) close_payload[1 + i] = static_cast<std::uint8_t>(derived_.begin()->second >> (8 * i));
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

awaitable<bool> session::compensate(const engine::decision& d, const sqlns::parsed_statement& st,
                                    const std::vector<proto::binary_value>* params,
                                    const std::vector<proto::value_type>* types) {
    const auto& insert = std::get<match::claim_insert>(*d.fact);
    auto sql = match::compensation(*d.stock, insert.rows.front().stock_key, 1);
    if (!sql) {
        spdlog::error("session {}: rule {}: cannot build the compensation: {}", id_, rule_name(d), sql.error().message());
        co_return true;  // the answer still goes out; the metric and log say a unit may be missing
    }
    auto reply = co_await run_sql(*sql, params, types);
    if (!reply) co_return false;
    if (reply->is_ok && reply->affected_rows > 0) {
        claim_metrics::get().compensations.with(rule_name(d)).inc();
        audit(d, "compensated", st);
    } else {
        spdlog::error("session {}: rule {}: compensation did not return the unit", id_, rule_name(d));
    }
    co_return true;
}

awaitable<bool> session::answer(const rules::answer& a, std::uint16_t status) {
    auto seq = proto::reply_seq(command_seq_);
    if (a.type == rules::answer::kind::error) {
        co_return co_await write_client(proto::make_err_frame(seq, a.code, a.sql_state, a.message));
    }
    co_return co_await write_client(proto::make_ok_frame(seq, 0, status, caps_));
}

std::optional<std::int64_t> session::read_counter(const captured_reply& reply, const engine::decision& d, bool binary) {
    const auto& read = std::get<match::counter_read>(*d.fact);
    proto::bytes_view rest(reply.raw);
    auto next = [&]() -> std::optional<proto::bytes_view> {
        auto scan = proto::scan_packet(rest, opt_.max_packet_bytes);
        if (!scan || scan->raw_size == 0 || scan->frames != 1) return std::nullopt;
        auto payload = scan->first_payload;
        rest = rest.subspan(scan->raw_size);
        return payload;
    };
    auto head = next();
    if (!head) return std::nullopt;
    auto count = proto::parse_column_count(*head);
    if (!count || *count == 0 || *count > 4096) return std::nullopt;
    std::vector<proto::value_type> types;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    std::size_t index = read.counter_position ? *read.counter_position : none;
    for (std::size_t i = 0; i < *count; ++i) {
        auto payload = next();
        if (!payload) return std::nullopt;
        auto col = proto::parse_column_definition(*payload, mariadb_caps_);
        if (!col) return std::nullopt;
        types.push_back(proto::value_type_of(*col));
        if (index == none && (sqlns::identifier_equals(col->org_name, d.stock->counter_column) ||
                       (!read.counter_label.empty() && col->name == read.counter_label)))
            index = i;
    }
    if (index >= *count) return std::nullopt;
    if (!(caps_ & proto::cap::deprecate_eof) && !next()) return std::nullopt;
    auto row = next();
    if (!row || proto::is_eof_packet(*row, caps_) || (*row)[0] == proto::err_header) return std::nullopt;
    auto after = next();  // exactly one row: the key pins one counter
    if (!after || !proto::is_eof_packet(*after, caps_)) return std::nullopt;
    if (binary) {
        auto values = proto::parse_binary_row(*row, types);
        if (!values) return std::nullopt;
        const auto& v = (*values)[index];
        if (auto* i = std::get_if<std::int64_t>(&v)) return *i;
        if (auto* u = std::get_if<std::uint64_t>(&v)) return *u <= INT64_MAX ? std::optional<std::int64_t>(*u) : std::nullopt;
        if (auto* b = std::get_if<proto::bytes_view>(&v)) return to_int(proto::as_chars(*b));
        return std::nullopt;
    }
    auto values = proto::parse_text_row(*row, *count);
    if (!values || !(*values)[index]) return std::nullopt;
    return to_int(*(*values)[index]);
}

namespace {
awaitable<void> release_lock(guards::redis_guard* redis, std::string key, std::string token) {
    (void)co_await redis->release(key, token);
}
}  // namespace

void session::release_transaction_locks() {
    if (redis_) {
        for (auto& lock : transaction_locks_)
            asio::co_spawn(client_.get_executor(), release_lock(redis_, std::move(lock.key), std::move(lock.token)),
                           asio::detached);
    }
    transaction_locks_.clear();
}

void session::audit(const engine::decision& d, std::string_view action, const sqlns::parsed_statement& st) {
    spdlog::debug("session {}: rule {}: {} ({})", id_, rule_name(d), action, d.note);
    if (!ctx_.audit || !ctx_.audit->enabled()) return;
    audit_event e;
    e.session = id_;
    e.client = peer_;
    e.user = user_;
    e.rule = rule_name(d);
    e.action = action;
    e.note = d.note;
    if (d.stock)
        for (std::size_t i = 0; i < d.key.size() && i < d.stock->key_columns.size(); ++i)
            e.keys.emplace_back(d.stock->key_columns[i], d.key[i]);
    if (d.claim)
        for (std::size_t i = 0; i < d.idempotency.size() && i < d.claim->idempotency_columns.size(); ++i)
            e.keys.emplace_back(d.claim->idempotency_columns[i], d.idempotency[i]);
    auto digest = statement_digest(st);
    e.digest = digest;
    ctx_.audit->write(e);
}

}  // namespace claimguard::session
