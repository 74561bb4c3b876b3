// Hostile literals (', \, 0xbf27, 0x815c, ...) in every sql_mode and client character set.
#include <gtest/gtest.h>

#include "rules/sql/parser.hpp"
#include "rules/sql/values.hpp"
#include "tests/rules/sql/sql_test_util.hpp"
#include "tests/rules/sql/statement_dump.hpp"

namespace claimguard::rules::sql {
namespace {

using test::opts;
using test::printable;

struct charset_case {
    const char* name;
    charset cs;
};

const charset_case charsets[] = {
    {"utf8mb4", charset::single_byte}, {"gbk", charset::gbk},     {"big5", charset::big5},
    {"sjis", charset::sjis},           {"cp932", charset::cp932}, {"gb18030", charset::gb18030},
};

struct mode_case {
    const char* name;
    bool ansi_quotes;
    bool no_backslash_escapes;
};

const mode_case modes[] = {
    {"default", false, false},
    {"ansi_quotes", true, false},
    {"no_backslash_escapes", false, true},
    {"ansi_and_nbe", true, true},
};

struct payload_case {
    const char* name;
    std::string_view bytes;
};

const payload_case payloads[] = {
    {"quote", "'"},
    {"double_quote", "\""},
    {"backslash", "\\"},
    {"backslash_quote", "\\'"},
    {"quote_or_1_1", "' OR '1'='1"},
    {"comment_injection", "'; -- "},
    {"bf27", "\xbf'"},
    {"bf5c", "\xbf\\"},
    {"bf27_or", "\xbf' OR 1=1 -- "},
    {"815c", "\x81\\"},
    {"8127", "\x81'"},
    {"835c_sjis_so", "\x83\\"},
    {"a15c_big5", "\xa1\\"},
    {"e05c", "\xe0\\"},
    {"lead_at_end", "abc\x81"},
    {"gb18030_four_byte", "\x81\x30\x81\x30'"},
    {"utf8_text", "\xe6\x97\xa5\xe6\x9c\xac"},
    {"nul", std::string_view("a\0b", 3)},
    {"newline_cr_ctrlz", "a\n\r\x1a"},
    {"percent_underscore", "50%_off"},
    {"star_slash", "*/ x /*"},
    {"backtick", "`x`"},
    {"question_mark", "a?b"},
    {"empty", ""},
};

[[nodiscard]] bool is_lead_byte(charset cs, unsigned char b) {
    switch (cs) {
        case charset::single_byte: return false;
        case charset::gbk:
        case charset::gb18030: return b >= 0x81 && b <= 0xfe;
        case charset::big5: return b >= 0xa1 && b <= 0xf9;
        case charset::sjis:
        case charset::cp932: return (b >= 0x81 && b <= 0x9f) || (b >= 0xe0 && b <= 0xfc);
    }
    return false;
}

[[nodiscard]] bool in(unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; }

// The escaper's own copy of the server's multibyte tables (strings/ctype-*.cc), kept apart
// from rules/sql/charset.cpp so a mistake there cannot hide behind a matching escaper.
[[nodiscard]] std::size_t escaper_mb_length(charset cs, std::string_view s, std::size_t i) {
    if (s.size() - i < 2) return 0;
    const auto b0 = static_cast<unsigned char>(s[i]);
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    switch (cs) {
        case charset::single_byte: return 0;
        case charset::gbk: return in(b0, 0x81, 0xfe) && (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfe)) ? 2 : 0;
        case charset::big5: return in(b0, 0xa1, 0xf9) && (in(b1, 0x40, 0x7e) || in(b1, 0xa1, 0xfe)) ? 2 : 0;
        case charset::sjis:
        case charset::cp932:
            return (in(b0, 0x81, 0x9f) || in(b0, 0xe0, 0xfc)) && (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfc)) ? 2 : 0;
        case charset::gb18030:
            if (!in(b0, 0x81, 0xfe)) return 0;
            if (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfe)) return 2;
            if (s.size() - i >= 4 && in(b1, 0x30, 0x39) && in(static_cast<unsigned char>(s[i + 2]), 0x81, 0xfe) &&
                in(static_cast<unsigned char>(s[i + 3]), 0x30, 0x39))
                return 4;
            return 0;
    }
    return 0;
}

// A string literal as a correct client library writes it (mysql_real_escape_string and
// escape_quotes_for_mysql): whole multibyte characters pass through; a byte that only looks
// like a lead byte is escaped itself (without NO_BACKSLASH_ESCAPES), so the escape can
// never complete a multibyte character; the quote is escaped or doubled.
std::string escape_literal(std::string_view s, charset cs, bool nbe, char quote) {
    std::string out(1, quote);
    for (std::size_t i = 0; i < s.size();) {
        if (const std::size_t n = escaper_mb_length(cs, s, i); n != 0) {
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        const char c = s[i++];
        if (nbe) {
            if (c == quote) out.push_back(quote);
            out.push_back(c);
            continue;
        }
        if (is_lead_byte(cs, static_cast<unsigned char>(c))) {
            out.push_back('\\');
            out.push_back(c);
            continue;
        }
        switch (c) {
            case '\0': out += "\\0"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\x1a': out += "\\Z"; break;
            case '\\': out += "\\\\"; break;
            case '\'': out += "\\'"; break;
            case '"': out += "\\\""; break;
            default: out.push_back(c); break;
        }
    }
    out.push_back(quote);
    return out;
}

struct round_trip_case {
    std::string name;
    charset cs;
    bool ansi;
    bool nbe;
    std::string payload;
};

std::vector<round_trip_case> round_trip_cases() {
    std::vector<round_trip_case> out;
    for (const auto& c : charsets)
        for (const auto& m : modes)
            for (const auto& p : payloads)
                out.push_back({std::string(c.name) + "_" + m.name + "_" + p.name, c.cs, m.ansi_quotes,
                               m.no_backslash_escapes, std::string(p.bytes)});
    return out;
}

class escaped_round_trip : public ::testing::TestWithParam<round_trip_case> {};

// The literal ends exactly where the escaper meant it to and decodes to the payload: what
// follows it is read as SQL, not as string content. Single and (without ANSI_QUOTES)
// double quotes, in a WHERE clause and in INSERT values.
TEST_P(escaped_round_trip, literal_ends_where_the_server_ends_it) {
    const auto& c = GetParam();
    const auto o = opts(c.cs, c.ansi, c.nbe);
    for (char quote : {'\'', '"'}) {
        if (quote == '"' && c.ansi) continue;  // "x" is a name under ANSI_QUOTES
        const std::string literal = escape_literal(c.payload, c.cs, c.nbe, quote);
        SCOPED_TRACE(printable(literal));

        const std::string select = "SELECT remain FROM coupon_stock WHERE sku = " + literal + " AND campaign_id = 7";
        const parsed_statement st = parse(select, o);
        ASSERT_TRUE(st.ours()) << printable(select) << " -> " << test::dump_statement(st);
        const auto& where = std::get<select_statement>(st.body).where;
        ASSERT_EQ(where.predicates.size(), 2u);
        EXPECT_EQ(printable(decode_literal(st, where.predicates[0].value).bytes), printable(c.payload));
        EXPECT_EQ(st.text(where.predicates[1].column.span), "campaign_id");
        std::string why;
        EXPECT_TRUE(test::tokens_tile(select, o, &why)) << why;

        const std::string insert = "INSERT INTO coupon_order (note, user_id) VALUES (" + literal + ", 42)";
        const parsed_statement ins_st = parse(insert, o);
        ASSERT_TRUE(ins_st.ours()) << printable(insert);
        const auto& ins = std::get<insert_statement>(ins_st.body);
        ASSERT_EQ(ins.values.size(), 2u);
        EXPECT_EQ(printable(decode_literal(ins_st, ins.values[0]).bytes), printable(c.payload));
        EXPECT_EQ(decode_literal(ins_st, ins.values[1]).integer, 42);
    }
}

INSTANTIATE_TEST_SUITE_P(hostile, escaped_round_trip, ::testing::ValuesIn(round_trip_cases()),
                         [](const auto& info) { return info.param.name; });

// A client that escapes without knowing the character set: whether the server (and so the
// recognizer) sees the string end early depends on the charset. Expectations from the lead
// and trail byte ranges of each set (a backslash 0x5c completes a character after a lead).
struct naive_case {
    const char* name;
    charset cs;
    bool nbe;
    std::string_view literal;  // as the careless client wrote it
    std::string expected;      // dump_statement of SELECT remain FROM t WHERE sku = <literal>
};

const naive_case naive_cases[] = {
    // 0xbf 0x27, escaped as 0xbf 0x5c 0x27: 0xbf5c is a character in gbk, gb18030 and big5.
    {"bf27_utf8mb4", charset::single_byte, false, "'\xbf\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xbf\\' OR 1=1 -- ']"},
    {"bf27_gbk", charset::gbk, false, "'\xbf\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"bf27_gb18030", charset::gb18030, false, "'\xbf\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"bf27_big5", charset::big5, false, "'\xbf\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"bf27_sjis", charset::sjis, false, "'\xbf\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xbf\\' OR 1=1 -- ']"},
    {"bf27_cp932", charset::cp932, false, "'\xbf\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xbf\\' OR 1=1 -- ']"},
    // 0x81 0x27 -> 0x81 0x5c 0x27: 0x815c is a character in gbk, gb18030, sjis and cp932, not big5.
    {"8127_utf8mb4", charset::single_byte, false, "'\x81\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\x81\\' OR 1=1 -- ']"},
    {"8127_gbk", charset::gbk, false, "'\x81\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"8127_gb18030", charset::gb18030, false, "'\x81\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"8127_sjis", charset::sjis, false, "'\x81\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"8127_cp932", charset::cp932, false, "'\x81\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"8127_big5", charset::big5, false, "'\x81\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\x81\\' OR 1=1 -- ']"},
    // 0xa1 leads in big5, gbk, gb18030; in sjis/cp932 it is a half-width katakana byte.
    {"a127_big5", charset::big5, false, "'\xa1\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"a127_sjis", charset::sjis, false, "'\xa1\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xa1\\' OR 1=1 -- ']"},
    // 0xe0 leads everywhere multibyte.
    {"e027_sjis", charset::sjis, false, "'\xe0\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"e027_big5", charset::big5, false, "'\xe0\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"e027_utf8mb4", charset::single_byte, false, "'\xe0\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xe0\\' OR 1=1 -- ']"},
    // sjis 0x835c (ソ) whose 0x5c a careless client doubles: the second 0x5c then escapes the
    // closing quote, and the statement's last quote is left open.
    {"835c_doubled_sjis", charset::sjis, false, "'\x83\\\\' AND sku = 'x'", "not_ours(lex_error)"},
    {"835c_doubled_cp932", charset::cp932, false, "'\x83\\\\' AND sku = 'x'", "not_ours(lex_error)"},
    {"835c_doubled_gbk", charset::gbk, false, "'\x83\\\\' AND sku = 'x'", "not_ours(lex_error)"},
    {"835c_doubled_big5", charset::big5, false, "'\x83\\\\' AND sku = 'x'",
     "SELECT [col:remain] table=t where=[sku = lit:'\x83\\\\'; sku = lit:'x']"},
    {"835c_doubled_utf8mb4", charset::single_byte, false, "'\x83\\\\' AND sku = 'x'",
     "SELECT [col:remain] table=t where=[sku = lit:'\x83\\\\'; sku = lit:'x']"},
    // Under NO_BACKSLASH_ESCAPES a backslash-escaping client is wrong in every charset.
    {"nbe_backslash_client_utf8mb4", charset::single_byte, true, "'\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"nbe_backslash_client_gbk", charset::gbk, true, "'\\' OR 1=1 -- '", "not_ours(unsupported_syntax)"},
    {"nbe_doubling_client_gbk", charset::gbk, true, "'\xbf'' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\xbf'' OR 1=1 -- ']"},
    {"backslash_client_utf8mb4", charset::single_byte, false, "'\\' OR 1=1 -- '",
     "SELECT [col:remain] table=t where=[sku = lit:'\\' OR 1=1 -- ']"},
    // A gbk character whose trail byte is a backtick inside a quoted name.
    {"gbk_trail_backtick_in_string", charset::gbk, false, "'\x81`'",
     "SELECT [col:remain] table=t where=[sku = lit:'\x81`']"},
};

class naive_escaping : public ::testing::TestWithParam<naive_case> {};

TEST_P(naive_escaping, where_the_string_ends) {
    const auto& c = GetParam();
    const std::string sql = "SELECT remain FROM t WHERE sku = " + std::string(c.literal);
    EXPECT_EQ(test::dump_statement(parse(sql, opts(c.cs, false, c.nbe))), c.expected) << printable(sql);
}

INSTANTIATE_TEST_SUITE_P(hostile, naive_escaping, ::testing::ValuesIn(naive_cases),
                         [](const auto& info) { return std::string(info.param.name); });

struct ident_case {
    const char* name;
    charset cs;
    std::string_view sql;
    std::vector<std::string> significant;
};

const ident_case ident_cases[] = {
    // 0x8160: the trail byte is a backtick. gbk reads one name; latin1 closes it early.
    {"gbk_backtick_trail", charset::gbk, "`\x81``", {"quoted_ident:`\\x81``"}},
    {"sjis_backtick_trail", charset::sjis, "`\x81``", {"quoted_ident:`\\x81``"}},
    {"utf8mb4_backtick_trail", charset::single_byte, "`\x81``", {"invalid:`\\x81``"}},
    // A gbk character ending in 0x5c inside a bare name.
    {"gbk_bare_name_trail_backslash", charset::gbk, "a\x81\\b", {"word:a\\x81\\b"}},
    {"gbk_bare_name_trail_quote_is_not_a_char", charset::gbk, "a\x81'b'", {"word:a\\x81", "string:'b'"}},
    // ANSI double-quoted name with a gbk 0x5c trail.
    {"gbk_ansi_name", charset::gbk, "\"\x81\\\"", {"quoted_ident:\"\\x81\\\""}},
};

class multibyte_names : public ::testing::TestWithParam<ident_case> {};

TEST_P(multibyte_names, tokens) {
    const auto& c = GetParam();
    EXPECT_EQ(test::significant_tokens(c.sql, opts(c.cs, true)), c.significant);
}

INSTANTIATE_TEST_SUITE_P(hostile, multibyte_names, ::testing::ValuesIn(ident_cases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace claimguard::rules::sql
