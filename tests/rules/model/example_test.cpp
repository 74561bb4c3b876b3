// The shipped example and SQL files: coupon.yaml describes the incident's schema, the migration cannot drift.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "rules/model/ddl.hpp"
#include "rules/model/rules.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules::test {
namespace {

const std::string example_path = "rules/examples/coupon.yaml";

std::string read_repo_file(const std::string& relative) {
    std::ifstream in(std::string(CLAIMGUARD_SOURCE_DIR) + "/" + relative, std::ios::binary);
    EXPECT_TRUE(in) << "cannot open " << relative;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

rule_set load_example() {
    // The file name as `claimguard ddl rules/examples/coupon.yaml` sees it from the repo root.
    auto r = load_rules({{example_path, read_repo_file(example_path)}});
    for (const auto& e : r.errors)
        ADD_FAILURE() << format_diagnostic(e);
    return r.rules.value_or(rule_set{});
}

TEST(coupon_example, describes_the_incident) {
    const auto set = load_example();
    ASSERT_EQ(set.stocks.size(), 1u);
    ASSERT_EQ(set.claims.size(), 1u);
    EXPECT_EQ(set.default_mode, mode::enforce);

    const auto& stock = set.stocks[0];
    EXPECT_EQ(stock.name, "coupon_stock");
    EXPECT_EQ(stock.table.schema, "");
    EXPECT_EQ(stock.table.name, "coupon_stock");
    EXPECT_EQ(stock.key_columns, std::vector<std::string>{"campaign_id"});
    EXPECT_EQ(stock.counter_column, "remain");
    EXPECT_EQ(stock.floor, 0);
    EXPECT_EQ(stock.version_column, "version");
    EXPECT_EQ(stock.exhausted.type, answer::kind::error);
    EXPECT_EQ(stock.exhausted.code, 1644);
    EXPECT_EQ(stock.exhausted.sql_state, "45000");
    EXPECT_EQ(stock.exhausted.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(set.effective_mode(stock), mode::enforce);

    const auto& claim = set.claims[0];
    EXPECT_EQ(claim.name, "coupon_order");
    EXPECT_EQ(claim.table.name, "coupon_order");
    EXPECT_EQ(claim.idempotency_columns, (std::vector<std::string>{"user_id", "campaign_id"}));
    EXPECT_FALSE(claim.idempotency_key_column.has_value());
    EXPECT_EQ(claim.stock_rule, "coupon_stock");
    EXPECT_EQ(set.find_stock(claim.stock_rule), &set.stocks[0]);
    EXPECT_EQ(claim.stock_key_mapping,
              (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
    ASSERT_TRUE(claim.redis.has_value());
    // The post-mortem's Redis filter: SET lock:coupon:{user}:{campaign} 1 NX PX 3000.
    EXPECT_EQ(claim.redis->key_template, "lock:coupon:{user_id}:{campaign_id}");
    EXPECT_EQ(claim.redis->ttl, std::chrono::milliseconds(3000));
    EXPECT_EQ(claim.duplicate.code, 1644);
    EXPECT_EQ(claim.duplicate.sql_state, "45000");
    EXPECT_EQ(claim.duplicate.message, "claimguard: already claimed");
    EXPECT_EQ(claim.strict, strictness::require_decrement);
    EXPECT_EQ(set.effective_mode(claim), mode::enforce);
}

TEST(coupon_example, migration_is_exactly_the_generated_ddl) {
    const auto set = load_example();
    EXPECT_EQ(read_repo_file("sql/migrations/001_claimguard_unique_index.sql"), render_ddl(set))
        << "regenerate with: claimguard ddl rules/examples/coupon.yaml > "
           "sql/migrations/001_claimguard_unique_index.sql";
}

// The body of `CREATE TABLE <table> (...)` in a SQL file, or empty.
std::string create_table_body(const std::string& sql, const std::string& table) {
    const auto start = sql.find("CREATE TABLE " + table + " (");
    if (start == std::string::npos)
        return {};
    const auto end = sql.find("\n)", start);
    return sql.substr(start, end - start);
}

bool defines_column(const std::string& body, const std::string& column) {
    std::istringstream lines(body);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream words(line);
        std::string first;
        words >> first;
        if (iequals(first, column))
            return true;
    }
    return false;
}

TEST(coupon_example, legacy_schema_has_every_column_the_rules_name) {
    const auto sql = read_repo_file("sql/legacy_schema.sql");
    const auto set = load_example();
    ASSERT_EQ(set.stocks.size(), 1u);
    ASSERT_EQ(set.claims.size(), 1u);
    const auto stock_body = create_table_body(sql, set.stocks[0].table.name);
    ASSERT_FALSE(stock_body.empty());
    for (const auto& c : set.stocks[0].key_columns)
        EXPECT_TRUE(defines_column(stock_body, c)) << c;
    EXPECT_TRUE(defines_column(stock_body, set.stocks[0].counter_column));
    EXPECT_TRUE(defines_column(stock_body, *set.stocks[0].version_column));
    const auto claim_body = create_table_body(sql, set.claims[0].table.name);
    ASSERT_FALSE(claim_body.empty());
    for (const auto& c : set.claims[0].idempotency_columns)
        EXPECT_TRUE(defines_column(claim_body, c)) << c;
    for (const auto& [claim_col, stock_col] : set.claims[0].stock_key_mapping)
        EXPECT_TRUE(defines_column(claim_body, claim_col)) << claim_col;
}

TEST(coupon_example, legacy_schema_has_no_unique_index_on_the_claim) {
    // The incident's schema: duplicates were possible because nothing unique covered the claim.
    const auto sql = read_repo_file("sql/legacy_schema.sql");
    const auto body = create_table_body(sql, "coupon_order");
    ASSERT_FALSE(body.empty());
    EXPECT_EQ(ascii_lower(body).find("unique"), std::string::npos);
}

}  // namespace
}  // namespace claimguard::rules::test
