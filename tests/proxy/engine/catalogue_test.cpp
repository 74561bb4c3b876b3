// The event catalogue: one row per engine::event, unique audit words, the enforce words the docs
// and alerts name, and observe mode's words as "would-" + the word enforce mode would audit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "proxy/engine/catalogue.hpp"

namespace claimguard::engine::test {
namespace {

TEST(catalogue, one_row_per_event) {
    std::map<event, int> rows;
    for (const auto& r : catalogue()) ++rows[r.what];
    ASSERT_EQ(rows.size(), event_count);
    for (std::size_t i = 0; i < event_count; ++i) {
        EXPECT_EQ(rows[static_cast<event>(i)], 1) << "event " << i;
        EXPECT_EQ(row_of(static_cast<event>(i)).what, static_cast<event>(i));
    }
}

TEST(catalogue, words_unique_and_named) {
    std::set<std::string_view> words;
    for (const auto& r : catalogue()) {
        EXPECT_FALSE(r.action.empty());
        EXPECT_TRUE(words.insert(r.action).second) << r.action;
    }
}

TEST(catalogue, enforce_words_are_the_documented_ones) {
    EXPECT_EQ(action_of(event::took), "rewritten");
    EXPECT_EQ(action_of(event::tracked), "tracked");
    EXPECT_EQ(action_of(event::exhausted), "exhausted");
    EXPECT_EQ(action_of(event::not_lower), "refused-not-lower");
    EXPECT_EQ(action_of(event::restocked), "restock");
    EXPECT_EQ(action_of(event::blocked), "blocked");
    EXPECT_EQ(action_of(event::claim_unbacked), "claim-before-decrement");
    EXPECT_EQ(action_of(event::duplicate_redis), "duplicate-redis");
    EXPECT_EQ(action_of(event::duplicate_db), "duplicate-db");
    EXPECT_EQ(action_of(event::compensated), "compensated");
    EXPECT_EQ(action_of(event::rolled_back), "rolled-back");
    EXPECT_EQ(action_of(event::unmodeled_refused), "refused-unmodeled");
    EXPECT_EQ(action_of(event::unmodeled_forwarded), "forwarded-unmodeled");
    EXPECT_EQ(action_of(event::deferred_committed), "deferred-committed");
    EXPECT_EQ(action_of(event::deferred_dropped), "deferred-dropped");
}

TEST(catalogue, observe_words_are_would_and_the_enforce_word) {
    const std::map<verdict, std::string> want{
        {verdict::take, "would-rewritten"},
        {verdict::track_decrement, "would-tracked"},
        {verdict::restock, "would-restock"},
        {verdict::exhausted, "would-exhausted"},
        {verdict::claim, "would-claimed"},
        {verdict::rollback_instead, "would-rolled-back"},
        {verdict::refuse, "would-refused-unmodeled"},
        {verdict::forward, "would-forwarded-unmodeled"},
    };
    const auto& observable = observable_events();
    for (const auto& [v, word] : want) {
        const event e = enforce_event(v);
        EXPECT_EQ(observe_action(e), word) << verdict_name(v);
        EXPECT_EQ(observe_action(e), std::string(observe_prefix) + std::string(action_of(e)));
        EXPECT_NE(std::find(observable.begin(), observable.end(), e), observable.end()) << word;
    }
    // A claim enforce mode would answer exhausted without a take: the blocked claim's word.
    EXPECT_EQ(enforce_event(verdict::claim, true), event::blocked);
    EXPECT_EQ(action_of(event::would_block), observe_action(event::blocked));
    EXPECT_EQ(row_of(event::would_block).labels[0], action_of(event::blocked));
    // Every observable event is an enforce event (no would-would-...).
    for (auto e : observable) EXPECT_FALSE(action_of(e).starts_with(observe_prefix)) << action_of(e);
}

TEST(catalogue, metrics_have_consistent_labels) {
    std::map<std::string_view, std::size_t> labels_of;
    for (const auto& r : catalogue()) {
        ASSERT_FALSE(r.metric.empty()) << r.action;
        EXPECT_TRUE(r.metric.starts_with("claimguard_") && r.metric.ends_with("_total")) << r.metric;
        auto [it, fresh] = labels_of.emplace(r.metric, r.label_count());
        EXPECT_EQ(it->second, r.label_count()) << r.metric << " (" << r.action << ")";
    }
    // The deferred takes' ends and the reserved takes' events are reported with their take, the others
    // with the statement.
    for (const auto& r : catalogue())
        EXPECT_EQ(r.with_take, r.action.starts_with("deferred-") || r.action.starts_with("reserve-")) << r.action;
}

// The admission gate's notes: one row each, in the enum's order; the ERR 1205 answers audited with
// the documented words; no word shared with an event.
TEST(catalogue, admission_notes_have_their_rows) {
    const auto& rows = admission_catalogue();
    ASSERT_EQ(rows.size(), admission_note_count);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i].what, static_cast<admission_note::kind>(i));
        EXPECT_TRUE(rows[i].action.starts_with("admission-")) << rows[i].action;
    }
    EXPECT_EQ(row_of(admission_note::kind::timed_out).action, "admission-timeout");
    EXPECT_EQ(row_of(admission_note::kind::queue_full).action, "admission-queue-full");
    EXPECT_TRUE(row_of(admission_note::kind::timed_out).audited);
    EXPECT_TRUE(row_of(admission_note::kind::queue_full).audited);
    EXPECT_FALSE(row_of(admission_note::kind::lock_held).audited);
    EXPECT_FALSE(row_of(admission_note::kind::sold_out).audited);
    std::set<std::string_view> words;
    for (const auto& r : catalogue()) words.insert(r.action);
    for (const auto& r : rows) EXPECT_TRUE(words.insert(r.action).second) << r.action;
}

}  // namespace
}  // namespace claimguard::engine::test
