// The sidecar's ledger of committed takes: units that decrements took from a stock row and that
// no claim row has used yet, whichever of the app's connections sent them. A pool that lends
// one connection for the decrement and another for the claim INSERT still gets its unit back
// when the claim turns out a duplicate, and a claim with no take behind it is seen as such.
// Thread-safe (the sidecar's I/O threads share one); pure bookkeeping, no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "memory.hpp"

namespace claimguard::engine {

class take_ledger {
public:
    using clock = std::chrono::steady_clock;

    // Named limits: keys tracked, takes kept per key, and how long an unused take or credit
    // stays (a take older than this was left by an app that never inserted its claim: it is
    // dropped and counted, the unit stays taken, as it would directly).
    static constexpr std::size_t max_keys = 65536;
    static constexpr std::size_t max_takes_per_key = 4096;
    static constexpr std::chrono::seconds take_lifetime{60};
    static constexpr std::chrono::seconds credit_lifetime{10};

    struct take {
        std::int64_t units = 0;
        std::uint64_t session = 0;  // the session whose decrement took it
        clock::time_point at;
    };

    // A decrement committed (autocommit, or its transaction committed): `units` were taken.
    void add_take(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                  clock::time_point now = clock::now());
    // The take a claim uses: this session's oldest first (exact pairing for one connection),
    // else the oldest of any session. Empty: no committed take is waiting for a claim.
    std::optional<std::int64_t> pop_take(const std::string& rule, const key_tuple& key, std::uint64_t session,
                                         clock::time_point now = clock::now());
    // A take borrowed by a transaction that rolled back goes back.
    void return_take(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                     clock::time_point now = clock::now());

    // The sidecar gave `units` back for a claim that did not happen. An app that gives them
    // back itself right after (remain = remain + units) is absorbed once, not applied twice; so is
    // one restock of the sum of several credits (remain = remain + N after an N-row cancellation).
    void add_credit(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                    clock::time_point now = clock::now());
    [[nodiscard]] bool use_credit(const std::string& rule, const key_tuple& key, std::int64_t units,
                                  std::uint64_t session, clock::time_point now = clock::now());

    // Takes dropped unused (expired or over the per-key limit), for a metric.
    [[nodiscard]] std::uint64_t dropped_takes() const;

    // A take no claim used: its units stay taken (a leak, unless the app meant to decrement
    // without a claim). Kept for sweep() to report (at most max_reported between two sweeps).
    struct unclaimed_take {
        std::string rule;
        key_tuple key;
        std::int64_t units = 0;
        std::uint64_t session = 0;
        std::chrono::seconds age{0};
    };
    static constexpr std::size_t max_reported = 4096;
    // Expires every key (a take is otherwise looked at only when its key is touched again) and
    // returns the takes dropped since the last call, oldest first.
    [[nodiscard]] std::vector<unclaimed_take> sweep(clock::time_point now = clock::now());
    // Units taken and not yet used by a claim, per stock rule.
    [[nodiscard]] std::map<std::string, std::int64_t> waiting_units() const;
    [[nodiscard]] std::size_t waiting_takes(const std::string& rule, const key_tuple& key) const;

private:
    struct slot {
        std::deque<take> takes;
        std::deque<take> credits;
    };
    slot* find_or_add(const std::string& rule, const key_tuple& key);
    void expire(const std::pair<std::string, key_tuple>& k, slot& s, clock::time_point now);
    void drop(const std::pair<std::string, key_tuple>& k, const take& t, clock::time_point now);

    mutable std::mutex mutex_;
    std::map<std::pair<std::string, key_tuple>, slot> slots_;
    std::uint64_t dropped_ = 0;
    std::vector<unclaimed_take> unreported_;
};

}  // namespace claimguard::engine
