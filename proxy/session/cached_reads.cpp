// Counter reads answered by the sidecar (stock rule read_cache): what the read cache's decision
// (engine::statement_operation, which also makes the cache follow the claims) needs of a read (the
// shape its reply is kept under, whether a cursor is asked for), the server's reply as a template,
// and the cache's metrics.
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

std::optional<engine::cached_read> session::cached_read_of(const engine::decision& d, const sqlns::parsed_statement& st,
                                                          std::uint8_t command, proto::bytes_view forward_bytes) const {
    if (d.what != engine::verdict::remember_read || d.deferred != engine::deferred_step::none || !d.stock ||
        !d.stock->read_cache || !ctx_.read_cache || !snapshot_)
        return std::nullopt;
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr) return std::nullopt;
    engine::cached_read out;
    out.situation.observe = snapshot_->rules.effective_mode(*d.stock) != rules::mode::enforce;
    // With autocommit off and no transaction open, the read itself would open one (the server's
    // reply says so): only the server can answer it.
    out.situation.autocommit_or_transaction = (status_ & (proto::status::autocommit | proto::status::in_trans)) != 0;
    const bool binary = command == proto::com::stmt_execute;
    if (binary) {
        const auto payload = forward_bytes.subspan(proto::frame_header_size);
        out.situation.cursor = payload.size() <= execute_flags_offset || payload[execute_flags_offset] != 0;
    }
    auto& shape = out.shape;
    shape.push_back(binary ? 'B' : 'T');
    shape += (caps_ & proto::cap::deprecate_eof) ? 'E' : '-';
    shape += (mariadb_caps_ & proto::mariadb_cap::extended_metadata) ? 'X' : '-';
    shape += std::to_string(static_cast<int>(connection_state_.lexer().client_charset));
    shape += '\n';
    shape += connection_state_.database();
    shape += '\n';
    shape += normalised_text(st, *r);
    return out;
}

std::shared_ptr<const proto::counter_reply> session::kept_read(const engine::decision& d, const captured_reply& reply,
                                                               std::uint8_t command) const {
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr || reply.is_err) return nullptr;  // an OK is no template either (parse_counter_reply)
    auto kept = proto::parse_counter_reply(reply.raw, caps_, mariadb_caps_, command == proto::com::stmt_execute,
                                           r->counter_position, r->counter_label);
    if (!kept) return nullptr;
    return std::make_shared<const proto::counter_reply>(std::move(*kept));
}

void session::report_reads(const std::vector<engine::read_note>& notes, const engine::decision& d) {
    if (notes.empty()) return;
    auto& m = claim_metrics::get();
    const auto& rule = d.stock->name;
    for (const auto& n : notes) {
        switch (n.what) {
            case engine::read_note::kind::bypass:
                counters_.read(snapshot_, rule, read_result::bypass).inc();
                spdlog::debug("session {}: rule {}: read sent to the server: {}", id_, rule, n.why);
                break;
            case engine::read_note::kind::hit: counters_.read(snapshot_, rule, read_result::hit).inc(); break;
            case engine::read_note::kind::miss: counters_.read(snapshot_, rule, read_result::miss).inc(); break;
            case engine::read_note::kind::refresh: counters_.read(snapshot_, rule, read_result::refresh).inc(); break;
            case engine::read_note::kind::stored: {
                const auto& cache = *ctx_.read_cache;
                m.read_cache_keys.set(static_cast<std::int64_t>(cache.keys()));
                m.read_cache_templates.set(static_cast<std::int64_t>(cache.templates()));
                m.count_read_cache_evictions(cache.evictions());
                break;
            }
        }
    }
}

}  // namespace claimguard::session
