// DDL for claim rules: identifier quoting, deterministic index names, statements, the whole script.
#include <gtest/gtest.h>

#include "rules/model/ddl.hpp"
#include "rules/model/text.hpp"
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

struct quote_case {
    const char* name;
    std::string id;
    std::string quoted;
};

const quote_case quote_cases[] = {
    {"plain", "coupon_order", "`coupon_order`"},
    {"backtick_doubled", "a`b", "`a``b`"},
    {"only_backticks", "``", "``````"},
    {"space", "coupon order", "`coupon order`"},
    {"utf8", "优惠券", "`优惠券`"},
    {"keyword", "order", "`order`"},
};

class quoting : public testing::TestWithParam<quote_case> {};
TEST_P(quoting, identifier) { EXPECT_EQ(quote_identifier(GetParam().id), GetParam().quoted); }
INSTANTIATE_TEST_SUITE_P(ddl, quoting, testing::ValuesIn(quote_cases),
                         [](const testing::TestParamInfo<quote_case>& i) { return std::string(i.param.name); });

TEST(ddl_quoting, table_with_and_without_schema) {
    EXPECT_EQ(quote_table({"", "coupon_order"}), "`coupon_order`");
    EXPECT_EQ(quote_table({"sh`op", "coupon_order"}), "`sh``op`.`coupon_order`");
}

TEST(ddl_index_name, short_names_spell_table_and_columns) {
    EXPECT_EQ(unique_index_name("coupon_order", {"user_id", "campaign_id"}),
              "uq_claimguard_coupon_order_user_id_campaign_id");
    EXPECT_EQ(unique_index_name("t", {"request_id"}), "uq_claimguard_t_request_id");
}

TEST(ddl_index_name, exactly_64_characters_is_kept) {
    // "uq_claimguard_" (14) + table (48) + "_" + "c" = 64.
    const std::string table(48, 't');
    const auto name = unique_index_name(table, {"c"});
    EXPECT_EQ(name, "uq_claimguard_" + table + "_c");
    EXPECT_EQ(name.size(), 64u);
}

TEST(ddl_index_name, long_names_are_cut_and_end_in_a_hash) {
    const std::string table(49, 't');
    const auto name = unique_index_name(table, {"c"});
    ASSERT_EQ(name.size(), 64u);
    const std::string full = "uq_claimguard_" + table + "_c";
    EXPECT_EQ(name.substr(0, 55), full.substr(0, 55));
    EXPECT_EQ(name[55], '_');
    // The hash is FNV-1a 64 of table, NUL, column; its low 8 hex digits.
    std::string hashed = table + std::string(1, '\0') + "c";
    EXPECT_EQ(name.substr(56), to_hex(fnv1a64(hashed), 8));
}

TEST(ddl_index_name, distinct_long_column_lists_get_distinct_names) {
    const std::string table(60, 't');
    EXPECT_NE(unique_index_name(table, {"a", "b"}), unique_index_name(table, {"a_b"}));
    EXPECT_NE(unique_index_name(table, {"user_id"}), unique_index_name(table, {"campaign_id"}));
    EXPECT_EQ(unique_index_name(table, {"a"}), unique_index_name(table, {"a"}));
}

TEST(ddl_index_name, multibyte_names_are_cut_on_character_boundaries) {
    std::string table;
    for (int i = 0; i < 60; ++i)
        table += "表";
    const auto name = unique_index_name(table, {"列"});
    EXPECT_FALSE(first_invalid_utf8(name).has_value());
    EXPECT_EQ(utf8_length(name), 64u);
}

rule_set load_set(const std::string& yaml) {
    auto r = load_one(yaml);
    EXPECT_TRUE(r.rules.has_value()) << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
    return r.rules.value_or(rule_set{});
}

TEST(ddl_indexes, one_per_claim_rule_plus_the_key_column) {
    const auto set = load_set(with_claim_lines("    idempotency_key_column: request_id\n"));
    const auto indexes = required_unique_indexes(set);
    ASSERT_EQ(indexes.size(), 2u);
    EXPECT_EQ(indexes[0].rule, "c");
    EXPECT_EQ(indexes[0].columns, (std::vector<std::string>{"user_id", "campaign_id"}));
    EXPECT_EQ(indexes[0].why, unique_index::purpose::idempotency_columns);
    EXPECT_EQ(indexes[0].name, "uq_claimguard_coupon_order_user_id_campaign_id");
    EXPECT_EQ(indexes[1].columns, std::vector<std::string>{"request_id"});
    EXPECT_EQ(indexes[1].why, unique_index::purpose::idempotency_key_column);
    EXPECT_EQ(indexes[1].name, "uq_claimguard_coupon_order_request_id");
}

TEST(ddl_indexes, key_column_named_like_the_business_key_gets_its_own_name) {
    const auto set = load_set(base_stock +
                              "claim_rules:\n  - table: t\n    idempotency_columns: [a, b]\n"
                              "    idempotency_key_column: A_B\n    consumes: {rule: s, columns: {a: campaign_id}}\n");
    const auto indexes = required_unique_indexes(set);
    ASSERT_EQ(indexes.size(), 2u);
    EXPECT_EQ(indexes[0].name, "uq_claimguard_t_a_b");
    EXPECT_EQ(indexes[1].name, "uq_claimguard_t_A_B_" + to_hex(fnv1a64(std::string("t\0A_B", 5)), 8));
}

TEST(ddl_statements, duplicates_query_and_alter) {
    const unique_index index{"c", {"shop", "coupon_order"}, {"user_id", "campaign_id"}, "uq_x",
                             unique_index::purpose::idempotency_columns};
    EXPECT_EQ(duplicates_query(index),
              "SELECT `user_id`, `campaign_id`, COUNT(*) AS claims FROM `shop`.`coupon_order` GROUP BY `user_id`, "
              "`campaign_id` HAVING COUNT(*) > 1;");
    EXPECT_EQ(add_index_statement(index),
              "ALTER TABLE `shop`.`coupon_order` ADD UNIQUE INDEX `uq_x` (`user_id`, `campaign_id`), "
              "ALGORITHM=INPLACE, LOCK=NONE;");
}

TEST(ddl_statements, hostile_identifiers_stay_quoted) {
    const unique_index index{"c", {"", "o`; DROP TABLE x; --"}, {"a`b"}, "n`",
                             unique_index::purpose::idempotency_columns};
    EXPECT_EQ(add_index_statement(index),
              "ALTER TABLE `o``; DROP TABLE x; --` ADD UNIQUE INDEX `n``` (`a``b`), ALGORITHM=INPLACE, LOCK=NONE;");
}

TEST(ddl_script, no_claim_rules) {
    const auto set = load_set(base_stock);
    EXPECT_EQ(render_ddl(set), "-- claimguard ddl: the UNIQUE indexes that back the claim rules.\n"
                               "-- The rule set has no claim rules, so there is nothing to create.\n");
}

TEST(ddl_script, every_statement_is_preceded_by_its_rule_and_duplicates_query) {
    const auto set = load_set(with_claim_lines("    idempotency_key_column: request_id\n"));
    const auto ddl = render_ddl(set);
    EXPECT_NE(ddl.find("\n-- Claim rule 'c': at most one row in coupon_order per (user_id, campaign_id), the claim's "
                       "business key.\n"
                       "-- Existing duplicates (this must return no rows before the ALTER TABLE):\n"
                       "--   SELECT `user_id`, `campaign_id`, COUNT(*) AS claims FROM `coupon_order` GROUP BY "
                       "`user_id`, `campaign_id` HAVING COUNT(*) > 1;\n"
                       "ALTER TABLE `coupon_order` ADD UNIQUE INDEX `uq_claimguard_coupon_order_user_id_campaign_id` "
                       "(`user_id`, `campaign_id`), ALGORITHM=INPLACE, LOCK=NONE;\n"),
              std::string::npos)
        << ddl;
    EXPECT_NE(ddl.find("\n-- Claim rule 'c': at most one row in coupon_order per request_id, the idempotency key "
                       "column.\n"
                       "-- Existing duplicates (this must return no rows before the ALTER TABLE):\n"
                       "--   SELECT `request_id`, COUNT(*) AS claims FROM `coupon_order` GROUP BY `request_id` "
                       "HAVING COUNT(*) > 1;\n"
                       "ALTER TABLE `coupon_order` ADD UNIQUE INDEX `uq_claimguard_coupon_order_request_id` "
                       "(`request_id`), ALGORITHM=INPLACE, LOCK=NONE;\n"),
              std::string::npos)
        << ddl;
    EXPECT_NE(ddl.find("USE <the application's database>"), std::string::npos);
}

TEST(ddl_script, schema_qualified_tables_need_no_use_note) {
    const auto set = load_set(base_stock +
                              "claim_rules:\n  - table: shop.orders\n    idempotency_columns: [u, campaign_id]\n"
                              "    consumes: s\n");
    const auto ddl = render_ddl(set);
    EXPECT_NE(ddl.find("ALTER TABLE `shop`.`orders` ADD UNIQUE INDEX `uq_claimguard_orders_u_campaign_id`"),
              std::string::npos);
    EXPECT_EQ(ddl.find("USE <"), std::string::npos);
}

TEST(ddl_script, every_line_is_a_comment_or_a_statement) {
    const auto set = load_set(with_claim_lines("    idempotency_key_column: request_id\n"));
    const auto ddl = render_ddl(set);
    std::size_t start = 0;
    int statements = 0;
    while (start < ddl.size()) {
        const auto end = ddl.find('\n', start);
        ASSERT_NE(end, std::string::npos) << "the script ends with a newline";
        const auto line = ddl.substr(start, end - start);
        const bool comment = line.starts_with("--") && (line.size() == 2 || line[2] == ' ');
        const bool statement = line.starts_with("ALTER TABLE ") && line.ends_with(";");
        EXPECT_TRUE(line.empty() || comment || statement) << line;
        statements += statement;
        start = end + 1;
    }
    EXPECT_EQ(statements, 2);
}

TEST(ddl_script, file_names_with_control_characters_stay_in_the_comment) {
    const auto r = load_rules({{"evil\nDROP TABLE x;.yaml", base_stock + base_claim}});
    ASSERT_TRUE(r.rules);
    const auto ddl = render_ddl(*r.rules);
    EXPECT_EQ(ddl.find("\nDROP"), std::string::npos);
    EXPECT_NE(ddl.find("evil?DROP TABLE x;.yaml"), std::string::npos);
}

TEST(ddl_script, is_deterministic) {
    const auto set = load_set(base_stock + base_claim);
    EXPECT_EQ(render_ddl(set), render_ddl(load_set(base_stock + base_claim)));
}

}  // namespace
}  // namespace claimguard::rules::test
