// The claim engine's metrics: every family of the claim engine (the catalogue's events, admission,
// the read cache) registered in one place (claim_metrics.cpp), and each rule's children resolved
// once per rules snapshot (a table built when the snapshot is installed), so that counting an
// event takes neither a family's mutex nor an allocation for its label key.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proxy/admin/metrics.hpp"
#include "proxy/engine/catalogue.hpp"
#include "proxy/engine/rules_snapshot.hpp"

namespace claimguard::session {

// claimguard_read_cache_total's result label.
enum class read_result : std::uint8_t { hit, miss, refresh, bypass };
inline constexpr std::array<std::string_view, 4> read_results{"hit", "miss", "refresh", "bypass"};
// The admission queue's counters (claimguard_admission_*_total).
enum class admission_count : std::uint8_t { waits, timeouts, queue_full, sold_out, lock_held };

class claim_metrics {
public:
    static claim_metrics& get();

    // The counter family a catalogue row names (engine::event_row::metric).
    [[nodiscard]] admin::family<admin::counter>& family(std::string_view name) const;
    [[nodiscard]] admin::family<admin::counter>& admission_family(admission_count what) const;

    admin::family<admin::counter>& would;      // claimguard_would_rewrite_total{rule,action}
    admin::family<admin::counter>& unmodeled;  // claimguard_unmodeled_total{rule,reason,policy}
    admin::family<admin::counter>& trusted_writes;  // claimguard_trusted_writes_total{rule}
    // The per-key admission queue (admission.cpp).
    admin::family<admin::counter>& admission_waits;
    admin::family<admin::counter>& admission_timeouts;
    admin::family<admin::counter>& admission_queue_full;
    admin::family<admin::counter>& admission_sold_out;
    admin::family<admin::counter>& admission_lock_held;
    admin::gauge& admission_queued;
    // group_update: the batches this sidecar sent, and the takes in them (the leaders' included).
    admin::family<admin::counter>& group_update_batches;
    admin::family<admin::counter>& group_update_takes;
    // The read cache (cached_reads.cpp).
    admin::family<admin::counter>& read_cache_reads;  // {rule,result}
    admin::gauge& read_cache_keys;
    admin::gauge& read_cache_templates;
    admin::counter& read_cache_evictions;  // claimguard_read_cache_evictions_total
    // claimguard_claim_duration_seconds{rule}: commands a rule acted on, from the command to the end of its answer.
    admin::family<admin::histogram>& duration;

    // The read cache's evictions() is cumulative: counts what it dropped since the last look.
    void count_read_cache_evictions(std::uint64_t total);

private:
    claim_metrics();
    std::map<std::string_view, admin::family<admin::counter>*> by_name_;
    std::atomic<std::uint64_t> evictions_counted_{0};
};

// One rule's children with fixed labels.
struct rule_counters {
    // `observe`: the rule is in observe mode (its would{action} children); `has_admission`,
    // `has_read_cache`: the stock rule has them (their children). What is not resolved here a
    // session resolves once (session_counters::dynamic).
    explicit rule_counters(std::string_view rule, bool observe, bool has_admission, bool has_read_cache);

    // Each event's counter (null: a label of it comes from the decision: unmodeled's reason, would's action).
    std::array<admin::counter*, engine::event_count> by_event{};
    [[nodiscard]] admin::counter* of(engine::event e) const { return by_event[static_cast<std::size_t>(e)]; }
    // Observe mode: claimguard_would_rewrite_total{action = the word of the enforce event}, by that event.
    std::array<admin::counter*, engine::event_count> would{};
    std::array<admin::counter*, 5> admission{};  // by admission_count
    std::array<admin::counter*, read_results.size()> reads{};
    admin::histogram* duration = nullptr;  // claimguard_claim_duration_seconds{rule}
};

// The children of a snapshot's rules (stock and claim rules, by name).
class claim_counter_table {
public:
    explicit claim_counter_table(const engine::rules_snapshot& snapshot);
    [[nodiscard]] const rule_counters* find(std::string_view rule) const;

private:
    std::map<std::string, rule_counters, std::less<>> by_rule_;
};

// The tables of the snapshots in use, process-wide like the metrics registry. install() builds one
// before the snapshot is published (rules_reloader, schema_watch); of() takes a mutex, so sessions
// ask only when their snapshot changed, and build one for a snapshot nobody installed (tests).
class claim_counter_tables {
public:
    static claim_counter_tables& get();
    void install(const std::shared_ptr<const engine::rules_snapshot>& snapshot);
    [[nodiscard]] std::shared_ptr<const claim_counter_table> of(
        const std::shared_ptr<const engine::rules_snapshot>& snapshot);

private:
    std::shared_ptr<const claim_counter_table> add_locked(
        const std::shared_ptr<const engine::rules_snapshot>& snapshot);
    std::mutex mutex_;
    std::vector<std::pair<std::weak_ptr<const engine::rules_snapshot>, std::shared_ptr<const claim_counter_table>>>
        tables_;
};

// A session's way to its counters: the table of its current snapshot (one pointer compare per
// look while the rules are unchanged); rules the table does not name (a take deferred before a
// reload renamed its rule) and the children whose labels the decision gives (unmodeled's reason)
// resolved once per session in a small bounded memo.
class session_counters {
public:
    // The snapshot the next look-ups are in (null: keep the last one).
    void follow(const std::shared_ptr<const engine::rules_snapshot>& snapshot);
    [[nodiscard]] const rule_counters& of(std::string_view rule);
    // One counter of `rule` in `snapshot` (the command's; null: the last one followed).
    [[nodiscard]] admin::counter& read(const std::shared_ptr<const engine::rules_snapshot>& snapshot,
                                       std::string_view rule, read_result what);
    [[nodiscard]] admin::counter& admission(const std::shared_ptr<const engine::rules_snapshot>& snapshot,
                                            std::string_view rule, admission_count what);
    // A child of `family` for (rule, values...) not in the table.
    [[nodiscard]] admin::counter& dynamic(admin::family<admin::counter>& family, std::string_view rule,
                                          std::string_view a, std::string_view b = {});
    // The command ended after `seconds`: observed in claimguard_claim_duration_seconds of the
    // last rule of() was asked for since the previous call (none: a command no rule acted on).
    void command_ended(double seconds);

private:
    // The histogram child of the last rule of() returned during this command (children never move).
    admin::histogram* touched_ = nullptr;
    static constexpr std::size_t max_memo = 256;
    std::weak_ptr<const engine::rules_snapshot> seen_;  // the snapshot table_ is of (no ABA: a weak_ptr keeps its identity)
    std::shared_ptr<const claim_counter_table> table_;
    std::map<std::string, rule_counters, std::less<>> fallback_;
    struct memo {
        const admin::family<admin::counter>* family;
        std::string rule, a, b;
        admin::counter* child;
    };
    std::vector<memo> memo_;
};

}  // namespace claimguard::session
