// Matcher and rule index: statements that reach a rule's table through database code (a procedure,
// a function, a view, a table with a trigger) get an unmodeled fact with code routine/view/trigger.
#include <gtest/gtest.h>

#include "rules/match/matcher.hpp"
#include "rules/sql/parser.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace claimguard::rules::match {
namespace {

// What the schema check would find: coupon_stock reached by a procedure, a function, a view, a
// trigger on an unprotected table (and one on a protected table), and an event.
std::vector<code_object> found_code() {
    return {
        {code_kind::procedure, "shop", "claim_coupon", "", "coupon_stock", "coupon_stock"},
        {code_kind::function, "shop", "f_take", "", "coupon_stock", "coupon_stock"},
        {code_kind::view, "shop", "v_stock", "", "coupon_stock", "coupon_stock"},
        {code_kind::view, "shop", "v_stock_top", "", "coupon_stock", "v_stock"},
        {code_kind::trigger, "shop", "trg_ticket", "ticket", "coupon_stock", "coupon_stock"},
        {code_kind::trigger, "shop", "trg_order", "coupon_order", "coupon_stock", "coupon_stock"},
        {code_kind::event, "shop", "ev_refill", "", "coupon_stock", "coupon_stock"},
        {code_kind::procedure, "shop", "p_orders", "", "coupon_order", "coupon_order"},
        {code_kind::view, "shop", "v_gone", "", "no_such_rule", "coupon_stock"},
    };
}

struct code_case {
    const char* name;
    std::string_view sql;
    std::vector<std::string> unmodeled;  // "rule code", in fact order
};

const code_case code_cases[] = {
    {"call_procedure", "CALL claim_coupon(1, 77)", {"coupon_stock routine"}},
    {"call_procedure_prepared", "CALL claim_coupon(?, ?)", {"coupon_stock routine"}},
    {"call_quoted_and_qualified", "call `shop`.`CLAIM_COUPON`(1, 77)", {"coupon_stock routine"}},
    {"call_other_procedure", "CALL claim_coupon_v2(1, 77)", {}},
    {"call_for_claim_rule", "CALL p_orders()", {"coupon_order routine"}},
    {"update_view", "UPDATE v_stock SET remain = 5 WHERE campaign_id = 77", {"coupon_stock view"}},
    {"update_view_placeholder", "UPDATE v_stock SET remain = ? WHERE campaign_id = ?", {"coupon_stock view"}},
    {"update_view_over_view", "UPDATE v_stock_top SET remain = 5", {"coupon_stock view"}},
    {"insert_view", "INSERT INTO v_stock (campaign_id, remain) VALUES (78, 10)", {"coupon_stock view"}},
    {"delete_view", "DELETE FROM v_stock WHERE campaign_id = 77", {"coupon_stock view"}},
    {"replace_view", "REPLACE INTO v_stock (campaign_id, remain) VALUES (77, 10)", {"coupon_stock view"}},
    {"select_view_is_a_read", "SELECT remain FROM v_stock WHERE campaign_id = 77", {}},
    {"select_function_can_write", "SELECT f_take(77)", {"coupon_stock routine"}},
    {"set_function_can_write", "SET @r = f_take(77)", {"coupon_stock routine"}},
    {"insert_trigger_table", "INSERT INTO ticket (campaign_id) VALUES (77)", {"coupon_stock trigger"}},
    {"update_trigger_table", "UPDATE ticket SET campaign_id = 78 WHERE id = 1", {"coupon_stock trigger"}},
    {"delete_trigger_table", "DELETE FROM ticket WHERE id = 1", {"coupon_stock trigger"}},
    {"select_trigger_table_is_a_read", "SELECT * FROM ticket", {}},
    {"similar_names_are_not_the_view", "UPDATE v_stock2 SET remain = 5", {}},
    {"event_is_reached_by_nothing", "ALTER EVENT ev_refill DISABLE", {}},
    {"name_in_a_string_counts", "INSERT INTO log (msg) VALUES ('v_stock')", {"coupon_stock view"}},
    {"one_fact_per_rule", "UPDATE v_stock, ticket SET v_stock.remain = 1", {"coupon_stock view"}},
    {"begin_is_not_a_write", "BEGIN", {}},
};

std::vector<std::string> unmodeled_of(const match_result& result) {
    std::vector<std::string> out;
    for (const auto& f : result.facts)
        if (const auto* u = std::get_if<unmodeled>(&f))
            out.push_back(std::string(u->stock ? u->stock->name : u->claim->name) + " " + std::string(u->code));
    return out;
}

class database_code_match : public ::testing::TestWithParam<code_case> {};

TEST_P(database_code_match, facts) {
    const auto& c = GetParam();
    static const rule_set rules = test::make_rules();
    static const auto code = found_code();
    static const rule_index index(rules, code);
    const auto st = sql::parse(c.sql, {});
    const auto got = unmodeled_of(match(st, index));
    EXPECT_EQ(got, c.unmodeled) << c.sql;
    if (!got.empty()) {
        EXPECT_NE(index.filter().classify(c.sql), sql::prefilter_verdict::irrelevant) << c.sql;
    }
}

INSTANTIATE_TEST_SUITE_P(code, database_code_match, ::testing::ValuesIn(code_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// Without a schema check nothing changes: the same statements are not the rules' business.
TEST(database_code, without_the_check_the_statements_are_forwarded) {
    const rule_set rules = test::make_rules();
    const rule_index index(rules);
    for (const char* sql : {"CALL claim_coupon(1, 77)", "UPDATE v_stock SET remain = 5 WHERE campaign_id = 77",
                            "INSERT INTO ticket (campaign_id) VALUES (77)"}) {
        EXPECT_TRUE(match(sql::parse(sql, {}), index).facts.empty()) << sql;
        EXPECT_EQ(index.filter().classify(sql), sql::prefilter_verdict::irrelevant) << sql;
    }
}

TEST(database_code, routes_name_the_object_and_skip_what_no_statement_reaches) {
    const rule_set rules = test::make_rules();
    const auto code = found_code();
    const rule_index index(rules, code);
    std::vector<std::string> names;
    for (const auto& r : index.code_routes()) names.push_back(r.name);
    // The trigger on coupon_order (a protected table: its writes are the rules'), the event and the
    // object of an unknown rule give no route.
    EXPECT_EQ(names,
              (std::vector<std::string>{"claim_coupon", "f_take", "v_stock", "v_stock_top", "ticket", "p_orders"}));
    EXPECT_NE(index.code_routes()[0].reason.find("procedure claim_coupon"), std::string::npos);
    EXPECT_EQ(index.code_routes()[0].stock, &index.rules().stocks[0]);
}

struct identifier_case {
    const char* name;
    std::string_view text;
    std::string_view identifier;
    bool found;
};

const identifier_case identifier_cases[] = {
    {"plain", "UPDATE coupon_stock SET remain = remain - 1", "coupon_stock", true},
    {"backticks", "update `coupon_stock` set", "coupon_stock", true},
    {"qualified", "UPDATE shop.coupon_stock SET", "coupon_stock", true},
    {"case", "UPDATE COUPON_STOCK SET", "coupon_stock", true},
    {"prefix_of_longer", "UPDATE coupon_stock_log SET", "coupon_stock", false},
    {"suffix_of_longer", "UPDATE old_coupon_stock SET", "coupon_stock", false},
    {"dollar_is_part", "UPDATE coupon_stock$ SET", "coupon_stock", false},
    {"at_the_end", "FROM coupon_stock", "coupon_stock", true},
    {"empty_name", "anything", "", false},
};

class whole_identifier : public ::testing::TestWithParam<identifier_case> {};

TEST_P(whole_identifier, finds) {
    const auto& c = GetParam();
    EXPECT_EQ(names_identifier(c.text, c.identifier), c.found) << c.text;
}

INSTANTIATE_TEST_SUITE_P(code, whole_identifier, ::testing::ValuesIn(identifier_cases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace claimguard::rules::match
