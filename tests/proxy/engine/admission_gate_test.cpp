// The per-key admission gate: slots, FIFO order, deadlines, sold-out answers, re-check, limits,
// and no slot or ticket left behind on any path (release, abandon, timeout, sold out).
#include "proxy/engine/admission_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace claimguard::engine {
namespace {

using namespace std::chrono_literals;
using clock = admission_gate::clock;

const std::string rule = "coupon_stock";
const key_tuple key7{"7"};
const key_tuple key8{"8"};

rules::admission_limits limits(std::uint32_t in_flight, std::chrono::milliseconds timeout = 2000ms,
                               std::uint32_t max_queue = 100) {
    return {in_flight, timeout, max_queue};
}

// Records which tickets were woken, in order.
struct wakes {
    std::vector<int> order;
    admission_gate::wake_fn of(int who) {
        return [this, who] { order.push_back(who); };
    }
};

TEST(AdmissionGate, AdmitsUpToMaxInFlightThenQueues) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto a = g.enter(rule, key7, limits(2), 1, w.of(1), t0);
    auto b = g.enter(rule, key7, limits(2), 1, w.of(2), t0);
    auto c = g.enter(rule, key7, limits(2), 1, w.of(3), t0);
    EXPECT_EQ(a.what, admission::admitted);
    EXPECT_EQ(b.what, admission::admitted);
    EXPECT_EQ(c.what, admission::queued);
    EXPECT_EQ(g.in_flight(rule, key7), 2u);
    EXPECT_EQ(g.queued(rule, key7), 1u);
    // Another key has its own slots.
    EXPECT_EQ(g.enter(rule, key8, limits(2), 1, w.of(4), t0).what, admission::admitted);
    EXPECT_TRUE(w.order.empty());
}

TEST(AdmissionGate, ReleaseAdmitsWaitersFirstComeFirstServed) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 1, w.of(0), t0);
    std::vector<admission_gate::ticket> queued;
    for (int i = 1; i <= 5; ++i) {
        auto r = g.enter(rule, key7, limits(1), 1, w.of(i), t0 + std::chrono::milliseconds(i));
        ASSERT_EQ(r.what, admission::queued);
        queued.push_back(r.id);
    }
    auto current = holder.id;
    for (int i = 1; i <= 5; ++i) {
        EXPECT_EQ(g.resolve(queued[i - 1], t0 + 10ms), admission::queued);  // not its turn yet
        g.release(current, t0 + 10ms);
        ASSERT_EQ(w.order.size(), static_cast<std::size_t>(i));
        EXPECT_EQ(w.order.back(), i);  // the oldest waiter, and only it
        EXPECT_EQ(g.resolve(queued[i - 1], t0 + 10ms), admission::admitted);
        EXPECT_EQ(g.in_flight(rule, key7), 1u);
        current = queued[i - 1];
    }
    g.release(current, t0 + 10ms);
    EXPECT_EQ(g.keys(), 0u);
    EXPECT_EQ(g.tickets(), 0u);
    EXPECT_EQ(g.queued(), 0u);
}

TEST(AdmissionGate, ANewArrivalNeverOvertakesTheQueue) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 1, w.of(0), t0);
    auto waiter = g.enter(rule, key7, limits(1), 1, w.of(1), t0);
    g.release(holder.id, t0);  // the slot goes to the waiter, not to whoever comes next
    EXPECT_EQ(g.enter(rule, key7, limits(1), 1, w.of(2), t0).what, admission::queued);
    EXPECT_EQ(g.resolve(waiter.id, t0), admission::admitted);
}

TEST(AdmissionGate, AWaiterPastItsDeadlineTimesOutAndLeavesTheQueue) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1, 100ms), 1, w.of(0), t0);
    auto late = g.enter(rule, key7, limits(1, 100ms), 1, w.of(1), t0);
    auto next = g.enter(rule, key7, limits(1, 500ms), 1, w.of(2), t0 + 50ms);
    EXPECT_EQ(g.resolve(late.id, t0 + 99ms), admission::queued);
    EXPECT_EQ(g.resolve(late.id, t0 + 100ms), admission::timed_out);
    EXPECT_EQ(g.queued(rule, key7), 1u);
    g.release(holder.id, t0 + 120ms);
    EXPECT_EQ(w.order, std::vector<int>{2});
    EXPECT_EQ(g.resolve(next.id, t0 + 120ms), admission::admitted);
    g.release(next.id, t0 + 130ms);
    EXPECT_EQ(g.tickets(), 0u);
}

TEST(AdmissionGate, AGrantThatFindsTheWaiterExpiredGivesItNoSlot) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1, 100ms), 1, w.of(0), t0);
    auto expired = g.enter(rule, key7, limits(1, 100ms), 1, w.of(1), t0);
    auto fresh = g.enter(rule, key7, limits(1, 1000ms), 1, w.of(2), t0 + 90ms);
    g.release(holder.id, t0 + 150ms);  // the first waiter's deadline passed before its timer fired
    EXPECT_EQ(w.order, (std::vector<int>{1, 2}));
    EXPECT_EQ(g.resolve(expired.id, t0 + 150ms), admission::timed_out);
    EXPECT_EQ(g.resolve(fresh.id, t0 + 150ms), admission::admitted);
    EXPECT_EQ(g.in_flight(rule, key7), 1u);
}

TEST(AdmissionGate, SoldOutAnswersTheWholeQueueAndLaterArrivalsUntilTheRecheck) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 1, w.of(0), t0);
    std::vector<admission_gate::ticket> queued;
    for (int i = 1; i <= 3; ++i) queued.push_back(g.enter(rule, key7, limits(1), 1, w.of(i), t0).id);
    g.note_sold_out(rule, key7, 1, t0 + 1ms);         // the holder's take found the floor
    EXPECT_EQ(w.order, (std::vector<int>{1, 2, 3}));  // everyone at once
    for (auto id : queued) EXPECT_EQ(g.resolve(id, t0 + 1ms), admission::sold_out);
    EXPECT_EQ(g.queued(), 0u);
    g.release(holder.id, t0 + 2ms);
    EXPECT_EQ(g.enter(rule, key7, limits(1), 1, w.of(9), t0 + 50ms).what, admission::sold_out);
    // After the re-check interval one round goes to the database again (a restock must be seen).
    auto probe = g.enter(rule, key7, limits(1), 1, w.of(10), t0 + 1ms + admission_gate::sold_out_recheck);
    EXPECT_EQ(probe.what, admission::admitted);
    g.release(probe.id, t0 + 200ms);
    EXPECT_EQ(g.keys(), 0u);
    EXPECT_EQ(g.tickets(), 0u);
}

TEST(AdmissionGate, ATakeOrRestockEndsSoldOutAtOnce) {
    admission_gate g;
    const auto t0 = clock::now();
    g.note_sold_out(rule, key7, 1, t0);
    EXPECT_EQ(g.enter(rule, key7, limits(1), 1, {}, t0 + 1ms).what, admission::sold_out);
    g.note_available(rule, key7);
    auto r = g.enter(rule, key7, limits(1), 1, {}, t0 + 2ms);
    EXPECT_EQ(r.what, admission::admitted);
    g.release(r.id, t0 + 3ms);
}

// A trusted user's restock of every key of a rule (issue 21): none of them is sold out any more;
// another rule's key still is.
TEST(AdmissionGate, ARestockOfEveryKeyOfARuleEndsSoldOutForEach) {
    admission_gate g;
    const auto t0 = clock::now();
    g.note_sold_out(rule, key7, 1, t0);
    g.note_sold_out(rule, key8, 1, t0);
    g.note_sold_out("other_rule", key7, 1, t0);
    g.note_available_rule(rule);
    for (const auto& k : {key7, key8}) {
        auto r = g.enter(rule, k, limits(1), 1, {}, t0 + 2ms);
        EXPECT_EQ(r.what, admission::admitted);
        g.release(r.id, t0 + 3ms);
    }
    EXPECT_EQ(g.enter("other_rule", key7, limits(1), 1, {}, t0 + 4ms).what, admission::sold_out);
}

TEST(AdmissionGate, SoldOutForLargerTakesLetsSmallerOnesWait) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 5, w.of(0), t0);
    auto big = g.enter(rule, key7, limits(1), 5, w.of(1), t0);
    auto small = g.enter(rule, key7, limits(1), 1, w.of(2), t0);
    g.note_sold_out(rule, key7, 5, t0);  // 5 units did not fit: 1 may still
    EXPECT_EQ(w.order, std::vector<int>{1});
    EXPECT_EQ(g.resolve(big.id, t0), admission::sold_out);
    EXPECT_EQ(g.enter(rule, key7, limits(1), 7, {}, t0).what, admission::sold_out);
    g.release(holder.id, t0);
    EXPECT_EQ(g.resolve(small.id, t0), admission::admitted);
    g.release(small.id, t0);
    EXPECT_EQ(g.tickets(), 0u);
}

TEST(AdmissionGate, MaxQueueRefusesOneMore) {
    admission_gate g;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1, 2000ms, 2), 1, {}, t0);
    auto a = g.enter(rule, key7, limits(1, 2000ms, 2), 1, {}, t0);
    auto b = g.enter(rule, key7, limits(1, 2000ms, 2), 1, {}, t0);
    EXPECT_EQ(a.what, admission::queued);
    EXPECT_EQ(b.what, admission::queued);
    EXPECT_EQ(g.enter(rule, key7, limits(1, 2000ms, 2), 1, {}, t0).what, admission::queue_full);
    g.abandon(a.id, t0);
    g.abandon(b.id, t0);
    g.release(holder.id, t0);
    EXPECT_EQ(g.keys(), 0u);
    EXPECT_EQ(g.tickets(), 0u);
}

TEST(AdmissionGate, AbandonNeverLeaksASlotInAnyState) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 1, w.of(0), t0);
    auto gone = g.enter(rule, key7, limits(1), 1, w.of(1), t0);
    auto next = g.enter(rule, key7, limits(1), 1, w.of(2), t0);
    g.abandon(gone.id, t0);  // a client that hung up while queued: leaves the queue
    EXPECT_EQ(g.queued(rule, key7), 1u);
    g.abandon(holder.id, t0);  // a session that ended holding the slot (disconnect in a transaction)
    EXPECT_EQ(w.order, std::vector<int>{2});
    EXPECT_EQ(g.resolve(next.id, t0), admission::admitted);
    g.abandon(next.id, t0);
    g.abandon(next.id, t0);  // twice: harmless
    g.abandon(12345, t0);    // unknown: harmless
    EXPECT_EQ(g.keys(), 0u);
    EXPECT_EQ(g.tickets(), 0u);
    EXPECT_EQ(g.queued(), 0u);
}

TEST(AdmissionGate, AReloadThatRaisesMaxInFlightAdmitsWaiters) {
    admission_gate g;
    wakes w;
    const auto t0 = clock::now();
    auto holder = g.enter(rule, key7, limits(1), 1, w.of(0), t0);
    auto waiter = g.enter(rule, key7, limits(1), 1, w.of(1), t0);
    auto third = g.enter(rule, key7, limits(3), 1, w.of(2), t0);  // the new rules say 3
    EXPECT_EQ(third.what, admission::queued);                     // behind the first waiter ...
    EXPECT_EQ(w.order, (std::vector<int>{1, 2}));                 // ... and both get a slot at once
    EXPECT_EQ(g.resolve(waiter.id, t0), admission::admitted);
    EXPECT_EQ(g.resolve(third.id, t0), admission::admitted);
    EXPECT_EQ(g.in_flight(rule, key7), 3u);
    g.release(holder.id, t0);
    g.release(waiter.id, t0);
    g.release(third.id, t0);
    EXPECT_EQ(g.keys(), 0u);
}

TEST(AdmissionGate, ThreadsNeverExceedMaxInFlightAndLeaveNothingBehind) {
    admission_gate g;
    constexpr int threads = 8;
    constexpr int rounds = 2000;
    constexpr std::uint32_t max_in_flight = 3;
    std::atomic<int> inside{0}, worst{0}, admitted{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                std::atomic<bool> woken{false};
                auto r = g.enter(rule, key7, limits(max_in_flight, 60000ms, 1000), 1, [&woken] { woken = true; });
                if (r.what == admission::queued) {
                    while (!woken) std::this_thread::yield();
                    ASSERT_EQ(g.resolve(r.id), admission::admitted);
                } else {
                    ASSERT_EQ(r.what, admission::admitted);
                }
                int now = ++inside;
                int seen = worst.load();
                while (now > seen && !worst.compare_exchange_weak(seen, now)) {
                }
                ++admitted;
                --inside;
                g.release(r.id);
            }
        });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(admitted.load(), threads * rounds);
    EXPECT_LE(worst.load(), static_cast<int>(max_in_flight));
    EXPECT_EQ(g.keys(), 0u);
    EXPECT_EQ(g.tickets(), 0u);
    EXPECT_EQ(g.queued(), 0u);
}

}  // namespace
}  // namespace claimguard::engine
