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
    // What became of a queued ticket: admitted, sold_out, timed_out, or still queued. A ticket
    // still queued at or past its deadline leaves the queue: timed_out.
    [[nodiscard]] admission resolve(ticket id, clock::time_point now = clock::now());
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
    };

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
