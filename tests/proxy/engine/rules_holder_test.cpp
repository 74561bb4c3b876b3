// rules_holder / rules_view: a reload is seen by the next command, a held snapshot outlives it.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "proxy/engine/rules_snapshot.hpp"

namespace {

using namespace claimguard;

std::shared_ptr<const engine::rules_snapshot> make_snapshot(const std::string& marker) {
    auto s = std::make_shared<engine::rules_snapshot>(rules::rule_set{});
    s->files = {marker};
    return s;
}

TEST(RulesHolder, VersionCountsReplacements) {
    engine::rules_holder holder;
    EXPECT_EQ(holder.version(), 0u);
    EXPECT_EQ(holder.current(), nullptr);
    holder.replace(make_snapshot("a"));
    holder.replace(make_snapshot("b"));
    EXPECT_EQ(holder.version(), 2u);
    EXPECT_EQ(holder.current()->files.at(0), "b");
}

TEST(RulesView, EmptyHolderGivesNull) {
    engine::rules_holder holder;
    engine::rules_view view;
    EXPECT_EQ(view.current(holder), nullptr);
}

TEST(RulesView, CachesUntilTheVersionMoves) {
    engine::rules_holder holder;
    holder.replace(make_snapshot("a"));
    engine::rules_view view;
    const auto* first = view.current(holder).get();
    EXPECT_EQ(view.current(holder).get(), first);  // same object, no reload
    EXPECT_EQ(first->files.at(0), "a");
}

TEST(RulesView, ReloadIsSeenByTheNextCommand) {
    engine::rules_holder holder;
    holder.replace(make_snapshot("a"));
    engine::rules_view view;
    ASSERT_EQ(view.current(holder)->files.at(0), "a");
    holder.replace(make_snapshot("b"));
    EXPECT_EQ(view.current(holder)->files.at(0), "b");
    holder.replace(nullptr);  // rules removed: the next command sees none
    EXPECT_EQ(view.current(holder), nullptr);
}

TEST(RulesView, HeldSnapshotStaysAliveAfterAReload) {
    engine::rules_holder holder;
    holder.replace(make_snapshot("a"));
    engine::rules_view view;
    std::shared_ptr<const engine::rules_snapshot> in_flight = view.current(holder);  // a command's own copy
    std::weak_ptr<const engine::rules_snapshot> watch = in_flight;
    holder.replace(make_snapshot("b"));
    ASSERT_EQ(view.current(holder)->files.at(0), "b");  // the view dropped "a"
    ASSERT_FALSE(watch.expired());
    EXPECT_EQ(in_flight->files.at(0), "a");
    in_flight.reset();
    EXPECT_TRUE(watch.expired());  // nobody else kept it
}

TEST(RulesView, ANewHolderIsNotMistakenForTheOld) {
    engine::rules_view view;
    auto first = std::make_unique<engine::rules_holder>();
    first->replace(make_snapshot("a"));
    ASSERT_EQ(view.current(*first)->files.at(0), "a");
    first.reset();
    engine::rules_holder second;  // same version (1) as the first had
    second.replace(make_snapshot("b"));
    EXPECT_EQ(view.current(second)->files.at(0), "b");
}

TEST(RulesView, PerThreadViewsSeeAReload) {
    engine::rules_holder holder;
    holder.replace(make_snapshot("a"));
    ASSERT_EQ(engine::current_on_this_thread(holder)->files.at(0), "a");
    holder.replace(make_snapshot("b"));
    EXPECT_EQ(engine::current_on_this_thread(holder)->files.at(0), "b");
    std::string seen;
    std::thread other([&] { seen = engine::current_on_this_thread(holder)->files.at(0); });
    other.join();
    EXPECT_EQ(seen, "b");
}

TEST(RulesView, ConcurrentReloadsNeverShowATornOrOlderSnapshot) {
    engine::rules_holder holder;
    constexpr int reloads = 2000;
    holder.replace(make_snapshot("0"));
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    std::atomic<int> regressions{0};
    for (int t = 0; t < 2; ++t)
        readers.emplace_back([&] {
            engine::rules_view view;
            int last = 0;
            while (!stop.load()) {
                int now = std::stoi(view.current(holder)->files.at(0));
                if (now < last) ++regressions;
                last = now;
            }
        });
    for (int i = 1; i <= reloads; ++i) holder.replace(make_snapshot(std::to_string(i)));
    stop = true;
    for (auto& r : readers) r.join();
    EXPECT_EQ(regressions.load(), 0);
    engine::rules_view late;
    EXPECT_EQ(late.current(holder)->files.at(0), std::to_string(reloads));
}

}  // namespace
