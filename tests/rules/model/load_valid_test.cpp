// Valid rules files: every field with its default and each accepted spelling, read into the model.
#include <functional>

#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

struct valid_case {
    const char* name;
    std::string yaml;
    std::function<void(const rule_set&)> check;
};

std::string valid_name(const testing::TestParamInfo<valid_case>& info) { return info.param.name; }

const stock_rule& stock(const rule_set& r) { return r.stocks.at(0); }
const claim_rule& claim(const rule_set& r) { return r.claims.at(0); }

std::string claim_with_redis(const std::string& key, const std::string& ttl_line) {
    return with_claim_lines("    redis:\n      key: \"" + key + "\"\n" + ttl_line);
}

const valid_case valid_cases[] = {
    {"defaults", base_stock + base_claim,
     [](const rule_set& r) {
         EXPECT_EQ(r.default_mode, mode::enforce);
         ASSERT_EQ(r.stocks.size(), 1u);
         ASSERT_EQ(r.claims.size(), 1u);
         const auto& s = stock(r);
         EXPECT_EQ(s.name, "s");
         EXPECT_EQ(s.table.schema, "");
         EXPECT_EQ(s.table.name, "coupon_stock");
         EXPECT_EQ(s.key_columns, std::vector<std::string>{"campaign_id"});
         EXPECT_EQ(s.counter_column, "remain");
         EXPECT_EQ(s.floor, 0);
         EXPECT_EQ(s.units, 1);
         EXPECT_EQ(s.unmodeled, unmodeled_policy::refuse);
         EXPECT_FALSE(s.defer_decrement);
         EXPECT_TRUE(r.trusted_users.empty());
         EXPECT_FALSE(s.version_column.has_value());
         EXPECT_EQ(s.exhausted.type, answer::kind::error);
         EXPECT_EQ(s.exhausted.code, 1644);
         EXPECT_EQ(s.exhausted.sql_state, "45000");
         EXPECT_EQ(s.exhausted.message, "claimguard: coupon_stock is sold out for this key");
         EXPECT_FALSE(s.rule_mode.has_value());
         EXPECT_EQ(s.pos.file, test_file);
         EXPECT_EQ(s.pos.line, 2);
         EXPECT_EQ(s.pos.column, 5);
         const auto& c = claim(r);
         EXPECT_EQ(c.name, "c");
         EXPECT_EQ(c.table.name, "coupon_order");
         EXPECT_EQ(c.idempotency_columns, (std::vector<std::string>{"user_id", "campaign_id"}));
         EXPECT_FALSE(c.idempotency_key_column.has_value());
         EXPECT_EQ(c.stock_rule, "s");
         EXPECT_EQ(c.stock_key_mapping, (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
         EXPECT_FALSE(c.redis.has_value());
         EXPECT_EQ(c.duplicate.type, answer::kind::error);
         EXPECT_EQ(c.duplicate.code, 1644);
         EXPECT_EQ(c.duplicate.sql_state, "45000");
         EXPECT_EQ(c.duplicate.message, "claimguard: already claimed");
         EXPECT_EQ(c.strict, strictness::require_decrement);
         EXPECT_EQ(c.on_cancel, cancel_policy::keep_stock);  // cancellations keep their units unless told
         EXPECT_FALSE(c.decremented_by_trigger);             // the sidecar's own take backs a claim unless told
         EXPECT_EQ(c.unmodeled, unmodeled_policy::refuse);
         EXPECT_EQ(c.pos.line, 7);
         EXPECT_EQ(c.pos.column, 5);
         EXPECT_EQ(r.effective_mode(s), mode::enforce);
         EXPECT_EQ(r.effective_mode(c), mode::enforce);
     }},
    {"default_mode_observe", "default_mode: observe\n" + base_stock + base_claim,
     [](const rule_set& r) {
         EXPECT_EQ(r.default_mode, mode::observe);
         EXPECT_EQ(r.effective_mode(stock(r)), mode::observe);
         EXPECT_EQ(r.effective_mode(claim(r)), mode::observe);
     }},
    {"rule_mode_overrides_default", "default_mode: observe\n" + with_stock_lines("    mode: enforce\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).rule_mode, mode::enforce);
         EXPECT_EQ(r.effective_mode(stock(r)), mode::enforce);
         EXPECT_EQ(r.effective_mode(claim(r)), mode::observe);
     }},
    {"claim_mode_observe", with_claim_lines("    mode: observe\n"),
     [](const rule_set& r) { EXPECT_EQ(r.effective_mode(claim(r)), mode::observe); }},
    {"schema_qualified_table",
     "stock_rules:\n  - table: shop.coupon_stock\n    key_columns: campaign_id\n    counter_column: remain\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).table.schema, "shop");
         EXPECT_EQ(stock(r).table.name, "coupon_stock");
         EXPECT_EQ(stock(r).name, "shop.coupon_stock");  // the implied name is the table as written
         EXPECT_EQ(stock(r).exhausted.message, "claimguard: shop.coupon_stock is sold out for this key");
     }},
    {"table_mapping_form",
     "stock_rules:\n  - name: odd\n    table: {schema: my.shop, name: \"coupon stock\"}\n"
     "    key_columns: id\n    counter_column: remain\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).table.schema, "my.shop");
         EXPECT_EQ(stock(r).table.name, "coupon stock");
     }},
    {"table_mapping_without_schema",
     "stock_rules:\n  - name: t\n    table: {name: \"a.b\"}\n    key_columns: id\n    counter_column: n\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).table.schema, "");
         EXPECT_EQ(stock(r).table.name, "a.b");
     }},
    {"key_columns_single_value",
     "stock_rules:\n  - table: t\n    key_columns: campaign_id\n    counter_column: remain\n",
     [](const rule_set& r) { EXPECT_EQ(stock(r).key_columns, std::vector<std::string>{"campaign_id"}); }},
    {"key_columns_two_with_explicit_mapping",
     "stock_rules:\n  - name: sku_stock\n    table: sku_stock\n    key_columns: [campaign_id, sku]\n"
     "    counter_column: remain\nclaim_rules:\n  - table: orders\n    idempotency_columns: [user_id, sku_code]\n"
     "    consumes:\n      rule: sku_stock\n      columns: {sku_code: sku, cid: campaign_id}\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).key_columns, (std::vector<std::string>{"campaign_id", "sku"}));
         // In stock key column order, whatever the order written.
         EXPECT_EQ(claim(r).stock_key_mapping,
                   (std::vector<std::pair<std::string, std::string>>{{"cid", "campaign_id"}, {"sku_code", "sku"}}));
     }},
    {"key_columns_block_list",
     "stock_rules:\n  - table: t\n    key_columns:\n      - a\n      - b\n    counter_column: n\n",
     [](const rule_set& r) { EXPECT_EQ(stock(r).key_columns, (std::vector<std::string>{"a", "b"})); }},
    {"sixteen_key_columns",
     "stock_rules:\n  - table: t\n    key_columns: [c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, "
     "c15, c16]\n    counter_column: n\n",
     [](const rule_set& r) { EXPECT_EQ(stock(r).key_columns.size(), 16u); }},
    {"floor_positive", with_stock_lines("    floor: 5\n"), [](const rule_set& r) { EXPECT_EQ(stock(r).floor, 5); }},
    {"floor_negative", with_stock_lines("    floor: -5\n"), [](const rule_set& r) { EXPECT_EQ(stock(r).floor, -5); }},
    {"floor_int64_max", with_stock_lines("    floor: 9223372036854775807\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).floor, INT64_MAX); }},
    {"floor_int64_min", with_stock_lines("    floor: -9223372036854775808\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).floor, INT64_MIN); }},
    {"floor_quoted_number", with_stock_lines("    floor: \"3\"\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).floor, 3); }},
    {"version_column", with_stock_lines("    version_column: version\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).version_column, "version"); }},
    {"null_optional_fields_are_absent", with_stock_lines("    version_column: ~\n    floor:\n    mode: null\n"),
     [](const rule_set& r) {
         EXPECT_FALSE(stock(r).version_column.has_value());
         EXPECT_EQ(stock(r).floor, 0);
         EXPECT_FALSE(stock(r).rule_mode.has_value());
     }},
    {"exhausted_ok", with_stock_lines("    exhausted: {type: ok}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.type, answer::kind::ok);
         EXPECT_EQ(stock(r).exhausted.code, 0);
         EXPECT_EQ(stock(r).exhausted.sql_state, "");
         EXPECT_EQ(stock(r).exhausted.message, "");
     }},
    {"exhausted_shorthand_ok", with_stock_lines("    exhausted: ok\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).exhausted.type, answer::kind::ok); }},
    {"exhausted_shorthand_error", with_stock_lines("    exhausted: error\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.type, answer::kind::error);
         EXPECT_EQ(stock(r).exhausted.code, 1644);
         EXPECT_EQ(stock(r).exhausted.message, "claimguard: coupon_stock is sold out for this key");
     }},
    {"exhausted_custom",
     with_stock_lines("    exhausted:\n      type: error\n      code: 1690\n      sqlstate: \"22003\"\n"
                      "      message: \"sold out, try the next campaign\"\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.code, 1690);
         EXPECT_EQ(stock(r).exhausted.sql_state, "22003");
         EXPECT_EQ(stock(r).exhausted.message, "sold out, try the next campaign");
     }},
    {"exhausted_partial_keeps_defaults", with_stock_lines("    exhausted: {message: gone}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.type, answer::kind::error);
         EXPECT_EQ(stock(r).exhausted.code, 1644);
         EXPECT_EQ(stock(r).exhausted.sql_state, "45000");
         EXPECT_EQ(stock(r).exhausted.message, "gone");
     }},
    {"sqlstate_unquoted_and_code_limits", with_stock_lines("    exhausted: {sqlstate: 45000, code: 65535}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.sql_state, "45000");
         EXPECT_EQ(stock(r).exhausted.code, 65535);
     }},
    {"sqlstate_letters", with_stock_lines("    exhausted: {sqlstate: HY000, code: 1}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.sql_state, "HY000");
         EXPECT_EQ(stock(r).exhausted.code, 1);
     }},
    {"message_utf8", with_stock_lines("    exhausted: {message: \"优惠券已抢完\"}\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).exhausted.message, "优惠券已抢完"); }},
    {"duplicate_custom", with_claim_lines("    duplicate: {code: 1062, sqlstate: \"23000\", message: \"dup\"}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(claim(r).duplicate.code, 1062);
         EXPECT_EQ(claim(r).duplicate.sql_state, "23000");
         EXPECT_EQ(claim(r).duplicate.message, "dup");
     }},
    {"duplicate_ok", with_claim_lines("    duplicate: ok\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).duplicate.type, answer::kind::ok); }},
    {"idempotency_key_column", with_claim_lines("    idempotency_key_column: request_id\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).idempotency_key_column, "request_id"); }},
    {"idempotency_columns_single", base_stock +
         "claim_rules:\n  - table: coupon_order\n    idempotency_columns: user_id\n    consumes: s\n",
     [](const rule_set& r) { EXPECT_EQ(claim(r).idempotency_columns, std::vector<std::string>{"user_id"}); }},
    {"consumes_renamed_column", base_stock +
         "claim_rules:\n  - table: coupon_order\n    idempotency_columns: [user_id, cid]\n"
         "    consumes: {rule: s, columns: {cid: campaign_id}}\n",
     [](const rule_set& r) {
         EXPECT_EQ(claim(r).stock_key_mapping, (std::vector<std::pair<std::string, std::string>>{{"cid", "campaign_id"}}));
     }},
    {"consumes_mapping_case_insensitive", base_stock +
         "claim_rules:\n  - table: coupon_order\n    idempotency_columns: [user_id, CID]\n"
         "    consumes: {rule: s, columns: {CID: Campaign_ID}}\n",
     [](const rule_set& r) {
         // The stock side is spelled as the stock rule spells it.
         EXPECT_EQ(claim(r).stock_key_mapping, (std::vector<std::pair<std::string, std::string>>{{"CID", "campaign_id"}}));
     }},
    {"consumes_mapping_without_columns", with_claim_lines("").replace(
                                             with_claim_lines("").find("consumes: s"), 11, "consumes: {rule: s}"),
     [](const rule_set& r) {
         EXPECT_EQ(claim(r).stock_key_mapping,
                   (std::vector<std::pair<std::string, std::string>>{{"campaign_id", "campaign_id"}}));
     }},
    {"redis_default_ttl", claim_with_redis("lock:coupon:{user_id}:{campaign_id}", ""),
     [](const rule_set& r) {
         ASSERT_TRUE(claim(r).redis.has_value());
         EXPECT_EQ(claim(r).redis->key_template, "lock:coupon:{user_id}:{campaign_id}");
         EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(3000));
     }},
    {"redis_ttl_ms", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 250ms\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(250)); }},
    {"redis_ttl_seconds", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 3s\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(3000)); }},
    {"redis_ttl_minutes", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 2m\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(120000)); }},
    {"redis_ttl_fraction_of_seconds", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 1.5s\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(1500)); }},
    {"redis_ttl_limits", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 24h\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(86400000)); }},
    {"redis_ttl_minimum", claim_with_redis("l:{user_id}:{campaign_id}", "      ttl: 1ms\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->ttl, std::chrono::milliseconds(1)); }},
    {"redis_key_with_literal_braces", claim_with_redis("{{x}}:{campaign_id}:{user_id}", ""),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->key_template, "{{x}}:{campaign_id}:{user_id}"); }},
    {"redis_key_request_id_only",
     with_claim_lines("    idempotency_key_column: request_id\n    redis: {key: \"req:{request_id}\"}\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->key_template, "req:{request_id}"); }},
    {"redis_key_plain_scalar", with_claim_lines("    redis:\n      key: lock:coupon:{user_id}:{campaign_id}\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).redis->key_template, "lock:coupon:{user_id}:{campaign_id}"); }},
    {"redis_null_is_no_guard", with_claim_lines("    redis: ~\n"),
     [](const rule_set& r) { EXPECT_FALSE(claim(r).redis.has_value()); }},
    {"strictness_require_decrement", with_claim_lines("    strictness: require_decrement\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).strict, strictness::require_decrement); }},
    {"on_cancel_return_stock", with_claim_lines("    on_cancel: return_stock\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).on_cancel, cancel_policy::return_stock); }},
    {"on_cancel_keep_stock", with_claim_lines("    on_cancel: keep_stock\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).on_cancel, cancel_policy::keep_stock); }},
    {"decremented_by_trigger_true", with_claim_lines("    decremented_by_trigger: true\n"),
     [](const rule_set& r) { EXPECT_TRUE(claim(r).decremented_by_trigger); }},
    {"defer_decrement_on", with_stock_lines("    defer_decrement: true\n"),
     [](const rule_set& r) { EXPECT_TRUE(stock(r).defer_decrement); }},
    {"defer_decrement_off", with_stock_lines("    defer_decrement: false\n"),
     [](const rule_set& r) { EXPECT_FALSE(stock(r).defer_decrement); }},
    {"units_and_unmodeled", with_stock_lines("    units: 3\n    unmodeled: forward\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).units, 3);
         EXPECT_EQ(stock(r).unmodeled, unmodeled_policy::forward);
     }},
    {"read_cache_absent_is_off", with_stock_lines(""),
     [](const rule_set& r) { EXPECT_FALSE(stock(r).read_cache.has_value()); }},
    {"max_refresh_wait_absent_is_the_default", with_stock_lines("    read_cache: 50ms\n"),
     [](const rule_set& r) { EXPECT_FALSE(stock(r).max_refresh_wait.has_value()); }},
    {"max_refresh_wait_set", with_stock_lines("    read_cache: 50ms\n    max_refresh_wait: 1s\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).max_refresh_wait, std::chrono::milliseconds(1000)); }},
    {"read_cache_sold_out_absent_is_off", with_stock_lines("    read_cache: 50ms\n"),
     [](const rule_set& r) { EXPECT_FALSE(stock(r).read_cache_sold_out.has_value()); }},
    {"read_cache_sold_out_set", with_stock_lines("    read_cache: 50ms\n    read_cache_sold_out: 2s\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).read_cache_sold_out, std::chrono::milliseconds(2000)); }},
    {"read_cache_sold_out_as_long_as_read_cache",
     with_stock_lines("    read_cache: 50ms\n    read_cache_sold_out: 50ms\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).read_cache_sold_out, std::chrono::milliseconds(50)); }},
    {"read_cache_ms", with_stock_lines("    read_cache: 50ms\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).read_cache, std::chrono::milliseconds(50)); }},
    {"read_cache_at_its_bounds", with_stock_lines("    read_cache: 10s\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).read_cache, std::chrono::milliseconds(10000)); }},
    {"read_cache_one_ms", with_stock_lines("    read_cache: 1ms\n"),
     [](const rule_set& r) { EXPECT_EQ(stock(r).read_cache, std::chrono::milliseconds(1)); }},
    {"admission", with_stock_lines("    admission:\n      max_in_flight: 4\n      queue_timeout: 2s\n"),
     [](const rule_set& r) {
         ASSERT_TRUE(stock(r).admission.has_value());
         EXPECT_EQ(stock(r).admission->max_in_flight, 4u);
         EXPECT_EQ(stock(r).admission->queue_timeout, std::chrono::milliseconds(2000));
         EXPECT_EQ(stock(r).admission->max_queue, 10000u);  // default_admission_max_queue
     }},
    {"admission_with_max_queue", with_stock_lines("    admission: {max_in_flight: 1, queue_timeout: 250ms, max_queue: 7}\n"),
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).admission->max_in_flight, 1u);
         EXPECT_EQ(stock(r).admission->queue_timeout, std::chrono::milliseconds(250));
         EXPECT_EQ(stock(r).admission->max_queue, 7u);
     }},
    {"group_update",
     with_stock_lines("    admission: {max_in_flight: 1, queue_timeout: 2s}\n    group_update: {max_batch: 8, max_wait: 2ms}\n"),
     [](const rule_set& r) {
         ASSERT_TRUE(stock(r).group_update.has_value());
         EXPECT_EQ(stock(r).group_update->max_batch, 8u);
         EXPECT_EQ(stock(r).group_update->max_wait, std::chrono::milliseconds(2));
     }},
    {"group_update_defaults",
     with_stock_lines("    admission: {max_in_flight: 1, queue_timeout: 2s}\n    group_update: {}\n"),
     [](const rule_set& r) {
         ASSERT_TRUE(stock(r).group_update.has_value());
         EXPECT_EQ(stock(r).group_update->max_batch, 32u);  // default_group_update_batch
         EXPECT_EQ(stock(r).group_update->max_wait, std::chrono::milliseconds(1));
     }},
    {"reserve",
     with_stock_lines("    reserve: {block: 40, idle: 250ms}\n"),
     [](const rule_set& r) {
         ASSERT_TRUE(stock(r).reserve.has_value());
         EXPECT_EQ(stock(r).reserve->block, 40);
         EXPECT_EQ(stock(r).reserve->idle, std::chrono::milliseconds(250));
     }},
    {"reserve_idle_default", with_stock_lines("    reserve: {block: 5}\n"),
     [](const rule_set& r) {
         ASSERT_TRUE(stock(r).reserve.has_value());
         EXPECT_EQ(stock(r).reserve->idle, std::chrono::milliseconds(5000));
     }},
    {"no_reserve_by_default", base_stock + base_claim,
     [](const rule_set& r) { EXPECT_FALSE(stock(r).reserve.has_value()); }},
    {"no_group_update_by_default", base_stock + base_claim,
     [](const rule_set& r) { EXPECT_FALSE(stock(r).group_update.has_value()); }},
    {"no_admission_by_default", base_stock + base_claim,
     [](const rule_set& r) { EXPECT_FALSE(stock(r).admission.has_value()); }},
    {"claim_unmodeled_forward", with_claim_lines("    unmodeled: forward\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).unmodeled, unmodeled_policy::forward); }},
    {"trusted_users", "trusted_users: [stock_admin, dba]\n" + base_stock + base_claim,
     [](const rule_set& r) {
         EXPECT_EQ(r.trusted_users, (std::vector<std::string>{"stock_admin", "dba"}));
         EXPECT_TRUE(r.is_trusted("dba"));
         EXPECT_FALSE(r.is_trusted("cg_app"));
     }},
    {"strictness_after_refused", with_claim_lines("    strictness: after_refused\n"),
     [](const rule_set& r) { EXPECT_EQ(claim(r).strict, strictness::after_refused); }},
    {"implied_names",
     "stock_rules:\n  - table: coupon_stock\n    key_columns: campaign_id\n    counter_column: remain\n"
     "claim_rules:\n  - table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
     "    consumes: coupon_stock\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).name, "coupon_stock");
         EXPECT_EQ(claim(r).name, "coupon_order");
         EXPECT_EQ(claim(r).stock_rule, "coupon_stock");
         EXPECT_EQ(r.find_stock("coupon_stock"), &r.stocks[0]);
     }},
    {"empty_file", "", [](const rule_set& r) {
         EXPECT_TRUE(r.stocks.empty());
         EXPECT_TRUE(r.claims.empty());
         EXPECT_EQ(r.default_mode, mode::enforce);
     }},
    {"comments_only", "# nothing yet\n\n   # still nothing\n",
     [](const rule_set& r) { EXPECT_TRUE(r.stocks.empty() && r.claims.empty()); }},
    {"empty_sections", "default_mode: enforce\nstock_rules:\nclaim_rules: []\n",
     [](const rule_set& r) { EXPECT_TRUE(r.stocks.empty() && r.claims.empty()); }},
    {"only_stock_rules", base_stock, [](const rule_set& r) {
         EXPECT_EQ(r.stocks.size(), 1u);
         EXPECT_TRUE(r.claims.empty());
     }},
    {"utf8_bom", "\xEF\xBB\xBF" + base_stock + base_claim,
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).name, "s");
         EXPECT_EQ(stock(r).pos.line, 2);
     }},
    {"crlf_line_endings",
     "stock_rules:\r\n  - name: s\r\n    table: t\r\n    key_columns: k\r\n    counter_column: n\r\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).table.name, "t");
         EXPECT_EQ(stock(r).counter_column, "n");
     }},
    {"flow_style_document",
     "{stock_rules: [{table: t, key_columns: [k], counter_column: n}], claim_rules: [{table: o, "
     "idempotency_columns: [u, k], consumes: t}]}",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).name, "t");
         EXPECT_EQ(claim(r).stock_key_mapping, (std::vector<std::pair<std::string, std::string>>{{"k", "k"}}));
     }},
    {"anchors_and_aliases_share_an_answer",
     "stock_rules:\n  - name: s\n    table: coupon_stock\n    key_columns: [campaign_id]\n"
     "    counter_column: remain\n    exhausted: &refusal {code: 1644, sqlstate: \"45000\", message: \"no\"}\n"
     "claim_rules:\n  - name: c\n    table: coupon_order\n    idempotency_columns: [user_id, campaign_id]\n"
     "    consumes: s\n    duplicate: *refusal\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).exhausted.message, "no");
         EXPECT_EQ(claim(r).duplicate.message, "no");
     }},
    {"unicode_identifiers",
     "stock_rules:\n  - name: s\n    table: 优惠券库存\n    key_columns: 活动\n    counter_column: 剩余\n",
     [](const rule_set& r) {
         EXPECT_EQ(stock(r).table.name, "优惠券库存");
         EXPECT_EQ(stock(r).counter_column, "剩余");
     }},
    {"implied_unicode_name_can_be_consumed",
     "stock_rules:\n  - table: 优惠券库存\n    key_columns: 活动\n    counter_column: 剩余\n"
     "claim_rules:\n  - table: 订单\n    idempotency_columns: [用户, 活动]\n    consumes: 优惠券库存\n",
     [](const rule_set& r) {
         EXPECT_EQ(claim(r).stock_rule, "优惠券库存");
         EXPECT_EQ(r.find_stock("优惠券库存"), &r.stocks[0]);
     }},
    {"identifier_of_64_multibyte_characters",
     [] {
         std::string name;
         for (int i = 0; i < 64; ++i)
             name += "表";
         return "stock_rules:\n  - name: s\n    table: " + name + "\n    key_columns: k\n    counter_column: n\n";
     }(),
     [](const rule_set& r) { EXPECT_EQ(stock(r).table.name.size(), 64u * 3); }},
    {"two_counters_in_one_table",
     "stock_rules:\n  - name: a\n    table: t\n    key_columns: k\n    counter_column: remain\n"
     "  - name: b\n    table: t\n    key_columns: k\n    counter_column: remain_vip\n",
     [](const rule_set& r) { EXPECT_EQ(r.stocks.size(), 2u); }},
    {"same_table_name_in_two_schemas",
     base_stock + "claim_rules:\n  - name: a\n    table: shop1.orders\n    idempotency_columns: [u, campaign_id]\n"
                  "    consumes: s\n  - name: b\n    table: shop2.orders\n    idempotency_columns: [u, campaign_id]\n"
                  "    consumes: s\n",
     [](const rule_set& r) { EXPECT_EQ(r.claims.size(), 2u); }},
    {"find_stock_missing", base_stock, [](const rule_set& r) {
         EXPECT_EQ(r.find_stock("s"), &r.stocks[0]);
         EXPECT_EQ(r.find_stock("S"), nullptr);
         EXPECT_EQ(r.find_stock(""), nullptr);
     }},
    {"keys_in_any_order",
     "claim_rules:\n  - consumes: s\n    idempotency_columns: [user_id, campaign_id]\n    table: coupon_order\n"
     "stock_rules:\n  - counter_column: remain\n    key_columns: campaign_id\n    table: coupon_stock\n    name: s\n",
     [](const rule_set& r) {
         EXPECT_EQ(claim(r).stock_rule, "s");
         EXPECT_EQ(claim(r).pos.line, 2);
     }},
};

class load_valid : public testing::TestWithParam<valid_case> {};

TEST_P(load_valid, loads) {
    const auto& c = GetParam();
    const auto r = load_one(c.yaml);
    ASSERT_TRUE(r.rules.has_value()) << "YAML:\n" << c.yaml << "\nfirst error: "
                                     << (r.errors.empty() ? "" : format_diagnostic(r.errors[0]));
    EXPECT_TRUE(r.errors.empty());
    c.check(*r.rules);
}

INSTANTIATE_TEST_SUITE_P(rules_model, load_valid, testing::ValuesIn(valid_cases), valid_name);

TEST(load_valid_hash, version_hash_is_16_hex_digits_and_stable) {
    const auto a = load_one(base_stock);
    const auto b = load_one(base_stock);
    ASSERT_TRUE(a.rules && b.rules);
    EXPECT_EQ(a.rules->version_hash.size(), 16u);
    EXPECT_EQ(a.rules->version_hash.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_EQ(a.rules->version_hash, b.rules->version_hash);
}

TEST(load_valid_hash, version_hash_changes_with_content_not_with_where_the_file_is) {
    // A DBA's `claimguard lint` of a copy shows the version a sidecar reports for the mounted file.
    const auto a = load_rules({{"a.yaml", base_stock}});
    const auto comment = load_rules({{"a.yaml", base_stock + "# a comment\n"}});
    const auto renamed = load_rules({{"/etc/claimguard/rules/..data/b.yaml", base_stock}});
    ASSERT_TRUE(a.rules && comment.rules && renamed.rules);
    EXPECT_NE(a.rules->version_hash, comment.rules->version_hash);
    EXPECT_EQ(a.rules->version_hash, renamed.rules->version_hash);
}

TEST(load_valid_hash, version_hash_is_fnv1a_over_size_and_text) {
    // Recomputed independently: FNV-1a 64 over "<size>\0<text>" (the file's name is not part of it).
    const std::string text = "default_mode: enforce\n";
    std::string framed = std::to_string(text.size()) + '\0' + text;
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char c : framed) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    const auto r = load_rules({{"a.yaml", text}});
    ASSERT_TRUE(r.rules);
    EXPECT_EQ(r.rules->version_hash, hex);
}

}  // namespace
}  // namespace claimguard::rules::test
