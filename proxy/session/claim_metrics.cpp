// The claim engine's families, registered here only; the per-rule children of a rules snapshot.
#include "claim_metrics.hpp"

#include <stdexcept>

namespace claimguard::session {

namespace {

std::size_t index_of(engine::event e) { return static_cast<std::size_t>(e); }

admin::counter& child(admin::family<admin::counter>& f, std::string_view rule, std::string_view a, std::string_view b) {
    switch (f.label_names().size()) {
        case 1: return f.with(rule);
        case 2: return f.with(rule, a);
        default: return f.with(rule, a, b);
    }
}

}  // namespace

claim_metrics::claim_metrics()
    : would(admin::default_registry().counter_family("claimguard_would_rewrite_total",
                                                     "Observe mode: what enforce mode would have done, by the action "
                                                     "enforce mode would audit",
                                                     {"rule", "action"})),
      unmodeled(admin::default_registry().counter_family(
          "claimguard_unmodeled_total",
          "Statements on protected tables in a shape claimguard does not model, by reason and policy",
          {"rule", "reason", "policy"})),
      trusted_writes(admin::default_registry().counter_family(
          "claimguard_trusted_writes_total",
          "Writes of a stock table by a trusted user (trusted_users), forwarded unchanged and audited", {"rule"})),
      admission_waits(admin::default_registry().counter_family(
          "claimguard_admission_waits_total", "Decrements that waited in the per-key admission queue", {"rule"})),
      admission_timeouts(admin::default_registry().counter_family(
          "claimguard_admission_timeouts_total",
          "Decrements answered ERR 1205 after waiting queue_timeout for their key", {"rule"})),
      admission_queue_full(admin::default_registry().counter_family(
          "claimguard_admission_queue_full_total",
          "Decrements answered ERR 1205 at once because max_queue statements already waited", {"rule"})),
      admission_sold_out(admin::default_registry().counter_family(
          "claimguard_admission_sold_out_answers_total",
          "Decrements answered sold out by the admission queue, without the database", {"rule"})),
      admission_lock_held(admin::default_registry().counter_family(
          "claimguard_admission_lock_held_total",
          "Decrements let through the admission queue at once: their transaction already "
          "holds a lock a slot holder may wait for (a locking read of the key, another key's slot)",
          {"rule"})),
      admission_queued(
          admin::default_registry()
              .gauge_family("claimguard_admission_queued", "Statements waiting in admission queues now", {})
              .with()),
      group_update_batches(admin::default_registry().counter_family(
          "claimguard_group_update_batches_total",
          "Batches of takes of one key sent as one conditional UPDATE (group_update), by their leader", {"rule"})),
      group_update_takes(admin::default_registry().counter_family(
          "claimguard_group_update_takes_total",
          "Takes decided in group_update batches, the leaders' included (takes / batches: the mean batch size)",
          {"rule"})),
      read_cache_reads(admin::default_registry().counter_family(
          "claimguard_read_cache_total",
          "Counter reads of rules with read_cache: hit (answered by the sidecar), miss (nothing kept "
          "yet), refresh (kept but older than the TTL or invalidated), bypass (not cacheable: in a "
          "transaction that touched the key, FOR UPDATE, not plain, observe mode)",
          {"rule", "result"})),
      read_cache_keys(
          admin::default_registry().add_gauge("claimguard_read_cache_keys", "Keys whose counter the read cache holds")),
      read_cache_templates(admin::default_registry().add_gauge("claimguard_read_cache_templates",
                                                               "Reply templates the read cache holds")),
      read_cache_evictions(admin::default_registry().add_counter(
          "claimguard_read_cache_evictions_total", "Keys and templates the read cache dropped at its limits")),
      duration(admin::default_registry().histogram_family(
          "claimguard_claim_duration_seconds",
          "Time from a client command a rule acted on (a take, a claim, a refusal, a cached read) to the end of "
          "its answer, by rule",
          {"rule"}, admin::command_duration_buckets)) {
    auto& r = admin::default_registry();
    auto add = [&](std::string_view name, std::string_view help, std::initializer_list<std::string_view> labels) {
        by_name_.emplace(name, &r.counter_family(name, help, labels));
    };
    // The families the catalogue's rows name (engine/catalogue.cpp), in the order they were documented.
    add("claimguard_rewrites_total", "Writes of a counter applied as conditional takes that took stock", {"rule"});
    add("claimguard_tracked_decrements_total",
        "Guarded decrements and compare-and-sets of the app that took stock (forwarded as written)", {"rule"});
    add("claimguard_exhausted_total", "Takes refused at the floor, answered with the exhausted answer", {"rule"});
    add("claimguard_conflicts_total",
        "Takes that changed no row while stock was left (the app's own condition, e.g. a version): "
        "answered with the server's 0 rows",
        {"rule"});
    add("claimguard_take_differs_total",
        "Absolute writes whose value meant other units than the rule's (read - written); the rule's units were taken",
        {"rule"});
    add("claimguard_restocks_total", "Increments of a counter forwarded to the database", {"rule"});
    add("claimguard_absorbed_give_backs_total",
        "The app's own give-back of units claimguard had already given back, answered without the database", {"rule"});
    add("claimguard_absorbed_recomputes_total",
        "The app's recompute of a counter from its claims (SET c = N - (SELECT COUNT(*) ...)) right after its claim "
        "by INSERT ... SELECT took the unit, answered without the database",
        {"rule"});
    add("claimguard_blocked_claims_total", "Claim inserts answered exhausted without reaching the database", {"rule"});
    add("claimguard_duplicates_total", "Claims refused as already claimed, by the guard that saw it",
        {"rule", "guard"});
    add("claimguard_compensations_total", "Stock units given back after a claim did not happen", {"rule"});
    add("claimguard_compensation_failures_total", "Give-backs that changed no row", {"rule"});
    by_name_.emplace(would.name(), &would);
    by_name_.emplace(unmodeled.name(), &unmodeled);
    add("claimguard_claims_total", "Claim rows inserted through the claim protocol", {"rule"});
    add("claimguard_claims_before_decrement_total",
        "Claim rows inserted with no take behind them yet (in a transaction: its decrement must "
        "follow; in autocommit: not backed by stock, strictness after_refused)",
        {"rule", "in"});
    add("claimguard_rolled_back_commits_total",
        "COMMITs turned into ROLLBACK because the transaction held a claim without stock", {"rule"});
    add("claimguard_deferred_takes_total",
        "Takes in transactions deferred to COMMIT (defer_decrement), by what became of them: "
        "deferred (answered OK, not sent), flushed (sent before a statement on the table), "
        "committed (sent before COMMIT), refused (sold out when sent), failed (an error when "
        "sent), dropped (never sent: rolled back, or the claim gave the unit back)",
        {"rule", "result"});
    add("claimguard_cancellations_total",
        "DELETEs of claim rows that deleted rows (cancellations), by what became of their units: kept (on_cancel: "
        "keep_stock) or returned to the stock row in the DELETE's transaction (return_stock)",
        {"rule", "stock"});
    add("claimguard_trigger_claims_total",
        "claim INSERTs whose stock the claim table's trigger decrements (decremented_by_trigger), by what the "
        "counter read around them said: claimed (the trigger took the rule's units), exhausted (it took nothing or "
        "went below the floor: undone, the exhausted answer), mismatch (another amount: undone, refused)",
        {"rule", "result"});
    add("claimguard_reserve_takes_total",
        "Takes served from the sidecar's reserved block (reserve), by what became of their units: served "
        "(handed to the transaction or the autocommit statement, answered OK), committed (consumed: its "
        "COMMIT, or at once in autocommit), returned (back to the block: rolled back, or the claim gave the "
        "unit back)",
        {"rule", "result"});
    for (const auto& row : engine::catalogue())
        if (!by_name_.contains(row.metric))
            throw std::logic_error("claim_metrics: the catalogue names an unregistered family " +
                                   std::string(row.metric));
}

claim_metrics& claim_metrics::get() {
    static claim_metrics m;
    return m;
}

void claim_metrics::count_read_cache_evictions(std::uint64_t total) {
    // Sessions of every I/O thread look: whoever moves the mark forward counts the difference.
    auto seen = evictions_counted_.load(std::memory_order_relaxed);
    while (total > seen)
        if (evictions_counted_.compare_exchange_weak(seen, total, std::memory_order_relaxed)) {
            read_cache_evictions.inc(total - seen);
            return;
        }
}

admin::family<admin::counter>& claim_metrics::admission_family(admission_count what) const {
    switch (what) {
        case admission_count::waits: return admission_waits;
        case admission_count::timeouts: return admission_timeouts;
        case admission_count::queue_full: return admission_queue_full;
        case admission_count::sold_out: return admission_sold_out;
        case admission_count::lock_held: break;
    }
    return admission_lock_held;
}

admin::family<admin::counter>& claim_metrics::family(std::string_view name) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) throw std::logic_error("claim_metrics: no family " + std::string(name));
    return *it->second;
}

rule_counters::rule_counters(std::string_view rule, bool observe, bool has_admission, bool has_read_cache) {
    auto& m = claim_metrics::get();
    for (const auto& row : engine::catalogue()) {
        if (row.labels[0] == engine::from_decision || row.labels[1] == engine::from_decision) continue;
        if (row.what == engine::event::would_block && !observe) continue;
        by_event[index_of(row.what)] = &child(m.family(row.metric), rule, row.labels[0], row.labels[1]);
    }
    if (observe)
        for (auto e : engine::observable_events()) would[index_of(e)] = &m.would.with(rule, engine::action_of(e));
    if (has_admission)
        for (std::size_t i = 0; i < admission.size(); ++i)
            admission[i] = &m.admission_family(static_cast<admission_count>(i)).with(rule);
    if (has_read_cache)
        for (std::size_t i = 0; i < read_results.size(); ++i)
            reads[i] = &m.read_cache_reads.with(rule, read_results[i]);
    duration = &m.duration.with(rule);
}

claim_counter_table::claim_counter_table(const engine::rules_snapshot& snapshot) {
    const auto& rules = snapshot.rules;
    for (const auto& s : rules.stocks)
        by_rule_.try_emplace(s.name, s.name, rules.effective_mode(s) == rules::mode::observe, s.admission.has_value(),
                             s.read_cache.has_value());
    for (const auto& c : rules.claims)
        by_rule_.try_emplace(c.name, c.name, rules.effective_mode(c) == rules::mode::observe, false, false);
}

const rule_counters* claim_counter_table::find(std::string_view rule) const {
    auto it = by_rule_.find(rule);
    return it == by_rule_.end() ? nullptr : &it->second;
}

claim_counter_tables& claim_counter_tables::get() {
    static claim_counter_tables t;
    return t;
}

std::shared_ptr<const claim_counter_table> claim_counter_tables::add_locked(
    const std::shared_ptr<const engine::rules_snapshot>& snapshot) {
    std::erase_if(tables_, [](const auto& t) { return t.first.expired(); });
    for (const auto& [s, table] : tables_)
        if (s.lock() == snapshot) return table;
    auto table = std::make_shared<const claim_counter_table>(*snapshot);
    tables_.emplace_back(snapshot, table);
    return table;
}

void claim_counter_tables::install(const std::shared_ptr<const engine::rules_snapshot>& snapshot) {
    if (!snapshot) return;
    const std::lock_guard lock(mutex_);
    (void)add_locked(snapshot);
}

std::shared_ptr<const claim_counter_table> claim_counter_tables::of(
    const std::shared_ptr<const engine::rules_snapshot>& snapshot) {
    if (!snapshot) return nullptr;
    const std::lock_guard lock(mutex_);
    return add_locked(snapshot);
}

void session_counters::follow(const std::shared_ptr<const engine::rules_snapshot>& snapshot) {
    if (!snapshot || (!seen_.owner_before(snapshot) && !snapshot.owner_before(seen_))) return;
    table_ = claim_counter_tables::get().of(snapshot);
    seen_ = snapshot;
}

const rule_counters& session_counters::of(std::string_view rule) {
    const rule_counters* found = nullptr;
    if (table_) found = table_->find(rule);
    if (found == nullptr) {
        if (auto it = fallback_.find(rule); it != fallback_.end()) {
            found = &it->second;
        } else {
            if (fallback_.size() >= max_memo) fallback_.clear();
            found = &fallback_.try_emplace(std::string(rule), rule, false, false, false).first->second;
        }
    }
    touched_ = found->duration;
    return *found;
}

void session_counters::command_ended(double seconds) {
    if (touched_ == nullptr) return;
    touched_->observe(seconds);
    touched_ = nullptr;
}

admin::counter& session_counters::read(const std::shared_ptr<const engine::rules_snapshot>& snapshot,
                                       std::string_view rule, read_result what) {
    follow(snapshot);
    const auto i = static_cast<std::size_t>(what);
    if (auto* c = of(rule).reads[i]) return *c;
    return dynamic(claim_metrics::get().read_cache_reads, rule, read_results[i]);
}

admin::counter& session_counters::admission(const std::shared_ptr<const engine::rules_snapshot>& snapshot,
                                            std::string_view rule, admission_count what) {
    follow(snapshot);
    if (auto* c = of(rule).admission[static_cast<std::size_t>(what)]) return *c;
    return dynamic(claim_metrics::get().admission_family(what), rule, {});
}

admin::counter& session_counters::dynamic(admin::family<admin::counter>& family, std::string_view rule,
                                          std::string_view a, std::string_view b) {
    for (const auto& m : memo_)
        if (m.family == &family && m.rule == rule && m.a == a && m.b == b) return *m.child;
    if (memo_.size() >= max_memo) memo_.clear();
    auto& c = child(family, rule, a, b);
    memo_.push_back({&family, std::string(rule), std::string(a), std::string(b), &c});
    return c;
}

}  // namespace claimguard::session
