// The sidecar's per-key admission gate (stock rule `admission:`): at most max_in_flight decrements
// of one (rule, key) in flight, the rest in a FIFO with a deadline; a key a take found sold out
// answers its queue at once. Pure bookkeeping shared by the I/O threads (one mutex, no Asio): a
// waiter is woken through the callback it registered, called outside the lock; the session does
// the waiting (a timer on its own executor) and asks resolve() what became of its ticket.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

enum class admission {
    admitted,    // the ticket holds a slot: go to the database, release() afterwards
    queued,      // wait for the wake callback (or the deadline), then resolve()
    sold_out,    // a take of this key found the floor: answer sold out, nothing reaches the database
    timed_out,   // waited past queue_timeout: answer ERR 1205
    queue_full,  // max_queue statements already wait: answer ERR 1205 at once
    bypass,      // the gate tracks max_keys keys already: go without a slot (nothing to release)
    // group_update: a leader took the queued ticket into its batch (no slot: nothing to release)
    grouped,           // the batch is on its way: keep waiting for the wake callback
    grouped_taken,     // the batch committed this take: answer the take's OK
    grouped_sold_out,  // the batch found the floor for this take: answer sold out
    grouped_failed,    // the batch's UPDATE failed (error_code): nothing was taken
};

// What became of a take in a leader's batch (group_update), for the member's answer and audit.
struct group_result {
    admission what = admission::grouped;
    std::uint16_t error_code = 0;     // grouped_failed: the database's error
    std::uint32_t batch = 0;          // takes in the batch, the leader's included
    std::uint32_t leader_thread = 0;  // the leader's backend connection (its thread id), for the audit
};

[[nodiscard]] std::string_view admission_name(admission a);

class admission_gate {
public:
    using clock = std::chrono::steady_clock;
    using ticket = std::uint64_t;
    using wake_fn = std::function<void()>;

    // Named limits: keys tracked at once (idle keys are forgotten), and how long a sold-out key
    // answers without the database before one round goes there again (a restock must be seen).
    static constexpr std::size_t max_keys = 65536;
    static constexpr std::chrono::milliseconds sold_out_recheck{100};

    struct entry_result {
        admission what = admission::bypass;
        ticket id = 0;  // admitted, queued: the ticket to resolve / release / abandon
    };

    // A decrement of `units` of (rule, key) wants to go. `wake` is called (once, from whichever thread
    // changed the ticket, never under the gate's lock) when a queued ticket is admitted, answered
    // sold out or expired by a grant that found it past its deadline.
    [[nodiscard]] entry_result enter(const std::string& rule, const key_tuple& key,
                                     const rules::admission_limits& limits, std::int64_t units, wake_fn wake,
                                     clock::time_point now = clock::now());
    // The same for a take a leader may put in its batch (group_update: an autocommit take whose
    // UPDATE the sidecar can send for it). `session`: the waiter's, for the take ledger.
    [[nodiscard]] entry_result enter_groupable(const std::string& rule, const key_tuple& key,
                                               const rules::admission_limits& limits, std::int64_t units,
                                               std::uint64_t session, wake_fn wake,
                                               clock::time_point now = clock::now());
    // What became of a queued ticket: admitted, sold_out, timed_out, or still queued. A ticket
    // still queued at or past its deadline leaves the queue: timed_out.
    [[nodiscard]] admission resolve(ticket id, clock::time_point now = clock::now());
    // The same, with what a leader's batch decided for a grouped ticket (grouped_*; the ticket is
    // then forgotten). A grouped ticket is never timed out: its unit may be taken already.
    [[nodiscard]] admission resolve(ticket id, group_result& out, clock::time_point now = clock::now());

    // group_update. A member of a leader's batch: its ticket and units, and its session.
    struct member {
        ticket id = 0;
        std::int64_t units = 0;
        std::uint64_t session = 0;
    };
    // How many groupable waiters are queued first in line behind the admitted `leader`.
    [[nodiscard]] std::size_t groupable_behind(ticket leader) const;
    // The admitted `leader` takes up to `most` groupable waiters from the front of its key's queue,
    // in FIFO order (stopping at the first that is not groupable: a batch never jumps a waiter).
    // Each becomes `grouped` until settle(); an expired one is answered timed_out instead.
    [[nodiscard]] std::vector<member> take_group(ticket leader, std::size_t most, clock::time_point now = clock::now());
    // The batch decided a member (result.what: grouped_taken, grouped_sold_out or grouped_failed):
    // its waiter is woken. false: the member went away (abandon) after joining: nobody answers it.
    bool settle(ticket member, const group_result& result);
    // An admitted ticket's decrement is over (its reply was sent, or its transaction ended).
    void release(ticket id, clock::time_point now = clock::now());
    // The waiter went away (disconnect, shutdown): a queued ticket leaves the queue, an admitted
    // one releases its slot, an answered one is forgotten. Any ticket, any state: never leaks.
    void abandon(ticket id, clock::time_point now = clock::now());

    // A take of `units` found the floor: every waiter for as many units or more is answered sold
    // out, and such new arrivals until sold_out_recheck has passed or note_available(); smaller
    // takes may still fit and keep their place.
    void note_sold_out(const std::string& rule, const key_tuple& key, std::int64_t units,
                       clock::time_point now = clock::now());
    // A take succeeded or a restock went through: the key is not sold out.
    void note_available(const std::string& rule, const key_tuple& key);
    // ... for every key of `rule` (a trusted user's restock whose WHERE pins no key).
    void note_available_rule(const std::string& rule);

    // For metrics and tests.
    [[nodiscard]] std::size_t queued() const;
    [[nodiscard]] std::size_t queued(const std::string& rule, const key_tuple& key) const;
    [[nodiscard]] std::size_t in_flight(const std::string& rule, const key_tuple& key) const;
    [[nodiscard]] std::size_t keys() const;
    [[nodiscard]] std::size_t tickets() const;

private:
    using key_type = std::pair<std::string, key_tuple>;
    struct waiter {
        ticket id = 0;
        std::int64_t units = 1;
        clock::time_point deadline;
        wake_fn wake;
        bool groupable = false;
        std::uint64_t session = 0;
    };
    struct slot {
        std::uint32_t in_flight = 0;
        std::uint32_t max_in_flight = 1;
        std::deque<waiter> queue;
        clock::time_point sold_out_until{};
        std::int64_t sold_out_units = 0;  // takes of this many units or more are sold out until then
    };
    struct ticket_state {
        std::map<key_type, slot>::iterator key;
        admission what = admission::queued;
        wake_fn wake;         // grouped: the waiter's, called by settle()
        group_result result;  // grouped_*: what the batch decided
    };
    entry_result enter_waiter(const std::string& rule, const key_tuple& key, const rules::admission_limits& limits,
                              waiter w, clock::time_point now);

    // Under the lock: admits waiters while slots are free; their wake callbacks go to `woken`.
    void grant(slot& s, clock::time_point now, std::vector<wake_fn>& woken);
    void forget_if_idle(std::map<key_type, slot>::iterator it, clock::time_point now);
    void release_locked(ticket id, clock::time_point now, std::vector<wake_fn>& woken);

    mutable std::mutex mutex_;
    std::map<key_type, slot> slots_;
    std::unordered_map<ticket, ticket_state> tickets_;
    std::size_t queued_ = 0;
    ticket next_ticket_ = 1;
};

}  // namespace claimguard::engine
