// Unit tests of the schema check's decision: which UNIQUE index backs a claim rule, and the reports.
#include "proxy/schema/report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "rules/model/ddl.hpp"

namespace claimguard::schema {
namespace {

using strings = std::vector<std::string>;

index_info unique(std::string name, strings columns) {
    return {std::move(name), true, std::move(columns), false, false};
}
index_info plain(std::string name, strings columns) {
    return {std::move(name), false, std::move(columns), false, false};
}

table_info coupon_order(std::vector<index_info> indexes, bool nullable_user = false) {
    return {"shop",
            "coupon_order",
            {{"id", false, "", ""},
             {"user_id", nullable_user, "", ""},
             {"campaign_id", false, "", ""},
             {"created_at", false, "", ""},
             {"request_id", true, "", ""}},
            std::move(indexes)};
}

rules::unique_index business_key(strings columns = {"user_id", "campaign_id"}) {
    return {"coupon_order",
            {"shop", "coupon_order"},
            columns,
            rules::unique_index_name("coupon_order", columns),
            rules::unique_index::purpose::idempotency_columns};
}

rules::unique_index request_key() {
    return {"coupon_order",
            {"shop", "coupon_order"},
            {"request_id"},
            rules::unique_index_name("coupon_order", {"request_id"}),
            rules::unique_index::purpose::idempotency_key_column};
}

struct decision_case {
    const char* name;
    rules::unique_index required;
    std::optional<table_info> table;  // nullopt: the table does not exist
    index_status status;
    std::string covering;  // the index that backs the rule, "" for none
    strings near_misses;   // names of indexes explained as not backing it
    strings missing_columns;
    strings nullable_columns;
};

std::ostream& operator<<(std::ostream& os, const decision_case& c) { return os << c.name; }

class decision : public ::testing::TestWithParam<decision_case> {};

TEST_P(decision, decides) {
    const auto& c = GetParam();
    const auto got = check_index(c.required, c.table ? &*c.table : nullptr);
    EXPECT_EQ(to_string(got.status), to_string(c.status));
    EXPECT_EQ(got.covering ? got.covering->name : std::string(), c.covering);
    strings misses;
    for (const auto& m : got.near_misses) misses.push_back(m.index.name);
    EXPECT_EQ(misses, c.near_misses);
    EXPECT_EQ(got.missing_columns, c.missing_columns);
    EXPECT_EQ(got.nullable_columns, c.nullable_columns);
}

const decision_case decision_cases[] = {
    {"exact_unique_index",
     business_key(),
     coupon_order({unique("PRIMARY", {"id"}), unique("uq_user_campaign", {"user_id", "campaign_id"})}),
     index_status::covered,
     "uq_user_campaign",
     {},
     {},
     {}},
    {"exact_columns_in_another_order",
     business_key(),
     coupon_order({unique("uq_campaign_user", {"campaign_id", "user_id"})}),
     index_status::covered,
     "uq_campaign_user",
     {},
     {},
     {}},
    {"stricter_subset_is_covered_but_stricter",
     business_key(),
     coupon_order({unique("uq_user", {"user_id"})}),
     index_status::covered_stricter,
     "uq_user",
     {},
     {},
     {}},
    {"superset_does_not_cover",
     business_key(),
     coupon_order({unique("uq_user_campaign_time", {"user_id", "campaign_id", "created_at"})}),
     index_status::missing,
     "",
     {"uq_user_campaign_time"},
     {},
     {}},
    {"superset_beside_stricter_subset",
     business_key(),
     coupon_order({unique("uq_wide", {"user_id", "campaign_id", "created_at"}), unique("uq_user", {"user_id"})}),
     index_status::covered_stricter,
     "uq_user",
     {"uq_wide"},
     {},
     {}},
    {"exact_wins_over_stricter_listed_first",
     business_key(),
     coupon_order({unique("uq_user", {"user_id"}), unique("uq_exact", {"user_id", "campaign_id"})}),
     index_status::covered,
     "uq_exact",
     {},
     {},
     {}},
    {"primary_key_on_exact_columns",
     business_key(),
     coupon_order({unique("PRIMARY", {"campaign_id", "user_id"})}),
     index_status::covered,
     "PRIMARY",
     {},
     {},
     {}},
    {"unrelated_primary_key_does_not_cover",
     business_key(),
     coupon_order({unique("PRIMARY", {"id"})}),
     index_status::missing,
     "",
     {},
     {},
     {}},
    {"non_unique_index_on_exact_columns",
     business_key(),
     coupon_order({plain("idx_user_campaign", {"user_id", "campaign_id"})}),
     index_status::missing,
     "",
     {"idx_user_campaign"},
     {},
     {}},
    {"non_unique_subset_is_ignored",
     business_key(),
     coupon_order({plain("idx_user", {"user_id"})}),
     index_status::missing,
     "",
     {},
     {},
     {}},
    {"prefix_index_on_exact_columns_is_stricter",
     business_key(),
     coupon_order({{"uq_prefix", true, {"user_id", "campaign_id"}, true, false}}),
     index_status::covered_stricter,
     "uq_prefix",
     {},
     {},
     {}},
    {"expression_index_is_ignored",
     business_key(),
     coupon_order({{"uq_functional", true, {"user_id"}, false, true}}),
     index_status::missing,
     "",
     {},
     {},
     {}},
    {"no_indexes_at_all", business_key(), coupon_order({}), index_status::missing, "", {}, {}, {}},
    {"table_missing", business_key(), std::nullopt, index_status::table_missing, "", {}, {}, {}},
    {"column_missing",
     business_key({"user_id", "campaign"}),
     coupon_order({unique("uq_user", {"user_id"})}),
     index_status::column_missing,
     "",
     {},
     {"campaign"},
     {}},
    {"column_names_ignore_case",
     business_key({"User_Id", "CAMPAIGN_ID"}),
     coupon_order({unique("uq_user_campaign", {"user_id", "Campaign_id"})}),
     index_status::covered,
     "uq_user_campaign",
     {},
     {},
     {}},
    {"idempotency_key_unique",
     request_key(),
     coupon_order({unique("uq_request", {"request_id"})}),
     index_status::covered,
     "uq_request",
     {},
     {},
     {"request_id"}},
    {"idempotency_key_inside_wider_unique",
     request_key(),
     coupon_order({unique("uq_request_user", {"request_id", "user_id"})}),
     index_status::missing,
     "",
     {"uq_request_user"},
     {},
     {"request_id"}},
    {"idempotency_key_missing_column",
     request_key(),
     table_info{"shop", "coupon_order", {{"id", false, "", ""}}, {unique("PRIMARY", {"id"})}},
     index_status::column_missing,
     "",
     {},
     {"request_id"},
     {}},
    {"nullable_column_of_the_covering_index",
     business_key(),
     coupon_order({unique("uq_user_campaign", {"user_id", "campaign_id"})}, true),
     index_status::covered,
     "uq_user_campaign",
     {},
     {},
     {"user_id"}},
    {"nullable_column_outside_a_stricter_index_is_irrelevant",
     business_key(),
     coupon_order({unique("uq_campaign", {"campaign_id"})}, true),
     index_status::covered_stricter,
     "uq_campaign",
     {},
     {},
     {}},
};

INSTANTIATE_TEST_SUITE_P(schema, decision, ::testing::ValuesIn(decision_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// --- the rule set around the decision --------------------------------------------------------------

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

const char* const two_claims_yaml = R"(
stock_rules:
  - name: coupon_stock
    table: coupon_stock
    key_columns: [campaign_id]
    counter_column: remain
claim_rules:
  - name: coupon_order
    table: coupon_order
    idempotency_columns: [user_id, campaign_id]
    idempotency_key_column: request_id
    consumes: {rule: coupon_stock, columns: {campaign_id: campaign_id}}
  - name: gift_order
    table: {schema: gifts, name: gift_order}
    idempotency_columns: [user_id, campaign_id]
    consumes: {rule: coupon_stock, columns: {campaign_id: campaign_id}}
)";

TEST(schema_report, resolves_schemas_and_lists_tables_once) {
    const auto set = load(two_claims_yaml);
    ASSERT_EQ(set.claims.size(), 2u);
    // Stock rules' tables are checked too (issue 17: their columns must exist): claims first, then stocks.
    EXPECT_EQ(rules_without_schema(set, ""), (strings{"coupon_order", "coupon_stock"}));
    EXPECT_TRUE(rules_without_schema(set, "shop").empty());
    const auto tables = tables_to_inspect(set, "shop");
    ASSERT_EQ(tables.size(), 3u);
    EXPECT_EQ(tables[2].name, "coupon_stock");
    EXPECT_EQ(tables[0].schema, "shop");
    EXPECT_EQ(tables[0].name, "coupon_order");
    EXPECT_EQ(tables[1].schema, "gifts");
    EXPECT_EQ(tables[1].name, "gift_order");
}

TEST(schema_report, one_check_per_required_index_in_rule_order) {
    const auto set = load(two_claims_yaml);
    schema_metadata md;
    md.tables.push_back(coupon_order({unique("uq_request", {"request_id"}), unique("uq_user", {"user_id"})}));
    const auto report = build_report(set, md, "shop");
    const auto required = rules::required_unique_indexes(set);
    ASSERT_EQ(report.checks.size(), required.size());
    for (std::size_t i = 0; i < required.size(); ++i) {
        EXPECT_EQ(report.checks[i].required.rule, required[i].rule);
        EXPECT_EQ(report.checks[i].required.columns, required[i].columns);
    }
    EXPECT_EQ(report.checks[0].status, index_status::covered_stricter);  // coupon_order (user_id, campaign_id)
    EXPECT_EQ(report.checks[1].status, index_status::covered);           // coupon_order request_id
    EXPECT_EQ(report.checks[2].status, index_status::table_missing);     // gifts.gift_order
    EXPECT_EQ(report.checks[0].required.table.schema, "shop");
    EXPECT_EQ(rule_status(report, "coupon_order"), index_status::covered_stricter);
    EXPECT_EQ(rule_status(report, "gift_order"), index_status::table_missing);
    EXPECT_EQ(exit_code(report), 1);
}

TEST(schema_report, table_found_ignoring_case_keeps_the_servers_spelling) {
    schema_metadata md;
    auto t = coupon_order({unique("uq", {"user_id", "campaign_id"})});
    t.name = "Coupon_Order";
    md.tables.push_back(t);
    const auto* found = find_table(md, {"SHOP", "coupon_order"});
    ASSERT_NE(found, nullptr);
    const auto c = check_index(business_key(), found);
    EXPECT_EQ(c.required.table.name, "Coupon_Order");
    EXPECT_EQ(c.required.table.schema, "shop");
}

TEST(schema_report, exact_table_name_preferred_over_another_case) {
    schema_metadata md;
    auto upper = coupon_order({});
    upper.name = "COUPON_ORDER";
    md.tables.push_back(upper);
    md.tables.push_back(coupon_order({unique("uq", {"user_id", "campaign_id"})}));
    const auto* found = find_table(md, {"shop", "coupon_order"});
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, "coupon_order");
}

struct exit_case {
    const char* name;
    std::vector<index_status> statuses;
    std::string error;
    int expected;
};

std::ostream& operator<<(std::ostream& os, const exit_case& c) { return os << c.name; }

class exit_codes : public ::testing::TestWithParam<exit_case> {};

TEST_P(exit_codes, follow_the_worst_status) {
    schema_report r;
    r.error = GetParam().error;
    for (const auto s : GetParam().statuses) {
        index_check c;
        c.status = s;
        r.checks.push_back(c);
    }
    EXPECT_EQ(exit_code(r), GetParam().expected);
    EXPECT_EQ(r.all_covered(), GetParam().expected == 0);
}

INSTANTIATE_TEST_SUITE_P(
    schema, exit_codes,
    ::testing::Values(exit_case{"no_claim_rules", {}, "", 0},
                      exit_case{"all_covered", {index_status::covered, index_status::covered_stricter}, "", 0},
                      exit_case{"one_missing", {index_status::covered, index_status::missing}, "", 1},
                      exit_case{"table_missing", {index_status::table_missing}, "", 1},
                      exit_case{"column_missing", {index_status::covered, index_status::column_missing}, "", 1},
                      exit_case{"unreachable", {}, "connecting to db:3306: refused", 2}),
    [](const auto& info) { return std::string(info.param.name); });

// --- the SQL the check runs and prints ------------------------------------------------------------

TEST(schema_report, duplicate_count_query_quotes_identifiers) {
    const rules::unique_index index{
        "r", {"sh`op", "order`s"}, {"user`id", "campaign_id"}, "uq", rules::unique_index::purpose::idempotency_columns};
    EXPECT_EQ(duplicate_count_query(index),
              "SELECT COUNT(*), COALESCE(SUM(`n` - 1), 0) FROM (SELECT COUNT(*) AS `n` FROM `sh``op`.`order``s` "
              "WHERE `user``id` IS NOT NULL AND `campaign_id` IS NOT NULL GROUP BY `user``id`, `campaign_id` "
              "HAVING COUNT(*) > 1) AS `d`");
}

schema_report missing_report(std::optional<duplicate_count> dups) {
    schema_report r;
    r.server = "db:3306";
    r.database = "shop";
    const auto table = coupon_order({unique("uq_wide", {"user_id", "campaign_id", "created_at"})});
    auto c = check_index(business_key(), &table);
    c.duplicates = dups;
    r.checks.push_back(c);
    return r;
}

TEST(schema_text, missing_index_shows_why_duplicates_and_the_fix) {
    const auto r = missing_report(duplicate_count{3, 4});
    const auto text = render_text(r);
    const auto& required = r.checks.front().required;
    EXPECT_NE(text.find("coupon_order: MISSING: no UNIQUE index on shop.coupon_order (user_id, campaign_id)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("`uq_wide` (user_id, campaign_id, created_at) does not help: it also includes created_at"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("3 values of (user_id, campaign_id) already held by more than one row (4 rows beyond"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(rules::duplicates_query(required)), std::string::npos) << text;
    EXPECT_NE(text.find(rules::add_index_statement(required)), std::string::npos) << text;
    EXPECT_NE(text.find("Fix, once the duplicates are gone:"), std::string::npos) << text;
    EXPECT_NE(text.find("0 of 1 UNIQUE index in place; 1 missing"), std::string::npos) << text;
}

TEST(schema_text, missing_index_without_duplicates_can_be_added_now) {
    const auto text = render_text(missing_report(duplicate_count{0, 0}));
    EXPECT_NE(text.find("Duplicates: none; the index can be added now."), std::string::npos) << text;
    EXPECT_EQ(text.find("once the duplicates are gone"), std::string::npos) << text;
}

TEST(schema_text, uncounted_duplicates_show_the_query_to_run_first) {
    const auto r = missing_report(std::nullopt);
    const auto text = render_text(r);
    EXPECT_NE(text.find("this must return no rows"), std::string::npos) << text;
    EXPECT_NE(text.find(rules::duplicates_query(r.checks.front().required)), std::string::npos) << text;
}

TEST(schema_text, covered_stricter_and_nullable_are_explained) {
    schema_report r;
    schema_metadata md;
    md.tables.push_back(coupon_order({unique("uq_user", {"user_id"})}, true));
    r.checks.push_back(check_index(business_key(), &md.tables.front()));
    const auto text = render_text(r);
    EXPECT_NE(text.find("OK, STRICTER: UNIQUE index `uq_user` (user_id) on shop.coupon_order allows at most one "
                        "row per user_id, whatever campaign_id holds"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Note: user_id allows NULL"), std::string::npos) << text;
    EXPECT_EQ(text.find("ALTER TABLE"), std::string::npos) << text;
    EXPECT_NE(text.find("Every claim rule is backed by the database."), std::string::npos) << text;
}

TEST(schema_text, unreachable_database_says_why) {
    schema_report r;
    r.server = "db:3306";
    r.error = "connecting to db:3306 as check: Access denied";
    EXPECT_NE(render_text(r).find("ERROR: connecting to db:3306 as check: Access denied"), std::string::npos);
}

TEST(schema_json, carries_status_duplicates_and_fix) {
    const auto r = missing_report(duplicate_count{3, 4});
    const auto j = to_json(r);
    EXPECT_EQ(j["exit_code"], 1);
    EXPECT_EQ(j["ok"], false);
    EXPECT_TRUE(j["error"].is_null());
    EXPECT_EQ(j["summary"]["missing"], 1);
    ASSERT_EQ(j["rules"].size(), 1u);
    EXPECT_EQ(j["rules"][0]["rule"], "coupon_order");
    EXPECT_EQ(j["rules"][0]["status"], "missing");
    const auto& idx = j["rules"][0]["indexes"][0];
    EXPECT_EQ(idx["purpose"], "idempotency_columns");
    EXPECT_EQ(idx["schema"], "shop");
    EXPECT_EQ(idx["columns"], nlohmann::json({"user_id", "campaign_id"}));
    EXPECT_EQ(idx["duplicates"]["keys"], 3);
    EXPECT_EQ(idx["duplicates"]["surplus_rows"], 4);
    EXPECT_EQ(idx["near_misses"][0]["reason"], "superset");
    EXPECT_EQ(idx["near_misses"][0]["extra_columns"], nlohmann::json({"created_at"}));
    EXPECT_EQ(idx["fix"], rules::add_index_statement(r.checks.front().required));
    EXPECT_EQ(idx["duplicates_query"], rules::duplicates_query(r.checks.front().required));
}

TEST(schema_json, groups_a_rules_indexes_and_takes_the_worst_status) {
    schema_metadata md;
    md.tables.push_back(coupon_order({unique("uq_user_campaign", {"user_id", "campaign_id"})}));
    schema_report r;
    r.checks.push_back(check_index(business_key(), &md.tables.front()));
    r.checks.push_back(check_index(request_key(), &md.tables.front()));
    const auto j = to_json(r);
    ASSERT_EQ(j["rules"].size(), 1u);
    EXPECT_EQ(j["rules"][0]["status"], "missing");
    ASSERT_EQ(j["rules"][0]["indexes"].size(), 2u);
    EXPECT_EQ(j["rules"][0]["indexes"][0]["status"], "covered");
    EXPECT_TRUE(j["rules"][0]["indexes"][0]["fix"].is_null());
    EXPECT_EQ(j["rules"][0]["indexes"][0]["covering_index"]["name"], "uq_user_campaign");
    EXPECT_EQ(j["rules"][0]["indexes"][1]["purpose"], "idempotency_key_column");
    EXPECT_EQ(j["rules"][0]["indexes"][1]["status"], "missing");
}

}  // namespace
}  // namespace claimguard::schema
