// Counter reads answered by the sidecar (stock rule read_cache): which reads may be, the shape
// their reply is kept under, serving them from the sidecar-wide read cache or keeping the
// server's reply, and the cache following what this sidecar's claim operations did.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "claim_metrics.hpp"
#include "proxy/engine/read_cache.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace match = rules::match;
namespace sqlns = rules::sql;

namespace {

// COM_STMT_EXECUTE: the flags byte after the command and the statement id; non-zero asks for a
// cursor, whose rows come by COM_STMT_FETCH (never answered from the cache).
constexpr std::size_t execute_flags_offset = 5;

// The statement with its key values as "?" (prepared statements have them already): reads of
// different keys in one form share nothing, but the text says what the reply's columns are.
std::string normalised_text(const sqlns::parsed_statement& st, const match::counter_read& r) {
    std::vector<std::string_view> literals;
    for (const auto& k : r.key)
        if (k.type == match::value_ref::kind::literal && !k.text.empty() && k.text.data() >= st.sql.data() &&
            k.text.data() + k.text.size() <= st.sql.data() + st.sql.size())
            literals.push_back(k.text);
    std::sort(literals.begin(), literals.end(), [](auto a, auto b) { return a.data() < b.data(); });
    std::string out;
    const char* at = st.sql.data();
    for (auto l : literals) {
        if (l.data() < at) continue;  // overlapping: cannot happen, skip rather than guess
        out.append(at, l.data());
        out.push_back('?');
        at = l.data() + l.size();
    }
    out.append(at, st.sql.data() + st.sql.size());
    return out;
}

}  // namespace

awaitable<std::optional<session::intercepted>> session::serve_counter_read(const engine::decision& d,
                                                                           const sqlns::parsed_statement& st,
                                                                           std::uint8_t command,
                                                                           proto::bytes_view forward_bytes,
                                                                           std::uint8_t last_seq) {
    auto& m = claim_metrics::get();
    auto& cache = *ctx_.read_cache;
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr) co_return std::nullopt;
    const auto& rule = *d.stock;
    // Cacheable only when the reply differs from the kept one in the counter alone and the
    // session may see the sidecar's value (engine::read_cache_bypass says why not).
    engine::read_situation situation;
    situation.observe = snapshot_->rules.effective_mode(rule) != rules::mode::enforce;
    // With autocommit off and no transaction open, the read itself would open one (the server's
    // reply says so): only the server can answer it.
    situation.autocommit_or_transaction = (status_ & (proto::status::autocommit | proto::status::in_trans)) != 0;
    const bool binary = command == proto::com::stmt_execute;
    if (binary) {
        const auto payload = forward_bytes.subspan(proto::frame_header_size);
        situation.cursor = payload.size() <= execute_flags_offset || payload[execute_flags_offset] != 0;
    }
    if (auto why = engine::read_cache_bypass(*r, d.key, memory_, situation); !why.empty()) {
        counters_.read(snapshot_, rule.name, read_result::bypass).inc();
        spdlog::debug("session {}: rule {}: read sent to the server: {}", id_, rule.name, why);
        co_return std::nullopt;
    }
    std::string shape;
    shape.push_back(binary ? 'B' : 'T');
    shape += (caps_ & proto::cap::deprecate_eof) ? 'E' : '-';
    shape += (mariadb_caps_ & proto::mariadb_cap::extended_metadata) ? 'X' : '-';
    shape += std::to_string(static_cast<int>(lexer_.client_charset));
    shape += '\n';
    shape += database_;
    shape += '\n';
    shape += normalised_text(st, *r);

    // A read inside a transaction may answer from an older snapshot: its reply is never kept as
    // the key's value, so it never refreshes the cache for the others.
    const bool in_transaction_before = (status_ & proto::status::in_trans) != 0;
    auto now = engine::read_cache::clock::now();
    auto found = cache.find(rule.name, d.key, shape, *rule.read_cache, now, !in_transaction_before);
    // Another read of this key is refreshing it: its answer serves this one too (one refresh per
    // key per TTL, however many reads arrive meanwhile). find() stops saying wait after
    // max_refresh_wait, and then this read asks the server itself.
    while (found.what == engine::read_cache::outcome::wait) {
        admission_timer_.expires_after(engine::read_cache::refresh_poll_interval);
        co_await admission_timer_.async_wait(nothrow);
        if (closed_) co_return intercepted::failed;
        now = engine::read_cache::clock::now();
        found = cache.find(rule.name, d.key, shape, *rule.read_cache, now, !in_transaction_before);
    }
    if (found.what == engine::read_cache::outcome::hit) {
        auto bytes = proto::rebuild_counter_reply(*found.reply, found.value, status_, proto::reply_seq(command_seq_));
        if (bytes) {
            counters_.read(snapshot_, rule.name, read_result::hit).inc();
            auto& e = memory_.entry(rule.name, d.key);
            memory_.note_read(e, found.value, in_transaction_before);
            e.refused = false;  // a new attempt starts with a read
            if (!co_await write_client(*bytes)) co_return intercepted::failed;
            co_return intercepted::handled;
        }
        found.what = engine::read_cache::outcome::refresh;  // the value does not fit the column: ask the server
    }
    counters_.read(snapshot_, rule.name, found.what == engine::read_cache::outcome::miss ? read_result::miss : read_result::refresh)
        .inc();
    forwarded_statement_ = true;
    auto reply = co_await roundtrip(forward_bytes, command, last_seq);
    bool stored = false;
    if (!reply) {
        if (!in_transaction_before) cache.end_refresh(rule.name, d.key);
        co_return intercepted::failed;
    }
    if (!reply->is_err && !reply->is_ok) {
        auto kept =
            proto::parse_counter_reply(reply->raw, caps_, mariadb_caps_, binary, r->counter_position, r->counter_label);
        if (kept) {
            const auto value = kept->value;
            auto& e = memory_.entry(rule.name, d.key);
            memory_.note_read(e, value, in_transaction_before);
            e.refused = false;
            // A read inside a transaction may answer from an older snapshot: served from the
            // kept template later, never kept as the key's value.
            if (!in_transaction_before) {
                cache.store(rule.name, d.key, shape, std::make_shared<const proto::counter_reply>(std::move(*kept)),
                            value, found.generation, now);
                stored = true;
                m.read_cache_keys.set(static_cast<std::int64_t>(cache.keys()));
                m.read_cache_templates.set(static_cast<std::int64_t>(cache.templates()));
                m.count_read_cache_evictions(cache.evictions());
            }
        }
    }
    if (!stored && !in_transaction_before) cache.end_refresh(rule.name, d.key);
    if (!co_await write_client(reply->raw)) co_return intercepted::failed;
    co_return intercepted::handled;
}

void session::update_read_cache(const std::vector<engine::event>& events, const engine::decision& d) {
    auto& cache = *ctx_.read_cache;
    const auto& rule = *d.stock;
    using engine::event;
    for (auto e : events) {
        switch (e) {
            case event::took:
            case event::tracked:
                // Committed at once in autocommit; in a transaction it may still roll back, so the
                // next read asks the server.
                // A write that said more than the key (AND version = ?) may have changed other
                // columns the kept reply shows (the version an optimistic app reads next).
                if ((status_ & proto::status::in_trans) || d.may_conflict)
                    cache.invalidate(rule.name, d.key);
                else
                    cache.on_take(rule.name, d.key, d.units);
                break;
            case event::exhausted: cache.on_exhausted(rule.name, d.key, rule.floor); break;
            // The app's own condition did not hold: what it read was stale (another sidecar's
            // write); its retry reads from the server.
            case event::conflict:
            case event::restocked:
            case event::compensated:
            case event::compensation_failed: cache.invalidate(rule.name, d.key); break;
            default: break;
        }
    }
}

}  // namespace claimguard::session
