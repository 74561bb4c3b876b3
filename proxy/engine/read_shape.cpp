// A counter read's shape for the read cache, the server's reply as its template, where the counter is.
#include "read_shape.hpp"

#include <algorithm>
#include <vector>

#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/command.hpp"

namespace claimguard::engine {

namespace match = rules::match;

namespace {

// COM_STMT_EXECUTE: the flags byte after the command and the statement id; non-zero asks for a
// cursor, whose rows come by COM_STMT_FETCH (never answered from the cache).
constexpr std::size_t execute_flags_offset = 5;

}  // namespace

std::string normalised_text(const rules::sql::parsed_statement& st, const match::counter_read& r) {
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

std::optional<cached_read> cached_read_of(const decision& d, const rules::sql::parsed_statement& st,
                                          const read_origin& o) {
    if (d.what != verdict::remember_read || d.deferred != deferred_step::none || !d.stock || !d.stock->read_cache ||
        o.rules == nullptr)
        return std::nullopt;
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr) return std::nullopt;
    cached_read out;
    out.situation.observe = o.rules->effective_mode(*d.stock) != rules::mode::enforce;
    // With autocommit off and no transaction open, the read itself would open one (the server's
    // reply says so): only the server can answer it.
    out.situation.autocommit_or_transaction =
        (o.status & (protocol::status::autocommit | protocol::status::in_trans)) != 0;
    const bool binary = o.command == protocol::com::stmt_execute;
    if (binary) out.situation.cursor = o.payload.size() <= execute_flags_offset || o.payload[execute_flags_offset] != 0;
    auto& shape = out.shape;
    shape.push_back(binary ? 'B' : 'T');
    shape += (o.caps & protocol::cap::deprecate_eof) ? 'E' : '-';
    shape += (o.mariadb_caps & protocol::mariadb_cap::extended_metadata) ? 'X' : '-';
    shape += std::to_string(o.charset);
    shape += '\n';
    shape += o.database;
    shape += '\n';
    shape += normalised_text(st, *r);
    return out;
}

std::shared_ptr<const protocol::counter_reply> read_template(const decision& d, protocol::bytes_view raw, bool is_err,
                                                             std::uint32_t caps, std::uint32_t mariadb_caps,
                                                             bool binary) {
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr || is_err) return nullptr;
    auto kept = protocol::parse_counter_reply(raw, caps, mariadb_caps, binary, r->counter_position, r->counter_label);
    if (!kept) return nullptr;
    return std::make_shared<const protocol::counter_reply>(std::move(*kept));
}

std::optional<protocol::counter_request> counter_column(const decision& d, bool own, bool binary) {
    if (own) return protocol::counter_request{0, {}, binary};
    const auto* r = std::get_if<match::counter_read>(d.fact);
    if (r == nullptr) return std::nullopt;
    return protocol::counter_request{r->counter_position, r->counter_label, binary};
}

}  // namespace claimguard::engine
