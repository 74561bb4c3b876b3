// Comments, hints, versioned markers and odd spacing in every gap never change how a statement reads.
#include <gtest/gtest.h>

#include "rules/sql/parser.hpp"
#include "tests/rules/sql/sql_test_util.hpp"
#include "tests/rules/sql/statement_dump.hpp"

namespace claimguard::rules::sql {
namespace {

struct base_statement {
    const char* name;
    const char* sql;  // tokens separated by exactly one space
};

const base_statement bases[] = {
    {"incident_update", "UPDATE coupon_stock SET remain = 99 , version = 3 WHERE campaign_id = 7 AND sku = 'x'"},
    {"relative_update", "UPDATE coupon_stock s SET s.remain = s.remain - ? WHERE s.campaign_id = ?"},
    {"read", "SELECT remain AS r FROM coupon_stock s WHERE campaign_id = ? FOR UPDATE"},
    {"claim", "INSERT INTO coupon_order ( user_id , campaign_id ) VALUES ( 42 , ? ) , ( 43 , 7 )"},
    {"session", "SET autocommit = 0 , sql_mode = 'ANSI'"},
    {"commit", "COMMIT WORK AND NO CHAIN"},
};

struct gap_filler {
    const char* name;
    const char* text;
};

const gap_filler fillers[] = {
    {"block_comment", " /* c */ "},
    {"tight_block_comment", "/**/"},
    {"dash_comment", " -- c\n"},
    {"hash_comment", " #c\n"},
    {"newline_tabs", "\n\t\t"},
    {"hint", " /*+ NO_ICP(t) */ "},
    {"empty_versioned", " /*!50700 */ "},
    {"crlf", "\r\n"},
    {"many_spaces", "     "},
};

struct trivia_case {
    std::string name;
    std::string base;
    std::string filler;
};

std::vector<trivia_case> trivia_cases() {
    std::vector<trivia_case> out;
    for (const auto& b : bases)
        for (const auto& f : fillers) out.push_back({std::string(b.name) + "_" + f.name, b.sql, f.text});
    return out;
}

// Dumps quote spans as written; compare with comments removed from the dump of spans
// that cover several tokens (s.remain, s.campaign_id) by re-reading without them.
std::string normalized(const parsed_statement& st) {
    std::string d = test::dump_statement(st);
    std::string out;
    for (std::size_t i = 0; i < d.size(); ++i) {
        if (d.compare(i, 2, "/*") == 0) {
            const auto close = d.find("*/", i + 2);
            i = close == std::string::npos ? d.size() : close + 1;
            continue;
        }
        if (d[i] == '\n' || d[i] == '\t' || d[i] == '\r' || d[i] == ' ') {
            if (!out.empty() && out.back() != ' ') out.push_back(' ');
            continue;
        }
        out.push_back(d[i]);
    }
    return out;
}

class trivia_table : public ::testing::TestWithParam<trivia_case> {};

TEST_P(trivia_table, in_every_gap) {
    const auto& c = GetParam();
    const parsed_statement base = parse(c.base, test::opts());
    ASSERT_TRUE(base.ours());
    std::size_t gap = 0;
    for (std::size_t i = 0; i < c.base.size(); ++i) {
        if (c.base[i] != ' ') continue;
        ++gap;
        const std::string sql = c.base.substr(0, i) + c.filler + c.base.substr(i + 1);
        SCOPED_TRACE("gap " + std::to_string(gap) + ": " + test::printable(sql));
        const parsed_statement st = parse(sql, test::opts());
        ASSERT_TRUE(st.ours());
        EXPECT_EQ(normalized(st), normalized(base));
        EXPECT_EQ(st.placeholder_count, base.placeholder_count);
    }
    EXPECT_GT(gap, 3u);
}

INSTANTIATE_TEST_SUITE_P(trivia, trivia_table, ::testing::ValuesIn(trivia_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace claimguard::rules::sql
