// The explain dry run: what a DBA sees before enabling a rule.
#include <gtest/gtest.h>

#include <sstream>

#include "rules/match/describe.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace claimguard::rules::match {
namespace {

std::string run(std::string_view sql, std::optional<std::int64_t> read = std::nullopt) {
    static const rule_set rules = test::make_rules();
    static const rule_index index(rules);
    explain_options o;
    o.read_value = read;
    std::ostringstream out;
    explain(index, sql, o, out);
    return out.str();
}

TEST(explain, incident_with_the_value_read) {
    EXPECT_EQ(run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", 100),
              "pre-filter: candidate (names a protected table)\n"
              "statement: UPDATE\n"
              "fact: counter write: stock rule coupon_stock, table coupon_stock, campaign_id = 7, sets remain = 99\n"
              "decision: rewrite (read 100, writes 99: takes 1 unit with a conditional decrement)\n"
              "sql: UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1\n"
              "when 0 rows change: answer exhausted: ERROR 1644 (45000): coupons sold out\n"
              "mode: enforce\n");
}

TEST(explain, incident_without_a_read) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7")
                  .find("decision: forward (no read of this key recorded; pass --read VALUE to see the rewrite)\n"),
              std::string::npos);
}

TEST(explain, write_that_takes_no_stock) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", 99)
                  .find("decision: forward (writes 99 after reading 99: takes no stock)\n"),
              std::string::npos);
}

TEST(explain, several_units) {
    const std::string out = run("UPDATE coupon_stock SET remain = 95 WHERE campaign_id = 7", 100);
    EXPECT_NE(out.find("takes 5 units"), std::string::npos);
    EXPECT_NE(out.find("sql: UPDATE coupon_stock SET remain = remain - 5, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 5\n"),
              std::string::npos);
}

TEST(explain, compare_and_set_is_forwarded) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND remain = 100", 100)
                  .find("decision: forward (the WHERE clause already requires remain = 100)\n"),
              std::string::npos);
}

TEST(explain, prepared_write) {
    const std::string out = run("UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?");
    EXPECT_NE(out.find("fact: counter write: stock rule coupon_stock, table coupon_stock, campaign_id = ?1, sets remain = ?0\n"),
              std::string::npos);
    EXPECT_NE(out.find("decision: rewrite when executed: units = the value read - the bound value of ?0\n"), std::string::npos);
}

TEST(explain, partial_key_is_a_warning) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = 99 WHERE id = 3", 100).find("does not pin every key column"),
              std::string::npos);
}

TEST(explain, unguarded_relative_decrement) {
    EXPECT_EQ(run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ?"),
              "pre-filter: candidate (names a protected table)\n"
              "statement: UPDATE\n"
              "fact: counter change: stock rule coupon_stock, table coupon_stock, campaign_id = ?0, remain - 1, no guard\n"
              "decision: rewrite (add the guard remain >= floor + amount; no guard now)\n"
              "sql: UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = ? AND remain >= 1\n"
              "parameters: ?0\n"
              "when 0 rows change: answer exhausted: ERROR 1644 (45000): coupons sold out\n"
              "mode: enforce\n");
}

TEST(explain, guarded_relative_decrement_is_forwarded) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain > 0")
                  .find("decision: forward (already guarded by remain > 0)\n"),
              std::string::npos);
}

TEST(explain, increment_is_forwarded) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 7").find("decision: forward (returns stock)\n"),
              std::string::npos);
}

TEST(explain, observe_mode_says_so) {
    const std::string out = run("UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2");
    EXPECT_NE(out.find("sql: UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2 AND qty >= 6\n"),
              std::string::npos);
    EXPECT_NE(out.find("mode: observe (claimguard logs that it would rewrite; the statement is forwarded unchanged)\n"),
              std::string::npos);
}

TEST(explain, placeholder_amount_with_floor_waits_for_execution) {
    EXPECT_NE(run("UPDATE shop.inventory SET qty = qty - ? WHERE sku = ? AND warehouse = ?")
                  .find("decision: rewrite when executed (the guard qty >= 5 + amount needs the bound value of ?0)\n"),
              std::string::npos);
}

TEST(explain, claim_insert) {
    EXPECT_EQ(run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)"),
              "pre-filter: candidate (names a protected table)\n"
              "statement: INSERT\n"
              "fact: claim insert: claim rule coupon_order, table coupon_order, 1 row\n"
              "decision: claim check\n"
              "row 1: user_id = 42, campaign_id = 7\n"
              "  redis: SET lock:coupon:42:7 <token> NX PX 3000\n"
              "  consumes: stock rule coupon_stock for campaign_id = 7; answered exhausted if this session's decrement for it was refused\n"
              "  on duplicate: answer ERROR 1644 (45000): already claimed, then return the unit:\n"
              "  sql: UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 7\n"
              "mode: enforce\n");
}

TEST(explain, claim_warnings) {
    EXPECT_NE(run("REPLACE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)").find("REPLACE overwrites a duplicate"),
              std::string::npos);
    EXPECT_NE(run("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)").find("INSERT IGNORE"),
              std::string::npos);
    EXPECT_NE(run("INSERT INTO coupon_order VALUES (1, 42, 7)").find("no column list"), std::string::npos);
}

TEST(explain, claim_with_ok_answer_and_two_key_columns) {
    const std::string out = run("INSERT INTO shop.orders (order_no, item_sku, wh) VALUES ('o-1', 'A', 2)");
    EXPECT_NE(out.find("on duplicate: answer OK (0 rows affected)"), std::string::npos);
    EXPECT_NE(out.find("sql: UPDATE `shop`.`inventory` SET `qty` = `qty` + 1 WHERE `sku` = 'A' AND `warehouse` = 2\n"),
              std::string::npos);
    EXPECT_EQ(out.find("redis:"), std::string::npos);  // no Redis guard on that rule
}

TEST(explain, irrelevant_statement) {
    EXPECT_EQ(run("SELECT id FROM users WHERE id = 1"),
              "pre-filter: irrelevant (no rule can apply)\n"
              "statement: SELECT\n"
              "decision: forward unchanged (no rule applies)\n");
}

TEST(explain, unmodeled_statement) {
    const std::string out = run("UPDATE coupon_stock SET remain = 1 WHERE campaign_id = 7 OR 1 = 1");
    EXPECT_NE(out.find("statement: not recognised: a shape claimguard does not read"), std::string::npos);
    EXPECT_NE(out.find("(at byte 57)"), std::string::npos);
    EXPECT_NE(out.find("fact: unmodeled: stock rule coupon_stock"), std::string::npos);
    EXPECT_NE(out.find("decision: forward unchanged; warning: touches a protected table"), std::string::npos);
}

TEST(explain, read) {
    EXPECT_NE(run("SELECT id, remain FROM coupon_stock WHERE campaign_id = 7 FOR UPDATE")
                  .find("decision: forward; remember remain for campaign_id = 7 from the result row (column 2, remain)\n"),
              std::string::npos);
}

TEST(explain, session_statements) {
    const std::string out = run("SET autocommit=0, NAMES gbk");
    EXPECT_NE(out.find("pre-filter: session statement (parsed)\n"), std::string::npos);
    EXPECT_NE(out.find("fact: transaction: autocommit off\n"), std::string::npos);
    EXPECT_NE(out.find("fact: session: client character set gbk (gbk)\n"), std::string::npos);
    EXPECT_NE(run("SET sql_mode = 'ANSI_QUOTES'").find("(ANSI_QUOTES on, NO_BACKSLASH_ESCAPES off)"), std::string::npos);
    EXPECT_NE(run("COMMIT AND CHAIN").find("fact: transaction: commit and chain\n"), std::string::npos);
}

TEST(explain, lex_error_is_explained) {
    EXPECT_NE(run("UPDATE coupon_stock SET remain = 'x").find("(a string, quoted name or comment is not closed)"),
              std::string::npos);
}

TEST(explain, describe_value_forms) {
    value_ref v;
    EXPECT_EQ(describe_value(v), "(not written)");
    v.type = value_ref::kind::placeholder;
    v.placeholder_index = 3;
    EXPECT_EQ(describe_value(v), "?3");
    v.type = value_ref::kind::expression;
    v.text = "NOW()";
    EXPECT_EQ(describe_value(v), "<expression NOW()>");
}

}  // namespace
}  // namespace claimguard::rules::match
