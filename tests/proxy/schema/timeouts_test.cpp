// The server-timeout advice of the schema check: which settings leave an orphaned transaction holding
// the hot row's lock for hours, and what the report says about them.
#include "proxy/schema/timeouts.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "proxy/schema/report.hpp"

namespace {

using namespace claimguard::schema;

server_timeouts mariadb_defaults() {
    server_timeouts t;
    EXPECT_TRUE(set_timeout(t, "wait_timeout", "28800"));
    EXPECT_TRUE(set_timeout(t, "idle_transaction_timeout", "0"));
    EXPECT_TRUE(set_timeout(t, "idle_write_transaction_timeout", "0"));
    EXPECT_TRUE(set_timeout(t, "innodb_lock_wait_timeout", "50"));
    return t;
}

const timeout_advice& find(const std::vector<timeout_advice>& a, const std::string& name) {
    for (const auto& x : a)
        if (x.variable == name) return x;
    throw std::runtime_error("no advice for " + name);
}

TEST(timeouts, set_timeout_reads_numbers_only) {
    server_timeouts t;
    EXPECT_TRUE(set_timeout(t, "wait_timeout", "600"));
    EXPECT_TRUE(set_timeout(t, "innodb_lock_wait_timeout", "1.5"));
    EXPECT_TRUE(set_timeout(t, "some_other_variable", "7"));  // ignored
    EXPECT_FALSE(set_timeout(t, "idle_transaction_timeout", "off"));
    EXPECT_FALSE(set_timeout(t, "idle_transaction_timeout", "-1"));
    EXPECT_EQ(t.wait_timeout, 600);
    EXPECT_EQ(t.innodb_lock_wait_timeout, 1.5);
    EXPECT_FALSE(t.idle_transaction_timeout.has_value());
}

TEST(timeouts, mariadb_defaults_leave_an_orphan_for_eight_hours) {
    const auto t = mariadb_defaults();
    EXPECT_EQ(orphan_lock_bound_s(t), 28800);
    const auto a = advise_timeouts(t);
    ASSERT_EQ(a.size(), std::size(timeout_variables));
    EXPECT_FALSE(find(a, "idle_write_transaction_timeout").ok);
    EXPECT_NE(find(a, "idle_write_transaction_timeout").advice.find("RECOMMENDED 30"), std::string::npos);
    EXPECT_FALSE(find(a, "wait_timeout").ok);
    EXPECT_TRUE(find(a, "innodb_lock_wait_timeout").ok);
}

TEST(timeouts, idle_write_timeout_bounds_it_and_calms_wait_timeout) {
    auto t = mariadb_defaults();
    ASSERT_TRUE(set_timeout(t, "idle_write_transaction_timeout", "30"));
    EXPECT_EQ(orphan_lock_bound_s(t), 30);
    const auto a = advise_timeouts(t);
    for (const auto& x : a) EXPECT_TRUE(x.ok) << x.variable << ": " << x.advice;
}

TEST(timeouts, an_idle_write_timeout_of_hours_is_no_bound) {
    auto t = mariadb_defaults();
    ASSERT_TRUE(set_timeout(t, "idle_write_transaction_timeout", "7200"));
    EXPECT_EQ(orphan_lock_bound_s(t), 7200);
    EXPECT_FALSE(find(advise_timeouts(t), "idle_write_transaction_timeout").ok);
}

TEST(timeouts, the_smallest_timeout_that_is_on_wins) {
    server_timeouts t;
    t.wait_timeout = 600;
    t.idle_transaction_timeout = 45;
    t.idle_write_transaction_timeout = 0;
    EXPECT_EQ(orphan_lock_bound_s(t), 45);
}

TEST(timeouts, mysql_has_no_idle_timeouts) {
    server_timeouts t;
    t.wait_timeout = 28800;
    t.innodb_lock_wait_timeout = 50;
    const auto a = advise_timeouts(t);
    EXPECT_TRUE(find(a, "idle_write_transaction_timeout").ok);  // nothing to change on MySQL
    EXPECT_NE(find(a, "idle_write_transaction_timeout").advice.find("MySQL"), std::string::npos);
    EXPECT_FALSE(find(a, "wait_timeout").ok);
    const auto lines = timeout_lines(t);
    EXPECT_NE(lines.front().find("idle_write_transaction_timeout = not on this server"), std::string::npos);
}

TEST(timeouts, nothing_set_means_only_orphan_kill) {
    server_timeouts t;
    t.wait_timeout = 0;
    EXPECT_FALSE(orphan_lock_bound_s(t).has_value());
    EXPECT_NE(timeout_lines(t).back().find("only claimguard's orphan_kill"), std::string::npos);
}

TEST(timeouts, report_text_and_json_carry_them) {
    schema_report r;
    r.server = "db:3306";
    r.timeouts = mariadb_defaults();
    const auto text = render_text(r);
    EXPECT_NE(text.find("idle_write_transaction_timeout = 0 (off): WARNING: RECOMMENDED 30"), std::string::npos)
        << text;
    EXPECT_NE(text.find("for up to 28800s on this server"), std::string::npos) << text;
    const auto j = to_json(r);
    EXPECT_EQ(j["timeouts"]["values"]["wait_timeout"], 28800);
    EXPECT_EQ(j["timeouts"]["orphan_lock_bound_s"], 28800);
    EXPECT_EQ(j["timeouts"]["advice"].size(), std::size(timeout_variables));
    EXPECT_TRUE(j["timeouts_error"].is_null());
    EXPECT_EQ(exit_code(r), 0);  // advisory: never changes the check's verdict
}

TEST(timeouts, report_says_when_they_could_not_be_read) {
    schema_report r;
    r.timeouts_error = "reading the server's timeouts: denied";
    EXPECT_NE(render_text(r).find("Server timeouts: not read"), std::string::npos);
    EXPECT_EQ(to_json(r)["timeouts_error"], "reading the server's timeouts: denied");
}

}  // namespace
