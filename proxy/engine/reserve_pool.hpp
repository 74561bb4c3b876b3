// Reserved stock (stock rule `reserve:`): the units of each key this sidecar took from the stock row
// in blocks, on a connection of its own outside any app transaction, handed one take at a time to
// app transactions, whose take then holds no row lock. Pure bookkeeping shared by the I/O threads
// and the reserve connection's thread (one mutex, no I/O): the refills and give-backs it plans are
// sent by the session layer (reserve_link), which reports back here.
//
// Where a unit is: in the row; in this pool (taken from the row, not handed out); handed to an open
// app transaction (taken from the pool); consumed (that transaction committed, or its COMMIT's outcome
// is unknown: counted consumed, a leak at worst, never an over-issue). A unit goes back to the pool
// when its transaction does not commit, and from the pool to the row when idle, at shutdown, and
// when a reload drops or changes the rule.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

// What the reserve connection needs to reach a key's row, self-contained (the rules may be
// reloaded meanwhile): the rule as it was, the key as literals, the session's database.
struct reserve_target {
    rules::stock_rule rule;
    std::vector<rules::match::key_literal> key;
    std::string database;  // for a rule table without a schema
};

// Units going back to the row: UPDATE t SET c = c + units WHERE <key> (sent once, never retried: a
// give-back whose outcome is unknown is a leak, not a second give-back).
struct reserve_give_back {
    reserve_target target;
    key_tuple key;
    std::int64_t units = 0;
};

// A refill to send: SELECT c ... FOR UPDATE, then the take of refill_size() units, then COMMIT.
struct reserve_refill {
    reserve_target target;
    key_tuple key;
    std::int64_t units = 0;  // the take that asked: the refill takes at least this many, or none
    // The most it may take: the rule's block less the units this sidecar holds of the key (in the
    // pool or handed to open transactions), so a sidecar never holds more than one block of a key.
    std::int64_t room = 0;
};

// Whether a reloaded rule `now` keeps the units the pool took under `then`: the same row reached the same
// way and reserved alike (else they go back to the row: the reload dropped or changed the rule).
[[nodiscard]] bool reserve_unchanged(const rules::stock_rule& then, const rules::stock_rule& now);

class reserve_pool {
public:
    using clock = std::chrono::steady_clock;
    // How long "the row has no units and the pool none" answers takes sold out without asking the
    // database again (a restock is seen after it), as the admission queue's sold-out state.
    static constexpr std::chrono::milliseconds sold_out_hold{100};
    // Near sell-out a refill takes at most this fraction of what is left (1 / shrink_divisor), so
    // that no sidecar sits on the last units while others answer sold out.
    static constexpr std::int64_t shrink_divisor = 8;
    // After a refill failed (the connection is down, a lock wait timed out), the key's takes go to the
    // row for this long before a refill is tried again: a take never waits for a connection that fails.
    static constexpr std::chrono::milliseconds failure_backoff{1000};

    // How many units a refill takes when `left` units are above the floor: `block`, fewer near
    // sell-out (left / shrink_divisor), at least `units` (one take) when that many are left, a whole
    // number of takes; 0 when fewer than `units` are left.
    [[nodiscard]] static std::int64_t refill_size(std::int64_t block, std::int64_t units, std::int64_t left);

    enum class serve { served, empty, sold_out };
    // A take of `units` in an app transaction: served from the pool (the units are the transaction's
    // now), empty (a refill must come first), or sold out (the row had none at the last refill).
    serve take(const std::string& rule, const key_tuple& key, std::int64_t units, clock::time_point now);
    // Units handed out whose transaction did not commit: back to the pool.
    void give_back(const std::string& rule, const key_tuple& key, std::int64_t units, clock::time_point now);
    // Units handed out whose transaction committed (or whose COMMIT's outcome is unknown).
    void consumed(const std::string& rule, const key_tuple& key, std::int64_t units);

    // A refill for a take of `units` that found the pool empty; nullopt: the pool can serve it now,
    // the key is sold out, a refill of the key is already on its way (wait for it), or this sidecar
    // holds a whole block of the key already (handed to open transactions: the take goes to the row).
    std::optional<reserve_refill> begin_refill(reserve_target target, const key_tuple& key, std::int64_t units,
                                               clock::time_point now);
    // The refill's outcome: `taken` units now in the pool (0: the row had fewer than one take left,
    // or the refill failed: `failed` then, and the key is not marked sold out).
    void end_refill(const std::string& rule, const key_tuple& key, std::int64_t taken, bool failed,
                    clock::time_point now);
    // A refill of the key is on its way.
    [[nodiscard]] bool refilling(const std::string& rule, const key_tuple& key) const;

    // A read through this sidecar found the row with less than one take above the floor while this
    // sidecar still holds units of the key in its pool: they are the sale's last ones, and an app that
    // answers "sold out" itself on such a read (the incident's SELECT, then "if remain > 0") would
    // leave them unsold until `idle`. They go back to the row with the next take_idle().
    void row_seen_empty(const std::string& rule, const key_tuple& key);
    // A give-back the server answered with an error (nothing applied, e.g. a lock wait timeout): its
    // units are in this pool again, to go back with a later one. Only a give-back whose outcome is
    // unknown (the connection lost) leaks.
    void give_back_refused(const reserve_give_back& g, clock::time_point now);

    // The pool's units of keys without a take for their rule's `idle`, or seen to be the last ones
    // (row_seen_empty): they go back to the row.
    [[nodiscard]] std::vector<reserve_give_back> take_idle(clock::time_point now);
    // Every unit of the pool (shutdown), or of the rules `keep` does not keep (a reload).
    template <class Keep>
    [[nodiscard]] std::vector<reserve_give_back> take_unless(Keep keep) {
        std::lock_guard lock(mutex_);
        std::vector<reserve_give_back> out;
        for (auto& [k, e] : entries_)
            if (e.units > 0 && !keep(e.target.rule)) out.push_back(release(k, e));
        return out;
    }
    [[nodiscard]] std::vector<reserve_give_back> take_all() {
        return take_unless([](const rules::stock_rule&) { return false; });
    }

    // For metrics and tests.
    struct totals {
        std::int64_t pooled = 0;          // units in the pool (taken from the row, not handed out)
        std::int64_t handed = 0;          // units handed to open transactions
        std::uint64_t refills = 0;        // refills that took units
        std::uint64_t empty_refills = 0;  // refills that found fewer than one take left
        std::uint64_t served = 0;         // takes served from the pool
        std::uint64_t returned = 0;       // units back to the pool from transactions that did not commit
        std::uint64_t given_back = 0;     // units back to the row (idle, shutdown, reload)
    };
    [[nodiscard]] totals stats() const;
    [[nodiscard]] std::int64_t pooled(const std::string& rule, const key_tuple& key) const;

private:
    struct entry {
        reserve_target target;
        std::int64_t units = 0;   // in the pool
        std::int64_t handed = 0;  // handed to open transactions
        clock::time_point last_used{};
        clock::time_point sold_out_until{};
        clock::time_point failed_until{};
        bool refilling = false;
        bool release_due = false;  // row_seen_empty: the units go back with the next take_idle()
    };
    using key_type = std::pair<std::string, key_tuple>;
    reserve_give_back release(const key_type& k, entry& e);

    mutable std::mutex mutex_;
    std::map<key_type, entry> entries_;
    totals totals_;
};

// What a read of a reserve rule's counter found (the value the app gets): a row with less than one
// take above the floor while this sidecar holds units of the key releases them (row_seen_empty).
inline void reserve_read_seen(reserve_pool* pool, const rules::stock_rule& rule, const key_tuple& key,
                              std::int64_t value) {
    if (pool != nullptr && rule.reserve && value - rule.floor < rule.units) pool->row_seen_empty(rule.name, key);
}

}  // namespace claimguard::engine
