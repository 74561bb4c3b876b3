// Hostile input: tabs, binary, bad UTF-8, oversize files, deep nesting, anchors, odd keys, garbage.
#include <random>

#include "rules/model/limits.hpp"
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

const std::string nested_message = "the YAML is nested more than 64 levels deep here; a rules file needs no more than 5";
const std::string top_fields = "its fields are: default_mode, stock_rules, claim_rules, trusted_users, rule_modes";

std::string repeat(const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
        out += s;
    return out;
}

std::string indented_keys(int levels) {
    std::string out;
    for (int i = 0; i < levels; ++i)
        out += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
    return out;
}

const error_case hostile_cases[] = {
    {"tab_indentation", "stock_rules:\n\t- table: t\n",
     {"2:1: a tab is used for indentation here; YAML indents with spaces only"}},
    {"tab_after_spaces", "stock_rules:\n  - table: t\n  \tkey_columns: k\n",
     {"3:3: a tab is used for indentation here; YAML indents with spaces only"}},
    {"tab_after_dash", "stock_rules:\n  -\ttable: t\n",
     {"2:4: a tab is used for indentation here; YAML indents with spaces only"}},
    {"tabs_on_two_lines_both_reported", "stock_rules:\n\t- table: t\n\t  key_columns: k\n",
     {"2:1: a tab is used for indentation here; YAML indents with spaces only",
      "3:1: a tab is used for indentation here; YAML indents with spaces only"}},
    {"tab_in_column_1_of_a_blank_line", "default_mode: enforce\n\t\n",
     {"2:1: a tab is used for indentation here; YAML indents with spaces only"}},
    {"tab_in_column_1_of_a_comment_line", "default_mode: enforce\n\t# note\n",
     {"2:1: a tab is used for indentation here; YAML indents with spaces only"}},
    {"nul_byte", std::string("default_mode: enforce\n\0x", 24),
     {"2:1: the file contains the control character 0x00; a rules file is plain text (is this a binary file?)"}},
    {"escape_character", "default_mode: \x1b[31menforce\n",
     {"1:15: the file contains the control character 0x1b; a rules file is plain text (is this a binary file?)"}},
    {"delete_character", "default_mode: enf\x7f" "orce\n",
     {"1:18: the file contains the control character 0x7f; a rules file is plain text (is this a binary file?)"}},
    {"invalid_utf8", "default_mode: \xff\n", {"1:15: the file is not valid UTF-8 (byte 0xff); save it as UTF-8"}},
    {"utf16_file", std::string("\xff\xfe" "d\0e\0", 6), {"1:1: the file is not valid UTF-8 (byte 0xff); save it as UTF-8"}},
    {"overlong_utf8", "a: \xc0\xaf\n", {"1:4: the file is not valid UTF-8 (byte 0xc0); save it as UTF-8"}},
    {"utf8_surrogate", "a: \xed\xa0\x80\n", {"1:4: the file is not valid UTF-8 (byte 0xed); save it as UTF-8"}},
    {"truncated_utf8_at_end", "a: \xe4\xbd", {"1:4: the file is not valid UTF-8 (byte 0xe4); save it as UTF-8"}},
    {"file_too_large", std::string(max_rules_file_bytes + 1, '#'),
     {"1:1: the file is larger than 1048576 bytes, the most a rules file may hold"}},
    {"deep_flow_sequences", "a: " + repeat("[", 100), {"1:67: " + nested_message}},
    {"deep_flow_mappings", repeat("{a: ", 100), {"1:253: " + nested_message}},
    {"deep_compact_sequences", repeat("- ", 100) + "x\n", {"1:201: " + nested_message}},
    {"deep_indentation", indented_keys(70), {"65:65: " + nested_message}},
    {"deep_flow_across_lines", "a:\n" + repeat("  [\n", 100), {"64:3: " + nested_message}},
    {"nesting_at_the_limit_is_parsed", "a: " + repeat("[", 63) + repeat("]", 63) + "\n",
     {"1:1: unknown field 'a' in the rules file; " + top_fields}},
    {"brackets_in_quotes_do_not_nest", "default_mode: \"" + repeat("[", 100) + "\"\n",
     {"1:15: default_mode must be enforce or observe, not '" + repeat("[", 60) + "...'"}},
    {"brackets_in_single_quotes_do_not_nest", "default_mode: '" + repeat("{", 100) + "'\n",
     {"1:15: default_mode must be enforce or observe, not '" + repeat("{", 60) + "...'"}},
    {"unknown_anchor", "default_mode: *x\n", {"1:15: this is not valid YAML: the referenced anchor is not defined"}},
    {"alias_of_the_wrong_type_is_reported_at_its_key", "default_mode: &m enforce\nstock_rules: *m\n",
     {"2:1: stock_rules must be a list of stock rules, each starting with '- ', not a single value"}},
    {"complex_key", "? [a, b]\n: c\n", {"1:3: a field name must be a single word, not a list"}},
    {"null_key", "~: x\n", {"1:1: a field name is missing before the ':'"}},
    {"folded_scalar_keeps_its_newline", "default_mode: >\n  enforce\n",
     {"1:15: default_mode must be enforce or observe, not 'enforce?'"}},
    {"unclosed_flow_sequence", "stock_rules: [\n", {"2:1: this is not valid YAML: end of sequence flow not found"}},
    {"lone_comma_does_not_hang_the_parser", ",\n", {"1:1: this is not valid YAML: unexpected ',' here"}},
    {"comma_after_a_document_does_not_hang", "default_mode: enforce\n...\n,\n",
     {"3:1: the file holds more than one YAML document ('---'); put each rule set in its own file"}},
    // yaml-cpp 0.7 ends an unclosed double-quoted scalar at the end of the file (the line break folds to a space).
    {"unclosed_quote", "default_mode: \"enforce\n", {"1:15: default_mode must be enforce or observe, not 'enforce '"}},
};

class hostile_yaml : public testing::TestWithParam<error_case> {};
TEST_P(hostile_yaml, reports_exactly) { expect_errors(GetParam()); }
INSTANTIATE_TEST_SUITE_P(hostile, hostile_yaml, testing::ValuesIn(hostile_cases), case_name);

struct accepted_case {
    const char* name;
    std::string yaml;
};

const accepted_case accepted_cases[] = {
    {"file_of_exactly_the_limit", std::string(max_rules_file_bytes, '#')},
    {"tab_before_a_comment", "default_mode: enforce\t# tabs after content are fine\n"},
    {"spaces_then_tab_on_a_blank_line", "default_mode: enforce\n  \t\n"},
    {"standard_tag", "default_mode: !!str enforce\n"},
    {"local_tag", "default_mode: !mode enforce\n"},
    {"brackets_in_comments", "# " + repeat("[", 200) + "\ndefault_mode: enforce\n"},
    {"document_end_marker", "default_mode: enforce\n...\n"},
    {"document_start_marker", "---\ndefault_mode: enforce\n"},
};

class hostile_accepted : public testing::TestWithParam<accepted_case> {};
TEST_P(hostile_accepted, loads) {
    const auto r = load_one(GetParam().yaml);
    EXPECT_TRUE(r.rules.has_value()) << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
}
INSTANTIATE_TEST_SUITE_P(hostile, hostile_accepted, testing::ValuesIn(accepted_cases),
                         [](const testing::TestParamInfo<accepted_case>& i) { return std::string(i.param.name); });

TEST(hostile_yaml_limits, billion_laughs_stays_bounded) {
    std::string yaml = "x0: &a0 [l, l, l, l, l, l, l, l, l, l]\n";
    for (int i = 1; i < 9; ++i) {
        yaml += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
        for (int j = 0; j < 10; ++j)
            yaml += (j == 0 ? "*a" : ", *a") + std::to_string(i - 1);
        yaml += "]\n";
    }
    yaml += "stock_rules: *a8\n";
    const auto r = load_one(yaml);
    ASSERT_FALSE(r.rules.has_value());
    // Nine unknown fields, then one error per stock rule entry (each a list, not a mapping), reported at
    // stock_rules on line 10 since the entries are aliases defined earlier.
    ASSERT_EQ(r.errors.size(), 19u);
    EXPECT_EQ(r.errors[9].pos.line, 10);
    EXPECT_EQ(r.errors[9].pos.column, 1);
    EXPECT_EQ(format_diagnostic(r.errors[0]), "rules.yaml:1:1: error: unknown field 'x0' in the rules file; " + top_fields);
    EXPECT_EQ(r.errors[18].message, "each stock rule is a mapping of fields (table:, ...), not a list");
}

TEST(hostile_yaml_limits, errors_are_capped) {
    std::string yaml = "stock_rules:\n";
    for (int i = 0; i < 300; ++i)
        yaml += "  - {name: r" + std::to_string(i) + ", table: t" + std::to_string(i) +
                ", key_columns: k, counter_column: n, floor: x}\n";
    const auto r = load_one(yaml);
    ASSERT_EQ(r.errors.size(), max_diagnostics + 1);
    EXPECT_EQ(r.errors.back().message, "too many errors (more than 100); fix these first");
    for (std::size_t i = 0; i < max_diagnostics; ++i)
        EXPECT_EQ(r.errors[i].pos.line, static_cast<int>(i) + 2);
}

TEST(hostile_yaml_limits, too_many_rules) {
    std::string yaml = "stock_rules:\n";
    for (std::size_t i = 0; i <= max_rules_per_set; ++i)
        yaml += "  - {table: t" + std::to_string(i) + ", key_columns: k, counter_column: n}\n";
    const auto r = load_one(yaml);
    EXPECT_EQ(error_lines(r), std::vector<std::string>{"4098:5: too many rules: a rule set holds at most 4096"});
}

// Never a crash and always an answer, whatever the bytes (the fuzz target explores further).
TEST(hostile_yaml_garbage, random_bytes) {
    std::mt19937 rng(20240611);
    for (int round = 0; round < 300; ++round) {
        std::string text(rng() % 512, '\0');
        for (auto& c : text)
            c = static_cast<char>(rng() & 0xFF);
        const auto r = load_one(text);
        EXPECT_NE(r.rules.has_value(), !r.errors.empty()) << "round " << round;
    }
}

TEST(hostile_yaml_garbage, random_yaml_punctuation) {
    const std::string alphabet = "-:[]{},&*!|>'\"#?%@` \n\n  \tab~0.";
    std::mt19937 rng(7);
    for (int round = 0; round < 2000; ++round) {
        std::string text(rng() % 128, ' ');
        for (auto& c : text)
            c = alphabet[rng() % alphabet.size()];
        const auto r = load_one(text);
        EXPECT_NE(r.rules.has_value(), !r.errors.empty()) << "round " << round;
        for (const auto& e : r.errors) {
            EXPECT_GE(e.pos.line, 1);
            EXPECT_GE(e.pos.column, 1);
            EXPECT_FALSE(e.message.empty());
        }
    }
}

TEST(hostile_yaml_garbage, mutations_of_a_valid_file) {
    const std::string valid = base_stock + base_claim + "    redis: {key: \"l:{user_id}:{campaign_id}\", ttl: 3s}\n";
    std::mt19937 rng(99);
    for (int round = 0; round < 2000; ++round) {
        std::string text = valid;
        for (int m = 0; m < 3; ++m)
            text[rng() % text.size()] = static_cast<char>(rng() % 128);
        const auto r = load_one(text);
        EXPECT_NE(r.rules.has_value(), !r.errors.empty()) << text;
    }
}

}  // namespace
}  // namespace claimguard::rules::test
