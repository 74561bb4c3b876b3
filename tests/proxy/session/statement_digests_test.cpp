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

TEST(statement_digests, unlisted_tables_are_filed_under_a_pseudo_rule_with_their_notes_and_bounded) {
    statement_digests d;
    const std::string_view take = "UPDATE t1 SET remain = ? WHERE id = ?";
    EXPECT_TRUE(d.record_unlisted("shop.t1", "aa", take, "would-rewritten", {"counter: remain", "key_columns: id"}, 2));
    EXPECT_TRUE(d.record_unlisted("shop.t1", "aa", take, "would-rewritten", {"counter: remain", "key_columns: id"}, 2));
    EXPECT_TRUE(
        d.record_unlisted("shop.t2", "bb", "INSERT INTO t2 (a) VALUES (?)", "would-claimed", {"after: shop.t1"}, 2));
    // A third table is beyond the bound: counted, not kept; the kept ones still count.
    EXPECT_FALSE(d.record_unlisted("shop.t3", "cc", "UPDATE t3 SET n = ? WHERE id = ?", "would-rewritten", {}, 2));
    EXPECT_TRUE(
        d.record_unlisted("shop.t2", "bb", "INSERT INTO t2 (a) VALUES (?)", "would-claimed", {"after: shop.t1"}, 2));
    const auto j = nlohmann::json::parse(d.json());
    ASSERT_EQ(j["shapes"].size(), 2u);
    EXPECT_EQ(j["unlisted_dropped"], 1);
    const auto& first = j["shapes"][0];
    EXPECT_EQ(first["rule"], "unlisted:shop.t1");
    EXPECT_EQ(first["statement"], take);
    EXPECT_EQ(first["actions"]["rewritten"], (nlohmann::json{{"enforced", 0}, {"observed", 2}}));
    EXPECT_EQ(first["notes"], (nlohmann::json{{"counter: remain", 2}, {"key_columns: id", 2}}));
    EXPECT_EQ(j["shapes"][1]["rule"], "unlisted:shop.t2");
    // A rule's shapes carry no notes.
    d.record("coupon_stock", "dd", take, "rewritten");
    for (const auto& s : nlohmann::json::parse(d.json())["shapes"])
        if (s["rule"] == "coupon_stock") {
            EXPECT_FALSE(s.contains("notes")) << s;
        }
    EXPECT_NE(d.text().find("1 statement(s) of tables beyond watch_unlisted_tables not kept"), std::string::npos);
}

}  // namespace
}  // namespace claimguard::session
