// Bound COM_STMT_EXECUTE values as the decision compares them with literals.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "proxy/engine/bound_values.hpp"

namespace claimguard::engine {
namespace {

namespace proto = protocol;

struct bound_case {
    const char* name;
    proto::binary_value value;
    std::optional<std::string> canonical;  // empty: no value
    std::optional<std::int64_t> integer;
};

proto::bytes_view text(std::string_view s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

TEST(bound_values, each_binary_value_as_the_server_compares_it) {
    const std::vector<bound_case> cases = {
        {"signed", std::int64_t{-42}, "-42", -42},
        {"unsigned", std::uint64_t{7}, "7", 7},
        {"unsigned_past_bigint_is_no_integer", std::numeric_limits<std::uint64_t>::max(), "18446744073709551615",
         std::nullopt},
        {"numeric_string_as_a_number", text(" 007 "), "7", 7},
        {"decimal_string_keeps_its_decimals", text("7.50"), "7.5", std::nullopt},
        {"string_as_bytes", text("abc"), "abc", std::nullopt},
        {"double_integral", 7.0, "7", 7},  // Node's numbers are doubles
        {"null", std::monostate{}, std::nullopt, std::nullopt},
        {"long_data", proto::long_data_value{}, std::nullopt, std::nullopt},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        auto r = resolve_bound(c.value);
        ASSERT_EQ(r.has_value(), c.canonical.has_value());
        if (!r) continue;
        EXPECT_EQ(r->canonical, *c.canonical);
        EXPECT_EQ(r->integer, c.integer);
    }
}

TEST(bound_values, placeholders_from_the_execute_literals_as_written) {
    const std::vector<proto::binary_value> params = {std::int64_t{5}, text("x")};
    auto resolve = bound_resolver(params);
    rules::match::value_ref first;
    first.type = rules::match::value_ref::kind::placeholder;
    first.placeholder_index = 0;
    EXPECT_EQ(resolve(first)->integer, 5);
    auto second = first;
    second.placeholder_index = 1;
    EXPECT_EQ(resolve(second)->canonical, "x");
    auto unbound = first;
    unbound.placeholder_index = 2;
    EXPECT_FALSE(resolve(unbound));
}

}  // namespace
}  // namespace claimguard::engine
