// The one duration syntax (issue 22): rules/model/duration.hpp, used by flags, the environment, the
// config file and the rules file alike.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "rules/model/duration.hpp"

namespace {

using claimguard::duration::problem;
namespace duration = claimguard::duration;

struct parse_case {
    const char* name;
    std::string text;
    std::optional<long long> ms;
    problem why = problem::none;
};

const parse_case parse_cases[] = {
    {"milliseconds", "250ms", 250},
    {"seconds", "5s", 5000},
    {"fraction_of_seconds", "1.5s", 1500},
    {"fraction_with_trailing_zeros", "1.500s", 1500},
    {"fraction_of_minutes", "0.5m", 30000},
    {"fraction_of_hours", "1.25h", 4500000},
    {"finest_fraction_of_an_hour", "0.0000001h", std::nullopt, problem::too_fine},
    {"millisecond_in_hours", "0.000001h", std::nullopt, problem::too_fine},  // 3.6 ms
    {"exact_millisecond_of_a_second", "0.001s", 1},
    {"minutes", "2m", 120000},
    {"hours", "8h", 28800000},
    {"zero_with_unit", "0s", 0},
    {"leading_zeros", "007ms", 7},
    {"bare_number", "2", std::nullopt, problem::no_unit},
    {"bare_zero", "0", std::nullopt, problem::no_unit},
    {"bare_fraction", "1.5", std::nullopt, problem::no_unit},
    {"empty", "", std::nullopt, problem::empty},
    {"unit_only", "ms", std::nullopt, problem::malformed},
    {"leading_dot", ".5s", std::nullopt, problem::malformed},
    {"trailing_dot", "5.s", std::nullopt, problem::malformed},
    {"negative", "-1s", std::nullopt, problem::malformed},
    {"plus", "+1s", std::nullopt, problem::malformed},
    {"space", "5 s", std::nullopt, problem::malformed},
    {"two_units", "1m30s", std::nullopt, problem::malformed},
    {"days", "1d", std::nullopt, problem::unknown_unit},
    {"long_unit", "5sec", std::nullopt, problem::unknown_unit},
    {"upper_case", "5S", std::nullopt, problem::unknown_unit},
    {"microseconds", "5us", std::nullopt, problem::unknown_unit},
    {"below_a_millisecond", "0.5ms", std::nullopt, problem::too_fine},
    {"too_large", "99999999999999999999ms", std::nullopt, problem::too_large},
    {"too_large_after_scaling", "9999999999999h", std::nullopt, problem::too_large},
    {"largest", "9007199254740992ms", 9007199254740992LL},
};

class parse : public testing::TestWithParam<parse_case> {};

TEST_P(parse, value_or_problem) {
    const auto& c = GetParam();
    const auto p = duration::parse(c.text);
    ASSERT_EQ(p.value.has_value(), c.ms.has_value()) << c.text;
    if (c.ms) {
        EXPECT_EQ(p.value->count(), *c.ms);
    }
    EXPECT_EQ(p.problem, c.why) << c.text;
}

INSTANTIATE_TEST_SUITE_P(duration, parse, testing::ValuesIn(parse_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(describe, names_the_value_and_the_accepted_forms) {
    EXPECT_EQ(duration::describe(duration::parse("2"), "2"),
              "'2' has no unit; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, s, m, h)");
    EXPECT_EQ(duration::describe(duration::parse("3d"), "3d"),
              "'3d' has an unknown unit; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, s, m, h)");
    EXPECT_EQ(duration::describe(duration::parse("0.5ms"), "0.5ms"), "'0.5ms' is finer than a millisecond");
    EXPECT_EQ(duration::describe(duration::parse("1s"), "1s"), "");
}

TEST(format, uses_the_largest_exact_unit_and_parses_back) {
    using std::chrono::milliseconds;
    EXPECT_EQ(duration::format(milliseconds(0)), "0s");
    EXPECT_EQ(duration::format(milliseconds(1500)), "1500ms");
    EXPECT_EQ(duration::format(milliseconds(30000)), "30s");
    EXPECT_EQ(duration::format(milliseconds(120000)), "2m");
    EXPECT_EQ(duration::format(milliseconds(28800000)), "8h");
    for (long long ms : {0LL, 1LL, 999LL, 1000LL, 61000LL, 3600000LL, 90061001LL})
        EXPECT_EQ(duration::parse(duration::format(milliseconds(ms))).value, milliseconds(ms)) << ms;
}

}  // namespace
