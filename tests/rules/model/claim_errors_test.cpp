// Invalid claim rules and rules that clash: consumes, column mappings, Redis guards, duplicates.
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

// base_stock, then a claim rule `c` whose consumes is written on lines 10 and after.
std::string claim_consumes(const std::string& consumes) {
    return base_stock + "claim_rules:\n  - name: c\n    table: coupon_order\n"
                        "    idempotency_columns: [user_id, campaign_id]\n    consumes:" + consumes;
}

// The claim rule with a Redis guard whose key is on line 11 at column 18.
std::string redis_key(const std::string& key) {
    return with_claim_lines("    redis: {key: \"" + key + "\"}\n");
}

// The claim rule with a Redis guard whose ttl is on line 13 at column 12.
std::string redis_ttl(const std::string& ttl) {
    return with_claim_lines("    redis:\n      key: \"l:{user_id}:{campaign_id}\"\n      ttl: " + ttl + "\n");
}

const std::string ttl_range = "; it must be at least 1ms and at most 24h";
const std::string forms = "; expected a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, s, m, h)";

const std::string sku_stock =
    "stock_rules:\n  - name: s\n    table: sku_stock\n    key_columns: [campaign_id, sku]\n    counter_column: remain\n";

const error_case claim_cases[] = {
    {"claim_missing_consumes",
     base_stock + "claim_rules:\n  - name: c\n    table: coupon_order\n    idempotency_columns: [user_id]\n",
     {"7:5: this claim rule has no consumes: (the stock rule each claim uses up, e.g. consumes: coupon_stock)"}},
    {"claim_missing_idempotency_columns",
     base_stock + "claim_rules:\n  - name: c\n    table: coupon_order\n    consumes: s\n",
     {"7:5: this claim rule has no idempotency_columns: (the business key that may be claimed once, e.g. "
      "idempotency_columns: [user_id, campaign_id])"}},
    {"claim_missing_table", base_stock + "claim_rules:\n  - name: c\n    idempotency_columns: [u]\n    consumes: s\n",
     {"7:5: this claim rule has no table: (the table that gets one row per claim, e.g. table: coupon_order)"}},
    {"claim_unknown_field_alias_hint", with_claim_lines("    stock_rule: s\n"),
     {"11:5: unknown field 'stock_rule' in a claim rule; did you mean 'consumes'?"}},
    {"claim_idempotency_columns_seventeen",
     base_stock + "claim_rules:\n  - name: c\n    table: o\n    idempotency_columns: [a1, a2, a3, a4, a5, a6, a7, a8, "
                  "a9, a10, a11, a12, a13, a14, a15, a16, a17]\n    consumes: s\n",
     {"9:26: idempotency_columns lists 17 columns; a MySQL index holds at most 16"}},
    {"idempotency_key_column_is_an_idempotency_column", with_claim_lines("    idempotency_key_column: user_id\n"),
     {"11:29: idempotency_key_column 'user_id' is already one of the idempotency_columns; name a separate "
      "request-id column or leave it out"}},
    {"consumes_unknown_rule", claim_consumes(" coupon\n"),
     {"10:15: claim rule 'c' consumes stock rule 'coupon', but there is no stock rule by that name"}},
    {"consumes_typo_gets_a_hint",
     "stock_rules:\n  - table: coupon_stock\n    key_columns: campaign_id\n    counter_column: remain\n"
     "claim_rules:\n  - table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
     "    consumes: coupon_stok\n",
     {"8:15: claim rule 'coupon_order' consumes stock rule 'coupon_stok', but there is no stock rule by that name; "
      "did you mean 'coupon_stock'?"}},
    {"consumes_a_claim_rule", claim_consumes(" c\n"),
     {"10:15: claim rule 'c' consumes stock rule 'c', but there is no stock rule by that name; 'c' is a claim rule, "
      "and a claim consumes a stock rule"}},
    {"consumes_without_any_stock_rule",
     "claim_rules:\n  - name: c\n    table: o\n    idempotency_columns: u\n    consumes: s\n",
     {"5:15: claim rule 'c' consumes stock rule 's', but there is no stock rule by that name; the rule set has no "
      "stock rules"}},
    {"consumes_empty", claim_consumes("\n"), {"10:5: consumes has no value; it needs a rule name"}},
    {"consumes_list", claim_consumes(" [s]\n"), {"10:15: consumes needs a rule name, not a list"}},
    {"consumes_name_with_space", claim_consumes(" \"s s\"\n"),
     {"10:15: claim rule 'c' consumes stock rule 's s', but there is no stock rule by that name"}},
    {"consumes_empty_string", claim_consumes(" \"\"\n"), {"10:15: consumes is empty; it needs the name of a stock rule"}},
    {"consumes_rule_empty_string", claim_consumes("\n      rule: \"\"\n"),
     {"11:13: rule is empty; it needs the name of a stock rule"}},
    {"consumes_mapping_without_rule", claim_consumes("\n      columns: {campaign_id: campaign_id}\n"),
     {"11:7: consumes has no rule: (the name of the stock rule this claim uses up, e.g. rule: coupon_stock)"}},
    {"consumes_unknown_field", claim_consumes("\n      rule: s\n      mapping: {campaign_id: campaign_id}\n"),
     {"12:7: unknown field 'mapping' in consumes; its fields are: rule, columns"}},
    {"columns_maps_to_a_missing_key_column", claim_consumes("\n      rule: s\n      columns: {campaign_id: campaign}\n"),
     {"12:30: columns maps 'campaign_id' to 'campaign', but stock rule 's' has no key column by that name; its key "
      "columns are: campaign_id"}},
    {"columns_leaves_out_a_key_column",
     sku_stock + "claim_rules:\n  - name: c\n    table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
                 "    consumes:\n      rule: s\n      columns: {campaign_id: campaign_id}\n",
     {"11:13: consumes does not say which column of 'coupon_order' holds stock key column 'sku' of stock rule 's'; "
      "add it under columns:"}},
    {"identity_mapping_needs_every_key_column_by_name",
     sku_stock + "claim_rules:\n  - name: c\n    table: orders\n    idempotency_columns: [user_id, sku]\n"
                 "    consumes: s\n    redis: {key: \"l:{user_id}:{sku}:{campaign_id}\"}\n",
     {}},
    {"columns_maps_two_columns_to_one", claim_consumes("\n      rule: s\n      columns: {a: campaign_id, b: campaign_id}\n"),
     {"12:36: columns maps both 'a' and 'b' to stock key column 'campaign_id'; map exactly one"}},
    {"columns_empty", claim_consumes("\n      rule: s\n      columns: {}\n"),
     {"12:16: columns needs a mapping from each claim column to the stock key column it holds, e.g. "
      "{campaign_id: campaign_id}, not an empty mapping"}},
    {"columns_list", claim_consumes("\n      rule: s\n      columns: [campaign_id]\n"),
     {"12:16: columns needs a mapping from each claim column to the stock key column it holds, e.g. "
      "{campaign_id: campaign_id}, not a list"}},
    {"columns_claim_column_twice",
     claim_consumes("\n      rule: s\n      columns: {campaign_id: campaign_id, CAMPAIGN_ID: campaign_id}\n"),
     {"12:43: columns lists claim column 'CAMPAIGN_ID' twice"}},
    {"columns_bad_identifier", claim_consumes("\n      rule: s\n      columns: {\"cid \": campaign_id}\n"),
     {"12:17: the claim column 'cid ' ends with a space, which MySQL does not allow in names"}},
    {"redis_without_key", with_claim_lines("    redis: {ttl: 3s}\n"),
     {"11:12: redis has no key: (the Redis key template, e.g. key: \"lock:coupon:{user_id}:{campaign_id}\")"}},
    {"redis_scalar", with_claim_lines("    redis: yes\n"),
     {"11:12: redis needs a mapping with key: and ttl:, not a single value"}},
    {"redis_unknown_field", redis_key("l:{user_id}:{campaign_id}\", expire: \"3s"),
     {"11:47: unknown field 'expire' in redis; its fields are: key, ttl"}},
    {"redis_key_unclosed_brace", redis_key("lock:{user_id"),
     {"11:18: redis key 'lock:{user_id' has a '{' that is never closed"}},
    {"redis_key_stray_brace", redis_key("lock:user_id}"),
     {"11:18: redis key 'lock:user_id}' has a '}' that closes no '{' (write '}}' for a literal brace)"}},
    {"redis_key_empty_placeholder", redis_key("lock:{}:{user_id}"),
     {"11:18: redis key 'lock:{}:{user_id}' has an empty placeholder '{}'; put a column name between the braces"}},
    {"redis_key_nested_brace", redis_key("lock:{a{b}"),
     {"11:18: redis key 'lock:{a{b}' has a '{' inside a placeholder"}},
    {"redis_key_placeholder_not_a_name", redis_key("l:{user_id }:{campaign_id}"),
     {"11:18: redis key 'l:{user_id }:{campaign_id}' has a placeholder {user_id } that ends with a space, which "
      "MySQL does not allow in names"}},
    {"redis_key_empty", redis_key(""), {"11:18: redis key '' is empty"}},
    {"redis_key_too_long", redis_key("{user_id}{campaign_id}" + std::string(500, 'k')),
     {"11:18: redis key '{user_id}{campaign_id}" + std::string(38, 'k') + "...' is longer than 512 bytes"}},
    {"redis_key_unknown_column", redis_key("lock:{user}:{campaign_id}"),
     {"11:18: redis key names column 'user', which claim rule 'c' does not have; it can use: user_id, campaign_id",
      "11:18: redis key leaves out idempotency column 'user_id', so two different claims could share one lock and "
      "the second would be refused as already claimed; add {user_id}"}},
    {"redis_key_without_placeholder", redis_key("lock:coupon"),
     {"11:18: redis key names no column, so every claim would share one lock; add the idempotency columns, e.g. "
      "lock:{user_id}:{campaign_id}"}},
    {"redis_key_leaves_out_a_column", redis_key("lock:{user_id}"),
     {"11:18: redis key leaves out idempotency column 'campaign_id', so two different claims could share one lock "
      "and the second would be refused as already claimed; add {campaign_id}"}},
    {"redis_ttl_words", redis_ttl("3 seconds"), {"13:12: ttl: '3 seconds' is not a duration" + forms}},
    {"redis_ttl_bare_number", redis_ttl("3000"), {"13:12: ttl: '3000' has no unit" + forms}},
    {"redis_ttl_below_a_millisecond", redis_ttl("1.0005s"), {"13:12: ttl: '1.0005s' is finer than a millisecond"}},
    {"redis_ttl_zero", redis_ttl("0ms"), {"13:12: ttl is '0ms'" + ttl_range}},
    {"redis_ttl_too_long", redis_ttl("25h"), {"13:12: ttl is '25h'" + ttl_range}},
    {"redis_ttl_negative", redis_ttl("-1s"), {"13:12: ttl: '-1s' is not a duration" + forms}},
    {"redis_ttl_upper_case_unit", redis_ttl("3S"), {"13:12: ttl: '3S' has an unknown unit" + forms}},
    {"redis_ttl_overflow", redis_ttl("99999999999999999999ms"), {"13:12: ttl is '99999999999999999999ms'" + ttl_range}},
    {"redis_ttl_overflow_after_scaling", redis_ttl("9999999999999999h"), {"13:12: ttl is '9999999999999999h'" + ttl_range}},
    {"strictness_unknown", with_claim_lines("    strictness: strict\n"),
     {"11:17: strictness must be after_refused or require_decrement, not 'strict'"}},
    {"on_cancel_unknown", with_claim_lines("    on_cancel: refund\n"),
     {"11:16: on_cancel must be keep_stock or return_stock, not 'refund'"}},
    {"on_cancel_a_list", with_claim_lines("    on_cancel: [return_stock]\n"),
     {"11:16: on_cancel needs keep_stock or return_stock, not a list"}},
    {"decremented_by_trigger_yes", with_claim_lines("    decremented_by_trigger: yes\n"),
     {"11:29: decremented_by_trigger must be true or false, not 'yes'"}},
    // The trigger decrements a stock rule: without consumes there is none to check.
    {"decremented_by_trigger_without_consumes",
     base_stock + "claim_rules:\n  - name: c\n    table: coupon_order\n    idempotency_columns: [user_id]\n"
                  "    decremented_by_trigger: true\n",
     {"7:5: this claim rule has no consumes: (the stock rule each claim uses up, e.g. consumes: coupon_stock)"}},
    // Across rules.
    {"duplicate_stock_names", base_stock + "  - name: s\n    table: other\n    key_columns: k\n    counter_column: n\n",
     {"6:11: there is already a rule named 's' (the stock rule at rules.yaml:2:5); rule names must be unique across "
      "all files"}},
    {"duplicate_implied_names",
     "stock_rules:\n  - table: t\n    key_columns: k\n    counter_column: a\n  - table: t\n    key_columns: k\n"
     "    counter_column: b\n",
     {"5:5: this rule's name defaults to its table 't', which the stock rule at rules.yaml:2:5 already uses; give "
      "one of them a name:"}},
    {"claim_named_like_a_stock_rule",
     base_stock + "claim_rules:\n  - name: s\n    table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
                  "    consumes: s\n",
     {"7:11: there is already a rule named 's' (the stock rule at rules.yaml:2:5); rule names must be unique across "
      "all files"}},
    {"stock_named_like_an_earlier_claim",
     "claim_rules:\n  - name: x\n    table: o\n    idempotency_columns: [u, k]\n    consumes: s\n"
     "stock_rules:\n  - name: s\n    table: t\n    key_columns: k\n    counter_column: n\n  - name: x\n    table: t2\n"
     "    key_columns: k\n    counter_column: n\n",
     {"11:11: there is already a rule named 'x' (the claim rule at rules.yaml:2:5); rule names must be unique "
      "across all files"}},
    {"same_counter_twice_ignoring_case",
     "stock_rules:\n  - name: a\n    table: t\n    key_columns: k\n    counter_column: n\n  - name: b\n    table: T\n"
     "    key_columns: k\n    counter_column: N\n",
     {"7:12: stock rule 'b' guards the same counter 'T.N' as stock rule 'a' at rules.yaml:2:5; one rule per counter"}},
    {"same_counter_with_and_without_schema",
     "stock_rules:\n  - name: a\n    table: shop.t\n    key_columns: k\n    counter_column: n\n  - name: b\n"
     "    table: t\n    key_columns: k\n    counter_column: n\n",
     {"7:12: stock rule 'b' guards the same counter 't.n' as stock rule 'a' at rules.yaml:2:5; one rule per counter"}},
    {"two_claim_rules_on_one_table",
     with_claim_lines("  - name: c2\n    table: shop.coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
                      "    consumes: s\n"),
     {"12:12: claim rule 'c2' is on the same table 'shop.coupon_order' as claim rule 'c' at rules.yaml:7:5; one "
      "claim rule per table"}},
};

class claim_errors : public testing::TestWithParam<error_case> {};
TEST_P(claim_errors, reports_exactly) {
    const auto& c = GetParam();
    if (c.errors.empty()) {
        const auto r = load_one(c.yaml);
        EXPECT_TRUE(r.rules.has_value()) << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
        return;
    }
    expect_errors(c);
}
INSTANTIATE_TEST_SUITE_P(claim_rule, claim_errors, testing::ValuesIn(claim_cases), case_name);

}  // namespace
}  // namespace claimguard::rules::test
