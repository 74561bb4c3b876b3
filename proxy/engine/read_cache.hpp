// The sidecar's read cache (stock rule read_cache): per (stock rule, key) the counter as this
// sidecar last knows it, and per (rule, key, statement shape) the server's last reply to a read,
// kept as a template, so a counter read can be answered without the database for at most the
// rule's TTL after the server was last asked. Updated by the decrements this sidecar applies,
// set to the floor by a refused take, invalidated by a restock. Thread-safe (the sidecar's I/O
// threads share one), bounded, pure bookkeeping: no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "memory.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "rules/match/facts.hpp"

namespace claimguard::engine {

// Where a counter read of a rule with read_cache stands: why only the server may answer it, or
// empty when the cache may (the session and `claimguard explain` ask the same question).
struct read_situation {
    bool observe = false;                   // the rule is in observe mode
    bool autocommit_or_transaction = true;  // false: autocommit off, no transaction open yet
    bool cursor = false;                    // COM_STMT_EXECUTE asking for a cursor
};
[[nodiscard]] std::string_view read_cache_bypass(const rules::match::counter_read& r, const key_tuple& key,
                                                 const session_memory& memory, const read_situation& s);

// A stock rule's read_cache_sold_out: while a key's known value is at or below the floor, every
// refresh that finds it still there doubles how long the next one waits, from the TTL up to
// `max` (zero: no backoff, a sold-out key is refreshed once per TTL like any other). A stale
// "sold out" never over-issues (every take is a conditional UPDATE in the database); it can only
// hide stock that came back elsewhere for at most `max`. Anything this sidecar sees that may
// raise the counter (a restock, a give-back, a trusted write) starts over from the TTL.
struct sold_out_backoff {
    std::chrono::milliseconds max{0};
    std::int64_t floor = 0;
};
[[nodiscard]] inline sold_out_backoff sold_out_backoff_of(const rules::stock_rule& r) {
    return {r.read_cache_sold_out.value_or(std::chrono::milliseconds{0}), r.floor};
}

class read_cache {
public:
    using clock = std::chrono::steady_clock;

    // Named limits: keys with a known value, reply templates kept, bytes one template may hold.
    static constexpr std::size_t max_keys = 65536;
    static constexpr std::size_t max_templates = 4096;
    static constexpr std::size_t max_template_bytes = 16 * 1024;

    enum class outcome : std::uint8_t {
        hit,      // answered from the cache
        miss,     // nothing kept for this key and shape: the read goes to the server
        refresh,  // kept, but older than the TTL or invalidated: the read goes to the server
        wait,     // ... and another read is asking the server right now: wait for its answer, find() again
    };

    // How long one read's refresh may hold the others back by default (its answer, or a failure, ends
    // it sooner; a stock rule's max_refresh_wait sets another); how often a waiting read looks again.
    static constexpr std::chrono::milliseconds max_refresh_wait{250};
    static constexpr std::chrono::milliseconds refresh_poll_interval{1};

    struct lookup {
        outcome what = outcome::miss;
        std::shared_ptr<const protocol::counter_reply> reply;  // hit: the template
        std::int64_t value = 0;                                // hit: the counter to answer
        std::uint64_t generation = 0;                          // miss/refresh: pass to store() with the server's reply
    };

    // A read of (rule, key) in the statement shape `shape` (the statement with its key values
    // normalised, the protocol, what changes the reply's bytes). One refresh per key at a time:
    // the first stale read that `may_refresh` (one whose reply can be kept: not in a transaction)
    // goes to the server, the others get `wait` until it stored its answer (or `max_wait` passed).
    // A sold-out key is kept longer than `ttl` as `sold_out` says.
    [[nodiscard]] lookup find(const std::string& rule, const key_tuple& key, const std::string& shape,
                              std::chrono::milliseconds ttl, clock::time_point now = clock::now(),
                              bool may_refresh = true, std::chrono::milliseconds max_wait = max_refresh_wait,
                              const sold_out_backoff& sold_out = {});
    // The server answered a read sent at `asked` (after find() returned `generation`): its
    // template (null when it cannot be one) and the counter it returned. The value is kept only
    // when no decrement, refusal or restock of this sidecar changed the key in between. A value at
    // or below `sold_out.floor` that was already there backs the key's refreshes off once more.
    void store(const std::string& rule, const key_tuple& key, const std::string& shape,
               std::shared_ptr<const protocol::counter_reply> reply, std::int64_t value, std::uint64_t generation,
               clock::time_point asked, const sold_out_backoff& sold_out = {});

    // The refresh this read started ended without store() (an error, a reply that is no template).
    void end_refresh(const std::string& rule, const key_tuple& key);
    // This sidecar took `units` (a decrement that changed a row).
    void on_take(const std::string& rule, const key_tuple& key, std::int64_t units);
    // A take was refused at the floor: the key is sold out, as of `now` (its backoff, if it was
    // already sold out, goes on where it was).
    void on_exhausted(const std::string& rule, const key_tuple& key, std::int64_t floor,
                      clock::time_point now = clock::now());
    // A write that may raise the counter (a restock, a give-back): the next read goes to the
    // server, and a sold-out key's backoff starts over from the TTL.
    void invalidate(const std::string& rule, const key_tuple& key);
    // A write that may raise the counter of keys not known (a trusted user's UPDATE without the
    // key, a LOAD DATA): every key of `rule` is read from the server next.
    void invalidate_rule(const std::string& rule);

    [[nodiscard]] std::size_t keys() const;
    [[nodiscard]] std::size_t templates() const;
    [[nodiscard]] std::uint64_t evictions() const;

    // How long after `fetched` a value of `refreshes_sold_out` refreshes that each found the key
    // still sold out is kept: the TTL doubled that many times, at most `sold_out.max`.
    [[nodiscard]] static std::chrono::milliseconds sold_out_age(std::chrono::milliseconds ttl,
                                                                const sold_out_backoff& sold_out,
                                                                unsigned refreshes_sold_out);

private:
    struct value_slot {
        std::int64_t value = 0;
        bool valid = false;
        clock::time_point fetched;     // when the server was last asked for it
        std::uint64_t generation = 0;  // bumped by every local change
        std::optional<clock::time_point> refreshing;  // a read asking the server since then
        // Refreshes in a row that found it at or below the floor again (read_cache_sold_out).
        unsigned refreshes_sold_out = 0;
    };
    struct template_slot {
        std::shared_ptr<const protocol::counter_reply> reply;
        clock::time_point fetched;  // the other columns' age
    };
    // Past this many the doubled age is longer than any bound a rule may set.
    static constexpr unsigned max_sold_out_doublings = 32;
    using key_id = std::pair<std::string, key_tuple>;
    value_slot& value_of(const std::string& rule, const key_tuple& key);

    mutable std::mutex mutex_;
    std::map<key_id, value_slot> values_;
    std::map<std::pair<key_id, std::string>, template_slot> templates_;
    std::uint64_t next_generation_ = 1;
    std::uint64_t evictions_ = 0;
};

}  // namespace claimguard::engine
