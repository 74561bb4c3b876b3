// Pre-filter: irrelevant statements skipped without parsing; protected tables never missed.
#include <gtest/gtest.h>

#include "rules/sql/prefilter.hpp"
#include "tests/rules/sql/sql_test_util.hpp"

namespace claimguard::rules::sql {
namespace {

struct prefilter_case {
    const char* name;
    std::string_view sql;
    prefilter_verdict verdict;
};

constexpr auto irrelevant = prefilter_verdict::irrelevant;
constexpr auto session = prefilter_verdict::session;
constexpr auto candidate = prefilter_verdict::candidate;

const prefilter_case cases[] = {
    {"select_other_table", "SELECT id, name FROM users WHERE id = 42", irrelevant},
    {"select_protected", "SELECT remain FROM coupon_stock WHERE campaign_id = 7", candidate},
    {"update_protected", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", candidate},
    {"insert_protected", "INSERT INTO coupon_order (user_id) VALUES (1)", candidate},
    {"replace_protected", "REPLACE INTO coupon_order (user_id) VALUES (1)", candidate},
    {"upper_case_name", "SELECT REMAIN FROM COUPON_STOCK", candidate},
    {"mixed_case_name", "select remain from Coupon_Stock", candidate},
    {"backticks", "UPDATE `coupon_stock` SET remain = 1", candidate},
    {"ansi_quotes", "UPDATE \"coupon_stock\" SET remain = 1", candidate},
    {"schema_qualified", "UPDATE shop.coupon_stock SET remain = 1", candidate},
    {"schema_qualified_backticks", "UPDATE `shop`.`coupon_stock` SET remain = 1", candidate},
    {"comment_before_name", "UPDATE/**/coupon_stock SET remain = 1", candidate},
    {"name_at_end", "SELECT * FROM coupon_stock", candidate},
    {"longer_name_is_other_table", "SELECT * FROM coupon_stock_archive", candidate},  // allowed false candidate
    {"name_as_suffix_is_other_table", "SELECT * FROM old_coupon_stock", irrelevant},
    {"name_inside_string_is_false_candidate", "SELECT 'coupon_stock' FROM users", candidate},
    {"leading_block_comment", "/* ApplicationName=DBeaver */ SELECT remain FROM coupon_stock", candidate},
    {"leading_block_comment_irrelevant", "/* ApplicationName=DBeaver */ SELECT 1", irrelevant},
    {"leading_hash_comment", "# hi\nUPDATE coupon_stock SET remain = 1", candidate},
    {"leading_dash_comment", "-- hi\nUPDATE coupon_stock SET remain = 1", candidate},
    {"leading_whitespace", " \n\t UPDATE coupon_stock SET remain = 1", candidate},
    {"leading_hint_like_comment", "/*+ x */ UPDATE coupon_stock SET remain = 1", candidate},
    {"leading_versioned_comment", "/*!40101 SET NAMES utf8 */", session},
    {"leading_versioned_dml", "/*!50700 UPDATE coupon_stock SET remain = 1 */", session},
    {"leading_mariadb_versioned", "/*M!100100 UPDATE x SET y = 1 */", session},
    {"dash_dash_without_space_is_not_comment", "--x\nUPDATE coupon_stock SET remain = 1", candidate},  // false candidate
    {"unterminated_leading_comment", "/* x UPDATE coupon_stock", irrelevant},
    {"begin", "BEGIN", session},
    {"start_transaction", "START TRANSACTION", session},
    {"commit", "commit", session},
    {"rollback", "ROLLBACK", session},
    {"savepoint", "SAVEPOINT a", session},
    {"release", "RELEASE SAVEPOINT a", session},
    {"set", "SET autocommit=0", session},
    {"set_lower", "set names utf8mb4", session},
    {"use", "USE shop", session},
    {"delete", "DELETE FROM coupon_stock WHERE campaign_id = 7", candidate},
    {"delete_elsewhere", "DELETE FROM users WHERE id = 7", irrelevant},
    {"truncate", "TRUNCATE TABLE coupon_order", candidate},
    {"load_data", "LOAD DATA INFILE 'x' INTO TABLE coupon_stock", candidate},
    {"alter", "ALTER TABLE coupon_stock ADD COLUMN x INT", candidate},
    {"drop_elsewhere", "DROP TABLE users", irrelevant},
    {"show", "SHOW WARNINGS", irrelevant},
    {"select_variable", "select @@session.transaction_read_only", irrelevant},
    {"parenthesized_select", "(SELECT remain FROM coupon_stock)", candidate},
    {"with_cte", "WITH x AS (SELECT 1) SELECT * FROM coupon_stock", candidate},
    {"with_cte_update", "WITH x AS (SELECT 1) UPDATE coupon_stock SET remain = 1", candidate},
    {"call_naming_table", "CALL restock('coupon_stock')", candidate},
    {"call_elsewhere", "CALL claim_coupon(1, 7)", irrelevant},
    {"prepare_from_text", "PREPARE u FROM 'UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?'", candidate},
    {"execute", "EXECUTE u USING @r, @c", session},
    {"deallocate", "DEALLOCATE PREPARE u", session},
    {"xa", "XA ROLLBACK 'x'", session},
    {"handler", "HANDLER coupon_stock OPEN", candidate},
    {"do", "DO (SELECT remain FROM coupon_stock)", candidate},
    {"empty", "", irrelevant},
    {"only_spaces", "   ", irrelevant},
    {"selectx_is_not_select", "SELECTX coupon_stock", candidate},  // false candidate: the server rejects it
    {"keyword_glued_to_multibyte", "SELECT\xe6 coupon_stock", candidate},
    {"short_statement", "SELECT", irrelevant},
    {"update_other_table", "UPDATE users SET name = 'coupon' WHERE id = 1", irrelevant},
    {"insert_other_table", "INSERT INTO audit_log (msg) VALUES ('x')", irrelevant},
    {"name_after_multibyte_byte", "SELECT * FROM \xe6" "coupon_stock", irrelevant},
    {"name_after_dot", "SELECT * FROM x.coupon_order", candidate},
};

class prefilter_table : public ::testing::TestWithParam<prefilter_case> {};

TEST_P(prefilter_table, verdict) {
    const prefilter pf({"coupon_stock", "Coupon_Order"});
    const auto& c = GetParam();
    EXPECT_EQ(pf.classify(c.sql), c.verdict) << test::printable(c.sql);
}

INSTANTIATE_TEST_SUITE_P(prefilter, prefilter_table, ::testing::ValuesIn(cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(prefilter, no_tables_means_only_session_statements_matter) {
    const prefilter pf(std::vector<std::string>{});
    EXPECT_EQ(pf.classify("UPDATE coupon_stock SET remain = 1"), prefilter_verdict::irrelevant);
    EXPECT_EQ(pf.classify("BEGIN"), prefilter_verdict::session);
}

TEST(prefilter, names_that_bytes_cannot_find_make_every_dml_a_candidate) {
    const prefilter quoted({"odd`name"});
    EXPECT_EQ(quoted.classify("SELECT 1 FROM `odd``name`"), prefilter_verdict::candidate);
    const prefilter non_ascii({"库存"});
    EXPECT_EQ(non_ascii.classify("SELECT 1 FROM t"), prefilter_verdict::candidate);
    EXPECT_EQ(non_ascii.classify("SHOW TABLES"), prefilter_verdict::candidate);  // every statement, the parser decides
}

TEST(prefilter, names_without_case_and_several_first_letters) {
    const prefilter pf({"_stock", "9lives", "Orders", "order_lines"});
    EXPECT_EQ(pf.classify("SELECT * FROM _stock"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT * FROM `9lives`"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT * FROM ORDER_LINES"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT * FROM x WHERE a = 1 /* orders */"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT * FROM order_line"), prefilter_verdict::irrelevant);
    EXPECT_EQ(pf.classify("SELECT * FROM a_stock"), prefilter_verdict::irrelevant);
    // A first hit that is not a whole name must not stop the search.
    EXPECT_EQ(pf.classify("SELECT orders_x, o FROM orders"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("UPDATE t SET o = 'x' WHERE ORDERS.id = 1"), prefilter_verdict::candidate);
}

TEST(prefilter, name_at_the_very_end_and_start_of_the_search) {
    const prefilter pf({"t1"});
    EXPECT_EQ(pf.classify("SELECT*FROM t1"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("UPDATE t1"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT t"), prefilter_verdict::irrelevant);
    EXPECT_EQ(pf.classify("SELECT"), prefilter_verdict::irrelevant);
}

TEST(prefilter, duplicate_names_are_fine) {
    const prefilter pf({"t1", "T1", "t1"});
    EXPECT_EQ(pf.classify("SELECT * FROM t1"), prefilter_verdict::candidate);
    EXPECT_EQ(pf.classify("SELECT * FROM t2"), prefilter_verdict::irrelevant);
}

}  // namespace
}  // namespace claimguard::rules::sql
