// Per-key admission in the session: waiting for a key's turn in the sidecar's admission gate (on
// this session's executor), giving the slots back. Whether a statement waits and what a refused one
// is answered: engine::statement_operation; what the gate did is counted in reporting.cpp.
#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/post.hpp>

#include "claim_metrics.hpp"
#include "proxy/engine/reserve_pool.hpp"
#include "reserve_link.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

using engine::admission;

namespace {

// How often a waiter looks at its ticket even without a wake-up (a safety net: the gate's wake
// is the normal path).
constexpr std::chrono::milliseconds admission_poll_interval{200};

}  // namespace

awaitable<engine::statement_input> session::wait_turn(const engine::turn_request& turn) {
    auto& gate = *ctx_.admission;
    // The gate wakes the waiter from whichever thread freed its slot: post to this session's
    // executor, where the wait runs; a session already gone is not touched.
    auto wake = [weak = weak_from_this(), ex = client_.socket().get_executor()] {
        asio::post(ex, [weak] {
            if (auto self = weak.lock()) self->admission_timer_.cancel();
        });
    };
    auto entry = turn.groupable ? gate.enter_groupable(turn.rule, turn.key, *turn.limits, turn.units, turn.session,
                                                       std::move(wake))
                                : gate.enter(turn.rule, turn.key, *turn.limits, turn.units, std::move(wake));
    if (entry.what != admission::queued) co_return engine::statement_input::of_turn(entry.what, entry.id);

    auto& queued = claim_metrics::get().admission_queued;
    counters_.admission(command_.snapshot, turn.rule, admission_count::waits).inc();
    queued.inc();
    client_.watch_while_queued(shared_from_this(), admission_timer_);  // a hang-up leaves the queue
    const auto deadline = clock_type::now() + turn.limits->queue_timeout;
    std::optional<admission> out;
    engine::group_result group;
    for (;;) {
        auto what = gate.resolve(entry.id, group);
        if (what != admission::queued && what != admission::grouped) {
            out = what;
            break;
        }
        if (closed_ || client_.hung_up() || deadline_.timed_out() != deadline_kind::none) {
            // A grouped take the leader then decides taken waits in the take ledger (the leader
            // puts it there), as a take whose app went away after its UPDATE committed.
            gate.abandon(entry.id);
            break;
        }
        // In a leader's batch: no queue_timeout any more (its unit may be taken already); the
        // leader's wake comes after one UPDATE or a few.
        const auto until = what == admission::grouped ? clock_type::now() + admission_poll_interval
                                                      : std::min(deadline, clock_type::now() + admission_poll_interval);
        admission_timer_.expires_at(until);
        co_await admission_timer_.async_wait(nothrow);
    }
    client_.stop_watching();
    queued.inc(-1);
    if (out == admission::admitted && (closed_ || client_.hung_up())) {
        gate.release(entry.id);
        co_return engine::statement_input::closing();
    }
    if (!out) co_return engine::statement_input::closing();
    co_return engine::statement_input::of_turn(*out, entry.id, group);
}

awaitable<void> session::fill_reserve(const engine::decision& d) {
    auto& pool = *ctx_.reserve;
    engine::reserve_target target{*d.stock, d.key_literals,
                                  d.schema.empty() ? connection_state_.database() : std::string(d.schema)};
    // A few rounds at most: another session may take the refill's units first; then the take goes to
    // the row as without reserve (the claim operation finds the block empty).
    // Bounded: a refill waits for the row's lock, which a transaction of this sidecar may hold.
    const auto give_up = clock_type::now() + std::chrono::seconds(3);
    for (int round = 0; round < 3 && !closed_ && clock_type::now() < give_up; ++round) {
        const auto now = engine::reserve_pool::clock::now();
        auto job = pool.begin_refill(target, d.key, d.units, now);
        if (!job && !pool.refilling(d.stock->name, d.key)) co_return;  // units here, or sold out
        if (job) {
            // The link's thread wakes this session on its executor; a session gone is not touched.
            ctx_.reserve_conn->refill(std::move(*job), [weak = weak_from_this(), ex = client_.socket().get_executor()] {
                asio::post(ex, [weak] {
                    if (auto self = weak.lock()) self->admission_timer_.cancel();
                });
            });
        }
        // Woken by the refill's end (ours), or polled while another session's refill is on its way.
        while (pool.refilling(d.stock->name, d.key) && !closed_ && clock_type::now() < give_up) {
            admission_timer_.expires_after(admission_poll_interval / 10);
            co_await admission_timer_.async_wait(nothrow);
        }
        if (pool.pooled(d.stock->name, d.key) >= d.units) co_return;
    }
}

void session::release_admission() {
    if (!ctx_.admission) return;
    admission_held_.release_all(*ctx_.admission);
}

}  // namespace claimguard::session
