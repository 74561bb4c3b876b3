// Rewriter: conditional decrements and compensations, checked by parsing what they produce.
#include <gtest/gtest.h>

#include "rules/match/matcher.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/parser.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace claimguard::rules::match {
namespace {

const rule_set& rules() {
    static const rule_set r = test::make_rules();
    return r;
}

const rule_index& index() {
    static const rule_index i(rules());
    return i;
}

sql::lexer_options gbk() {
    sql::lexer_options o;
    o.client_charset = sql::charset::gbk;
    return o;
}

struct rewrite_case {
    const char* name;
    std::string_view sql;
    std::int64_t units;  // for absolute writes: read value - written value; ignored for changes
    std::string expected;
    std::vector<std::uint32_t> parameters;
    sql::lexer_options options = {};
};

const rewrite_case write_cases[] = {
    {"incident", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"several_units", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", 6,
     "UPDATE coupon_stock SET remain = remain - 6, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 6", {}},
    {"version_assigned", "UPDATE coupon_stock SET remain = 99, version = 4 WHERE campaign_id = 7", 1,
     "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"version_first", "UPDATE coupon_stock SET version = 4, remain = 99 WHERE campaign_id = 7", 1,
     "UPDATE coupon_stock SET version = version + 1, remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"alias", "UPDATE coupon_stock s SET s.remain = 99 WHERE s.campaign_id = 7", 1,
     "UPDATE coupon_stock s SET s.remain = s.remain - 1, s.`version` = s.`version` + 1 WHERE s.campaign_id = 7 AND s.remain >= 1", {}},
    {"prepared", "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = ? AND remain >= 1", {1}},
    {"other_assignments_and_limit", "UPDATE coupon_stock SET updated_at = ?, remain = ? WHERE campaign_id = ? LIMIT 1", 2,
     "UPDATE coupon_stock SET updated_at = ?, remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = ? AND remain >= 2 LIMIT 1",
     {0, 2}},
    {"function_assignment_kept", "UPDATE coupon_stock SET remain = 99, updated_at = NOW() WHERE campaign_id = 7", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1, updated_at = NOW() WHERE campaign_id = 7 AND remain >= 1", {}},
    {"comments_dropped", "UPDATE coupon_stock SET remain = 99 WHERE /* k */ campaign_id = 7 -- end", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"comments_inside_where", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id /* k */ = 7 AND sku = 'a' # x\n", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND sku = 'a' AND remain >= 1", {}},
    {"versioned_where", "UPDATE coupon_stock SET remain = 99 /*!50700 WHERE campaign_id = 7 */", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"hostile_key_bytes_kept", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'a\\'b\\\\'", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 'a\\'b\\\\' AND remain >= 1", {}},
    {"gbk_key_bytes_kept", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = '\x81\\' AND sku = 'x'", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = '\x81\\' AND sku = 'x' AND remain >= 1",
     {}, gbk()},
    {"introducer_kept", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = _utf8mb4'7'", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = _utf8mb4'7' AND remain >= 1", {}},
    {"floor", "UPDATE shop.inventory SET qty = 10 WHERE sku = 'A' AND warehouse = 2", 2,
     "UPDATE shop.inventory SET qty = qty - 2 WHERE sku = 'A' AND warehouse = 2 AND qty >= 7", {}},
    {"modifiers", "UPDATE LOW_PRIORITY IGNORE coupon_stock SET remain = 99 WHERE campaign_id = 7", 1,
     "UPDATE LOW_PRIORITY IGNORE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"index_hint", "UPDATE coupon_stock FORCE INDEX (PRIMARY) SET remain = 99 WHERE campaign_id = 7", 1,
     "UPDATE coupon_stock FORCE INDEX (PRIMARY) SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"no_where", "UPDATE coupon_stock SET remain = 0", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE remain >= 1", {}},
    {"mybatis_layout", "update coupon_stock\n\t\tset remain = ?,\n\t\t\tversion = version + 1\n\t\twhere campaign_id = ?\n\t\t  and version = ?", 1,
     "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = ? and version = ? AND remain >= 1", {1, 2}},
    {"backticks", "UPDATE `shop`.`inventory` SET `qty` = 10 WHERE `sku` = 'A' AND `warehouse` = 2", 1,
     "UPDATE `shop`.`inventory` SET `qty` = `qty` - 1 WHERE `sku` = 'A' AND `warehouse` = 2 AND `qty` >= 6", {}},
    {"parenthesized_where", "UPDATE coupon_stock SET remain = 99 WHERE (campaign_id = 7 AND sku = 'a')", 1,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE (campaign_id = 7 AND sku = 'a') AND remain >= 1", {}},
};

const rewrite_case change_cases[] = {
    {"unguarded", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", 0,
     "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"placeholder_amount", "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?", 0,
     "UPDATE coupon_stock SET remain = remain - ?, `version` = `version` + 1 WHERE campaign_id = ? AND remain >= ?", {0, 1, 0}},
    {"weak_guard_kept_and_strengthened", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 7 AND remain > 0", 0,
     "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = 7 AND remain > 0 AND remain >= 2", {}},
    {"plus_negative", "UPDATE coupon_stock SET remain = remain + -2 WHERE campaign_id = 7", 0,
     "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 2", {}},
    {"version_present", "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 7", 0,
     "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 7 AND remain >= 1", {}},
    {"alias_and_placeholders", "UPDATE coupon_stock AS s SET s.remain = s.remain - 1 WHERE s.campaign_id = ?", 0,
     "UPDATE coupon_stock AS s SET s.remain = s.remain - 1, s.`version` = s.`version` + 1 WHERE s.campaign_id = ? AND s.remain >= 1", {0}},
    {"whole_decimal", "UPDATE coupon_stock SET remain = remain - 2.0 WHERE campaign_id = 7", 0,
     "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 2", {}},
    {"floor_literal", "UPDATE shop.inventory SET qty = qty - 3 WHERE sku = 'A' AND warehouse = 2", 0,
     "UPDATE shop.inventory SET qty = qty - 3 WHERE sku = 'A' AND warehouse = 2 AND qty >= 8", {}},
    {"weak_arithmetic_guard_kept_and_strengthened",
     "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 7 AND remain - 1 >= 0", 0,
     "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = 7 AND remain - 1 >= 0 "
     "AND remain >= 2", {}},
    {"mybatis_arithmetic_guard", "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0", 0,
     "UPDATE coupon_stock SET remain = remain - ?, `version` = `version` + 1 WHERE campaign_id = ? AND remain - ? >= 0 "
     "AND remain >= ?", {0, 1, 2, 0}},
    {"join_guard_on_the_stock_alias",
     "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
     "WHERE s.campaign_id = 7 AND c.status = 'ON'", 0,
     "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1, s.`version` = "
     "s.`version` + 1 WHERE s.campaign_id = 7 AND c.status = 'ON' AND s.remain >= 1", {}},
    {"join_without_where", "UPDATE campaign c JOIN coupon_stock s ON c.id = s.campaign_id AND s.campaign_id = ? "
                           "SET s.remain = s.remain - 2, c.sold = c.sold + 2", 0,
     "UPDATE campaign c JOIN coupon_stock s ON c.id = s.campaign_id AND s.campaign_id = ? SET s.remain = s.remain - 2, "
     "s.`version` = s.`version` + 1, c.sold = c.sold + 2 WHERE s.remain >= 2", {0}},
    {"comma_join", "UPDATE coupon_stock s, campaign c SET s.remain = s.remain - 1 WHERE s.campaign_id = c.id AND "
                   "s.campaign_id = 7", 0,
     "UPDATE coupon_stock s, campaign c SET s.remain = s.remain - 1, s.`version` = s.`version` + 1 WHERE "
     "s.campaign_id = c.id AND s.campaign_id = 7 AND s.remain >= 1", {}},
};

// The one counter fact of a statement.
template <class Fact>
const Fact& only_fact(const match_result& m) {
    static const Fact none{};
    if (m.facts.size() != 1 || !std::holds_alternative<Fact>(m.facts[0])) return none;
    return std::get<Fact>(m.facts[0]);
}

// Parses the rewrite and checks it says what was intended: a guarded decrement of the same
// row, user literals byte for byte, placeholders mapped back to the original ones.
void check_round_trip(const sql::parsed_statement& original, const small_vector<value_ref, 2>& original_key,
                      const stock_rule& rule, const rewritten_sql& out, const decrement_amount& amount) {
    const auto again = sql::parse(out.sql, original.options);
    ASSERT_TRUE(again.ours()) << out.sql;
    EXPECT_EQ(again.placeholder_count, out.parameters.size());
    const auto m = match(again, index());
    const auto& c = only_fact<counter_change>(m);
    ASSERT_NE(c.rule, nullptr) << out.sql;
    EXPECT_EQ(c.rule, &rule);
    EXPECT_EQ(c.sign, '-');
    if (amount.placeholder) {
        ASSERT_EQ(c.amount.type, value_ref::kind::placeholder);
        EXPECT_EQ(out.parameters.at(c.amount.placeholder_index), *amount.placeholder);
        EXPECT_EQ(c.guard, guard_state::unknown);
    } else {
        EXPECT_EQ(c.delta, -amount.units);
        EXPECT_EQ(c.guard, guard_state::sufficient);
    }
    ASSERT_EQ(c.key.size(), original_key.size());
    for (std::size_t i = 0; i < c.key.size(); ++i) {
        EXPECT_EQ(c.key[i].type, original_key[i].type);
        if (c.key[i].type == value_ref::kind::literal) {
            EXPECT_EQ(c.key[i].text, original_key[i].text);
        } else if (c.key[i].type == value_ref::kind::placeholder) {
            EXPECT_EQ(out.parameters.at(c.key[i].placeholder_index), original_key[i].placeholder_index);
        }
    }
    EXPECT_EQ(c.version_assignment.has_value(), rule.version_column.has_value());
}

class rewrite_write_table : public ::testing::TestWithParam<rewrite_case> {};

TEST_P(rewrite_write_table, sql) {
    const auto& c = GetParam();
    const auto st = sql::parse(c.sql, c.options);
    const auto m = match(st, index());
    const auto& w = only_fact<counter_write>(m);
    ASSERT_NE(w.rule, nullptr) << c.sql;
    const auto out = rewrite_write(st, w, c.units);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, c.expected);
    EXPECT_EQ(std::vector<std::uint32_t>(out->parameters.begin(), out->parameters.end()), c.parameters);
    check_round_trip(st, w.key, *w.rule, *out, {c.units, std::nullopt});
}

INSTANTIATE_TEST_SUITE_P(rewrite, rewrite_write_table, ::testing::ValuesIn(write_cases),
                         [](const auto& info) { return std::string(info.param.name); });

class rewrite_change_table : public ::testing::TestWithParam<rewrite_case> {};

TEST_P(rewrite_change_table, sql) {
    const auto& c = GetParam();
    const auto st = sql::parse(c.sql, c.options);
    const auto m = match(st, index());
    const auto& ch = only_fact<counter_change>(m);
    ASSERT_NE(ch.rule, nullptr) << c.sql;
    const auto out = rewrite_change(st, ch);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, c.expected);
    EXPECT_EQ(std::vector<std::uint32_t>(out->parameters.begin(), out->parameters.end()), c.parameters);
    decrement_amount amount;
    if (ch.amount.type == value_ref::kind::placeholder) amount.placeholder = ch.amount.placeholder_index;
    else amount.units = -*ch.delta;
    check_round_trip(st, ch.key, *ch.rule, *out, amount);
}

INSTANTIATE_TEST_SUITE_P(rewrite, rewrite_change_table, ::testing::ValuesIn(change_cases),
                         [](const auto& info) { return std::string(info.param.name); });

struct compensation_case {
    const char* name;
    std::string_view insert;
    std::int64_t units;
    std::string expected;
    std::vector<std::uint32_t> parameters;
};

const compensation_case compensation_cases[] = {
    {"literal_key", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", 1,
     "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 7", {}},
    {"placeholder_key", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)", 1,
     "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = ?", {1}},
    {"string_key_bytes_kept", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 'spring\\'7')", 1,
     "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 'spring\\'7'", {}},
    {"several_units", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", 3,
     "UPDATE `coupon_stock` SET `remain` = `remain` + 3, `version` = `version` + 1 WHERE `campaign_id` = 7", {}},
    {"mapped_two_columns", "INSERT INTO shop.orders (order_no, item_sku, wh) VALUES ('o-1', 'A\\'x', 2)", 1,
     "UPDATE `shop`.`inventory` SET `qty` = `qty` + 1 WHERE `sku` = 'A\\'x' AND `warehouse` = 2", {}},
    {"mapped_placeholders", "INSERT INTO shop.orders (wh, order_no, item_sku) VALUES (?, ?, ?)", 1,
     "UPDATE `shop`.`inventory` SET `qty` = `qty` + 1 WHERE `sku` = ? AND `warehouse` = ?", {2, 0}},
    {"negative_key", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, -7)", 1,
     "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = -7", {}},
};

class compensation_table : public ::testing::TestWithParam<compensation_case> {};

TEST_P(compensation_table, sql) {
    const auto& c = GetParam();
    const auto st = sql::parse(c.insert, {});
    const auto m = match(st, index());
    const auto& claim = only_fact<claim_insert>(m);
    ASSERT_NE(claim.stock, nullptr);
    ASSERT_EQ(claim.rows.size(), 1u);
    const auto& key = claim.rows[0].stock_key;
    const auto out = compensation(*claim.stock, key, c.units);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, c.expected);
    EXPECT_EQ(std::vector<std::uint32_t>(out->parameters.begin(), out->parameters.end()), c.parameters);
    // Round trip: an increment of the same row.
    const auto again = sql::parse(out->sql, {});
    const auto again_facts = match(again, index());
    const auto& change = only_fact<counter_change>(again_facts);
    ASSERT_EQ(change.rule, claim.stock) << out->sql;
    EXPECT_EQ(change.delta, c.units);
    ASSERT_EQ(change.key.size(), key.size());
    for (std::size_t i = 0; i < key.size(); ++i) {
        if (key[i].type == value_ref::kind::literal) {
            EXPECT_EQ(change.key[i].text, key[i].text);
        } else {
            EXPECT_EQ(out->parameters.at(change.key[i].placeholder_index), key[i].placeholder_index);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(rewrite, compensation_table, ::testing::ValuesIn(compensation_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(rewriter, refuses_what_is_not_a_decrement) {
    const auto inc = sql::parse("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 7", {});
    const auto m = match(inc, index());
    EXPECT_EQ(rewrite_change(inc, std::get<counter_change>(m.facts.at(0))).error(), make_error_code(errc::amount_not_positive));

    const auto dec = sql::parse("UPDATE coupon_stock SET remain = remain - 1.5 WHERE campaign_id = 7", {});
    const auto m2 = match(dec, index());
    EXPECT_EQ(rewrite_change(dec, std::get<counter_change>(m2.facts.at(0))).error(), make_error_code(errc::amount_not_integer));

    const auto w = sql::parse("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", {});
    const auto m3 = match(w, index());
    const auto& write = std::get<counter_write>(m3.facts.at(0));
    EXPECT_EQ(rewrite_write(w, write, 0).error(), make_error_code(errc::amount_not_positive));
    EXPECT_EQ(rewrite_write(w, write, -3).error(), make_error_code(errc::amount_not_positive));
}

TEST(rewriter, placeholder_amount_with_a_floor_waits_for_the_value) {
    const auto st = sql::parse("UPDATE shop.inventory SET qty = qty - ? WHERE sku = ? AND warehouse = ?", {});
    const auto m = match(st, index());
    const auto& c = std::get<counter_change>(m.facts.at(0));
    EXPECT_EQ(rewrite_change(st, c).error(), make_error_code(errc::amount_needs_value));
    // Once bound (say to 3), the engine passes the number: the guard is floor + 3.
    const auto out = rewrite_change(st, c, 3);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, "UPDATE shop.inventory SET qty = qty - 3 WHERE sku = ? AND warehouse = ? AND qty >= 8");
    EXPECT_EQ(std::vector<std::uint32_t>(out->parameters.begin(), out->parameters.end()), (std::vector<std::uint32_t>{1, 2}));
    check_round_trip(st, c.key, *c.rule, *out, {3, std::nullopt});
    EXPECT_EQ(rewrite_change(st, c, 0).error(), make_error_code(errc::amount_not_positive));
}

TEST(rewriter, known_units_replace_a_placeholder_amount) {
    const auto st = sql::parse("UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?", {});
    const auto m = match(st, index());
    const auto& c = std::get<counter_change>(m.facts.at(0));
    const auto out = rewrite_change(st, c, 2);
    ASSERT_TRUE(out);
    EXPECT_EQ(out->sql, "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = ? AND remain >= 2");
    EXPECT_EQ(std::vector<std::uint32_t>(out->parameters.begin(), out->parameters.end()), (std::vector<std::uint32_t>{1}));
}

TEST(rewriter, refuses_floor_overflow) {
    const auto st = sql::parse("UPDATE shop.inventory SET qty = 10 WHERE sku = 'A' AND warehouse = 2", {});
    const auto m = match(st, index());
    const auto& w = std::get<counter_write>(m.facts.at(0));
    EXPECT_EQ(rewrite_write(st, w, INT64_MAX).error(), make_error_code(errc::amount_out_of_range));
    EXPECT_TRUE(rewrite_write(st, w, INT64_MAX - 5));
}

TEST(rewriter, refuses_other_statements) {
    const auto st = sql::parse("SELECT remain FROM coupon_stock WHERE campaign_id = 7", {});
    EXPECT_EQ(conditional_decrement(st, rules().stocks[0], 0, std::nullopt, {1, std::nullopt}).error(),
              make_error_code(errc::not_an_update));
    const auto up = sql::parse("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", {});
    EXPECT_EQ(conditional_decrement(up, rules().stocks[0], 5, std::nullopt, {1, std::nullopt}).error(),
              make_error_code(errc::not_an_update));
}

TEST(rewriter, compensation_needs_bindable_keys) {
    const auto st = sql::parse("INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, NOW())", {});
    const auto m = match(st, index());
    const auto& c = std::get<claim_insert>(m.facts.at(0));
    EXPECT_EQ(compensation(*c.stock, c.rows[0].stock_key).error(), make_error_code(errc::key_not_bindable));
    const auto st2 = sql::parse("INSERT INTO coupon_order (user_id) VALUES (42)", {});
    const auto m2 = match(st2, index());
    const auto& c2 = std::get<claim_insert>(m2.facts.at(0));
    EXPECT_EQ(compensation(*c2.stock, c2.rows[0].stock_key).error(), make_error_code(errc::key_not_bindable));
    const auto st3 = sql::parse("INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", {});
    const auto m3 = match(st3, index());
    const auto& c3 = std::get<claim_insert>(m3.facts.at(0));
    EXPECT_EQ(compensation(*c3.stock, c3.rows[0].stock_key, 0).error(), make_error_code(errc::amount_not_positive));
    EXPECT_EQ(compensation(*c3.stock, {}).error(), make_error_code(errc::key_not_bindable));
}

}  // namespace
}  // namespace claimguard::rules::match

namespace claimguard::rules::match {
namespace {

// defer_decrement: the kept take names its key as literals (integers in decimal, anything else as
// hex of its bytes), pins a schema-less table to the session's database, and reads back as the
// guarded decrement it is.
TEST(rewriter, deferred_decrement_is_self_contained) {
    const auto* coupon = index().stock_named("coupon_stock");
    const auto* inventory = index().stock_named("inventory");
    ASSERT_NE(coupon, nullptr);
    ASSERT_NE(inventory, nullptr);
    const key_literal seven[] = {{"7", true}};
    auto out = deferred_decrement(*coupon, seven, 1, "shop");
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, "UPDATE `shop`.`coupon_stock` SET `remain` = `remain` - 1, `version` = `version` + 1 WHERE "
                        "`campaign_id` = 7 AND `remain` >= 1");
    EXPECT_TRUE(out->parameters.empty());
    const auto again = sql::parse(out->sql, {});
    const auto& change = only_fact<counter_change>(match(again, index()));
    EXPECT_EQ(change.guard, guard_state::sufficient);
    const key_literal hostile[] = {{"A'x\\\xbf\x27", false}, {"-2", true}};
    out = deferred_decrement(*inventory, hostile, 3);
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql, "UPDATE `shop`.`inventory` SET `qty` = `qty` - 3 WHERE `sku` = X'4127785CBF27' AND "
                        "`warehouse` = -2 AND `qty` >= 8");
    const key_literal not_a_number[] = {{"7; DROP", true}};  // never trusted as digits
    out = deferred_decrement(*coupon, not_a_number, 1);
    ASSERT_TRUE(out);
    EXPECT_NE(out->sql.find("X'373B2044524F50'"), std::string::npos) << out->sql;
    EXPECT_FALSE(deferred_decrement(*coupon, seven, 0));
    EXPECT_FALSE(deferred_decrement(*inventory, seven, 1));  // one key value for two columns
}

// group_update: one UPDATE of several takes' summed units, the version bumped once per take.
TEST(rewriter, group_decrement_sums_units_and_bumps_the_version_per_take) {
    const auto* coupon = index().stock_named("coupon_stock");
    const auto* inventory = index().stock_named("inventory");
    ASSERT_NE(coupon, nullptr);
    ASSERT_NE(inventory, nullptr);
    const key_literal seven[] = {{"7", true}};
    auto out = group_decrement(*coupon, seven, 5, 5, "shop");
    ASSERT_TRUE(out) << out.error().message();
    EXPECT_EQ(out->sql,
              "UPDATE `shop`.`coupon_stock` SET `remain` = `remain` - 5, `version` = `version` + 5 WHERE "
              "`campaign_id` = 7 AND `remain` >= 5");
    const auto again = sql::parse(out->sql, {});
    EXPECT_EQ(only_fact<counter_change>(match(again, index())).guard, guard_state::sufficient);
    const key_literal sku[] = {{"A", false}, {"2", true}};
    out = group_decrement(*inventory, sku, 6, 2);  // two takes of 3 units
    ASSERT_TRUE(out);
    EXPECT_EQ(out->sql,
              "UPDATE `shop`.`inventory` SET `qty` = `qty` - 6 WHERE `sku` = X'41' AND `warehouse` = 2 AND "
              "`qty` >= 11");
    EXPECT_FALSE(group_decrement(*coupon, seven, 5, 0));
    EXPECT_FALSE(group_decrement(*coupon, seven, 0, 1));
}

}  // namespace
}  // namespace claimguard::rules::match
