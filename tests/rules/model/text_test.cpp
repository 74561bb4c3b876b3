// Text helpers and small parsers: UTF-8, identifiers, key templates, durations, SQLSTATEs, hints, FNV-1a.
#include <gtest/gtest.h>

#include "rules/model/key_template.hpp"
#include "rules/model/precheck.hpp"
#include "rules/model/text.hpp"
#include "rules/model/yaml_fields.hpp"

namespace claimguard::rules::test {
namespace {

template <class T>
std::string param_name(const testing::TestParamInfo<T>& i) { return i.param.name; }

struct identifier_case {
    const char* name;
    std::string id;
    std::string problem;  // empty: valid
};

const identifier_case identifier_cases[] = {
    {"plain", "coupon_stock", ""},
    {"dollar_and_digits", "t$1", ""},
    {"all_digits_quoted_by_claimguard", "123", ""},
    {"with_space_inside", "coupon stock", ""},
    {"with_backtick", "a`b", ""},
    {"with_dot", "a.b", ""},
    {"cjk", "优惠券", ""},
    {"exactly_64", std::string(64, 'x'), ""},
    {"empty", "", "is empty"},
    {"too_long", std::string(65, 'x'), "is longer than 64 characters, the MySQL limit for names"},
    {"trailing_space", "x ", "ends with a space, which MySQL does not allow in names"},
    {"newline", "a\nb", "contains a control character"},
    {"nul", std::string("a\0b", 3), "contains a control character"},
    {"invalid_utf8", "a\xff", "is not valid UTF-8"},
    {"emoji", "\xF0\x9F\x8E\x9F",
     "contains a character MySQL does not allow in names (outside the Basic Multilingual Plane)"},
};

class identifier_rules : public testing::TestWithParam<identifier_case> {};
TEST_P(identifier_rules, problem) { EXPECT_EQ(identifier_problem(GetParam().id), GetParam().problem); }
INSTANTIATE_TEST_SUITE_P(text, identifier_rules, testing::ValuesIn(identifier_cases), param_name<identifier_case>);

struct template_case {
    const char* name;
    std::string key_template;
    std::vector<std::pair<bool, std::string>> parts;  // (is column, text)
    std::string error;
    std::size_t error_offset = 0;
};

const template_case template_cases[] = {
    {"incident_key", "lock:coupon:{user_id}:{campaign_id}",
     {{false, "lock:coupon:"}, {true, "user_id"}, {false, ":"}, {true, "campaign_id"}}, "", 0},
    {"only_a_column", "{request_id}", {{true, "request_id"}}, "", 0},
    {"no_columns", "static", {{false, "static"}}, "", 0},
    {"escaped_braces", "{{a}}:{b}", {{false, "{a}:"}, {true, "b"}}, "", 0},
    {"adjacent_columns", "{a}{b}", {{true, "a"}, {true, "b"}}, "", 0},
    {"unclosed", "x{a", {}, "has a '{' that is never closed", 1},
    {"stray_close", "ab}c", {}, "has a '}' that closes no '{' (write '}}' for a literal brace)", 2},
    {"empty_placeholder", "a{}", {}, "has an empty placeholder '{}'; put a column name between the braces", 1},
    {"brace_inside", "{a{b}", {}, "has a '{' inside a placeholder", 2},
};

class key_templates : public testing::TestWithParam<template_case> {};
TEST_P(key_templates, parse) {
    const auto& c = GetParam();
    const auto parsed = parse_key_template(c.key_template);
    EXPECT_EQ(parsed.error, c.error);
    if (!c.error.empty()) {
        EXPECT_EQ(parsed.error_offset, c.error_offset);
        return;
    }
    std::vector<std::pair<bool, std::string>> parts;
    for (const auto& p : parsed.parts)
        parts.emplace_back(p.type == template_part::kind::column, p.text);
    EXPECT_EQ(parts, c.parts);
}
INSTANTIATE_TEST_SUITE_P(text, key_templates, testing::ValuesIn(template_cases), param_name<template_case>);

TEST(key_template_expand, substitutes_columns) {
    const auto parsed = parse_key_template("lock:coupon:{user_id}:{campaign_id}");
    const auto key = expand_key_template(parsed.parts, [](const std::string& column) {
        return column == "user_id" ? std::string("42") : std::string("7");
    });
    EXPECT_EQ(key, "lock:coupon:42:7");
}

struct duration_case {
    const char* name;
    std::string text;
    std::optional<long long> ms;
};

const duration_case duration_cases[] = {
    {"bare_number_has_no_unit", "3000", std::nullopt},
    {"bare_zero_has_no_unit", "0", std::nullopt},
    {"ms", "250ms", 250},
    {"seconds", "3s", 3000},
    {"minutes", "2m", 120000},
    {"hours", "1h", 3600000},
    {"zero", "0ms", 0},
    {"empty", "", std::nullopt},
    {"unit_only", "ms", std::nullopt},
    {"space_before_unit", "3 s", std::nullopt},
    {"fraction", "1.5s", 1500},
    {"fraction_of_a_millisecond", "0.5ms", std::nullopt},
    {"negative", "-1s", std::nullopt},
    {"unknown_unit", "3d", std::nullopt},
    {"upper_case_unit", "3MS", std::nullopt},
    {"overflow", "99999999999999999999", std::nullopt},
    {"overflow_after_scale", "9223372036854775807h", std::nullopt},
};

class durations : public testing::TestWithParam<duration_case> {};
TEST_P(durations, parse) {
    const auto d = detail::parse_duration(GetParam().text);
    ASSERT_EQ(d.has_value(), GetParam().ms.has_value());
    if (d) {
        EXPECT_EQ(d->count(), *GetParam().ms);
    }
}
INSTANTIATE_TEST_SUITE_P(text, durations, testing::ValuesIn(duration_cases), param_name<duration_case>);

struct sql_state_case {
    const char* name;
    std::string text;
    std::string problem;
};

const sql_state_case sql_state_cases[] = {
    {"user_defined", "45000", ""},
    {"general_error", "HY000", ""},
    {"integrity", "23000", ""},
    {"warning_class", "01000", ""},
    {"short", "4500", "must be 5 characters, such as 45000"},
    {"long", "450000", "must be 5 characters, such as 45000"},
    {"lower_case", "hy000", "may hold only digits and upper-case letters, such as 45000"},
    {"success", "00000", "is in class 00, which means success; an error needs another class, such as 45000"},
    {"success_subclass", "00A01", "is in class 00, which means success; an error needs another class, such as 45000"},
};

class sql_states : public testing::TestWithParam<sql_state_case> {};
TEST_P(sql_states, problem) { EXPECT_EQ(detail::sql_state_problem(GetParam().text), GetParam().problem); }
INSTANTIATE_TEST_SUITE_P(text, sql_states, testing::ValuesIn(sql_state_cases), param_name<sql_state_case>);

struct hint_case {
    const char* name;
    std::string unknown;
    std::string hint;
};

constexpr std::string_view hint_fields[] = {"name", "table", "key_columns", "counter_column", "consumes", "redis"};

const hint_case hint_cases[] = {
    {"typo", "counter_colum", "counter_column"},
    {"prefix", "counter", "counter_column"},
    {"suffix", "columns", "key_columns"},
    {"case", "TABLE", "table"},
    {"alias", "stock_rule", "consumes"},
    {"alias_target_must_exist", "sql_state", ""},
    {"far_away", "colour", ""},
    {"short_word_no_prefix_guess", "ke", ""},
};

class field_hints : public testing::TestWithParam<hint_case> {};
TEST_P(field_hints, suggest) { EXPECT_EQ(detail::suggest_field(GetParam().unknown, hint_fields), GetParam().hint); }
INSTANTIATE_TEST_SUITE_P(text, field_hints, testing::ValuesIn(hint_cases), param_name<hint_case>);

struct utf8_case {
    const char* name;
    std::string text;
    std::optional<std::size_t> first_invalid;
    std::size_t length;  // code points, when valid
};

const utf8_case utf8_cases[] = {
    {"ascii", "abc", std::nullopt, 3},
    {"two_byte", "\xc3\xa9", std::nullopt, 1},
    {"three_byte", "\xe4\xbc\x98", std::nullopt, 1},
    {"four_byte", "\xf0\x9f\x98\x80", std::nullopt, 1},
    {"max_code_point", "\xf4\x8f\xbf\xbf", std::nullopt, 1},
    {"past_max_code_point", "a\xf4\x90\x80\x80", 1, 0},
    {"lone_continuation", "ab\x80", 2, 0},
    {"overlong_slash", "\xc0\xaf", 0, 0},
    {"overlong_three_byte", "\xe0\x80\xaf", 0, 0},
    {"surrogate", "\xed\xb0\x80", 0, 0},
    {"truncated", "\xe4\xbc", 0, 0},
    {"invalid_lead", "\xf8\x88\x80\x80\x80", 0, 0},
};

class utf8 : public testing::TestWithParam<utf8_case> {};
TEST_P(utf8, validates) {
    const auto& c = GetParam();
    EXPECT_EQ(first_invalid_utf8(c.text), c.first_invalid);
    if (!c.first_invalid) {
        EXPECT_EQ(utf8_length(c.text), c.length);
    }
}
INSTANTIATE_TEST_SUITE_P(text, utf8, testing::ValuesIn(utf8_cases), param_name<utf8_case>);

TEST(utf8_prefix, never_cuts_a_character) {
    EXPECT_EQ(utf8_prefix("\xe4\xbc\x98\xe6\x83\xa0", 1), "\xe4\xbc\x98");
    EXPECT_EQ(utf8_prefix("abc", 2), "ab");
    EXPECT_EQ(utf8_prefix("abc", 5), "abc");
    EXPECT_EQ(utf8_prefix("abc", 0), "");
}

TEST(fnv1a, published_test_vectors) {
    // From the FNV reference test suite (isthe.com/chongo/tech/comp/fnv).
    EXPECT_EQ(to_hex(fnv1a64("")), "cbf29ce484222325");
    EXPECT_EQ(to_hex(fnv1a64("a")), "af63dc4c8601ec8c");
    EXPECT_EQ(to_hex(fnv1a64("foobar")), "85944171f73967e8");
}

TEST(fnv1a, chaining_equals_one_pass) { EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar")); }

TEST(to_hex, pads_and_truncates) {
    EXPECT_EQ(to_hex(0x1f, 4), "001f");
    EXPECT_EQ(to_hex(0x123456789ULL, 8), "23456789");
    EXPECT_EQ(to_hex(0), "0000000000000000");
}

TEST(names, case_insensitive_ascii) {
    EXPECT_TRUE(iequals("Campaign_ID", "campaign_id"));
    EXPECT_FALSE(iequals("campaign", "campaign_id"));
    EXPECT_EQ(ascii_lower("AbC_\xc3\x89"), "abc_\xc3\x89");  // only ASCII letters fold
}

TEST(printable, replaces_control_characters) { EXPECT_EQ(printable(std::string("a\nb\0c\x7f", 6)), "a?b?c?"); }

TEST(precheck, bom_is_stripped_once) {
    EXPECT_EQ(strip_utf8_bom("\xEF\xBB\xBFx"), "x");
    EXPECT_EQ(strip_utf8_bom("x"), "x");
}

TEST(precheck, clean_text_has_no_problems) {
    EXPECT_TRUE(precheck_rules_text("a:\n  - b: [c, {d: e}]\n  - 'x'\n").empty());
    EXPECT_TRUE(precheck_rules_text("").empty());
}

}  // namespace
}  // namespace claimguard::rules::test
