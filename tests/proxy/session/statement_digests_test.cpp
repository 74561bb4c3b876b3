// GET /digests' table: one entry per rule and shape, enforce and observe counted under one word,
// bounded.
#include "proxy/session/statement_digests.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace claimguard::session {
namespace {

using namespace std::chrono_literals;

TEST(statement_digests, one_entry_per_rule_and_shape_with_enforced_and_observed_counts) {
    statement_digests d;
    const std::chrono::system_clock::time_point t0{std::chrono::seconds(1'800'000'000)};
    const std::string_view update = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?";
    d.record("coupon_stock", "aaaa", update, "rewritten", t0);
    d.record("coupon_stock", "aaaa", update, "exhausted", t0 + 5s);
    d.record("coupon_stock", "aaaa", update, "would-rewritten", t0 + 9s);
    d.record("coupon_order", "bbbb", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)", "blocked", t0);
    const auto j = nlohmann::json::parse(d.json());
    ASSERT_EQ(j["shapes"].size(), 2u);
    const auto& first = j["shapes"][0];  // most seen first
    EXPECT_EQ(first["rule"], "coupon_stock");
    EXPECT_EQ(first["statement"], update);
    EXPECT_EQ(first["count"], 3);
    EXPECT_EQ(first["first_seen"], "2027-01-15T08:00:00Z");
    EXPECT_EQ(first["last_seen"], "2027-01-15T08:00:09Z");
    EXPECT_EQ(first["actions"]["rewritten"], (nlohmann::json{{"enforced", 1}, {"observed", 1}}));
    EXPECT_EQ(first["actions"]["exhausted"], (nlohmann::json{{"enforced", 1}, {"observed", 0}}));
    EXPECT_EQ(j["dropped"], 0);
    const auto text = d.text();
    EXPECT_NE(text.find("rewritten 1/1"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string(update)), std::string::npos) << text;
}

TEST(statement_digests, shapes_beyond_the_capacity_are_counted_not_kept) {
    statement_digests d(2);
    d.record("r", "1", "A", "rewritten");
    d.record("r", "2", "B", "rewritten");
    d.record("r", "3", "C", "rewritten");
    d.record("r", "1", "A", "rewritten");  // a kept shape still counts
    const auto j = nlohmann::json::parse(d.json());
    EXPECT_EQ(d.size(), 2u);
    EXPECT_EQ(j["dropped"], 1);
    EXPECT_EQ(j["shapes"][0]["count"], 2);
}

}  // namespace
}  // namespace claimguard::session
