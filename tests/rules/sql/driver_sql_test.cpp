// SQL exactly as drivers and mappers send it: Connector/J, PyMySQL, mysql2, MyBatis, Hibernate.
#include <gtest/gtest.h>

#include "rules/sql/parser.hpp"
#include "tests/rules/sql/sql_test_util.hpp"
#include "tests/rules/sql/statement_dump.hpp"

namespace claimguard::rules::sql {
namespace {

using test::opts;

struct driver_case {
    const char* name;
    std::string_view sql;
    std::string expected;
    lexer_options options = opts();
};

const driver_case cases[] = {
    // MariaDB Connector/J 3.x: connection set-up, pipelined.
    {"mariadb_cj_session_setup",
     "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES'), session_track_schema=1,transaction_isolation='REPEATABLE-READ'",
     "SET [session autocommit = lit:1; session sql_mode = expr:concat(@@sql_mode,',STRICT_TRANS_TABLES'); "
     "session session_track_schema = lit:1; session transaction_isolation = lit:'REPEATABLE-READ']"},
    {"mariadb_cj_2x_session_setup",
     "set autocommit=1, session_track_schema=1, session_track_system_variables='auto_increment_increment' , sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')",
     "SET [session autocommit = lit:1; session session_track_schema = lit:1; session session_track_system_variables = "
     "lit:'auto_increment_increment'; session sql_mode = expr:concat(@@sql_mode,',STRICT_TRANS_TABLES')]"},
    {"mariadb_cj_variables", "SELECT @@max_allowed_packet, @@wait_timeout",
     "SELECT [expr:@@max_allowed_packet, expr:@@wait_timeout]"},
    {"mariadb_cj_read_write", "SET SESSION TRANSACTION READ WRITE", "not_ours(unsupported_syntax)"},
    {"mariadb_cj_autocommit_off", "set autocommit=0", "SET [session autocommit = lit:0]"},
    {"mariadb_cj_commit", "COMMIT", "TXN commit"},
    {"mariadb_cj_rollback", "ROLLBACK", "TXN rollback"},
    {"mariadb_cj_client_prepared_update", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7",
     "UPDATE table=coupon_stock set=[remain = lit:99] where=[campaign_id = lit:7]"},
    {"mariadb_cj_client_prepared_string", "INSERT INTO coupon_order (user_id, campaign_id, note) VALUES (42, 7, 'O\\'Brien \\\\ \\n')",
     "INSERT table=coupon_order cols=[user_id, campaign_id, note] rows=[(lit:42, lit:7, lit:'O\\'Brien \\\\ \\n')]"},
    {"mariadb_cj_server_prepared", "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?",
     "UPDATE table=coupon_stock set=[remain = ?0] where=[campaign_id = ?1]"},
    {"dbeaver_application_name", "/* ApplicationName=DBeaver 23.1.0 - SQLEditor <Script.sql> */ SELECT remain FROM coupon_stock WHERE campaign_id = 7",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id = lit:7]"},
    // MySQL Connector/J 8.
    {"mysql_cj_variables",
     "/* mysql-connector-j-8.0.33 (Revision: 7d6b0800528b6b25c68b52dc10d6c1c8429c100c) */SELECT  @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS character_set_client, @@character_set_connection AS character_set_connection, @@transaction_isolation AS transaction_isolation, @@wait_timeout AS wait_timeout",
     "SELECT [expr:@@session.auto_increment_increment AS auto_increment_increment, expr:@@character_set_client AS "
     "character_set_client, expr:@@character_set_connection AS character_set_connection, expr:@@transaction_isolation AS "
     "transaction_isolation, expr:@@wait_timeout AS wait_timeout]"},
    {"mysql_cj_results_null", "SET character_set_results = NULL", "SET [session character_set_results = NULL]"},
    {"mysql_cj_autocommit", "SET autocommit=1", "SET [session autocommit = lit:1]"},
    {"mysql_cj_read_only", "select @@session.transaction_read_only", "SELECT [expr:@@session.transaction_read_only]"},
    {"mysql_cj_isolation", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "not_ours(unsupported_syntax)"},
    {"mysql_cj_show_warnings", "SHOW WARNINGS", "not_ours(other_statement)"},
    // PyMySQL: connect, autocommit, begin, and its own escaping.
    {"pymysql_names", "SET NAMES utf8mb4", "SET [names word:utf8mb4]"},
    {"pymysql_names_collate", "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci", "SET [names word:utf8mb4 collate utf8mb4_general_ci]"},
    {"pymysql_autocommit", "SET AUTOCOMMIT = 0", "SET [session AUTOCOMMIT = lit:0]"},
    {"pymysql_begin", "BEGIN", "TXN begin"},
    {"pymysql_escaped_string", "SELECT remain FROM coupon_stock WHERE campaign_id = 7 AND sku = 'a\\'b\\\"c\\\\d\\ne\\0f\\Z'",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id = lit:7; sku = lit:'a\\'b\\\"c\\\\d\\ne\\0f\\Z']"},
    {"pymysql_bytes", "INSERT INTO coupon_order (user_id, token) VALUES (42, _binary'\\0ab\\'c')",
     "INSERT table=coupon_order cols=[user_id, token] rows=[(lit:42, lit:_binary'\\0ab\\'c')]"},
    {"pymysql_none_and_bool", "INSERT INTO coupon_order (user_id, note, vip) VALUES (42, NULL, 1)",
     "INSERT table=coupon_order cols=[user_id, note, vip] rows=[(lit:42, NULL, lit:1)]"},
    {"pymysql_executemany", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1,7),(2,7),(3,7)",
     "INSERT table=coupon_order cols=[user_id, campaign_id] rows=[(lit:1, lit:7), (lit:2, lit:7), (lit:3, lit:7)]"},
    {"pymysql_float", "UPDATE coupon_stock SET price = 9.99 WHERE campaign_id = 7",
     "UPDATE table=coupon_stock set=[price = lit:9.99] where=[campaign_id = lit:7]"},
    {"pymysql_nbe_escaping", "SELECT remain FROM coupon_stock WHERE sku = 'O''Brien\\'", 
     "SELECT [col:remain] table=coupon_stock where=[sku = lit:'O''Brien\\']", opts(charset::single_byte, false, true)},
    // mysql2 (node): client-side formatting by sqlstring, execute() with placeholders.
    {"mysql2_identifiers", "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 7",
     "SELECT [col:`remain`] table=`coupon_stock` where=[`campaign_id` = lit:7]"},
    {"mysql2_set_object", "INSERT INTO coupon_order SET `user_id` = 42, `campaign_id` = 7, `note` = 'it\\'s'",
     "INSERT set_form table=coupon_order cols=[`user_id`, `campaign_id`, `note`] rows=[(lit:42, lit:7, lit:'it\\'s')]"},
    {"mysql2_array_in", "SELECT remain FROM coupon_stock WHERE campaign_id IN (7, 8, 9)",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id IN (lit:7, lit:8, lit:9)]"},
    {"mysql2_buffer", "INSERT INTO coupon_order (user_id, token) VALUES (42, X'00ff')",
     "INSERT table=coupon_order cols=[user_id, token] rows=[(lit:42, lit:X'00ff')]"},
    {"mysql2_date", "INSERT INTO coupon_order (user_id, created) VALUES (42, '2024-06-18 10:00:00.000')",
     "INSERT table=coupon_order cols=[user_id, created] rows=[(lit:42, lit:'2024-06-18 10:00:00.000')]"},
    {"mysql2_execute", "SELECT remain FROM coupon_stock WHERE campaign_id = ?",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id = ?0]"},
    {"mysql2_start_transaction", "START TRANSACTION", "TXN begin"},
    // MyBatis XML mappers keep their newlines and tabs; #{} becomes ?.
    {"mybatis_select", "\n\t\tselect\n\t\t\tremain\n\t\tfrom coupon_stock\n\t\twhere campaign_id = ?\n\t",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id = ?0]"},
    {"mybatis_update_with_version",
     "update coupon_stock\n\t\tset remain = ?,\n\t\t\tversion = version + 1\n\t\twhere campaign_id = ?\n\t\t  and version = ?",
     "UPDATE table=coupon_stock set=[remain = ?0; version = version + lit:1] where=[campaign_id = ?1; version = ?2]"},
    {"mybatis_insert", "insert into coupon_order\n\t\t( user_id, campaign_id, create_time )\n\t\tvalues\n\t\t( ?, ?, now() )",
     "INSERT table=coupon_order cols=[user_id, campaign_id, create_time] rows=[(?0, ?1, expr:now())]"},
    {"mybatis_foreach", "INSERT INTO coupon_order (user_id, campaign_id) VALUES\n\t\t\t (?, ?)\n\t\t , \n\t\t\t (?, ?)",
     "INSERT table=coupon_order cols=[user_id, campaign_id] rows=[(?0, ?1), (?2, ?3)]"},
    {"mybatis_where_1_eq_1", "select remain from coupon_stock where 1=1 and campaign_id = ?",
     "SELECT [col:remain] table=coupon_stock where=[constant:1=1; campaign_id = ?0]"},
    {"mybatis_dollar_substitution", "select remain from coupon_stock where campaign_id = 7 and sku = 'A-1'",
     "SELECT [col:remain] table=coupon_stock where=[campaign_id = lit:7; sku = lit:'A-1']"},
    {"mybatis_plus_optimistic_lock", "UPDATE coupon_stock SET remain=?, version=? WHERE campaign_id=? AND version=?",
     "UPDATE table=coupon_stock set=[remain = ?0; version = ?1] where=[campaign_id = ?2; version = ?3]"},
    // Hibernate aliases everything.
    {"hibernate_select",
     "select couponstoc0_.remain as remain2_0_ from coupon_stock couponstoc0_ where couponstoc0_.campaign_id=?",
     "SELECT [col:couponstoc0_.remain AS remain2_0_] table=coupon_stock alias=couponstoc0_ where=[couponstoc0_.campaign_id = ?0]"},
    {"hibernate_update", "update coupon_stock set remain=?, version=? where campaign_id=? and version=?",
     "UPDATE table=coupon_stock set=[remain = ?0; version = ?1] where=[campaign_id = ?2; version = ?3]"},
    {"hibernate_lock", "select couponstoc0_.remain as remain2_0_ from coupon_stock couponstoc0_ where couponstoc0_.campaign_id=? for update",
     "SELECT [col:couponstoc0_.remain AS remain2_0_] table=coupon_stock alias=couponstoc0_ where=[couponstoc0_.campaign_id = ?0] lock=for_update"},
    // mysqldump / migration headers.
    {"mysqldump_names", "/*!40101 SET NAMES utf8mb4 */", "SET [names word:utf8mb4]"},
    {"mysqldump_sql_mode", "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */",
     "SET [user OLD_SQL_MODE = expr:@@SQL_MODE; session SQL_MODE = lit:'NO_AUTO_VALUE_ON_ZERO']"},
};

class driver_table : public ::testing::TestWithParam<driver_case> {};

TEST_P(driver_table, shape) {
    const auto& c = GetParam();
    EXPECT_EQ(test::dump_statement(parse(c.sql, c.options)), c.expected) << test::printable(c.sql);
}

INSTANTIATE_TEST_SUITE_P(drivers, driver_table, ::testing::ValuesIn(cases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace claimguard::rules::sql
