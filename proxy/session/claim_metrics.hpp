// The claim engine's per-rule metrics (claimguard_*_total{rule=...}): the families, registered in
// one place, and one rule's counters resolved once per session and rule, so that counting an event
// takes neither the family's mutex nor an allocation for its label key.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "proxy/admin/metrics.hpp"

namespace claimguard::session {

struct claim_metrics {
    admin::family<admin::counter>& rewrites;
    admin::family<admin::counter>& tracked;
    admin::family<admin::counter>& exhausted;
    admin::family<admin::counter>& conflicts;
    admin::family<admin::counter>& take_differs;
    admin::family<admin::counter>& restocks;
    admin::family<admin::counter>& absorbed;
    admin::family<admin::counter>& blocked;
    admin::family<admin::counter>& duplicates;
    admin::family<admin::counter>& compensations;
    admin::family<admin::counter>& compensation_failures;
    admin::family<admin::counter>& would;
    admin::family<admin::counter>& unmodeled;
    admin::family<admin::counter>& claims;
    admin::family<admin::counter>& unbacked;
    admin::family<admin::counter>& rolled_back;
    admin::family<admin::counter>& deferred;

    static claim_metrics& get() {
        auto& r = admin::default_registry();
        static claim_metrics m{
            r.counter_family("claimguard_rewrites_total", "Writes of a counter applied as conditional takes that took stock",
                             {"rule"}),
            r.counter_family("claimguard_tracked_decrements_total",
                             "Guarded decrements and compare-and-sets of the app that took stock (forwarded as written)",
                             {"rule"}),
            r.counter_family("claimguard_exhausted_total", "Takes refused at the floor, answered with the exhausted answer",
                             {"rule"}),
            r.counter_family("claimguard_conflicts_total",
                             "Takes that changed no row while stock was left (the app's own condition, e.g. a version): "
                             "answered with the server's 0 rows",
                             {"rule"}),
            r.counter_family("claimguard_take_differs_total",
                             "Absolute writes whose value meant other units than the rule's (read - written); the rule's units were taken",
                             {"rule"}),
            r.counter_family("claimguard_restocks_total", "Increments of a counter forwarded to the database", {"rule"}),
            r.counter_family("claimguard_absorbed_give_backs_total",
                             "The app's own give-back of units claimguard had already given back, answered without the database",
                             {"rule"}),
            r.counter_family("claimguard_blocked_claims_total",
                             "Claim inserts answered exhausted without reaching the database", {"rule"}),
            r.counter_family("claimguard_duplicates_total", "Claims refused as already claimed, by the guard that saw it",
                             {"rule", "guard"}),
            r.counter_family("claimguard_compensations_total", "Stock units given back after a claim did not happen",
                             {"rule"}),
            r.counter_family("claimguard_compensation_failures_total", "Give-backs that changed no row", {"rule"}),
            r.counter_family("claimguard_would_rewrite_total", "Observe mode: what enforce mode would have done",
                             {"rule", "action"}),
            r.counter_family("claimguard_unmodeled_total",
                             "Statements on protected tables in a shape claimguard does not model, by reason and policy",
                             {"rule", "reason", "policy"}),
            r.counter_family("claimguard_claims_total", "Claim rows inserted through the claim protocol", {"rule"}),
            r.counter_family("claimguard_claims_before_decrement_total",
                             "Claim rows inserted with no take behind them yet (in a transaction: its decrement must "
                             "follow; in autocommit: not backed by stock, strictness after_refused)",
                             {"rule", "in"}),
            r.counter_family("claimguard_rolled_back_commits_total",
                             "COMMITs turned into ROLLBACK because the transaction held a claim without stock", {"rule"}),
            r.counter_family("claimguard_deferred_takes_total",
                             "Takes in transactions deferred to COMMIT (defer_decrement), by what became of them: "
                             "deferred (answered OK, not sent), flushed (sent before a statement on the table), "
                             "committed (sent before COMMIT), refused (sold out when sent), failed (an error when "
                             "sent), dropped (never sent: rolled back, or the claim gave the unit back)",
                             {"rule", "result"}),
        };
        return m;
    }
};


// What became of a deferred take (claimguard_deferred_takes_total's result label), in order.
inline constexpr std::array<std::string_view, 6> deferred_results{"deferred", "flushed", "committed",
                                                                  "refused",  "failed",  "dropped"};

// One rule's children of the families above with fixed labels.
struct rule_counters {
    admin::counter* rewrites;
    admin::counter* tracked;
    admin::counter* exhausted;
    admin::counter* conflicts;
    admin::counter* not_lower;  // claimguard_unmodeled_total{reason="absolute_not_lower",policy="refuse"}
    admin::counter* take_differs;
    admin::counter* restocks;
    admin::counter* absorbed;
    admin::counter* blocked;
    admin::counter* claims;
    admin::counter* claims_ahead;     // {in="transaction"}
    admin::counter* claims_unbacked;  // {in="autocommit"}
    admin::counter* duplicates_redis;
    admin::counter* duplicates_db;
    admin::counter* compensations;
    admin::counter* compensation_failures;
    admin::counter* rolled_back;
    std::array<admin::counter*, deferred_results.size()> deferred;

    explicit rule_counters(std::string_view rule) {
        auto& m = claim_metrics::get();
        rewrites = &m.rewrites.with(rule);
        tracked = &m.tracked.with(rule);
        exhausted = &m.exhausted.with(rule);
        conflicts = &m.conflicts.with(rule);
        not_lower = &m.unmodeled.with(rule, "absolute_not_lower", "refuse");
        take_differs = &m.take_differs.with(rule);
        restocks = &m.restocks.with(rule);
        absorbed = &m.absorbed.with(rule);
        blocked = &m.blocked.with(rule);
        claims = &m.claims.with(rule);
        claims_ahead = &m.unbacked.with(rule, "transaction");
        claims_unbacked = &m.unbacked.with(rule, "autocommit");
        duplicates_redis = &m.duplicates.with(rule, "redis");
        duplicates_db = &m.duplicates.with(rule, "db");
        compensations = &m.compensations.with(rule);
        compensation_failures = &m.compensation_failures.with(rule);
        rolled_back = &m.rolled_back.with(rule);
        for (std::size_t i = 0; i < deferred_results.size(); ++i) deferred[i] = &m.deferred.with(rule, deferred_results[i]);
    }
};

// A session's counters by rule name, each rule resolved on its first event. Bounded: rules files
// name few rules, but reloads may rename them.
class rule_counter_cache {
public:
    static constexpr std::size_t max_rules = 256;
    rule_counters& of(std::string_view rule) {
        if (auto it = by_rule_.find(rule); it != by_rule_.end()) return it->second;
        if (by_rule_.size() >= max_rules) by_rule_.clear();
        return by_rule_.emplace(std::string(rule), rule_counters(rule)).first->second;
    }

private:
    std::map<std::string, rule_counters, std::less<>> by_rule_;
};

}  // namespace claimguard::session
