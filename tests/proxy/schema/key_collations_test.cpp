// The schema check's key collations (issue 17): how each stock rule key column compares, from
// COLLATION_NAME of it and of the claim columns holding it; a disagreement warns and stays bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proxy/schema/report.hpp"

namespace claimguard::schema {
namespace {

using k = rules::key_comparison;

const char* const promo_yaml = R"(stock_rules:
  - name: promo_stock
    table: promo_stock
    key_columns: [campaign_code]
    counter_column: remain
claim_rules:
  - name: promo_order
    table: promo_order
    idempotency_columns: [user_id, code]
    consumes:
      rule: promo_stock
      columns:
        code: campaign_code
)";

rules::rule_set load() {
    auto loaded = rules::load_rules({{"rules.yaml", promo_yaml}});
    EXPECT_TRUE(loaded.rules.has_value());
    return loaded.rules ? *loaded.rules : rules::rule_set{};
}

schema_metadata tables(const std::string& stock_collation, const std::string& claim_collation,
                       const std::string& claim_type = "varchar") {
    schema_metadata md;
    md.tables.push_back(
        {"shop",
         "promo_stock",
         {{"campaign_code", false, "varchar", "varchar(32)", stock_collation}, {"remain", false, "int", "int(11)"}},
         {}});
    md.tables.push_back(
        {"shop",
         "promo_order",
         {{"user_id", false, "bigint", "bigint(20)"}, {"code", false, claim_type, claim_type, claim_collation}},
         {{"uq", true, {"user_id", "code"}, false, false}}});
    return md;
}

struct collations_case {
    const char* name;
    std::string stock_collation;
    std::string claim_collation;
    std::string claim_type;
    k compare;
    bool warns;
};

TEST(key_collations, stock_and_claim_columns) {
    const collations_case cases[] = {
        {"both_general_ci", "utf8mb4_general_ci", "utf8mb4_general_ci", "varchar", k::ci_pad, false},
        {"same_comparison_other_name", "utf8mb4_general_ci", "utf8mb4_unicode_ci", "varchar", k::ci_pad, false},
        {"both_bin", "utf8mb4_bin", "utf8mb4_bin", "varchar", k::bytes_pad, false},
        {"mysql8_default", "utf8mb4_0900_ai_ci", "utf8mb4_0900_ai_ci", "varchar", k::ci_nopad, false},
        {"ci_stock_bin_claim", "utf8mb4_general_ci", "utf8mb4_bin", "varchar", k::bytes, true},
        {"bin_stock_ci_claim", "utf8mb4_bin", "utf8mb4_general_ci", "varchar", k::bytes, true},
        {"claim_is_a_number", "utf8mb4_general_ci", "", "bigint", k::bytes, true},
        {"stock_unknown_collation", "klingon_ci", "klingon_ci", "varchar", k::unknown, false},
    };
    const auto rules = load();
    for (const auto& c : cases) {
        const auto report = build_report(rules, tables(c.stock_collation, c.claim_collation, c.claim_type), "shop");
        ASSERT_EQ(report.key_collations.size(), 1u) << c.name;
        const auto& check = report.key_collations.front();
        EXPECT_EQ(check.rule, "promo_stock") << c.name;
        EXPECT_EQ(check.column, "campaign_code") << c.name;
        EXPECT_EQ(check.collation, c.stock_collation) << c.name;
        EXPECT_EQ(check.compare, c.compare) << c.name << ": " << engine::to_string(check.compare);
        EXPECT_EQ(!check.warning.empty(), c.warns) << c.name << ": " << check.warning;
        ASSERT_EQ(check.claims.size(), 1u) << c.name;
        EXPECT_EQ(check.claims.front().rule, "promo_order") << c.name;
        EXPECT_EQ(check.claims.front().column, "code") << c.name;
        const auto snapshot = key_compare_of(report.key_collations);
        ASSERT_EQ(snapshot.size(), 1u);
        EXPECT_EQ(snapshot.front(), (engine::rule_key_compare{"promo_stock", {c.compare}})) << c.name;
        // The text and JSON reports say it; a warning is a warning, never an exit code.
        const auto text = render_text(report);
        EXPECT_NE(text.find("promo_stock.campaign_code (" + c.stock_collation + ")"), std::string::npos)
            << c.name << "\n"
            << text;
        EXPECT_EQ(text.find("WARNING: stock rule promo_stock key column campaign_code") != std::string::npos, c.warns)
            << c.name << "\n"
            << text;
        const auto j = to_json(report);
        EXPECT_EQ(j["key_collations"][0]["compare"], std::string(engine::to_string(c.compare))) << c.name;
        EXPECT_EQ(exit_code(report), 0) << c.name;
    }
}

// A table the database lacks: a rule error elsewhere; no comparison (the key stays bytes).
TEST(key_collations, missing_stock_table_gives_no_comparison) {
    auto md = tables("utf8mb4_general_ci", "utf8mb4_general_ci");
    md.tables.erase(md.tables.begin());
    const auto report = build_report(load(), md, "shop");
    EXPECT_TRUE(report.key_collations.empty());
    EXPECT_TRUE(key_compare_of(report.key_collations).empty());
}

}  // namespace
}  // namespace claimguard::schema
