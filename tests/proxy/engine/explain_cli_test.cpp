// `claimguard explain`: reading the rules files, --read, exit codes, and the dry run it prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "proxy/engine/explain_cli.hpp"
#include "rules/sql/script.hpp"

namespace claimguard::engine {
namespace {

// A rules file in a fresh temporary directory, removed with the fixture.
class explain_cli : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("claimguard-explain-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write(const std::string& name, const std::string& text) {
        const auto path = dir_ / name;
        std::ofstream(path) << text;
        return path.string();
    }

    int run(const std::vector<std::string>& rules, std::optional<std::string> read, const std::string& sql) {
        explain_request r;
        r.rules_paths = rules;
        r.read_value = std::move(read);
        r.sql = sql;
        return run(r);
    }
    int run(const explain_request& r) {
        out_.str("");
        err_.str("");
        return explain_command(r, out_, err_);
    }

    std::filesystem::path dir_;
    std::ostringstream out_;
    std::ostringstream err_;
};

const char* const coupon_rules = R"(default_mode: enforce
stock_rules:
  - name: coupon_stock
    table: coupon_stock
    key_columns: [campaign_id]
    counter_column: remain
    floor: 0
    exhausted:
      type: error
      code: 1644
      sqlstate: "45000"
      message: "sold out"
claim_rules:
  - name: coupon_order
    table: coupon_order
    idempotency_columns: [user_id, campaign_id]
    consumes:
      rule: coupon_stock
      columns:
        campaign_id: campaign_id
    duplicate:
      type: error
      code: 1644
      sqlstate: "45000"
      message: "already claimed"
)";

TEST_F(explain_cli, rewrite_with_read) {
    const auto rules = write("coupon.yaml", coupon_rules);
    EXPECT_EQ(run({rules}, "100", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7"), 0) << err_.str();
    EXPECT_NE(out_.str().find("  send: UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1\n"),
              std::string::npos)
        << out_.str();
    EXPECT_NE(out_.str().find("when 0 rows change:\n"), std::string::npos);
    EXPECT_NE(out_.str().find("  answer ERROR 1644 (45000): sold out\n"), std::string::npos);
    EXPECT_EQ(err_.str(), "");
}

TEST_F(explain_cli, negative_read_is_an_integer_too) {
    const auto rules = write("coupon.yaml", coupon_rules);
    EXPECT_EQ(run({rules}, "-1", "UPDATE coupon_stock SET remain = -3 WHERE campaign_id = 7"), 0) << err_.str();
    EXPECT_NE(out_.str().find("decision: refuse (an absolute write that means other units than the rule's"),
              std::string::npos)
        << out_.str();  // -1 - (-3) = 2 units, the rule takes 1: refused by default
}

TEST_F(explain_cli, bad_read_value_is_a_usage_error) {
    const auto rules = write("coupon.yaml", coupon_rules);
    for (const char* bad : {"abc", "", "12x", "1.5", "99999999999999999999"}) {
        EXPECT_EQ(run({rules}, std::string(bad), "SELECT 1"), 2) << bad;
        EXPECT_NE(err_.str().find("--read"), std::string::npos);
        EXPECT_EQ(out_.str(), "");
    }
}

TEST_F(explain_cli, unreadable_rules_file) {
    EXPECT_EQ(run({(dir_ / "missing.yaml").string()}, std::nullopt, "SELECT 1"), 2);
    EXPECT_NE(err_.str().find("missing.yaml"), std::string::npos);
    EXPECT_EQ(out_.str(), "");
}

TEST_F(explain_cli, invalid_rules_file) {
    const auto rules = write("bad.yaml", "stock_rules:\n  - name: x\n");
    EXPECT_EQ(run({rules}, std::nullopt, "SELECT 1"), 1);
    EXPECT_NE(err_.str().find("bad.yaml"), std::string::npos);
    EXPECT_EQ(out_.str(), "");
}

TEST_F(explain_cli, statement_no_rule_touches) {
    const auto rules = write("coupon.yaml", coupon_rules);
    EXPECT_EQ(run({rules}, std::nullopt, "SELECT * FROM users"), 0);
    EXPECT_NE(out_.str().find("decision: forward\n"), std::string::npos) << out_.str();
}

TEST_F(explain_cli, a_file_of_statements_gives_one_row_each) {
    const auto rules = write("coupon.yaml", std::string(coupon_rules) + "trusted_users: [stock_admin]\n");
    const auto file = write("app.sql",
                            "-- what the app sends; a ';' inside a string or a comment ends nothing\n"
                            "SELECT remain FROM coupon_stock WHERE campaign_id = 7;\n"
                            "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7;\n"
                            "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 'a;b');\n"
                            "TRUNCATE coupon_stock /* ; */;\n\n;\n"
                            "SELECT 1");
    explain_request r;
    r.rules_paths = {rules};
    r.file = file;
    r.format = "json";
    ASSERT_EQ(run(r), 0) << err_.str();
    const auto rows = nlohmann::json::parse(out_.str());
    ASSERT_EQ(rows.size(), 5u) << out_.str();
    EXPECT_EQ(rows[0]["decision"], "remember_read");
    EXPECT_EQ(rows[1]["decision"], "take");
    EXPECT_EQ(rows[1]["rule"], "coupon_stock");
    EXPECT_EQ(rows[1]["units"], 1);
    EXPECT_EQ(rows[1]["mode"], "enforce");
    EXPECT_EQ(rows[2]["decision"], "claim");
    EXPECT_EQ(rows[2]["statement"], "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 'a;b')");
    EXPECT_EQ(rows[3]["unmodeled"], "other_statement");
    EXPECT_EQ(rows[3]["decision"], "refuse");
    EXPECT_TRUE(rows[4]["rule"].is_null());

    // The same as a table, and as a trusted user: every row forwarded.
    r.format = "table";
    ASSERT_EQ(run(r), 0) << err_.str();
    EXPECT_NE(out_.str().find("coupon_stock         enforce  take             1      -"), std::string::npos)
        << out_.str();
    EXPECT_NE(out_.str().find("5 statement(s)"), std::string::npos);
    r.user = "stock_admin";
    r.format = "json";
    ASSERT_EQ(run(r), 0) << err_.str();
    for (const auto& row : nlohmann::json::parse(out_.str())) EXPECT_EQ(row["decision"], "forward");
    r.user = "app";
    ASSERT_EQ(run(r), 0) << err_.str();
    EXPECT_EQ(nlohmann::json::parse(out_.str())[1]["decision"], "take");
}

TEST_F(explain_cli, one_statement_as_a_trusted_user_and_with_admission) {
    const auto rules = write("coupon.yaml", std::string(coupon_rules) + "trusted_users: [stock_admin]\n");
    explain_request r;
    r.rules_paths = {rules};
    r.sql = "UPDATE coupon_stock SET remain = remain + 100 WHERE campaign_id = 7";
    r.user = "stock_admin";
    ASSERT_EQ(run(r), 0) << err_.str();
    EXPECT_EQ(out_.str(),
              "user stock_admin is in trusted_users: the statement is forwarded unchanged, never refused; a write of "
              "a stock table is audited (trusted-write) and counted, and after its OK the read cache and the "
              "admission queue forget what they knew of its key\n");
    std::string with_admission = coupon_rules;
    with_admission.replace(with_admission.find("    floor: 0\n"), 13,
                           "    floor: 0\n    admission:\n      max_in_flight: 2\n      queue_timeout: 500ms\n");
    explain_request a;
    a.rules_paths = {write("admission.yaml", with_admission)};
    a.sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain > 0";
    ASSERT_EQ(run(a), 0) << err_.str();
    EXPECT_NE(out_.str().find("admission: at most 2 decrement(s) of this key in flight on this sidecar; the rest wait "
                              "in line (at most 10000, each at most 500ms, then ERR 1205)"),
              std::string::npos)
        << out_.str();
}

TEST_F(explain_cli, a_take_with_group_update_says_it_may_go_in_a_batch) {
    std::string with_group = coupon_rules;
    with_group.replace(with_group.find("    floor: 0\n"), 13,
                       "    floor: 0\n    admission: {max_in_flight: 1, queue_timeout: 2s}\n"
                       "    group_update: {max_batch: 16, max_wait: 1ms}\n");
    explain_request a;
    a.rules_paths = {write("group.yaml", with_group)};
    a.sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7";
    ASSERT_EQ(run(a), 0) << err_.str();
    EXPECT_NE(out_.str().find("group_update: in autocommit, up to 16 takes of this key queued on this sidecar go as "
                              "one UPDATE of their summed units"),
              std::string::npos)
        << out_.str();
}

TEST_F(explain_cli, a_take_with_reserve_says_it_is_served_from_the_sidecars_block) {
    std::string with_reserve = coupon_rules;
    with_reserve.replace(with_reserve.find("    floor: 0\n"), 13, "    floor: 0\n    reserve: {block: 20, idle: 2s}\n");
    explain_request a;
    a.rules_paths = {write("reserve.yaml", with_reserve)};
    a.sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7";
    ASSERT_EQ(run(a), 0) << err_.str();
    EXPECT_NE(out_.str().find("reserve: served from this sidecar's reserved units of the key "
                              "(taken from the row in blocks of up to 20"),
              std::string::npos)
        << out_.str();
    EXPECT_NE(out_.str().find("at ROLLBACK, in autocommit it is consumed at once; unused units go back to the row "
                              "after 2000ms"),
              std::string::npos)
        << out_.str();
}

TEST_F(explain_cli, file_and_statement_together_or_a_missing_file_are_usage_errors) {
    const auto rules = write("coupon.yaml", coupon_rules);
    explain_request r;
    r.rules_paths = {rules};
    r.sql = "SELECT 1";
    r.file = (dir_ / "missing.sql").string();
    EXPECT_EQ(run(r), 2);
    r.sql.clear();
    EXPECT_EQ(run(r), 2);
    EXPECT_NE(err_.str().find("cannot read"), std::string::npos) << err_.str();
}

TEST(explain_script, splits_at_semicolons_outside_strings_and_comments) {
    using rules::sql::split_script;
    EXPECT_EQ(split_script("SELECT 1; SELECT ';'/*;*/ ;\n-- ;\n ; ;SELECT 2"),
              (std::vector<std::string>{"SELECT 1", "SELECT ';'/*;*/", "SELECT 2"}));
    EXPECT_TRUE(split_script(" ;\n").empty());
}

}  // namespace
}  // namespace claimguard::engine
