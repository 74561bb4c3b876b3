// Text protocol through claimguard: types, NULLs, metadata, warnings, errors, multi-results, transactions.
#include "tests/integration/capi/harness.hpp"

#include <fmt/format.h>

namespace claimguard::integration {
namespace {

// Rows streamed by the "many rows" query: several network buffers' worth.
constexpr int many_rows = 5000;

class capi_text : public ::testing::TestWithParam<std::string> {};

constexpr std::string_view types_table = R"sql(
CREATE OR REPLACE TABLE it_types (
  id INT PRIMARY KEY AUTO_INCREMENT,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, iz INT(6) UNSIGNED ZEROFILL,
  bi BIGINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dc DECIMAL(30,6), b BIT(10),
  dt DATE, tm TIME(3), dtm DATETIME(6), ts TIMESTAMP(2) NULL DEFAULT NULL, y YEAR,
  c CHAR(5), vc VARCHAR(100) CHARACTER SET utf8mb4, l1 VARCHAR(20) CHARACTER SET latin1,
  bin BINARY(4), vb VARBINARY(16), tb TINYBLOB, bl BLOB, mt MEDIUMTEXT,
  e ENUM('a','b','c'), st SET('x','y','z'), j JSON, g POINT, ip INET6, u UUID
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4)sql";

constexpr std::string_view types_rows = R"sql(
INSERT INTO it_types (ti,tiu,si,mi,i,iz,bi,biu,f,d,dc,b,dt,tm,dtm,ts,y,c,vc,l1,bin,vb,tb,bl,mt,e,st,j,g,ip,u) VALUES
 (-128,255,-32768,-8388608,-2147483648,42,-9223372036854775808,18446744073709551615,
  -3.4e38,-1.7976931348623157e308,-123456789012345678901234.123456,b'1010101010',
  '1000-01-01','-838:59:59.000','1000-01-01 00:00:00.000000','1970-01-01 00:00:01.00',1901,
  '','héllo ☃ 😀','café',X'00010203',X'00ff00',X'',X'deadbeef','line1\nline2\ttab',
  'a','x,z','{"k": [1, 2.5, null, "s"]}',ST_GeomFromText('POINT(1 2)'),'::1','123e4567-e89b-12d3-a456-426655440000'),
 (127,0,32767,8388607,2147483647,0,9223372036854775807,0,1.25,2.5e-300,0.000001,b'0',
  '9999-12-31','838:59:59.999','9999-12-31 23:59:59.999999','2038-01-19 03:14:07.99',2155,
  'abcde','quote '' and backslash \\ and "dq"','',X'ffffffff',X'',X'00',X'',REPEAT('m',1000),
  'c','','[]',ST_GeomFromText('POINT(-1.5 0)'),'2001:db8::ff00:42:8329','00000000-0000-0000-0000-000000000000'),
 (NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,
  NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL))sql";

void types_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), types_table);
    record_query(t, m.get(), types_rows);
    record_query(t, m.get(), "SELECT * FROM it_types ORDER BY id");
    record_query(t, m.get(), "SELECT * FROM it_types ORDER BY id", fetch_mode::use);
    record_query(t, m.get(), "SELECT t.i AS alias_i, t.vc, CONCAT(t.c, '-') AS expr FROM it_types AS t ORDER BY t.id");
    record_query(t, m.get(),
                 "SELECT NULL, 1, -1.50, 'x', X'00ff', 1e300, 18446744073709551615, CAST(-1 AS UNSIGNED), "
                 "DATE'2024-02-29', TIME'-01:02:03.5', _latin1 'caf\xe9', _binary 'b', CAST(NULL AS INT), "
                 "JSON_OBJECT('a', 1), 1 = 1, BIT_COUNT(255)");
    record_query(t, m.get(), "SELECT * FROM it_types WHERE 1 = 0");
    record_query(t, m.get(), "SELECT HEX(b), ST_AsText(g), LENGTH(mt) FROM it_types ORDER BY id");
    record_query(t, m.get(), "SET NAMES latin1");
    record_query(t, m.get(), "SELECT vc, l1 FROM it_types ORDER BY id");
    record_query(t, m.get(), "SET NAMES utf8mb4");
    record_query(t, m.get(), "SELECT vc, l1 FROM it_types ORDER BY id");
    EXPECT_EQ(mysql_set_character_set(m.get(), "latin1"), 0);
    record_query(t, m.get(), "SELECT vc FROM it_types ORDER BY id");
}

TEST_P(capi_text, types_nulls_and_metadata) { expect_transparent(GetParam(), types_scenario); }

void many_rows_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    const std::string sql =
        fmt::format("SELECT seq, REPEAT(CHAR(65 + seq % 26), seq % 300), IF(seq % 7 = 0, NULL, seq * 1.5) "
                    "FROM seq_1_to_{}",
                    many_rows);
    record_query(t, m.get(), sql, fetch_mode::use);
    record_query(t, m.get(), sql, fetch_mode::store);
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_text, many_rows_streamed_and_buffered) { expect_transparent(GetParam(), many_rows_scenario); }

void warnings_errors_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO'");
    record_query(t, m.get(), "SELECT 1/0, CAST('12abc' AS INT)");
    record_query(t, m.get(), "SHOW WARNINGS");
    record_query(t, m.get(), "SELEC 1");
    record_query(t, m.get(), "SELECT * FROM it_no_such_table");
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_errs (id INT PRIMARY KEY, v TINYINT)");
    record_query(t, m.get(), "INSERT INTO it_errs VALUES (1, 1)");
    record_query(t, m.get(), "INSERT INTO it_errs VALUES (1, 2)");
    record_query(t, m.get(), "INSERT INTO it_errs VALUES (2, 1000)");
    record_query(t, m.get(), "INSERT INTO it_errs VALUES (3, 1/0)");
    record_query(t, m.get(), "SET SESSION sql_mode = ''");
    record_query(t, m.get(), "INSERT INTO it_errs VALUES (4, 1000)");
    record_query(t, m.get(), "SHOW WARNINGS");
    record_query(t, m.get(), "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom failure', MYSQL_ERRNO = 1644");
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_text, warnings_and_errors) { expect_transparent(GetParam(), warnings_errors_scenario); }

void error_mid_result_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_mid (id INT PRIMARY KEY, k INT);"
                 "INSERT INTO it_mid SELECT seq, IF(seq = 300, 299, seq) FROM seq_1_to_400;"
                 "CREATE OR REPLACE PROCEDURE it_mid_proc() BEGIN "
                 "  SELECT id FROM it_mid WHERE id <= 3 ORDER BY id; "
                 "  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'failed after one result set'; "
                 "END");
    // The correlated subquery returns two rows only at id 299, after hundreds of rows were produced.
    const std::string_view failing = "SELECT o.id, (SELECT i.id FROM it_mid AS i WHERE i.k = o.id) FROM it_mid AS o ORDER BY o.id";
    record_query(t, m.get(), failing, fetch_mode::use);
    record_query(t, m.get(), failing, fetch_mode::store);
    record_query(t, m.get(), "CALL it_mid_proc()", fetch_mode::use);
    record_query(t, m.get(), "CALL it_mid_proc()", fetch_mode::store);
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_text, error_in_the_middle_of_a_result) { expect_transparent(GetParam(), error_mid_result_scenario); }

void multi_results_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_multi (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(10));"
                 "CREATE OR REPLACE PROCEDURE it_two_results(IN n INT) BEGIN "
                 "  SELECT n AS first_result, 'a' AS label; "
                 "  SELECT id, v FROM it_multi ORDER BY id; "
                 "END");
    record_query(t, m.get(), "SELECT 1; INSERT INTO it_multi (v) VALUES ('x'), ('y'); SELECT 'two', NULL; DO 1");
    record_query(t, m.get(), "SELECT 1; SELECT * FROM it_no_such_table; SELECT 3");
    record_query(t, m.get(), "CALL it_two_results(7)");
    record_query(t, m.get(), "CALL it_two_results(8)", fetch_mode::use);
    record_query(t, m.get(), "CALL it_two_results(9); SELECT 'after call'");
    record_query(t, m.get(), "UPDATE it_multi SET v = 'z'; DELETE FROM it_multi WHERE id = 1; SELECT ROW_COUNT()");
}

TEST_P(capi_text, multi_statements_and_procedures) { expect_transparent(GetParam(), multi_results_scenario); }

void transactions_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_tx (id INT PRIMARY KEY) ENGINE=InnoDB");
    EXPECT_EQ(mysql_autocommit(m.get(), 0), 0);
    record_status(t, m.get(), "autocommit(0)");
    record_query(t, m.get(), "INSERT INTO it_tx VALUES (1)");
    EXPECT_EQ(mysql_rollback(m.get()), 0);
    record_status(t, m.get(), "rollback");
    record_query(t, m.get(), "INSERT INTO it_tx VALUES (2)");
    EXPECT_EQ(mysql_commit(m.get()), 0);
    record_status(t, m.get(), "commit");
    EXPECT_EQ(mysql_autocommit(m.get(), 1), 0);
    record_status(t, m.get(), "autocommit(1)");
    record_query(t, m.get(), "START TRANSACTION READ ONLY");
    record_query(t, m.get(), "SELECT id FROM it_tx ORDER BY id");
    record_query(t, m.get(), "INSERT INTO it_tx VALUES (3)");
    record_query(t, m.get(), "COMMIT");
    record_query(t, m.get(), "BEGIN; INSERT INTO it_tx VALUES (4); SAVEPOINT s1; INSERT INTO it_tx VALUES (5)");
    record_query(t, m.get(), "ROLLBACK TO SAVEPOINT s1");
    record_query(t, m.get(), "COMMIT");
    record_query(t, m.get(), "SELECT id FROM it_tx ORDER BY id");
    record_query(t, m.get(), "SET SESSION session_track_transaction_info = 'CHARACTERISTICS'");
    record_query(t, m.get(), "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
    record_query(t, m.get(), "START TRANSACTION WITH CONSISTENT SNAPSHOT");
    record_query(t, m.get(), "COMMIT");
    record_query(t, m.get(), "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES,NO_BACKSLASH_ESCAPES')");
    record_query(t, m.get(), "SELECT \"id\", 'a\\b' FROM it_tx ORDER BY 1");
}

TEST_P(capi_text, transactions_and_status_flags) { expect_transparent(GetParam(), transactions_scenario); }

void affected_rows_scenario(transcript& t, std::string_view target, unsigned long extra_flags) {
    connect_options options;
    options.flags |= extra_flags;
    auto m = connect(target, options);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_aff (id INT PRIMARY KEY AUTO_INCREMENT, k INT UNIQUE, v INT)");
    record_query(t, m.get(), "INSERT INTO it_aff (k, v) VALUES (1, 1), (2, 2), (3, 3)");
    record_query(t, m.get(), "UPDATE it_aff SET v = v WHERE k <= 2");
    record_query(t, m.get(), "UPDATE it_aff SET v = 10 WHERE k <= 2");
    record_query(t, m.get(), "INSERT INTO it_aff (k, v) VALUES (3, 30) ON DUPLICATE KEY UPDATE v = VALUES(v)");
    record_query(t, m.get(), "INSERT INTO it_aff (k, v) VALUES (3, 30) ON DUPLICATE KEY UPDATE v = VALUES(v)");
    record_query(t, m.get(), "INSERT IGNORE INTO it_aff (k, v) VALUES (1, 0), (9, 9)");
    record_query(t, m.get(), "REPLACE INTO it_aff (id, k, v) VALUES (1, 1, 100)");
    record_query(t, m.get(), "INSERT INTO it_aff SET id = 1000, k = 1000, v = 0");
    record_query(t, m.get(), "INSERT INTO it_aff (k, v) VALUES (1001, 0)");
    record_query(t, m.get(), "SELECT LAST_INSERT_ID(), ROW_COUNT()");
    record_query(t, m.get(), "DELETE FROM it_aff WHERE v >= 10");
    record_query(t, m.get(), "USE information_schema");
    record_query(t, m.get(), "USE cgtest");
}

TEST_P(capi_text, affected_rows_insert_ids_info) {
    expect_transparent(GetParam(), [](transcript& t, std::string_view target) { affected_rows_scenario(t, target, 0); });
}

TEST_P(capi_text, affected_rows_with_client_found_rows) {
    expect_transparent(GetParam(), [](transcript& t, std::string_view target) {
        affected_rows_scenario(t, target, CLIENT_FOUND_ROWS);
    });
}

INSTANTIATE_TEST_SUITE_P(proxied, capi_text, ::testing::ValuesIn(proxy_targets()), target_name{});

}  // namespace
}  // namespace claimguard::integration
