// Unit tests of the load tool's pure parts: how an ERR is classified, how answers are counted, percentiles, plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/load/attempt_plan.hpp"
#include "tests/load/claim_flow.hpp"
#include "tests/load/load_report.hpp"

namespace claimguard::load {
namespace {

struct classify_case {
    const char* name;
    unsigned code;
    const char* message;
    bool connection_lost;
    answer_kind kind;
    answer_reason reason;
};

class classify_test : public ::testing::TestWithParam<classify_case> {};

TEST_P(classify_test, reads_code_and_message) {
    const auto& c = GetParam();
    const answer_rules rules;  // the defaults: 1644 + "sold out" / "already claimed"
    const auto r = classify_error(sql_error(c.code, c.message, c.connection_lost), rules);
    EXPECT_EQ(r.kind, c.kind);
    EXPECT_EQ(r.reason, c.reason);
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(r.error->code, c.code);
}

INSTANTIATE_TEST_SUITE_P(
    load, classify_test,
    ::testing::Values(
        classify_case{"sold_out", 1644, "claimguard: coupon_stock is sold out for this key", false,
                      answer_kind::sold_out, answer_reason::server_answer},
        classify_case{"sold_out_any_case", 1644, "Sold Out", false, answer_kind::sold_out,
                      answer_reason::server_answer},
        classify_case{"already_claimed", 1644, "claimguard: already claimed", false, answer_kind::duplicate,
                      answer_reason::server_answer},
        classify_case{"signal_other_text", 1644, "something else", false, answer_kind::error, answer_reason::none},
        classify_case{"sold_out_text_other_code", 1213, "sold out", false, answer_kind::error,
                      answer_reason::none},
        classify_case{"raw_duplicate_key", 1062, "Duplicate entry '5-1' for key 'uq'", false, answer_kind::error,
                      answer_reason::none},
        classify_case{"lost_connection", 2013, "Lost connection to server during query", true, answer_kind::error,
                      answer_reason::none}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(classify, custom_rules) {
    answer_rules rules;
    rules.sold_out_code = 1105;
    rules.sold_out_text = "no stock";
    rules.duplicate_code = 1062;
    rules.duplicate_text = "";  // any message
    EXPECT_EQ(classify_error(sql_error(1105, "No stock left", false), rules).kind, answer_kind::sold_out);
    EXPECT_EQ(classify_error(sql_error(1062, "Duplicate entry", false), rules).kind, answer_kind::duplicate);
    EXPECT_EQ(classify_error(sql_error(1644, "sold out", false), rules).kind, answer_kind::error);
}

TEST(breaks_connection, client_errors_and_kills) {
    EXPECT_TRUE(breaks_connection(2006));
    EXPECT_TRUE(breaks_connection(2013));
    EXPECT_TRUE(breaks_connection(1927));
    EXPECT_FALSE(breaks_connection(1644));
    EXPECT_FALSE(breaks_connection(1062));
}

struct percentile_case {
    const char* name;
    std::vector<std::uint32_t> samples_us;
    double p;
    double expected_ms;
};

class percentile_test : public ::testing::TestWithParam<percentile_case> {};

TEST_P(percentile_test, nearest_rank) {
    const auto& c = GetParam();
    EXPECT_DOUBLE_EQ(percentile_ms(c.samples_us, c.p), c.expected_ms);
}

INSTANTIATE_TEST_SUITE_P(
    load, percentile_test,
    ::testing::Values(percentile_case{"empty", {}, 50, 0.0}, percentile_case{"one", {1500}, 99, 1.5},
                      // ranks: ceil(0.5*4)=2 -> 2000, ceil(0.95*4)=4 -> 4000 (unsorted input)
                      percentile_case{"median_of_four", {4000, 1000, 3000, 2000}, 50, 2.0},
                      percentile_case{"p95_of_four", {4000, 1000, 3000, 2000}, 95, 4.0},
                      percentile_case{"max", {7, 9000, 3}, 100, 9.0}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(tally, counts_each_kind_and_merges) {
    tally a, b;
    a.add({answer_kind::claimed, answer_reason::none, std::nullopt, {}}, 7, std::chrono::microseconds(100));
    a.add({answer_kind::sold_out, answer_reason::app_check, std::nullopt, {}}, 8, std::chrono::microseconds(200));
    b.add({answer_kind::sold_out, answer_reason::server_answer, sql_error(1644, "sold out", false), {}}, 9,
          std::chrono::microseconds(300));
    b.add({answer_kind::duplicate, answer_reason::server_answer, sql_error(1644, "already claimed", false), {}}, 7,
          std::chrono::microseconds(400));
    b.add({answer_kind::error, answer_reason::none, sql_error(1213, "Deadlock found", false), "UPDATE"}, 10,
          std::chrono::microseconds(500));
    b.add({answer_kind::error, answer_reason::none, sql_error(1213, "Deadlock found", false), "UPDATE"}, 11,
          std::chrono::microseconds(600));
    a.merge(std::move(b));

    run_summary s;
    s.tool = "t";
    s.attempts_planned = 6;
    s.elapsed_s = 2.0;
    s.record_claims = true;
    s.totals = a;
    const auto j = to_json(s);
    EXPECT_EQ(j["attempts"], 6);
    EXPECT_EQ(j["claimed"], 1);
    EXPECT_EQ(j["sold_out"], 2);
    EXPECT_EQ(j["sold_out_by"]["app_check"], 1);
    EXPECT_EQ(j["sold_out_by"]["server_answer"], 1);
    EXPECT_EQ(j["duplicate"], 1);
    EXPECT_EQ(j["duplicate_by"]["server_answer"], 1);
    EXPECT_EQ(j["other_errors"], 2);
    ASSERT_EQ(j["errors"].size(), 1u);
    EXPECT_EQ(j["errors"][0]["code"], 1213);
    EXPECT_EQ(j["errors"][0]["statement"], "UPDATE");
    EXPECT_EQ(j["errors"][0]["count"], 2);
    EXPECT_EQ(j["claimed_users"], nlohmann::json::array({7}));
    EXPECT_DOUBLE_EQ(j["claims_per_s"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j["latency_ms"]["max"].get<double>(), 0.6);
}

TEST(error_pattern, digits_become_n) {
    EXPECT_EQ(error_pattern("Duplicate entry '105-1' for key 'uq_2'"), "Duplicate entry 'N-N' for key 'uq_N'");
    EXPECT_EQ(error_pattern(""), "");
    EXPECT_EQ(error_pattern("no digits"), "no digits");
}

TEST(tally, groups_messages_that_differ_in_numbers) {
    tally t;
    const auto duplicate = [](const char* message) {
        return attempt_result{answer_kind::error, answer_reason::none, sql_error(1062, message, false), "INSERT"};
    };
    t.add(duplicate("Duplicate entry '7-1' for key 'u'"), 7, std::chrono::microseconds(1));
    t.add(duplicate("Duplicate entry '9-1' for key 'u'"), 9, std::chrono::microseconds(1));
    ASSERT_EQ(t.errors.size(), 1u);
    EXPECT_EQ((t.errors[{"INSERT", 1062, "Duplicate entry 'N-N' for key 'u'"}]), 2u);
}

TEST(tally, caps_distinct_error_messages) {
    tally t;
    std::string letters;
    for (std::size_t i = 0; i < max_distinct_errors + 5; ++i) {
        letters += 'x';
        t.add({answer_kind::error, answer_reason::none, sql_error(1105, "message " + letters, false), "SELECT"}, 1,
              std::chrono::microseconds(1));
    }
    EXPECT_EQ(t.errors.size(), max_distinct_errors + 1);
    EXPECT_EQ((t.errors[{"SELECT", 1105, "(other messages)"}]), 5u);
    EXPECT_EQ(t.other_errors, max_distinct_errors + 5);
}

TEST(tally, last_claim_is_the_latest_successful_claim) {
    using std::chrono::microseconds;
    const attempt_result claim{answer_kind::claimed, answer_reason::none, std::nullopt, {}};
    const attempt_result sold_out{answer_kind::sold_out, answer_reason::app_check, std::nullopt, {}};
    tally a, b;
    a.add(claim, 1, microseconds(10), microseconds(500'000));
    a.add(sold_out, 2, microseconds(10), microseconds(3'000'000));  // answers after the sale do not count
    b.add(claim, 3, microseconds(10), microseconds(1'000'000));
    b.add(claim, 4, microseconds(10), microseconds(250'000));  // threads finish out of order
    a.merge(std::move(b));
    EXPECT_EQ(a.last_claim, microseconds(1'000'000));

    run_summary s;
    s.config = nlohmann::json::object();
    s.elapsed_s = 4.0;
    s.totals = a;
    const auto j = to_json(s);
    EXPECT_DOUBLE_EQ(j["last_claim_s"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(j["claims_per_s_until_last_claim"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(j["claims_per_s"].get<double>(), 0.75);
    EXPECT_NE(to_table(s).find("last claim at"), std::string::npos);
}

TEST(tally, no_claim_reports_zero_rates) {
    tally t;
    t.add({answer_kind::sold_out, answer_reason::app_check, std::nullopt, {}}, 1, std::chrono::microseconds(5),
          std::chrono::microseconds(9));
    run_summary s;
    s.elapsed_s = 1.0;
    s.totals = t;
    const auto j = to_json(s);
    EXPECT_DOUBLE_EQ(j["last_claim_s"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(j["claims_per_s_until_last_claim"].get<double>(), 0.0);
}

TEST(flow, names) {
    ASSERT_TRUE(parse_flow("naive"));
    EXPECT_EQ(parse_flow("naive")->flow, flow_kind::naive);
    EXPECT_FALSE(parse_flow("naive")->transaction);
    EXPECT_EQ(parse_flow("fixed")->flow, flow_kind::fixed);
    EXPECT_FALSE(parse_flow("fixed")->transaction);
    ASSERT_TRUE(parse_flow("naive_tx"));
    EXPECT_EQ(parse_flow("naive_tx")->flow, flow_kind::naive);
    EXPECT_TRUE(parse_flow("naive_tx")->transaction);
    ASSERT_TRUE(parse_flow("fixed_tx"));
    EXPECT_EQ(parse_flow("fixed_tx")->flow, flow_kind::fixed);
    EXPECT_TRUE(parse_flow("fixed_tx")->transaction);
    EXPECT_FALSE(parse_flow("tx"));
    EXPECT_FALSE(parse_flow(""));
}

TEST(plan, every_user_the_same_number_of_times) {
    auto plan = make_plan(5, 4, 3, 1);
    ASSERT_EQ(plan.size(), 12u);
    for (std::int64_t user = 5; user < 9; ++user) EXPECT_EQ(std::count(plan.begin(), plan.end(), user), 3);
}

TEST(plan, herd_draws_random_users_in_range_with_repeats) {
    constexpr std::uint64_t attempts = 5000;
    const auto plan = make_herd_plan(100, 2000, attempts, 7);
    ASSERT_EQ(plan.size(), attempts);
    EXPECT_EQ(*std::min_element(plan.begin(), plan.end()) >= 100, true);
    EXPECT_EQ(*std::max_element(plan.begin(), plan.end()) <= 2099, true);
    const std::set<std::int64_t> distinct(plan.begin(), plan.end());
    // 5000 draws of 2000 users: about 2000 * (1 - e^-2.5) = 1836 distinct; some repeat, most appear.
    EXPECT_LT(distinct.size(), attempts);
    EXPECT_GT(distinct.size(), 1500u);
    EXPECT_EQ(make_herd_plan(100, 2000, attempts, 7), plan);  // the seed decides
    EXPECT_NE(make_herd_plan(100, 2000, attempts, 8), plan);
}

}  // namespace
}  // namespace claimguard::load
