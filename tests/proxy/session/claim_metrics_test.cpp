// The claim engine's metric children (proxy/session/claim_metrics.hpp): one table per rules
// snapshot whose children are the catalogue's, resolved when the snapshot is installed; the read
// cache's evictions counted as a counter.
#include <gtest/gtest.h>

#include <memory>

#include "proxy/session/claim_metrics.hpp"

namespace claimguard::session {
namespace {

std::shared_ptr<const engine::rules_snapshot> snapshot_with(std::string stock, std::string claim, bool observe) {
    rules::rule_set r;
    rules::stock_rule s;
    s.name = std::move(stock);
    s.table.name = "stock";
    s.admission = rules::admission_limits{};
    if (observe) s.rule_mode = rules::mode::observe;
    r.stocks.push_back(std::move(s));
    rules::claim_rule c;
    c.name = std::move(claim);
    c.table.name = "orders";
    r.claims.push_back(std::move(c));
    return std::make_shared<engine::rules_snapshot>(std::move(r));
}

TEST(claim_metrics, every_fixed_row_resolved_when_the_snapshot_is_installed) {
    auto snap = snapshot_with("cm_stock", "cm_claim", false);
    auto& tables = claim_counter_tables::get();
    tables.install(snap);
    const auto table = tables.of(snap);
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(tables.of(snap), table);  // once per snapshot, not per look
    const auto* c = table->find("cm_stock");
    ASSERT_NE(c, nullptr);
    auto& m = claim_metrics::get();
    for (const auto& row : engine::catalogue()) {
        const auto i = static_cast<std::size_t>(row.what);
        const bool from_decision = row.labels[0] == engine::from_decision || row.labels[1] == engine::from_decision;
        if (from_decision || row.what == engine::event::would_block) {
            EXPECT_EQ(c->by_event[i], nullptr) << row.action;  // enforce rule: no would children
            continue;
        }
        ASSERT_NE(c->by_event[i], nullptr) << row.action;
        auto& f = m.family(row.metric);
        admin::counter* want = nullptr;
        switch (row.label_count()) {
            case 0: want = &f.with("cm_stock"); break;
            case 1: want = &f.with("cm_stock", row.labels[0]); break;
            default: want = &f.with("cm_stock", row.labels[0], row.labels[1]); break;
        }
        EXPECT_EQ(c->by_event[i], want) << row.action;
    }
    for (auto* a : c->admission) EXPECT_NE(a, nullptr);  // the stock rule has admission
    for (auto* r : c->reads) EXPECT_EQ(r, nullptr);      // ... but no read cache
    EXPECT_NE(table->find("cm_claim"), nullptr);
    EXPECT_EQ(table->find("cm_other"), nullptr);
}

TEST(claim_metrics, observe_rules_have_the_would_children_by_enforce_word) {
    auto snap = snapshot_with("cm_obs_stock", "cm_obs_claim", true);
    const auto table = claim_counter_tables::get().of(snap);
    const auto* c = table->find("cm_obs_stock");
    ASSERT_NE(c, nullptr);
    auto& m = claim_metrics::get();
    for (auto e : engine::observable_events())
        EXPECT_EQ(c->would[static_cast<std::size_t>(e)], &m.would.with("cm_obs_stock", engine::action_of(e)));
    EXPECT_EQ(c->by_event[static_cast<std::size_t>(engine::event::would_block)],
              &m.would.with("cm_obs_stock", "blocked"));
}

TEST(claim_metrics, a_session_follows_its_snapshot_and_falls_back_for_other_rules) {
    auto first = snapshot_with("cm_a", "cm_a_claim", false);
    auto second = snapshot_with("cm_b", "cm_b_claim", false);
    session_counters counters;
    counters.follow(first);
    const auto* a = &counters.of("cm_a");
    EXPECT_EQ(a, claim_counter_tables::get().of(first)->find("cm_a"));
    counters.follow(second);
    EXPECT_EQ(&counters.of("cm_b"), claim_counter_tables::get().of(second)->find("cm_b"));
    // A rule the snapshot does not name (a take deferred before a reload): its own children.
    const auto& gone = counters.of("cm_a");
    EXPECT_EQ(gone.by_event[static_cast<std::size_t>(engine::event::took)],
              &claim_metrics::get().family("claimguard_rewrites_total").with("cm_a"));
    // Labels from the decision: resolved once, the same child after.
    auto& u = counters.dynamic(claim_metrics::get().unmodeled, "cm_b", "several_statements", "refuse");
    EXPECT_EQ(&counters.dynamic(claim_metrics::get().unmodeled, "cm_b", "several_statements", "refuse"), &u);
    EXPECT_EQ(&u, &claim_metrics::get().unmodeled.with("cm_b", "several_statements", "refuse"));
}

TEST(claim_metrics, read_cache_evictions_count_what_was_dropped_since_the_last_look) {
    auto& m = claim_metrics::get();
    const auto start = m.read_cache_evictions.value();
    m.count_read_cache_evictions(10);
    EXPECT_EQ(m.read_cache_evictions.value(), start + 10);
    m.count_read_cache_evictions(10);  // nothing new
    m.count_read_cache_evictions(7);   // an older look, from another thread
    EXPECT_EQ(m.read_cache_evictions.value(), start + 10);
    m.count_read_cache_evictions(15);
    EXPECT_EQ(m.read_cache_evictions.value(), start + 15);
}

// Issue 22: every rule's latency histogram exists (at 0) once its snapshot is installed, and a
// command is observed in the histogram of the rule a counter was looked up for.
TEST(claim_metrics, duration_per_rule_present_from_load_and_observed_for_the_rule_that_acted) {
    auto snap = snapshot_with("dur_stock", "dur_claim", false);
    claim_counter_tables::get().install(snap);
    const std::string text = admin::default_registry().render();
    EXPECT_NE(text.find("claimguard_claim_duration_seconds_count{rule=\"dur_stock\"} 0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("claimguard_claim_duration_seconds_count{rule=\"dur_claim\"} 0\n"), std::string::npos) << text;

    auto& h = claim_metrics::get().duration.with("dur_stock");
    session_counters counters;
    counters.follow(snap);
    counters.command_ended(0.5);  // no rule acted: nothing observed
    EXPECT_EQ(h.collect().count, 0u);
    (void)counters.of("dur_stock");
    counters.command_ended(0.002);
    EXPECT_EQ(h.collect().count, 1u);
    EXPECT_DOUBLE_EQ(h.collect().sum, 0.002);
    counters.command_ended(0.5);  // the next command: no rule again
    EXPECT_EQ(h.collect().count, 1u);
    EXPECT_EQ(claim_metrics::get().duration.with("dur_claim").collect().count, 0u);
}

}  // namespace
}  // namespace claimguard::session
