// Invalid rules files, top level and stock rules: every error with its exact line:column and sentence.
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

const std::string stock_fields_list =
    "name, table, key_columns, counter_column, version_column, floor, exhausted, mode, units, unmodeled, read_cache, "
    "max_refresh_wait, read_cache_sold_out, defer_decrement, admission, amount_evidence, group_update, reserve";

// Lines 1-3 of a stock rule whose line 4 is `    counter_column: <value>` (the value at column 21).
std::string counter_is(const std::string& value) {
    return "stock_rules:\n  - table: t\n    key_columns: k\n    counter_column: " + value + "\n";
}

// A stock rule whose line 3 is `    key_columns: <value>` (the value at column 18).
std::string keys_are(const std::string& value) {
    return "stock_rules:\n  - table: t\n    key_columns: " + value + "\n    counter_column: n\n";
}

// A stock rule whose line 2 is `  - table: <value>` (the value at column 12).
std::string table_is(const std::string& value) {
    return "stock_rules:\n  - table: " + value + "\n    key_columns: k\n    counter_column: n\n";
}

// A stock rule whose line 2 is `  - name: <value>` (the value at column 11).
std::string name_is(const std::string& value) {
    return "stock_rules:\n  - name: " + value + "\n    table: t\n    key_columns: k\n    counter_column: n\n";
}

std::string seventeen_columns() {
    std::string list = "[";
    for (int i = 1; i <= 17; ++i)
        list += (i == 1 ? "c" : ", c") + std::to_string(i);
    return list + "]";
}

const error_case top_level_cases[] = {
    {"unknown_top_field_with_hint", "default_mod: enforce\n",
     {"1:1: unknown field 'default_mod' in the rules file; did you mean 'default_mode'?"}},
    {"unknown_top_field_lists_fields", "version: 1\n",
     {"1:1: unknown field 'version' in the rules file; its fields are: default_mode, stock_rules, claim_rules, trusted_users, rule_modes"}},
    {"unknown_top_field_suffix_hint", "rules: []\n",
     {"1:1: unknown field 'rules' in the rules file; did you mean 'stock_rules'?"}},
    {"top_level_list", "- a\n- b\n",
     {"1:1: a rules file is a mapping with default_mode:, stock_rules: and claim_rules:, not a list"}},
    {"top_level_scalar", "hello\n",
     {"1:1: a rules file is a mapping with default_mode:, stock_rules: and claim_rules:, not a single value"}},
    {"default_mode_unknown_value", "default_mode: strict\n",
     {"1:15: default_mode must be enforce or observe, not 'strict'"}},
    {"default_mode_is_case_sensitive", "default_mode: Observe\n",
     {"1:15: default_mode must be enforce or observe, not 'Observe'"}},
    {"default_mode_empty", "default_mode:\n", {"1:1: default_mode has no value; it needs enforce or observe"}},
    {"default_mode_list", "default_mode: [enforce]\n", {"1:15: default_mode needs enforce or observe, not a list"}},
    {"duplicate_top_field", "default_mode: enforce\ndefault_mode: observe\n",
     {"2:1: default_mode is set twice in the rules file (first on line 1); keep one"}},
    {"two_documents", "default_mode: enforce\n---\ndefault_mode: observe\n",
     {"2:1: the file holds more than one YAML document ('---'); put each rule set in its own file"}},
    {"stock_rules_as_mapping", "stock_rules:\n  coupon: {table: t}\n",
     {"2:3: stock_rules must be a list of stock rules, each starting with '- ', not a mapping"}},
    {"claim_rules_as_scalar", "claim_rules: coupon_order\n",
     {"1:14: claim_rules must be a list of claim rules, each starting with '- ', not a single value"}},
    {"stock_rule_as_scalar", "stock_rules:\n  - coupon_stock\n",
     {"2:5: each stock rule is a mapping of fields (table:, ...), not a single value"}},
    {"claim_rule_as_list", "claim_rules:\n  - [a, b]\n",
     {"2:5: each claim rule is a mapping of fields (table:, ...), not a list"}},
};

const error_case stock_cases[] = {
    {"stock_unknown_field_with_hint", with_stock_lines("    conter_column: x\n"),
     {"6:5: unknown field 'conter_column' in a stock rule; did you mean 'counter_column'?"}},
    {"stock_unknown_field_lists_fields", with_stock_lines("    price: 10\n"),
     {"6:5: unknown field 'price' in a stock rule; its fields are: " + stock_fields_list}},
    {"stock_short_field_name_hint", with_stock_lines("    key: campaign_id\n"),
     {"6:5: unknown field 'key' in a stock rule; did you mean 'key_columns'?"}},
    {"stock_field_case_hint", with_stock_lines("    Floor: 1\n"),
     {"6:5: unknown field 'Floor' in a stock rule; did you mean 'floor'?"}},
    {"stock_duplicate_field", with_stock_lines("    counter_column: remain2\n"),
     {"6:5: counter_column is set twice in a stock rule (first on line 5); keep one"}},
    {"stock_merge_key", with_stock_lines("    <<: {floor: 1}\n"),
     {"6:5: merge keys (<<) are not supported; write the fields out in full"}},
    {"stock_missing_counter", "stock_rules:\n  - table: t\n    key_columns: k\n",
     {"2:5: this stock rule has no counter_column: (the column that holds the remaining stock, e.g. "
      "counter_column: remain)"}},
    {"stock_missing_table_and_key_columns", "stock_rules:\n  - counter_column: remain\n",
     {"2:5: this stock rule has no table: (the table that holds the stock counter, e.g. table: coupon_stock)",
      "2:5: this stock rule has no key_columns: (the column(s) that pick the stock row, e.g. key_columns: "
      "[campaign_id])"}},
    {"stock_counter_empty", "stock_rules:\n  - table: t\n    key_columns: k\n    counter_column:\n",
     {"4:5: counter_column has no value; it needs a column name"}},
    {"stock_counter_list", counter_is("[a, b]"), {"4:21: counter_column needs a column name, not a list"}},
    {"stock_counter_mapping", counter_is("{a: b}"), {"4:21: counter_column needs a column name, not a mapping"}},
    {"stock_counter_is_key_column", counter_is("K"),
     {"4:21: counter_column 'K' is also a key column; the counter must be its own column"}},
    {"stock_version_is_counter", with_stock_lines("    version_column: remain\n"),
     {"6:21: version_column 'remain' is also the counter column; the version must be its own column"}},
    {"stock_version_is_key", with_stock_lines("    version_column: Campaign_Id\n"),
     {"6:21: version_column 'Campaign_Id' is also the key column; the version must be its own column"}},
    {"read_cache_zero", with_stock_lines("    read_cache: 0ms\n"),
     {"6:17: read_cache is '0ms'; it must be at least 1ms and at most 10s"}},
    {"read_cache_over_ten_seconds", with_stock_lines("    read_cache: 10001ms\n"),
     {"6:17: read_cache is '10001ms'; it must be at least 1ms and at most 10s"}},
    {"max_refresh_wait_without_read_cache", with_stock_lines("    max_refresh_wait: 100ms\n"),
     {"6:23: max_refresh_wait applies to reads the sidecar answers: set read_cache too"}},
    {"max_refresh_wait_over_five_seconds", with_stock_lines("    read_cache: 50ms\n    max_refresh_wait: 5001ms\n"),
     {"7:23: max_refresh_wait is '5001ms'; it must be at least 1ms and at most 5s"}},
    {"read_cache_sold_out_without_read_cache", with_stock_lines("    read_cache_sold_out: 1s\n"),
     {"6:26: read_cache_sold_out applies to reads the sidecar answers: set read_cache too"}},
    {"read_cache_sold_out_below_read_cache", with_stock_lines("    read_cache: 50ms\n    read_cache_sold_out: 2ms\n"),
     {"7:26: read_cache_sold_out is '2ms'; it must be at least 50ms and at most 1m"}},
    {"read_cache_sold_out_over_a_minute", with_stock_lines("    read_cache: 50ms\n    read_cache_sold_out: 61s\n"),
     {"7:26: read_cache_sold_out is '61s'; it must be at least 50ms and at most 1m"}},
    {"read_cache_words", with_stock_lines("    read_cache: fast\n"),
     {"6:17: read_cache: 'fast' is not a duration; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, "
      "s, m, h)"}},
    {"read_cache_list", with_stock_lines("    read_cache: [50ms]\n"),
     {"6:17: read_cache needs a duration such as 250ms or 1.5s, not a list"}},
    {"floor_text", with_stock_lines("    floor: abc\n"), {"6:12: floor must be a whole number such as 0, not 'abc'"}},
    {"floor_decimal", with_stock_lines("    floor: 1.5\n"), {"6:12: floor must be a whole number such as 0, not '1.5'"}},
    {"floor_hex", with_stock_lines("    floor: 0x10\n"), {"6:12: floor must be a whole number such as 0, not '0x10'"}},
    {"floor_exponent", with_stock_lines("    floor: 1e30\n"),
     {"6:12: floor must be a whole number such as 0, not '1e30'"}},
    {"floor_plus_sign", with_stock_lines("    floor: +5\n"), {"6:12: floor must be a whole number such as 0, not '+5'"}},
    {"floor_too_large", with_stock_lines("    floor: 99999999999999999999\n"),
     {"6:12: floor is '99999999999999999999', outside the range -9223372036854775808 to 9223372036854775807"}},
    {"floor_too_small", with_stock_lines("    floor: -9223372036854775809\n"),
     {"6:12: floor is '-9223372036854775809', outside the range -9223372036854775808 to 9223372036854775807"}},
    {"floor_mapping", with_stock_lines("    floor: {a: 1}\n"), {"6:12: floor needs a whole number such as 0, not a mapping"}},
    {"defer_decrement_yes", with_stock_lines("    defer_decrement: yes\n"),
     {"6:22: defer_decrement must be true or false, not 'yes'"}},
    {"defer_decrement_list", with_stock_lines("    defer_decrement: [true]\n"),
     {"6:22: defer_decrement needs true or false, not a list"}},
    {"mode_wrong_case", with_stock_lines("    mode: Enforce\n"), {"6:11: mode must be enforce or observe, not 'Enforce'"}},
    {"mode_boolean", with_stock_lines("    mode: true\n"), {"6:11: mode must be enforce or observe, not 'true'"}},
    {"key_columns_empty_list", keys_are("[]"), {"3:18: key_columns is an empty list; it needs at least one column"}},
    {"key_columns_duplicate_ignoring_case", keys_are("[campaign_id, CAMPAIGN_ID]"),
     {"3:32: key_columns lists 'CAMPAIGN_ID' twice"}},
    {"key_columns_seventeen", keys_are(seventeen_columns()),
     {"3:18: key_columns lists 17 columns; a MySQL index holds at most 16"}},
    {"key_columns_nested_list", keys_are("[[a]]"), {"3:19: each entry of key_columns needs a column name, not a list"}},
    {"key_columns_mapping", keys_are("{a: b}"),
     {"3:18: key_columns needs a column name or a list of column names, not a mapping"}},
    {"key_columns_null_entry", keys_are("[a, ~]"), {"3:22: each entry of key_columns has no value; it needs a column name"}},
    {"key_columns_bad_entry", keys_are("[a, \"b \"]"),
     {"3:22: each entry of key_columns 'b ' ends with a space, which MySQL does not allow in names"}},
    {"identifier_too_long", counter_is(std::string(65, 'a')),
     {"4:21: counter_column '" + std::string(60, 'a') + "...' is longer than 64 characters, the MySQL limit for names"}},
    {"identifier_trailing_space", counter_is("\"remain \""),
     {"4:21: counter_column 'remain ' ends with a space, which MySQL does not allow in names"}},
    {"identifier_control_character", counter_is("\"re\\tmain\""),
     {"4:21: counter_column 're?main' contains a control character"}},
    {"identifier_nul_escape", counter_is("\"re\\0main\""), {"4:21: counter_column 're?main' contains a control character"}},
    {"identifier_outside_bmp", counter_is("\"\xF0\x9F\x98\x80\""),
     {"4:21: counter_column '\xF0\x9F\x98\x80' contains a character MySQL does not allow in names (outside the Basic "
      "Multilingual Plane)"}},
    {"identifier_empty_string", counter_is("\"\""), {"4:21: counter_column '' is empty"}},
    {"table_three_parts", table_is("a.b.c"),
     {"2:12: table 'a.b.c' has more than one '.'; for names that contain dots write table: {schema: ..., name: ...}"}},
    {"table_backticks", table_is("\"`coupon_stock`\""),
     {"2:12: table '`coupon_stock`' contains a backtick; write names without quotes (claimguard quotes them "
      "itself), or use table: {schema: ..., name: ...} for a name that really contains one"}},
    {"table_empty_schema", table_is(".coupon"), {"2:12: the schema in table '.coupon' is empty"}},
    {"table_empty_name", table_is("shop."), {"2:12: the table name in table 'shop.' is empty"}},
    {"table_long_schema", table_is(std::string(65, 's') + ".t"),
     {"2:12: the schema in table '" + std::string(60, 's') +
      "...' is longer than 64 characters, the MySQL limit for names"}},
    {"table_mapping_without_name", table_is("{schema: shop}"), {"2:12: table needs name: (and optionally schema:)"}},
    {"table_mapping_unknown_field", table_is("{name: t, db: shop}"),
     {"2:22: unknown field 'db' in a table; its fields are: schema, name"}},
    {"table_mapping_empty_name", table_is("{name: \"\"}"), {"2:19: table name '' is empty"}},
    {"table_mapping_duplicate_name", table_is("{name: a, name: b}"),
     {"2:22: name is set twice in a table (first on line 2); keep one"}},
    {"table_list", table_is("[a]"),
     {"2:12: table needs a table name such as coupon_stock or shop.coupon_stock, not a list"}},
    {"table_empty", "stock_rules:\n  - table:\n    key_columns: k\n    counter_column: n\n",
     {"2:5: table has no value; it needs a table name such as coupon_stock or shop.coupon_stock"}},
    {"name_with_space", name_is("coupon stock"),
     {"2:11: name 'coupon stock' may hold only letters, digits, '_', '-' and '.' (it appears in metrics and logs)"}},
    {"name_leading_dash", name_is("-x"), {"2:11: name '-x' must start with a letter, a digit or '_'"}},
    {"name_too_long", name_is(std::string(65, 'n')),
     {"2:11: name '" + std::string(60, 'n') + "...' is longer than 64 characters"}},
    {"name_list", name_is("[a]"), {"2:11: name needs a rule name, not a list"}},
    {"admission_not_a_mapping", with_stock_lines("    admission: 4\n"),
     {"6:16: admission needs a mapping with max_in_flight: and queue_timeout:, not a single value"}},
    {"admission_without_its_required_fields", with_stock_lines("    admission: {max_queue: 5}\n"),
     {"6:16: admission has no max_in_flight: (how many decrements of one key this sidecar lets reach the "
      "database at once, e.g. max_in_flight: 4)",
      "6:16: admission has no queue_timeout: (how long a statement may wait for its turn, e.g. queue_timeout: 2s)"}},
    {"admission_values_out_of_range",
     with_stock_lines("    admission:\n      max_in_flight: 0\n      queue_timeout: 2m\n      max_queue: 1000001\n"),
     {"7:22: max_in_flight is '0', outside the range 1 to 4096",
      "8:22: queue_timeout is '2m'; it must be at least 1ms and at most 1m",
      "9:18: max_queue is '1000001', outside the range 1 to 1000000"}},
    {"admission_bare_number_has_no_unit",  // issue 22: `queue_timeout: 2` used to lint as 2 ms
     with_stock_lines("    admission:\n      max_in_flight: 4\n      queue_timeout: 2\n"),
     {"8:22: queue_timeout: '2' has no unit; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, s, m, "
      "h)"}},
    {"admission_bad_duration_and_unknown_field",
     with_stock_lines("    admission:\n      max_in_flight: 4\n      queue_timeout: soon\n      max_wait: 1s\n"),
     {"8:22: queue_timeout: 'soon' is not a duration; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units "
      "ms, s, m, h)",
      "9:7: unknown field 'max_wait' in admission; its fields are: max_in_flight, queue_timeout, max_queue"}},
    {"group_update_needs_admission", with_stock_lines("    group_update: {max_batch: 8}\n"),
     {"6:19: group_update needs admission: on the same rule (the takes it groups wait in the key's admission "
      "queue), e.g. admission: {max_in_flight: 1, queue_timeout: 2s}"}},
    {"group_update_values_out_of_range",
     with_stock_lines("    admission: {max_in_flight: 1, queue_timeout: 2s}\n    group_update:\n      max_batch: 1\n"
                      "      max_wait: 1s\n"),
     {"8:18: max_batch is '1', outside the range 2 to 1024",
      "9:17: max_wait is '1s'; it must be at least 0s and at most 100ms"}},
    {"group_update_not_a_mapping",
     with_stock_lines("    admission: {max_in_flight: 1, queue_timeout: 2s}\n    group_update: 8\n"),
     {"7:19: group_update needs a mapping such as {max_batch: 32, max_wait: 1ms}, not a single value"}},
    {"reserve_with_a_version_column", with_stock_lines("    version_column: version\n    reserve: {block: 10}\n"),
     {"7:14: reserve cannot go with version_column 'version': a take served from the sidecar's reserved block "
      "never reaches the row, so the version would not count it (remove version_column, or reserve)"}},
    {"reserve_needs_a_block", with_stock_lines("    reserve: {idle: 1s}\n"),
     {"6:14: reserve has no block: (how many units the sidecar takes from the row at once, e.g. block: 50)"}},
    {"reserve_values_out_of_range", with_stock_lines("    reserve:\n      block: 0\n      idle: 1ms\n"),
     {"7:14: block is '0', outside the range 1 to 1000000",
      "8:13: idle is '1ms'; it must be at least 10ms and at most 1h"}},
    {"reserve_not_a_mapping", with_stock_lines("    reserve: 10\n"),
     {"6:14: reserve needs a mapping such as {block: 50, idle: 5s}, not a single value"}},
    {"all_errors_of_a_rule_are_collected", with_stock_lines("    floor: x\n    mode: y\n    price: z\n"),
     {"6:12: floor must be a whole number such as 0, not 'x'", "7:11: mode must be enforce or observe, not 'y'",
      "8:5: unknown field 'price' in a stock rule; its fields are: " + stock_fields_list}},
};

class load_errors : public testing::TestWithParam<error_case> {};
TEST_P(load_errors, reports_exactly) { expect_errors(GetParam()); }
INSTANTIATE_TEST_SUITE_P(top_level, load_errors, testing::ValuesIn(top_level_cases), case_name);
INSTANTIATE_TEST_SUITE_P(stock_rule, load_errors, testing::ValuesIn(stock_cases), case_name);

}  // namespace
}  // namespace claimguard::rules::test
