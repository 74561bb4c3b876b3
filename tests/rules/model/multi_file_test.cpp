// Several files form one rule set: references across files, duplicates across files, one default mode.
#include "rules/model/limits.hpp"
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

const std::string stock_file =
    "stock_rules:\n  - name: coupon_stock\n    table: coupon_stock\n    key_columns: campaign_id\n"
    "    counter_column: remain\n";
const std::string claim_file =
    "claim_rules:\n  - name: coupon_order\n    table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
    "    consumes: coupon_stock\n";

std::vector<std::string> formatted(const load_result& r) {
    std::vector<std::string> out;
    for (const auto& e : r.errors)
        out.push_back(format_diagnostic(e));
    return out;
}

struct multi_case {
    const char* name;
    std::vector<rules_source> sources;
    std::vector<std::string> errors;  // empty: the set loads
};

const multi_case multi_cases[] = {
    {"claim_consumes_stock_from_another_file", {{"stock.yaml", stock_file}, {"claim.yaml", claim_file}}, {}},
    {"order_of_files_does_not_matter", {{"claim.yaml", claim_file}, {"stock.yaml", stock_file}}, {}},
    {"same_default_mode_twice",
     {{"a.yaml", "default_mode: observe\n" + stock_file}, {"b.yaml", "default_mode: observe\n" + claim_file}},
     {}},
    {"duplicate_name_across_files", {{"a.yaml", stock_file}, {"b.yaml", stock_file}},
     {"b.yaml:2:11: error: there is already a rule named 'coupon_stock' (the stock rule at a.yaml:2:5); rule names "
      "must be unique across all files",
      "b.yaml:3:12: error: stock rule 'coupon_stock' guards the same counter 'coupon_stock.remain' as stock rule "
      "'coupon_stock' at a.yaml:2:5; one rule per counter"}},
    {"conflicting_default_modes",
     {{"a.yaml", "default_mode: enforce\n"}, {"b.yaml", "\ndefault_mode: observe\n"}},
     {"b.yaml:2:15: error: default_mode is observe here but enforce at a.yaml:1:15; all files form one rule set "
      "with one default mode"}},
    {"errors_sorted_by_file_then_line",
     {{"a.yaml", "default_mode: x\nfoo: 1\n"}, {"b.yaml", "bar: 2\n"}, {"c.yaml", "\t- x\n"}},
     {"a.yaml:1:15: error: default_mode must be enforce or observe, not 'x'",
      "a.yaml:2:1: error: unknown field 'foo' in the rules file; its fields are: default_mode, stock_rules, "
      "claim_rules, trusted_users, rule_modes",
      "b.yaml:1:1: error: unknown field 'bar' in the rules file; its fields are: default_mode, stock_rules, "
      "claim_rules, trusted_users, rule_modes",
      "c.yaml:1:1: error: a tab is used for indentation here; YAML indents with spaces only"}},
    {"a_broken_file_does_not_hide_the_others", {{"a.yaml", "stock_rules: [\n"}, {"b.yaml", "mode: x\n"}},
     {"a.yaml:2:1: error: this is not valid YAML: end of sequence flow not found",
      "b.yaml:1:1: error: unknown field 'mode' in the rules file; did you mean 'default_mode'?"}},
    {"two_claim_rules_on_one_table_across_files",
     {{"a.yaml", stock_file + claim_file},
      {"b.yaml", "claim_rules:\n  - name: again\n    table: coupon_order\n    idempotency_columns: user_id\n"
                 "    consumes: coupon_stock\n"}},
     {"b.yaml:3:12: error: claim rule 'again' is on the same table 'coupon_order' as claim rule 'coupon_order' at "
      "a.yaml:7:5; one claim rule per table"}},
};

class multi_file : public testing::TestWithParam<multi_case> {};

TEST_P(multi_file, loads_as_one_set) {
    const auto& c = GetParam();
    const auto r = load_rules(c.sources);
    EXPECT_EQ(formatted(r), c.errors);
    EXPECT_EQ(r.rules.has_value(), c.errors.empty());
}

INSTANTIATE_TEST_SUITE_P(rules_model, multi_file, testing::ValuesIn(multi_cases),
                         [](const testing::TestParamInfo<multi_case>& i) { return std::string(i.param.name); });

TEST(multi_file_set, rules_keep_their_file_and_file_order) {
    const auto r = load_rules({{"claim.yaml", claim_file}, {"stock.yaml", stock_file}});
    ASSERT_TRUE(r.rules);
    EXPECT_EQ(r.rules->stocks.at(0).pos.file, "stock.yaml");
    EXPECT_EQ(r.rules->claims.at(0).pos.file, "claim.yaml");
    EXPECT_EQ(r.rules->claims.at(0).stock_key_mapping,
              (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
    EXPECT_EQ(r.rules->default_mode, mode::enforce);
}

TEST(multi_file_set, default_mode_from_any_file_applies_to_all_rules) {
    const auto r = load_rules({{"a.yaml", stock_file}, {"b.yaml", "default_mode: observe\n" + claim_file}});
    ASSERT_TRUE(r.rules);
    EXPECT_EQ(r.rules->effective_mode(r.rules->stocks.at(0)), mode::observe);
}

TEST(multi_file_set, version_hash_depends_on_file_order) {
    const auto ab = load_rules({{"a.yaml", stock_file}, {"b.yaml", claim_file}});
    const auto ba = load_rules({{"b.yaml", claim_file}, {"a.yaml", stock_file}});
    ASSERT_TRUE(ab.rules && ba.rules);
    EXPECT_NE(ab.rules->version_hash, ba.rules->version_hash);
}

TEST(multi_file_set, moving_text_between_files_changes_the_hash) {
    // The file boundary is part of the digest: "ab" + "" must not equal "a" + "b".
    const auto one = load_rules({{"x.yaml", stock_file + claim_file}, {"y.yaml", ""}});
    const auto two = load_rules({{"x.yaml", stock_file}, {"y.yaml", claim_file}});
    ASSERT_TRUE(one.rules && two.rules);
    EXPECT_NE(one.rules->version_hash, two.rules->version_hash);
}

TEST(multi_file_set, rule_modes_overlay_sets_a_rules_mode_from_another_file) {
    const auto r = load_rules({{"a.yaml", stock_file}, {"b.yaml", claim_file},
                               {"zz-modes.yaml", "rule_modes:\n  coupon_stock: observe\n"}});
    ASSERT_TRUE(r.rules) << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
    EXPECT_EQ(r.rules->effective_mode(r.rules->stocks.at(0)), mode::observe);
    EXPECT_EQ(r.rules->effective_mode(r.rules->claims.at(0)), mode::enforce);
}

TEST(multi_file_set, rule_modes_overlay_wins_over_the_rules_own_mode) {
    const auto r = load_rules({{"a.yaml", stock_file + "    mode: observe\n"},
                               {"modes.yaml", "rule_modes:\n  coupon_stock: enforce\n"}});
    ASSERT_TRUE(r.rules) << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
    EXPECT_EQ(r.rules->effective_mode(r.rules->stocks.at(0)), mode::enforce);
}

TEST(multi_file_set, rule_modes_errors_are_located) {
    const auto unknown = load_rules({{"a.yaml", stock_file}, {"modes.yaml", "rule_modes:\n  coupon_stok: observe\n"}});
    EXPECT_EQ(formatted(unknown), std::vector<std::string>{
                                      "modes.yaml:2:3: error: rule_modes names 'coupon_stok', which is no rule of "
                                      "these files (rules: coupon_stock)"});
    const auto conflicting =
        load_rules({{"a.yaml", stock_file + "rule_modes:\n  coupon_stock: observe\n"},
                    {"modes.yaml", "rule_modes:\n  coupon_stock: enforce\n"}});
    EXPECT_EQ(formatted(conflicting),
              std::vector<std::string>{"modes.yaml:2:3: error: rule_modes sets 'coupon_stock' to enforce here but to "
                                       "observe at a.yaml:7:3"});
    const auto bad_mode = load_rules({{"a.yaml", stock_file}, {"modes.yaml", "rule_modes:\n  coupon_stock: off\n"}});
    ASSERT_EQ(bad_mode.errors.size(), 1u);
    EXPECT_NE(format_diagnostic(bad_mode.errors[0]).find("modes.yaml:2:17: error: coupon_stock must be enforce or observe"),
              std::string::npos)
        << format_diagnostic(bad_mode.errors[0]);
    const auto list = load_rules({{"a.yaml", stock_file}, {"modes.yaml", "rule_modes: [coupon_stock]\n"}});
    ASSERT_EQ(list.errors.size(), 1u);
    EXPECT_NE(format_diagnostic(list.errors[0]).find("rule_modes is a mapping"), std::string::npos);
}

TEST(multi_file_set, no_files_is_an_empty_rule_set) {
    // A rules directory emptied on purpose: the proxy relays every statement unchanged.
    const auto r = load_rules({});
    ASSERT_TRUE(r.rules);
    EXPECT_TRUE(r.rules->stocks.empty());
    EXPECT_TRUE(r.rules->claims.empty());
}

TEST(multi_file_set, too_many_files) {
    std::vector<rules_source> sources;
    for (std::size_t i = 0; i <= max_rules_sources; ++i)
        sources.push_back({"f" + std::to_string(i) + ".yaml", ""});
    const auto r = load_rules(sources);
    EXPECT_EQ(formatted(r), std::vector<std::string>{"f256.yaml:1:1: error: too many rules files: a rule set is read "
                                                     "from at most 256"});
}

TEST(multi_file_set, no_files_is_an_empty_set) {
    const auto r = load_rules({});
    ASSERT_TRUE(r.rules);
    EXPECT_TRUE(r.rules->stocks.empty());
}

}  // namespace
}  // namespace claimguard::rules::test
