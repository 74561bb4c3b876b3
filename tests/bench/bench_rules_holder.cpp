// Google Benchmark: the per-command rules access: the atomic shared_ptr load (old) vs the
// per-thread view that re-reads it only after a reload (new), alone and with 2 threads.
#include <benchmark/benchmark.h>

#include "proxy/engine/rules_snapshot.hpp"

namespace {

namespace engine = claimguard::engine;

engine::rules_holder& holder() {
    static engine::rules_holder h;
    return h;
}

void setup(const benchmark::State&) {
    if (!holder().current()) holder().replace(std::make_shared<engine::rules_snapshot>(claimguard::rules::rule_set{}));
}

// What intercept() did per COM_QUERY: snapshot_ = holder.current().
void atomic_load_per_command(benchmark::State& state) {
    std::shared_ptr<const engine::rules_snapshot> snapshot;
    for (auto _ : state) {
        snapshot = holder().current();
        benchmark::DoNotOptimize(snapshot.get());
    }
}

// What it does now: snapshot_ = current_on_this_thread(holder) (a version load, then a copy).
void thread_view_per_command(benchmark::State& state) {
    std::shared_ptr<const engine::rules_snapshot> snapshot;
    for (auto _ : state) {
        snapshot = engine::current_on_this_thread(holder());
        benchmark::DoNotOptimize(snapshot.get());
    }
}

BENCHMARK(atomic_load_per_command)->Setup(setup)->Threads(1)->Threads(2);
BENCHMARK(thread_view_per_command)->Setup(setup)->Threads(1)->Threads(2);

}  // namespace
