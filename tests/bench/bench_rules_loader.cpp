// Google Benchmark: loading and validating rules files (the hot-reload path) and rendering DDL.
#include <benchmark/benchmark.h>

#include <string>

#include "rules/model/ddl.hpp"
#include "rules/model/rules.hpp"

namespace {

namespace rules = claimguard::rules;

// The shape of rules/examples/coupon.yaml, with `n` stock and `n` claim rules.
std::string rules_text(int n) {
    std::string text = "default_mode: enforce\nstock_rules:\n";
    for (int i = 0; i < n; ++i)
        text += "  - name: stock_" + std::to_string(i) + "\n    table: coupon_stock_" + std::to_string(i) +
                "\n    key_columns: [campaign_id]\n    counter_column: remain\n    floor: 0\n"
                "    version_column: version\n    exhausted: {type: error, code: 1644, sqlstate: \"45000\", "
                "message: \"sold out\"}\n";
    text += "claim_rules:\n";
    for (int i = 0; i < n; ++i)
        text += "  - name: order_" + std::to_string(i) + "\n    table: coupon_order_" + std::to_string(i) +
                "\n    idempotency_columns: [user_id, campaign_id]\n    consumes:\n      rule: stock_" +
                std::to_string(i) + "\n      columns: {campaign_id: campaign_id}\n    redis:\n"
                "      key: \"lock:coupon:{user_id}:{campaign_id}\"\n      ttl: 3000ms\n";
    return text;
}

void load_rules_file(benchmark::State& state) {
    const std::vector<rules::rules_source> sources{{"rules.yaml", rules_text(static_cast<int>(state.range(0)))}};
    for (auto _ : state) {
        auto result = rules::load_rules(sources);
        benchmark::DoNotOptimize(result);
        if (!result.rules)
            state.SkipWithError("rules did not load");
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * sources[0].text.size()));
}
BENCHMARK(load_rules_file)->Arg(1)->Arg(10)->Arg(100);

void render_ddl_script(benchmark::State& state) {
    const auto loaded = rules::load_rules({{"rules.yaml", rules_text(static_cast<int>(state.range(0)))}});
    if (!loaded.rules) {
        state.SkipWithError("rules did not load");
        return;
    }
    for (auto _ : state)
        benchmark::DoNotOptimize(rules::render_ddl(*loaded.rules));
}
BENCHMARK(render_ddl_script)->Arg(1)->Arg(100);

}  // namespace
