// Literal decoding, key comparison, identifier matching, sql_mode flags and charset tables.
#include <gtest/gtest.h>

#include "rules/sql/charset.hpp"
#include "rules/sql/parser.hpp"
#include "rules/sql/values.hpp"
#include "tests/rules/sql/sql_test_util.hpp"

namespace claimguard::rules::sql {
namespace {

using test::opts;
using test::printable;

// Decodes the value of "SELECT 1 FROM t WHERE a = <literal>".
literal_value value_of(std::string_view literal, const lexer_options& o = opts()) {
    static std::string sql;
    sql = "SELECT 1 FROM t WHERE a = " + std::string(literal);
    const parsed_statement st = parse(sql, o);
    if (!st.ours()) return literal_value{literal_kind::null, "<not ours>", std::nullopt};
    return decode_literal(st, std::get<select_statement>(st.body).where.predicates.at(0).value);
}

struct decode_case {
    const char* name;
    std::string_view literal;
    lexer_options options;
    literal_kind kind;
    std::string bytes;
    std::optional<std::int64_t> integer;
};

const decode_case decode_cases[] = {
    {"integer", "42", opts(), literal_kind::integer, "42", 42},
    {"leading_zeros", "007", opts(), literal_kind::integer, "7", 7},
    {"negative", "-7", opts(), literal_kind::integer, "-7", -7},
    {"negative_zero", "-0", opts(), literal_kind::integer, "0", 0},
    {"double_negative", "- -7", opts(), literal_kind::integer, "7", 7},
    {"int64_max", "9223372036854775807", opts(), literal_kind::integer, "9223372036854775807", INT64_MAX},
    {"int64_min", "-9223372036854775808", opts(), literal_kind::integer, "-9223372036854775808", INT64_MIN},
    {"beyond_int64", "9223372036854775808", opts(), literal_kind::integer, "9223372036854775808", std::nullopt},
    {"twenty_digits", "12345678901234567890", opts(), literal_kind::integer, "12345678901234567890", std::nullopt},
    {"decimal", "1.50", opts(), literal_kind::decimal, "1.5", std::nullopt},
    {"decimal_whole", "99.00", opts(), literal_kind::decimal, "99", 99},
    {"decimal_leading_dot", ".5", opts(), literal_kind::decimal, "0.5", std::nullopt},
    {"decimal_negative", "-0.50", opts(), literal_kind::decimal, "-0.5", std::nullopt},
    {"real", "1E3", opts(), literal_kind::real, "1e3", std::nullopt},
    {"string", "'abc'", opts(), literal_kind::string, "abc", std::nullopt},
    {"string_escapes", "'a\\nb\\tc\\rd\\0e\\Zf\\bg'", opts(), literal_kind::string,
     std::string("a\nb\tc\rd\0e\x1a" "f\bg", 13), std::nullopt},
    {"string_escaped_quotes", "'it\\'s \\\"x\\\"'", opts(), literal_kind::string, "it's \"x\"", std::nullopt},
    {"string_doubled_quote", "'it''s'", opts(), literal_kind::string, "it's", std::nullopt},
    {"string_backslash", "'a\\\\b'", opts(), literal_kind::string, "a\\b", std::nullopt},
    {"string_unknown_escape", "'\\x\\y'", opts(), literal_kind::string, "xy", std::nullopt},
    {"string_like_escapes_kept", "'50\\%\\_'", opts(), literal_kind::string, "50\\%\\_", std::nullopt},
    {"nbe_backslash_literal", "'a\\b'", opts(charset::single_byte, false, true), literal_kind::string, "a\\b", std::nullopt},
    {"nbe_doubled_quote", "'a''b'", opts(charset::single_byte, false, true), literal_kind::string, "a'b", std::nullopt},
    {"double_quoted", "\"a'b\"", opts(), literal_kind::string, "a'b", std::nullopt},
    {"double_quoted_doubled", "\"a\"\"b\"", opts(), literal_kind::string, "a\"b", std::nullopt},
    {"national", "N'abc'", opts(), literal_kind::string, "abc", std::nullopt},
    {"introducer", "_utf8mb4'abc'", opts(), literal_kind::string, "abc", std::nullopt},
    {"concatenated", "'a' 'b' \"c\"", opts(), literal_kind::string, "abc", std::nullopt},
    {"gbk_trail_backslash_kept", "'\x81\\'", opts(charset::gbk), literal_kind::string, "\x81\\", std::nullopt},
    {"gbk_escaped_lead", "'\\\x81\\''", opts(charset::gbk), literal_kind::string, "\x81'", std::nullopt},
    {"hex_number", "0x4142", opts(), literal_kind::hex, "AB", 0x4142},
    {"hex_number_odd", "0x141", opts(), literal_kind::hex, "\x01" "A", 0x141},
    {"hex_string", "X'4142'", opts(), literal_kind::hex, "AB", 0x4142},
    {"hex_empty", "X''", opts(), literal_kind::hex, "", 0},
    {"bit_number", "0b1000001", opts(), literal_kind::bit, "A", 65},
    {"bit_string", "b'100000101000010'", opts(), literal_kind::bit, "AB", 0x4142},
    {"true", "TRUE", opts(), literal_kind::boolean, "1", 1},
    {"false", "false", opts(), literal_kind::boolean, "0", 0},
};

class decode_table : public ::testing::TestWithParam<decode_case> {};

TEST_P(decode_table, value) {
    const auto& c = GetParam();
    const literal_value v = value_of(c.literal, c.options);
    EXPECT_EQ(v.kind, c.kind);
    EXPECT_EQ(printable(v.bytes), printable(c.bytes));
    EXPECT_EQ(v.integer, c.integer);
}

INSTANTIATE_TEST_SUITE_P(values, decode_table, ::testing::ValuesIn(decode_cases),
                         [](const auto& info) { return std::string(info.param.name); });

struct same_case {
    const char* name;
    std::string_view a;
    std::string_view b;
    bool same;
};

const same_case same_cases[] = {
    {"equal_integers", "7", "7", true},
    {"leading_zero", "7", "007", true},
    {"integer_and_decimal", "7", "7.0", true},
    {"integer_and_string", "7", "'7'", true},
    {"string_with_spaces_and_integer", "' 7 '", "7", true},
    {"string_and_decimal", "'7.50'", "7.5", true},
    {"different_integers", "7", "8", false},
    {"string_not_a_number", "'7a'", "7", false},
    {"equal_strings", "'abc'", "'abc'", true},
    {"strings_differ_in_case", "'abc'", "'ABC'", false},
    {"escaped_and_doubled_quote", "'it\\'s'", "'it''s'", true},
    {"introducer_and_plain", "_utf8mb4'x'", "'x'", true},
    {"null_never_equal", "NULL", "NULL", false},
    {"hex_and_string", "X'41'", "'A'", true},
    {"hex_and_integer", "0x41", "65", true},
    {"true_and_one", "TRUE", "1", true},
    {"reals", "1e3", "1e3", true},
    {"real_and_integer", "1e3", "1000", false},
    {"negative_zero", "-0", "0", true},
};

class same_value_table : public ::testing::TestWithParam<same_case> {};

TEST_P(same_value_table, compare) {
    const auto& c = GetParam();
    const literal_value a = value_of(c.a);
    const literal_value b = value_of(c.b);
    EXPECT_EQ(same_value(a, b), c.same);
    EXPECT_EQ(same_value(b, a), c.same);
}

INSTANTIATE_TEST_SUITE_P(values, same_value_table, ::testing::ValuesIn(same_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(values, identifiers) {
    EXPECT_TRUE(identifier_equals("coupon_stock", "coupon_stock"));
    EXPECT_TRUE(identifier_equals("COUPON_STOCK", "coupon_stock"));
    EXPECT_TRUE(identifier_equals("`coupon_stock`", "coupon_stock"));
    EXPECT_TRUE(identifier_equals("\"coupon_stock\"", "coupon_stock"));
    EXPECT_TRUE(identifier_equals("`a``b`", "a`b"));
    EXPECT_FALSE(identifier_equals("`a``b`", "a``b"));
    EXPECT_FALSE(identifier_equals("`coupon_stock`", "coupon_stoc"));
    EXPECT_FALSE(identifier_equals("coupon_stock2", "coupon_stock"));
    EXPECT_EQ(unquote_identifier("`a``b`"), "a`b");
    EXPECT_EQ(unquote_identifier("\"a\"\"b\""), "a\"b");
    EXPECT_EQ(unquote_identifier("plain"), "plain");
    EXPECT_EQ(quote_identifier("a`b"), "`a``b`");
    EXPECT_EQ(quote_identifier("remain"), "`remain`");
}

TEST(values, canonical_number) {
    EXPECT_EQ(canonical_number("007"), "7");
    EXPECT_EQ(canonical_number(" -1.500 "), "-1.5");
    EXPECT_EQ(canonical_number("+3"), "3");
    EXPECT_EQ(canonical_number("abc"), std::nullopt);
    EXPECT_EQ(canonical_number(""), std::nullopt);
    EXPECT_EQ(canonical_number("."), std::nullopt);
    EXPECT_EQ(canonical_number("1e3"), std::nullopt);
}

struct sql_mode_case {
    const char* name;
    std::string_view value;
    bool ansi_quotes;
    bool no_backslash_escapes;
    bool pipes_as_concat;
};

const sql_mode_case sql_mode_cases[] = {
    {"empty", "", false, false, false},
    {"mysql8_default", "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", false, false, false},
    {"ansi_quotes", "ANSI_QUOTES", true, false, false},
    {"ansi_combination", "ANSI", true, false, true},
    {"traditional", "TRADITIONAL", false, false, false},
    {"nbe", "NO_BACKSLASH_ESCAPES", false, true, false},
    {"both_lower_case", "no_backslash_escapes,ansi_quotes", true, true, false},
    {"spaces", " ANSI_QUOTES , NO_BACKSLASH_ESCAPES ", true, true, false},
    {"pipes_as_concat", "PIPES_AS_CONCAT", false, false, true},
    {"mariadb_oracle", "ORACLE", true, false, true},
    {"mariadb_postgresql", "POSTGRESQL", true, false, true},
    {"mariadb_db2", "DB2", true, false, true},
    {"mariadb_maxdb", "MAXDB", true, false, true},
    {"mariadb_mssql", "MSSQL", true, false, true},
    // What MariaDB 10.11 answers to SELECT @@sql_mode after SET sql_mode = 'ANSI': expanded, then the name.
    {"mariadb_ansi_expanded", "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI", true, false, true},
    {"prefix_is_not_enough", "ANSI_QUOTES_X,NO_BACKSLASH,PIPES_AS_CONCATX", false, false, false},
};

class sql_mode_table : public ::testing::TestWithParam<sql_mode_case> {};

TEST_P(sql_mode_table, flags) {
    const auto& c = GetParam();
    const auto f = parse_sql_mode(c.value);
    EXPECT_EQ(f.ansi_quotes, c.ansi_quotes);
    EXPECT_EQ(f.no_backslash_escapes, c.no_backslash_escapes);
    EXPECT_EQ(f.pipes_as_concat, c.pipes_as_concat);
}

INSTANTIATE_TEST_SUITE_P(values, sql_mode_table, ::testing::ValuesIn(sql_mode_cases),
                         [](const auto& info) { return std::string(info.param.name); });

struct mb_case {
    const char* name;
    charset cs;
    std::string_view bytes;
    std::size_t length;
};

// Lead and trail ranges from the server's strings/ctype-{gbk,big5,sjis,cp932,gb18030}.cc.
const mb_case mb_cases[] = {
    {"gbk_815c", charset::gbk, "\x81\x5c", 2},
    {"gbk_bf5c", charset::gbk, "\xbf\x5c", 2},
    {"gbk_8140_lowest", charset::gbk, "\x81\x40", 2},
    {"gbk_fefe_highest", charset::gbk, "\xfe\xfe", 2},
    {"gbk_807f_not_lead", charset::gbk, "\x80\x40", 0},
    {"gbk_bf27_trail_quote", charset::gbk, "\xbf\x27", 0},
    {"gbk_813f_trail_too_low", charset::gbk, "\x81\x3f", 0},
    {"gbk_817f_trail_gap", charset::gbk, "\x81\x7f", 0},
    {"gbk_81ff", charset::gbk, "\x81\xff", 0},
    {"gbk_lead_at_end", charset::gbk, "\x81", 0},
    {"big5_a15c", charset::big5, "\xa1\x5c", 2},
    {"big5_f9fe", charset::big5, "\xf9\xfe", 2},
    {"big5_815c_not_lead", charset::big5, "\x81\x5c", 0},
    {"big5_fa40_not_lead", charset::big5, "\xfa\x40", 0},
    {"big5_a180_trail_gap", charset::big5, "\xa1\x80", 0},
    {"sjis_815c", charset::sjis, "\x81\x5c", 2},
    {"sjis_835c_so", charset::sjis, "\x83\x5c", 2},
    {"sjis_e05c", charset::sjis, "\xe0\x5c", 2},
    {"sjis_a05c_katakana_range", charset::sjis, "\xa0\x5c", 0},
    {"sjis_df5c_katakana", charset::sjis, "\xdf\x5c", 0},
    {"sjis_fd40_not_lead", charset::sjis, "\xfd\x40", 0},
    {"sjis_81fd_trail_too_high", charset::sjis, "\x81\xfd", 0},
    {"cp932_815c", charset::cp932, "\x81\x5c", 2},
    {"cp932_a15c", charset::cp932, "\xa1\x5c", 0},
    {"gb18030_two_byte", charset::gb18030, "\x81\x5c", 2},
    {"gb18030_four_byte", charset::gb18030, "\x81\x30\x81\x30", 4},
    {"gb18030_four_byte_highest", charset::gb18030, "\xfe\x39\xfe\x39", 4},
    {"gb18030_four_byte_bad_third", charset::gb18030, "\x81\x30\x80\x30", 0},
    {"gb18030_four_byte_truncated", charset::gb18030, "\x81\x30\x81", 0},
    {"gb18030_8027", charset::gb18030, "\x80\x27", 0},
    {"utf8_never", charset::single_byte, "\xe6\x97\xa5", 0},
};

class multibyte_table : public ::testing::TestWithParam<mb_case> {};

TEST_P(multibyte_table, length) {
    const auto& c = GetParam();
    EXPECT_EQ(multibyte_length(c.cs, c.bytes.data(), c.bytes.data() + c.bytes.size()), c.length);
}

INSTANTIATE_TEST_SUITE_P(charset, multibyte_table, ::testing::ValuesIn(mb_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(charset, names) {
    EXPECT_EQ(charset_from_name("gbk"), charset::gbk);
    EXPECT_EQ(charset_from_name("GBK"), charset::gbk);
    EXPECT_EQ(charset_from_name("big5"), charset::big5);
    EXPECT_EQ(charset_from_name("sjis"), charset::sjis);
    EXPECT_EQ(charset_from_name("cp932"), charset::cp932);
    EXPECT_EQ(charset_from_name("gb18030"), charset::gb18030);
    EXPECT_EQ(charset_from_name("utf8mb4"), charset::single_byte);
    EXPECT_EQ(charset_from_name("latin1"), charset::single_byte);
    EXPECT_EQ(charset_from_name("ujis"), charset::single_byte);
    EXPECT_EQ(charset_from_name("klingon"), std::nullopt);
}

TEST(charset, collations) {
    EXPECT_EQ(charset_from_collation(28), charset::gbk);     // gbk_chinese_ci
    EXPECT_EQ(charset_from_collation(87), charset::gbk);     // gbk_bin
    EXPECT_EQ(charset_from_collation(1), charset::big5);     // big5_chinese_ci
    EXPECT_EQ(charset_from_collation(13), charset::sjis);    // sjis_japanese_ci
    EXPECT_EQ(charset_from_collation(95), charset::cp932);   // cp932_japanese_ci
    EXPECT_EQ(charset_from_collation(248), charset::gb18030);
    EXPECT_EQ(charset_from_collation(1052), charset::gbk);   // MariaDB gbk_chinese_nopad_ci
    EXPECT_EQ(charset_from_collation(45), charset::single_byte);   // utf8mb4_general_ci
    EXPECT_EQ(charset_from_collation(255), charset::single_byte);  // utf8mb4_0900_ai_ci
    EXPECT_EQ(charset_from_collation(8), charset::single_byte);    // latin1_swedish_ci
}

}  // namespace
}  // namespace claimguard::rules::sql
