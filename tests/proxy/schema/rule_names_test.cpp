// Unit tests of the schema check's other half (issue 17): every table and column a rule names exists
// (reported at its file:line), counters are integers, and database code reaching a rule's table is found.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "proxy/schema/report.hpp"

namespace claimguard::schema {
namespace {

using strings = std::vector<std::string>;
using rules::match::code_kind;

// The example rules (rules/examples/coupon.yaml, trimmed): line numbers matter below.
const char* const coupon_yaml = R"(stock_rules:
  - name: coupon_stock
    table: coupon_stock
    key_columns: [campaign_id]
    counter_column: remain
    version_column: version
claim_rules:
  - name: coupon_order
    table: coupon_order
    idempotency_columns: [user_id, campaign_id]
    consumes:
      rule: coupon_stock
      columns:
        campaign_id: campaign_id
)";

rules::rule_set load(const std::string& yaml) {
    auto loaded = rules::load_rules({{"rules.yaml", yaml}});
    if (!loaded.rules) {
        std::string all;
        for (const auto& d : loaded.errors) all += rules::format_diagnostic(d) + "\n";
        ADD_FAILURE() << all;
        return {};
    }
    return *loaded.rules;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

table_info stock_table(std::string remain_type = "int") {
    return {"shop",
            "coupon_stock",
            {{"campaign_id", false, "bigint", "bigint(20)"},
             {"remain", false, remain_type, remain_type},
             {"version", false, "int", "int(11)"}},
            {}};
}

table_info order_table() {
    return {"shop",
            "coupon_order",
            {{"id", false, "bigint", "bigint(20)"},
             {"user_id", false, "bigint", "bigint(20)"},
             {"campaign_id", false, "bigint", "bigint(20)"}},
            {{"uq", true, {"user_id", "campaign_id"}, false, false}}};
}

struct names_case {
    const char* name;
    std::string yaml;                // the rules file
    std::vector<table_info> tables;  // what the server has
    strings errors;                  // format_rule_error of each, in order
};

std::ostream& operator<<(std::ostream& os, const names_case& c) { return os << c.name; }

const names_case names_cases[] = {
    {"everything_found", coupon_yaml, {stock_table(), order_table()}, {}},
    {"counter_column_typo",
     replaced(coupon_yaml, "counter_column: remain", "counter_column: remainder"),
     {stock_table(), order_table()},
     {"rules.yaml:5:21: error: rule coupon_stock, counter_column: coupon_stock.remainder: no such column (columns: "
      "campaign_id, remain, version)"}},
    {"key_column_missing",
     // the mapping must name a key column (lint), so it maps the new key name too
     replaced(replaced(coupon_yaml, "key_columns: [campaign_id]", "key_columns: [campaign]"),
              "campaign_id: campaign_id", "campaign: campaign"),
     {stock_table(), order_table()},
     {"rules.yaml:4:19: error: rule coupon_stock, key_columns: coupon_stock.campaign: no such column (columns: "
      "campaign_id, remain, version)",
      "rules.yaml:14:9: error: rule coupon_order, consumes.columns: coupon_order.campaign: no such column "
      "(columns: id, user_id, campaign_id)"}},
    {"version_column_missing",
     replaced(coupon_yaml, "version_column: version", "version_column: ver"),
     {stock_table(), order_table()},
     {"rules.yaml:6:21: error: rule coupon_stock, version_column: coupon_stock.ver: no such column (columns: "
      "campaign_id, remain, version)"}},
    {"idempotency_column_missing",
     replaced(coupon_yaml, "idempotency_columns: [user_id, campaign_id]", "idempotency_columns: [uid, campaign_id]"),
     {stock_table(), order_table()},
     {"rules.yaml:10:27: error: rule coupon_order, idempotency_columns: coupon_order.uid: no such column "
      "(columns: id, user_id, campaign_id)"}},
    {"stock_table_missing",
     coupon_yaml,
     {order_table()},
     {"rules.yaml:3:12: error: rule coupon_stock, table: coupon_stock: no such table in database shop (or the "
      "check's user has no privilege on it)"}},
    {"claim_table_missing",
     coupon_yaml,
     {stock_table()},
     {"rules.yaml:9:12: error: rule coupon_order, table: coupon_order: no such table in database shop (or the "
      "check's user has no privilege on it)"}},
    {"counter_not_an_integer",
     coupon_yaml,
     {stock_table("decimal"), order_table()},
     {"rules.yaml:5:21: error: rule coupon_stock, counter_column: coupon_stock.remain: the counter is decimal, not an "
      "integer type (TINYINT, SMALLINT, MEDIUMINT, INT or BIGINT): claimguard takes whole units from it"}},
    {"counter_varchar",
     coupon_yaml,
     {stock_table("varchar"), order_table()},
     {"rules.yaml:5:21: error: rule coupon_stock, counter_column: coupon_stock.remain: the counter is varchar, not an "
      "integer type (TINYINT, SMALLINT, MEDIUMINT, INT or BIGINT): claimguard takes whole units from it"}},
    {"column_case_ignored",
     replaced(coupon_yaml, "counter_column: remain", "counter_column: REMAIN"),
     {stock_table(), order_table()},
     {}},
    {"implicit_mapping_column_missing",
     replaced(coupon_yaml,
              "    consumes:\n      rule: coupon_stock\n      columns:\n        campaign_id: campaign_id\n",
              "    consumes: coupon_stock\n"),
     {stock_table(), {"shop", "coupon_order", {{"id", false, "bigint", ""}, {"user_id", false, "bigint", ""}}, {}}},
     {"rules.yaml:10:36: error: rule coupon_order, idempotency_columns: coupon_order.campaign_id: no such column "
      "(columns: id, user_id)",
      "rules.yaml:11:15: error: rule coupon_order, consumes: coupon_order.campaign_id: no such column (columns: id, "
      "user_id)"}},
};

class rule_names : public ::testing::TestWithParam<names_case> {};

TEST_P(rule_names, checks) {
    const auto& c = GetParam();
    const auto& want = c.errors;
    const auto set = load(c.yaml);
    schema_metadata md;
    md.tables = c.tables;
    strings got;
    for (const auto& e : check_rule_names(set, md, "shop")) got.push_back(format_rule_error(e));
    EXPECT_EQ(got, want);
    const auto report = build_report(set, md, "shop");
    EXPECT_EQ(exit_code(report), want.empty() && report.all_covered() ? 0 : 1);
}

INSTANTIATE_TEST_SUITE_P(schema, rule_names, ::testing::ValuesIn(names_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(rule_names, integer_types) {
    for (const char* t : {"tinyint", "smallint", "mediumint", "int", "INT", "integer", "bigint"})
        EXPECT_TRUE(is_integer_type(t)) << t;
    for (const char* t : {"decimal", "double", "float", "varchar", "bit", "", "intx"})
        EXPECT_FALSE(is_integer_type(t)) << t;
}

TEST(rule_names, reported_in_text_and_json) {
    const auto set = load(replaced(coupon_yaml, "counter_column: remain", "counter_column: remainder"));
    schema_metadata md;
    md.tables = {stock_table(), order_table()};
    const auto report = build_report(set, md, "shop");
    EXPECT_EQ(exit_code(report), 1);
    const auto text = render_text(report);
    EXPECT_NE(text.find("rules.yaml:5:21: error: rule coupon_stock, counter_column: coupon_stock.remainder: no such "
                        "column (columns: campaign_id, remain, version)"),
              std::string::npos)
        << text;
    const auto j = to_json(report);
    ASSERT_EQ(j["rule_errors"].size(), 1u);
    EXPECT_EQ(j["rule_errors"][0]["line"], 5);
    EXPECT_EQ(j["rule_errors"][0]["field"], "counter_column");
    EXPECT_EQ(j["summary"]["rule_errors"], 1);
    EXPECT_EQ(j["exit_code"], 1);
}

// --- database code ------------------------------------------------------------------------------------

struct code_case {
    const char* name;
    std::vector<code_source> sources;
    strings found;  // "kind name -> rule via"
};

std::ostream& operator<<(std::ostream& os, const code_case& c) { return os << c.name; }

const code_case code_cases[] = {
    {"procedure_writing_the_stock",
     {{code_kind::procedure, "shop", "claim_coupon", "",
       "BEGIN UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = c; INSERT INTO coupon_order (user_id, "
       "campaign_id) VALUES (u, c); END"}},
     {"procedure claim_coupon -> coupon_stock via coupon_stock",
      "procedure claim_coupon -> coupon_order via coupon_order"}},
    {"quoted_and_qualified_view",
     {{code_kind::view, "shop", "v_stock", "",
       "select `shop`.`coupon_stock`.`campaign_id` AS `campaign_id` from `shop`.`coupon_stock`"}},
     {"view v_stock -> coupon_stock via coupon_stock"}},
    {"view_over_view_listed_in_any_order",
     {{code_kind::view, "shop", "v_top", "", "select * from `shop`.`v_stock` where remain > 0"},
      {code_kind::view, "shop", "v_stock", "", "select * from coupon_stock"}},
     {"view v_top -> coupon_stock via v_stock", "view v_stock -> coupon_stock via coupon_stock"}},
    {"trigger_table_reached_by_a_procedure",
     {{code_kind::procedure, "shop", "buy", "", "INSERT INTO ticket VALUES (c)"},
      {code_kind::trigger, "shop", "trg_ticket", "ticket", "UPDATE coupon_stock SET remain = remain - 1"}},
     {"procedure buy -> coupon_stock via ticket", "trigger trg_ticket -> coupon_stock via coupon_stock"}},
    {"event",
     {{code_kind::event, "shop", "ev", "", "UPDATE COUPON_STOCK SET remain = 100"}},
     {"event ev -> coupon_stock via coupon_stock"}},
    {"function_called_by_a_procedure",
     {{code_kind::procedure, "shop", "p", "", "SELECT f_take(1) INTO x"},
      {code_kind::function, "shop", "f_take", "", "UPDATE coupon_stock SET remain = remain - 1; RETURN 1"}},
     {"procedure p -> coupon_stock via f_take", "function f_take -> coupon_stock via coupon_stock"}},
    {"longer_names_do_not_count",
     {{code_kind::procedure, "shop", "p", "", "UPDATE coupon_stock_log SET n = n + 1"},
      {code_kind::view, "shop", "v", "", "select * from old_coupon_order"}},
     {}},
    {"unrelated_code", {{code_kind::procedure, "shop", "p", "", "SELECT 1"}}, {}},
};

class database_code : public ::testing::TestWithParam<code_case> {};

TEST_P(database_code, found) {
    const auto& c = GetParam();
    const auto set = load(coupon_yaml);
    strings got;
    for (const auto& o : find_database_code(set, c.sources))
        got.push_back(std::string(rules::match::to_string(o.kind)) + " " + o.name + " -> " + o.rule + " via " + o.via);
    EXPECT_EQ(got, c.found);
}

INSTANTIATE_TEST_SUITE_P(schema, database_code, ::testing::ValuesIn(code_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(database_code_report, warnings_in_text_and_json_never_change_the_exit_code) {
    const auto set = load(coupon_yaml);
    schema_metadata md;
    md.tables = {stock_table(), order_table()};
    auto report = build_report(set, md, "shop");
    report.database_code = find_database_code(
        set, {{code_kind::procedure, "shop", "claim_coupon", "", "UPDATE coupon_stock SET remain = remain - 1"},
              {code_kind::trigger, "shop", "trg", "ticket", "UPDATE coupon_stock SET remain = remain - 1"}});
    EXPECT_EQ(exit_code(report), 0);
    const auto text = render_text(report);
    EXPECT_NE(text.find("WARNING: procedure shop.claim_coupon reaches rule coupon_stock (its text names coupon_stock): "
                        "CALL claim_coupon gets the rule's unmodeled policy."),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("WARNING: trigger shop.trg on ticket reaches rule coupon_stock"), std::string::npos) << text;
    const auto j = to_json(report);
    ASSERT_EQ(j["database_code"].size(), 2u);
    EXPECT_EQ(j["database_code"][0]["kind"], "procedure");
    EXPECT_EQ(j["database_code"][0]["name"], "claim_coupon");
    EXPECT_EQ(j["database_code"][0]["rule"], "coupon_stock");
    EXPECT_EQ(j["database_code"][1]["table"], "ticket");
    EXPECT_TRUE(j["database_code"][0]["table"].is_null());
}

// decremented_by_trigger: the claim table's trigger that names the consumed stock is expected; without
// it the rule is an error (exit 1). A trigger like it on a rule without the field: advice to set it.
TEST(database_code_report, decremented_by_trigger_expects_the_claim_tables_trigger) {
    const std::string with_field = std::string(coupon_yaml) + "    decremented_by_trigger: true\n";
    const std::vector<code_source> trigger = {{code_kind::trigger, "shop", "trg_claim", "coupon_order",
                                               "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = "
                                               "NEW.campaign_id AND remain > 0"}};
    schema_metadata md;
    md.tables = {stock_table(), order_table()};
    {
        const auto set = load(with_field);
        auto report = build_report(set, md, "shop");
        check_trigger_rules(set, report);
        ASSERT_EQ(report.rule_errors.size(), 1u);
        EXPECT_EQ(report.rule_errors[0].rule, "coupon_order");
        EXPECT_EQ(report.rule_errors[0].field, "decremented_by_trigger");
        EXPECT_NE(report.rule_errors[0].message.find("no trigger on coupon_order names coupon_stock"),
                  std::string::npos)
            << report.rule_errors[0].message;
        EXPECT_EQ(exit_code(report), 1);
    }
    {
        const auto set = load(with_field);
        auto report = build_report(set, md, "shop");
        report.database_code = find_database_code(set, trigger);
        check_trigger_rules(set, report);
        EXPECT_TRUE(report.rule_errors.empty());
        EXPECT_EQ(exit_code(report), 0);
        EXPECT_NE(render_text(report).find("expected: claim rule coupon_order has decremented_by_trigger: true"),
                  std::string::npos)
            << render_text(report);
    }
    {
        const auto set = load(coupon_yaml);
        auto report = build_report(set, md, "shop");
        report.database_code = find_database_code(set, trigger);
        check_trigger_rules(set, report);
        EXPECT_EQ(exit_code(report), 0);
        EXPECT_NE(render_text(report).find("set decremented_by_trigger: true on claim rule coupon_order"),
                  std::string::npos)
            << render_text(report);
    }
    {
        // The code could not all be read: a trigger may be there, nothing is reported missing.
        const auto set = load(with_field);
        auto report = build_report(set, md, "shop");
        report.database_code_error = "the check's user cannot see the text of trigger shop.trg_claim";
        check_trigger_rules(set, report);
        EXPECT_TRUE(report.rule_errors.empty());
    }
}

TEST(database_code_report, schemas_to_inspect_once_each) {
    const auto set =
        load(replaced(coupon_yaml, "    table: coupon_order", "    table: {schema: gifts, name: coupon_order}"));
    EXPECT_EQ(schemas_to_inspect(set, "shop"), (strings{"gifts", "shop"}));
}

}  // namespace
}  // namespace claimguard::schema
