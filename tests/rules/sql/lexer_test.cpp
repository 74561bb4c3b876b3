// Lexer: comments, versioned comments, hints, quoting, numbers, variables, byte ranges.
#include <gtest/gtest.h>

#include "rules/sql/lexer.hpp"
#include "tests/rules/sql/sql_test_util.hpp"

namespace claimguard::rules::sql {
namespace {

using test::all_tokens;
using test::opts;

struct lex_case {
    const char* name;
    std::string_view sql;
    lexer_options options;
    std::vector<std::string> tokens;  // every token, trivia included
};

const lex_case lex_cases[] = {
    // Comments
    {"hash_comment", "1 # x\n2", opts(), {"integer:1", "whitespace: ", "comment:# x", "whitespace:\\x0a", "integer:2"}},
    {"hash_comment_at_end", "1#x", opts(), {"integer:1", "comment:#x"}},
    {"dash_dash_space", "1 -- x\n2", opts(), {"integer:1", "whitespace: ", "comment:-- x", "whitespace:\\x0a", "integer:2"}},
    {"dash_dash_tab", "1 --\tx", opts(), {"integer:1", "whitespace: ", "comment:--\\x09x"}},
    {"dash_dash_newline", "1 --\n2", opts(), {"integer:1", "whitespace: ", "comment:--", "whitespace:\\x0a", "integer:2"}},
    {"dash_dash_control", "1 --\x01x", opts(), {"integer:1", "whitespace: ", "comment:--\\x01x"}},
    {"dash_dash_at_end", "1 --", opts(), {"integer:1", "whitespace: ", "comment:--"}},
    {"dash_dash_no_space_is_minus", "5--1", opts(), {"integer:5", "punct:-", "punct:-", "integer:1"}},
    {"dash_dash_letter_is_minus", "a--b", opts(), {"word:a", "punct:-", "punct:-", "word:b"}},
    {"block_comment", "1/* x */2", opts(), {"integer:1", "comment:/* x */", "integer:2"}},
    {"block_comment_multiline", "1/*\n*/2", opts(), {"integer:1", "comment:/*\\x0a*/", "integer:2"}},
    {"block_comment_star_inside", "/* a*b **/x", opts(), {"comment:/* a*b **/", "word:x"}},
    {"block_comment_quote_inside", "/* it's */x", opts(), {"comment:/* it's */", "word:x"}},
    {"block_comment_unterminated", "1 /* x", opts(), {"integer:1", "whitespace: ", "invalid:/* x"}},
    {"empty_block_comment", "/**/x", opts(), {"comment:/**/", "word:x"}},
    {"hint", "SELECT /*+ MAX_EXECUTION_TIME(1000) */ 1", opts(),
     {"word:SELECT", "whitespace: ", "hint:/*+ MAX_EXECUTION_TIME(1000) */", "whitespace: ", "integer:1"}},
    {"application_name_comment", "/* ApplicationName=DBeaver 23.1.0 - Main */ SELECT 1", opts(),
     {"comment:/* ApplicationName=DBeaver 23.1.0 - Main */", "whitespace: ", "word:SELECT", "whitespace: ", "integer:1"}},
    // Versioned comments
    {"versioned_comment", "/*!50700 SET x=1 */", opts(),
     {"version_open:/*!50700", "whitespace: ", "word:SET", "whitespace: ", "word:x", "punct:=", "integer:1",
      "whitespace: ", "version_close:*/"}},
    {"versioned_no_version", "/*! STRAIGHT_JOIN */", opts(),
     {"version_open:/*!", "whitespace: ", "word:STRAIGHT_JOIN", "whitespace: ", "version_close:*/"}},
    {"versioned_six_digits", "/*!100100 x */", opts(),
     {"version_open:/*!100100", "whitespace: ", "word:x", "whitespace: ", "version_close:*/"}},
    {"versioned_seven_digits_reads_five", "/*!5010012 */", opts(),
     {"version_open:/*!50100", "integer:12", "whitespace: ", "version_close:*/"}},
    {"versioned_string_with_close_inside", "/*!50700 'a*/b' */", opts(),
     {"version_open:/*!50700", "whitespace: ", "string:'a*/b'", "whitespace: ", "version_close:*/"}},
    {"versioned_above_server_is_comment", "/*!90000 x */y",
     [] { auto o = opts(); o.server_version = 80036; return o; }(), {"comment:/*!90000 x */", "word:y"}},
    {"versioned_below_server_is_sql", "/*!50700 x */y",
     [] { auto o = opts(); o.server_version = 80036; return o; }(),
     {"version_open:/*!50700", "whitespace: ", "word:x", "whitespace: ", "version_close:*/", "word:y"}},
    {"mariadb_versioned_when_mariadb", "/*M!100100 x */",
     [] { auto o = opts(); o.mariadb = true; return o; }(),
     {"version_open:/*M!100100", "whitespace: ", "word:x", "whitespace: ", "version_close:*/"}},
    {"mariadb_versioned_is_comment_on_mysql", "/*M!100100 x */", opts(), {"comment:/*M!100100 x */"}},
    {"star_slash_outside_version_is_punct", "2*/3", opts(), {"integer:2", "punct:*", "punct:/", "integer:3"}},
    // Strings
    {"single_quoted", "'abc'", opts(), {"string:'abc'"}},
    {"single_doubled_quote", "'it''s'", opts(), {"string:'it''s'"}},
    {"single_backslash_quote", "'it\\'s'", opts(), {"string:'it\\'s'"}},
    {"single_backslash_backslash_then_end", "'a\\\\' x", opts(), {"string:'a\\\\'", "whitespace: ", "word:x"}},
    {"nbe_backslash_ends_at_quote", "'a\\' x", opts(charset::single_byte, false, true),
     {"string:'a\\'", "whitespace: ", "word:x"}},
    {"nbe_doubled_quote", "'a''b'", opts(charset::single_byte, false, true), {"string:'a''b'"}},
    {"double_quoted_string", "\"a'b\"", opts(), {"string:\"a'b\""}},
    {"double_quoted_backslash", "\"a\\\"b\"", opts(), {"string:\"a\\\"b\""}},
    {"ansi_double_quoted_identifier", "\"a\"\"b\"", opts(charset::single_byte, true), {"quoted_ident:\"a\"\"b\""}},
    {"ansi_backslash_not_escape_in_identifier", "\"a\\\" x", opts(charset::single_byte, true),
     {"quoted_ident:\"a\\\"", "whitespace: ", "word:x"}},
    {"unterminated_string", "'abc", opts(), {"invalid:'abc"}},
    {"backslash_at_end", "'abc\\", opts(), {"invalid:'abc\\"}},
    {"national_string", "N'x'", opts(), {"string:N'x'"}},
    {"national_lowercase", "n'x'", opts(), {"string:n'x'"}},
    {"n_word_then_string", "N 'x'", opts(), {"word:N", "whitespace: ", "string:'x'"}},
    {"introducer", "_utf8mb4'x'", opts(), {"word:_utf8mb4", "string:'x'"}},
    {"introducer_binary_hex", "_binary X'41'", opts(), {"word:_binary", "whitespace: ", "hex_string:X'41'"}},
    {"adjacent_strings", "'a' 'b'", opts(), {"string:'a'", "whitespace: ", "string:'b'"}},
    {"string_with_newline", "'a\nb'", opts(), {"string:'a\\x0ab'"}},
    {"string_with_nul", std::string_view("'a\0b'", 5), opts(), {"string:'a\\x00b'"}},
    // Identifiers
    {"backtick", "`a b`", opts(), {"quoted_ident:`a b`"}},
    {"backtick_doubled", "`a``b`", opts(), {"quoted_ident:`a``b`"}},
    {"backtick_unterminated", "`ab", opts(), {"invalid:`ab"}},
    {"schema_qualified", "shop.coupon_stock", opts(), {"word:shop", "punct:.", "word:coupon_stock"}},
    {"qualified_backticks", "`shop`.`t`", opts(), {"quoted_ident:`shop`", "punct:.", "quoted_ident:`t`"}},
    {"digit_leading_identifier", "123abc", opts(), {"word:123abc"}},
    {"name_after_dot_can_start_with_digit", "t.1e5", opts(), {"word:t", "punct:.", "word:1e5"}},
    {"dollar_identifier", "a$b", opts(), {"word:a$b"}},
    {"non_ascii_identifier", "caf\xc3\xa9", opts(), {"word:caf\\xc3\\xa9"}},
    {"mixed_case_keyword", "SeLeCt", opts(), {"word:SeLeCt"}},
    // Numbers
    {"integer", "42", opts(), {"integer:42"}},
    {"decimal", "4.25", opts(), {"decimal:4.25"}},
    {"decimal_leading_dot", ".5", opts(), {"decimal:.5"}},
    {"decimal_trailing_dot", "5.", opts(), {"decimal:5."}},
    {"real", "1e10", opts(), {"real:1e10"}},
    {"real_negative_exponent", "1.5E-3", opts(), {"real:1.5E-3"}},
    {"real_then_word", "1e5x", opts(), {"real:1e5", "word:x"}},
    {"e_without_digits_is_identifier", "1e", opts(), {"word:1e"}},
    {"hex_number", "0x4A", opts(), {"hex_number:0x4A"}},
    {"hex_number_then_letter_is_identifier", "0x4g", opts(), {"word:0x4g"}},
    {"capital_0X_is_identifier", "0X41", opts(), {"word:0X41"}},
    {"hex_string", "X'4a'", opts(), {"hex_string:X'4a'"}},
    {"hex_string_lower", "x'4A'", opts(), {"hex_string:x'4A'"}},
    {"hex_string_odd_digits", "X'4'", opts(), {"invalid:X'4'"}},
    {"hex_string_bad_digit", "X'4z'", opts(), {"invalid:X'4", "word:z", "invalid:'"}},
    {"bit_number", "0b101", opts(), {"bit_number:0b101"}},
    {"bit_string", "b'101'", opts(), {"bit_string:b'101'"}},
    {"bit_string_upper", "B'1'", opts(), {"bit_string:B'1'"}},
    {"bit_string_bad_digit", "b'12'", opts(), {"invalid:b'1", "integer:2", "invalid:'"}},
    {"negative_is_two_tokens", "-5", opts(), {"punct:-", "integer:5"}},
    // Placeholders and variables
    {"placeholders", "? , ?", opts(), {"placeholder:?", "whitespace: ", "punct:,", "whitespace: ", "placeholder:?"}},
    {"user_var", "@x", opts(), {"user_var:@x"}},
    {"user_var_dotted", "@a.b", opts(), {"user_var:@a.b"}},
    {"user_var_quoted", "@'my var'", opts(), {"user_var:@'my var'"}},
    {"user_var_backtick", "@`v`", opts(), {"user_var:@`v`"}},
    {"system_var", "@@autocommit", opts(), {"system_var:@@autocommit"}},
    {"system_var_scoped", "@@session.transaction_read_only", opts(),
     {"system_var:@@session", "punct:.", "word:transaction_read_only"}},
    {"lone_at", "@ x", opts(), {"punct:@", "whitespace: ", "word:x"}},
    // Operators
    {"null_safe_equal", "a<=>b", opts(), {"word:a", "punct:<=>", "word:b"}},
    {"two_char_operators", "<= >= <> != := || && << >> ->", opts(),
     {"punct:<=", "whitespace: ", "punct:>=", "whitespace: ", "punct:<>", "whitespace: ", "punct:!=", "whitespace: ",
      "punct::=", "whitespace: ", "punct:||", "whitespace: ", "punct:&&", "whitespace: ", "punct:<<", "whitespace: ",
      "punct:>>", "whitespace: ", "punct:->"}},
    {"json_unquote_operator", "c->>'$.a'", opts(), {"word:c", "punct:->>", "string:'$.a'"}},
    {"whitespace_kinds", "a\t\r\n\v\fb", opts(), {"word:a", "whitespace:\\x09\\x0d\\x0a\\x0b\\x0c", "word:b"}},
    {"empty", "", opts(), {}},
};

class lex_table : public ::testing::TestWithParam<lex_case> {};

TEST_P(lex_table, tokens) {
    const auto& c = GetParam();
    EXPECT_EQ(all_tokens(c.sql, c.options), c.tokens) << test::printable(c.sql);
    std::string why;
    EXPECT_TRUE(test::tokens_tile(c.sql, c.options, &why)) << why;
}

INSTANTIATE_TEST_SUITE_P(lexer, lex_table, ::testing::ValuesIn(lex_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(lexer, placeholder_indices_count_only_real_placeholders) {
    const std::string_view sql = "SELECT ? /* ? */, '?', `?`, ? -- ?\n, /*!50700 ? */";
    lexer lx(sql, opts());
    std::vector<std::uint32_t> indices;
    for (token t = lx.next(); t.kind != token_kind::end; t = lx.next())
        if (t.kind == token_kind::placeholder) indices.push_back(t.aux);
    EXPECT_EQ(indices, (std::vector<std::uint32_t>{0, 1, 2}));
    EXPECT_EQ(lx.placeholder_count(), 3u);
}

TEST(lexer, unterminated_versioned_comment_is_reported) {
    lexer lx("/*!50700 SELECT 1", opts());
    while (lx.next().kind != token_kind::end) {
    }
    EXPECT_TRUE(lx.unterminated_version());
}

TEST(lexer, version_number_is_kept) {
    lexer lx("/*!50708 x */", opts());
    const token t = lx.next();
    EXPECT_EQ(t.kind, token_kind::version_open);
    EXPECT_EQ(t.aux, 50708u);
}

TEST(lexer, end_repeats_at_the_end) {
    lexer lx("x", opts());
    EXPECT_EQ(lx.next().kind, token_kind::word);
    for (int i = 0; i < 3; ++i) {
        const token t = lx.next();
        EXPECT_EQ(t.kind, token_kind::end);
        EXPECT_EQ(t.offset, 1u);
        EXPECT_EQ(t.length, 0u);
    }
}

}  // namespace
}  // namespace claimguard::rules::sql
