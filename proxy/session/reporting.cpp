// What the claim engine reports, counted and audited: each event by its catalogue row
// (proxy/engine/catalogue.hpp) with the counters of the command's rules snapshot (claim_metrics.hpp),
// what the admission gate did, what the read cache did.
#include <spdlog/spdlog.h>

#include "audit_log.hpp"
#include "statement_digests.hpp"
#include "claim_metrics.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/engine/catalogue.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace sqlns = rules::sql;
using engine::event;

namespace {

std::string_view rule_name(const engine::decision& d) {
    if (d.claim) return d.claim->name;
    if (d.stock) return d.stock->name;
    return "";
}

std::size_t index_of(event e) { return static_cast<std::size_t>(e); }

// The counter of claimguard_admission_*_total that counts a note.
admission_count count_of(engine::admission_note::kind what) {
    using k = engine::admission_note::kind;
    switch (what) {
        case k::lock_held: return admission_count::lock_held;
        case k::sold_out: return admission_count::sold_out;
        case k::timed_out: return admission_count::timeouts;
        case k::queue_full: return admission_count::queue_full;
        case k::grouped: break;  // not an admission_count: counted per batch
    }
    return admission_count::lock_held;
}

}  // namespace

void session::report_step(const engine::statement_report& r, const engine::decision& d,
                          const sqlns::parsed_statement& st) {
    if (!r.admission.empty()) report_admission(r.admission, d, st);
    if (!r.events.empty()) report_events(r.events, d, st);
    if (!r.deferred.empty()) report_deferred(r.deferred, &st);
    if (!r.reads.empty()) report_reads(r.reads, d);
    for (const auto& g : r.groups) {
        auto& m = claim_metrics::get();
        counters_.dynamic(m.group_update_batches, g.rule, {}).inc();
        counters_.dynamic(m.group_update_takes, g.rule, {}).inc(g.takes);
        spdlog::debug("session {}: rule {}: a batch of {} takes ({} taken) in {} UPDATEs", id_, g.rule, g.takes,
                      g.taken, g.statements);
    }
}

void session::report_events(const std::vector<engine::event>& events, const engine::decision& d,
                            const sqlns::parsed_statement& st) {
    auto& m = claim_metrics::get();
    const auto rule = rule_name(d);
    counters_.follow(command_.snapshot);
    const auto& c = counters_.of(rule);
    for (auto e : events) {
        const auto& row = engine::row_of(e);
        if (row.with_take) continue;  // reported with their take by report_deferred
        if (e == event::would || e == event::would_block) {
            // Observe mode: the word of the event enforce mode would have produced.
            const auto enforce = engine::enforce_event(d.what, e == event::would_block);
            if (auto* w = c.would[index_of(enforce)])
                w->inc();
            else
                counters_.dynamic(m.would, rule, engine::action_of(enforce)).inc();
            if (d.unmodeled) counters_.dynamic(m.unmodeled, rule, d.reason, "observe").inc();
            audit(d, engine::observe_action(enforce), st);
            continue;
        }
        if (auto* counter = c.by_event[index_of(e)])
            counter->inc();
        else  // the reason comes from the decision (unmodeled_refused, unmodeled_forwarded)
            counters_
                .dynamic(m.family(row.metric), rule, d.reason.empty() ? std::string_view("rewrite_failed") : d.reason,
                         row.labels[1])
                .inc();
        if (e == event::compensation_failed)
            spdlog::error("session {}: rule {}: a give-back changed no row", id_, rule);
        if (e == event::unmodeled_refused || e == event::unmodeled_forwarded)
            spdlog::info("session {}: rule {}: {} a statement claimguard does not model: {}", id_, rule,
                         e == event::unmodeled_refused ? "refused" : "forwarded", d.note);
        if (row.audited) audit(d, row.action, st);
    }
}

void session::report_deferred(const std::vector<std::pair<engine::event, engine::deferred_take>>& events,
                              const sqlns::parsed_statement* st) {
    if (events.empty()) return;
    counters_.follow(command_.snapshot);
    for (const auto& [e, t] : events) {
        const auto& row = engine::row_of(e);
        if (auto* counter = counters_.of(t.rule).by_event[index_of(e)]) counter->inc();
        spdlog::debug("session {}: rule {}: {}", id_, t.rule, row.action);
        if (!ctx_.audit || !ctx_.audit->enabled()) continue;
        audit_event a;
        a.session = id_;
        a.client = client_.peer();
        a.user = user_;
        a.rule = t.rule;
        a.action = row.action;
        a.note = e == engine::event::reserve_served || e == engine::event::reserve_committed ||
                         e == engine::event::reserve_returned
                     ? "take served from the sidecar's reserved block (reserve)"
                     : "take deferred to COMMIT (defer_decrement)";
        for (std::size_t i = 0; i < t.key.size() && i < t.key_columns.size(); ++i)
            a.keys.emplace_back(t.key_columns[i], t.key[i]);
        std::string digest;
        std::string statement;
        if (st) {
            digest = statement_digest(*st);
            statement = normalized_statement(*st);
        }
        a.digest = digest;
        a.statement = statement;
        fill_audit_context(a);
        keep_audit_line(a);
    }
}

void session::settle_reserved(std::vector<engine::deferred_take>& takes, bool committed) {
    if (ctx_.reserve == nullptr || takes.empty()) return;
    report_deferred(engine::settle_reserved(*ctx_.reserve, takes, committed), nullptr);
}

void session::report_dropped(std::vector<engine::deferred_take> dropped, bool committed) {
    settle_reserved(dropped, committed);  // served from the reserved block: never sent, settled here
    if (dropped.empty()) return;
    if (committed)  // a commit claimguard did not see coming: its claims went in without these takes
        spdlog::error("session {}: the transaction committed with {} deferred take(s) of rule {} never sent", id_,
                      dropped.size(), dropped.front().rule);
    std::vector<std::pair<engine::event, engine::deferred_take>> events;
    for (auto& t : dropped) events.emplace_back(engine::event::deferred_dropped, std::move(t));
    report_deferred(events, nullptr);
}

void session::audit(const engine::decision& d, std::string_view action, const sqlns::parsed_statement& st,
                    std::string_view note) {
    spdlog::debug("session {}: rule {}: {} ({})", id_, rule_name(d), action, d.note);
    const bool to_log = ctx_.audit && ctx_.audit->enabled();
    if (!to_log && !ctx_.digests) return;
    auto digest = statement_digest(st);
    auto statement = normalized_statement(st);
    if (ctx_.digests) ctx_.digests->record(rule_name(d), digest, statement, action);
    if (!to_log) return;
    audit_event e;
    e.session = id_;
    e.client = client_.peer();
    e.user = user_;
    e.rule = rule_name(d);
    e.action = action;
    e.note = note.empty() ? std::string_view(d.note) : note;
    if (d.stock)
        for (std::size_t i = 0; i < d.key.size() && i < d.stock->key_columns.size(); ++i)
            e.keys.emplace_back(d.stock->key_columns[i], d.key[i]);
    if (d.claim)
        for (std::size_t i = 0; i < d.idempotency.size() && i < d.claim->idempotency_columns.size(); ++i)
            e.keys.emplace_back(d.claim->idempotency_columns[i], d.idempotency[i]);
    e.digest = digest;
    e.statement = statement;
    fill_audit_context(e);
    keep_audit_line(e);
}

void session::watch_unlisted(std::string_view sql) {
    // Only statements that may start a shape are tokenised (the rest cost a first-word check).
    if (ctx_.digests == nullptr || !engine::may_watch(sql)) return;
    if (!unlisted_) unlisted_ = std::make_unique<engine::unlisted_watch>();
    const auto st = sqlns::parse(sql, connection_state_.lexer());
    const auto shape = unlisted_->observe(st, connection_state_.database());
    if (!shape) return;
    if (!ctx_.digests->record_unlisted(shape->table, statement_digest(st), normalized_statement(st), shape->action,
                                       shape->notes, opt_.watch_unlisted_tables) &&
        ctx_.unlisted_dropped != nullptr)
        ctx_.unlisted_dropped->inc();
}

void session::keep_audit_line(const audit_event& e) { audit_pending_.push_back(audit_line(e)); }

void session::note_command_answer() {
    audit_answer_ = command_.answered ? command_.answered_error : command_.failed ? command_.error : 0;
}

void session::flush_audit() {
    if (audit_pending_.empty() || !ctx_.audit) return;
    for (auto& line : audit_pending_)
        ctx_.audit->write_line(audit_answer_ ? with_answer(std::move(line), *audit_answer_) : std::move(line));
    audit_pending_.clear();
}

void session::fill_audit_context(audit_event& e) const {
    if (command_.snapshot) e.rules_version = command_.snapshot->rules.version_hash;
    e.host = ctx_.audit->host();
    e.database = memory_.database;
    e.backend_thread = backend_.thread_id();
}

void session::report_admission(const std::vector<engine::admission_note>& notes, const engine::decision& d,
                               const rules::sql::parsed_statement& st) {
    for (const auto& n : notes) {
        if (n.what == engine::admission_note::kind::grouped) {
            // Counted per batch (report_step); audited per take with the batch's size and connection.
            const auto note = n.message + " (leader's backend thread " + std::to_string(n.leader_thread) + ")";
            audit(d, engine::row_of(n.what).action, st, note);
            continue;
        }
        counters_.admission(command_.snapshot, n.rule, count_of(n.what)).inc();
        const auto& row = engine::row_of(n.what);
        if (!row.audited) continue;
        audit(d, row.action, st);
        spdlog::debug("session {}: {}", id_, n.message);
    }
}

void session::report_reads(const std::vector<engine::read_note>& notes, const engine::decision& d) {
    if (notes.empty()) return;
    auto& m = claim_metrics::get();
    const auto& rule = d.stock->name;
    for (const auto& n : notes) {
        switch (n.what) {
            case engine::read_note::kind::bypass:
                counters_.read(command_.snapshot, rule, read_result::bypass).inc();
                spdlog::debug("session {}: rule {}: read sent to the server: {}", id_, rule, n.why);
                break;
            case engine::read_note::kind::hit: counters_.read(command_.snapshot, rule, read_result::hit).inc(); break;
            case engine::read_note::kind::miss: counters_.read(command_.snapshot, rule, read_result::miss).inc(); break;
            case engine::read_note::kind::refresh:
                counters_.read(command_.snapshot, rule, read_result::refresh).inc();
                break;
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
