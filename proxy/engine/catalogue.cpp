// The catalogue's one table. The enforce words are a documented contract (docs/OPERATIONS.md, the
// helm alerts, the tests): change them only with those.
#include "catalogue.hpp"

namespace claimguard::engine {

namespace {

constexpr std::string_view unmodeled_total = "claimguard_unmodeled_total";
constexpr std::string_view deferred_total = "claimguard_deferred_takes_total";
constexpr std::string_view trigger_total = "claimguard_trigger_claims_total";
constexpr std::string_view reserve_total = "claimguard_reserve_takes_total";

constexpr std::array<event_row, event_count> rows{{
    {event::took, "rewritten", true, "claimguard_rewrites_total", {}},
    {event::tracked, "tracked", true, "claimguard_tracked_decrements_total", {}},
    {event::exhausted, "exhausted", true, "claimguard_exhausted_total", {}},
    {event::conflict, "conflict", true, "claimguard_conflicts_total", {}},
    {event::not_lower, "refused-not-lower", true, unmodeled_total, {"absolute_not_lower", "refuse"}},
    {event::app_meant_other, "take-differs-from-write", true, "claimguard_take_differs_total", {}},
    {event::restocked, "restock", true, "claimguard_restocks_total", {}},
    {event::absorbed, "absorbed-give-back", true, "claimguard_absorbed_give_backs_total", {}},
    {event::blocked, "blocked", true, "claimguard_blocked_claims_total", {}},
    // A claim row is audited by its outcome (duplicate, compensated, ...), not as it goes in.
    {event::claim_inserted, "claimed", false, "claimguard_claims_total", {}},
    {event::claim_ahead, "claim-ahead", false, "claimguard_claims_before_decrement_total", {"transaction"}},
    {event::claim_unbacked, "claim-before-decrement", true, "claimguard_claims_before_decrement_total", {"autocommit"}},
    {event::duplicate_redis, "duplicate-redis", true, "claimguard_duplicates_total", {"redis"}},
    {event::duplicate_db, "duplicate-db", true, "claimguard_duplicates_total", {"db"}},
    {event::compensated, "compensated", true, "claimguard_compensations_total", {}},
    {event::compensation_failed, "compensation-failed", true, "claimguard_compensation_failures_total", {}},
    {event::rolled_back, "rolled-back", true, "claimguard_rolled_back_commits_total", {}},
    {event::unmodeled_refused, "refused-unmodeled", true, unmodeled_total, {from_decision, "refuse"}},
    {event::unmodeled_forwarded, "forwarded-unmodeled", true, unmodeled_total, {from_decision, "forward"}},
    // Observe mode: audited as observe_action(enforce_event(d)), counted with that word as action.
    {event::would, "would", true, "claimguard_would_rewrite_total", {from_decision}},
    {event::would_block, "would-blocked", true, "claimguard_would_rewrite_total", {"blocked"}},
    {event::deferred, "deferred", true, deferred_total, {"deferred"}},
    {event::deferred_flushed, "deferred-flushed", true, deferred_total, {"flushed"}, true},
    {event::deferred_committed, "deferred-committed", true, deferred_total, {"committed"}, true},
    {event::deferred_refused, "deferred-refused", true, deferred_total, {"refused"}, true},
    {event::deferred_failed, "deferred-failed", true, deferred_total, {"failed"}, true},
    {event::deferred_dropped, "deferred-dropped", true, deferred_total, {"dropped"}, true},
    {event::cancelled_kept, "cancelled", true, "claimguard_cancellations_total", {"kept"}},
    {event::cancelled_returned, "cancelled-returned", true, "claimguard_cancellations_total", {"returned"}},
    {event::claimed_by_trigger, "claimed-by-trigger", true, trigger_total, {"claimed"}},
    {event::trigger_exhausted, "trigger-exhausted", true, trigger_total, {"exhausted"}},
    {event::trigger_mismatch, "trigger-mismatch", true, trigger_total, {"mismatch"}},
    {event::reserve_served, "reserve-served", true, reserve_total, {"served"}, true},
    {event::reserve_committed, "reserve-committed", true, reserve_total, {"committed"}, true},
    {event::reserve_returned, "reserve-returned", true, reserve_total, {"returned"}, true},
    {event::absorbed_recompute, "absorbed-recompute", true, "claimguard_absorbed_recomputes_total", {}},
}};

constexpr bool in_enum_order() {
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (static_cast<std::size_t>(rows[i].what) != i) return false;
    return true;
}
static_assert(in_enum_order(), "one catalogue row per engine::event, in the enum's order");

constexpr std::array<admission_row, admission_note_count> admission_rows{{
    // Counted only: let through at once, or answered sold out (the take's own events audit it).
    {admission_note::kind::lock_held, "admission-lock-held", false},
    {admission_note::kind::sold_out, "admission-sold-out", false},
    // Answered ERR 1205 by the queue: audited (docs/OPERATIONS.md, RULES.md).
    {admission_note::kind::timed_out, "admission-timeout", true},
    {admission_note::kind::queue_full, "admission-queue-full", true},
    // group_update: a take decided in a batch (audited with the batch's size and connection).
    {admission_note::kind::grouped, "admission-grouped", true},
}};

constexpr bool admission_in_enum_order() {
    for (std::size_t i = 0; i < admission_rows.size(); ++i)
        if (static_cast<std::size_t>(admission_rows[i].what) != i) return false;
    return true;
}
static_assert(admission_in_enum_order(), "one admission row per admission_note::kind, in the enum's order");

constexpr std::array<event, 10> observable{event::took,          event::tracked,           event::exhausted,
                                           event::restocked,     event::blocked,           event::claim_inserted,
                                           event::rolled_back,   event::unmodeled_refused, event::unmodeled_forwarded,
                                           event::cancelled_kept};

}  // namespace

const std::array<event_row, event_count>& catalogue() { return rows; }

const std::array<admission_row, admission_note_count>& admission_catalogue() { return admission_rows; }

const std::array<event, 10>& observable_events() { return observable; }

event enforce_event(verdict what, bool blocked) {
    if (blocked) return event::blocked;
    switch (what) {
        case verdict::take: return event::took;
        case verdict::track_decrement: return event::tracked;
        case verdict::restock: return event::restocked;
        case verdict::exhausted: return event::exhausted;
        case verdict::claim: return event::claim_inserted;
        case verdict::rollback_instead: return event::rolled_back;
        case verdict::refuse: return event::unmodeled_refused;  // unmodeled or ambiguous: refused either way
        case verdict::cancel: return event::cancelled_kept;     // "would-cancelled", whatever on_cancel says
        case verdict::forward:
        case verdict::remember_read: break;  // never observed (decide() does not mark them)
    }
    return event::unmodeled_forwarded;
}

}  // namespace claimguard::engine
