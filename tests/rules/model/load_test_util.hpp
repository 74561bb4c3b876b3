// Test helpers for the rules loader: one-file loads, errors as "line:col: message", base documents.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rules/model/rules.hpp"

namespace claimguard::rules::test {

inline constexpr const char* test_file = "rules.yaml";

// A valid stock rule on lines 1-5 (extra stock fields go on line 6).
inline const std::string base_stock =
    "stock_rules:\n"
    "  - name: s\n"
    "    table: coupon_stock\n"
    "    key_columns: [campaign_id]\n"
    "    counter_column: remain\n";

// A valid claim rule; after base_stock it takes lines 6-10 (extra claim fields go on line 11).
inline const std::string base_claim =
    "claim_rules:\n"
    "  - name: c\n"
    "    table: coupon_order\n"
    "    idempotency_columns: [user_id, campaign_id]\n"
    "    consumes: s\n";

inline std::string with_stock_lines(const std::string& extra) { return base_stock + extra + base_claim; }
inline std::string with_claim_lines(const std::string& extra) { return base_stock + base_claim + extra; }

inline load_result load_one(const std::string& yaml) { return load_rules({{test_file, yaml}}); }

// Errors as "line:column: message" (the file name is checked separately).
inline std::vector<std::string> error_lines(const load_result& r) {
    std::vector<std::string> out;
    for (const auto& e : r.errors)
        out.push_back(std::to_string(e.pos.line) + ":" + std::to_string(e.pos.column) + ": " + e.message);
    return out;
}

// A named error case: the YAML and every error it must produce, in order.
struct error_case {
    const char* name;
    std::string yaml;
    std::vector<std::string> errors;
};

inline std::string case_name(const testing::TestParamInfo<error_case>& info) { return info.param.name; }

inline void expect_errors(const error_case& c) {
    const auto r = load_one(c.yaml);
    EXPECT_FALSE(r.rules.has_value());
    EXPECT_EQ(error_lines(r), c.errors) << "YAML:\n" << c.yaml;
    for (const auto& e : r.errors)
        EXPECT_EQ(e.pos.file, test_file);
}

}  // namespace claimguard::rules::test
