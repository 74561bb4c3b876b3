// A script split into statements (explain --file, suggest) and statements shown on one line.
#include "rules/sql/script.hpp"

#include <gtest/gtest.h>

namespace claimguard::rules::sql {
namespace {

TEST(split_script, cuts_at_semicolons_outside_strings_names_and_comments) {
    const auto got = split_script(
        "SELECT ';' FROM `a;b`;\n  -- c; d\nUPDATE t SET x = 1 /* ; */ WHERE id = 2 ;;\n/*!40101 SET @x = 1; */ SELECT "
        "1");
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0], "SELECT ';' FROM `a;b`");
    EXPECT_EQ(got[1], "-- c; d\nUPDATE t SET x = 1 /* ; */ WHERE id = 2");
    EXPECT_EQ(got[2], "/*!40101 SET @x = 1; */ SELECT 1");
}

TEST(split_script, empty_and_blank_scripts_have_no_statement) {
    EXPECT_TRUE(split_script("").empty());
    EXPECT_TRUE(split_script(" ;\n; \t").empty());
}

TEST(one_line, line_breaks_and_tabs_become_spaces) {
    EXPECT_EQ(one_line("UPDATE t\n\tSET x = 1\r\nWHERE id = 2", 100), "UPDATE t  SET x = 1  WHERE id = 2");
}

TEST(one_line, a_long_statement_is_cut_to_the_limit_with_an_ellipsis) {
    const std::string statement(200, 'x');
    const auto shown = one_line(statement, 50);
    EXPECT_EQ(shown.size(), 50u);
    EXPECT_EQ(shown, std::string(47, 'x') + "...");
    EXPECT_EQ(one_line(std::string(50, 'y'), 50), std::string(50, 'y'));  // exactly the limit: kept whole
}

}  // namespace
}  // namespace claimguard::rules::sql
