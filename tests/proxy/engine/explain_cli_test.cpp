// `claimguard explain`: reading the rules files, --read, exit codes, and the dry run it prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proxy/engine/explain_cli.hpp"

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
        out_.str("");
        err_.str("");
        return explain_command(rules, read, sql, out_, err_);
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

}  // namespace
}  // namespace claimguard::engine
