// Matcher: statement + rules -> facts (reads, writes, relative changes, claims, boundaries).
#include <gtest/gtest.h>

#include "rules/match/matcher.hpp"
#include "rules/sql/parser.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace claimguard::rules::match {
namespace {

struct match_case {
    const char* name;
    std::string_view sql;
    std::vector<std::string> facts;
    std::optional<std::string_view> database = std::nullopt;
    sql::lexer_options options = {};
};

const match_case read_cases[] = {
    {"plain", "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"placeholder", "SELECT remain FROM coupon_stock WHERE campaign_id = ?",
     {"read coupon_stock table='coupon_stock' key=[?0] pos=0 label=remain lock=none"}},
    {"position_and_alias", "SELECT id, remain AS r FROM coupon_stock WHERE campaign_id = 7 FOR UPDATE",
     {"read coupon_stock table='coupon_stock' key=[7] pos=1 label=r lock=for_update"}},
    {"star", "SELECT * FROM coupon_stock WHERE campaign_id = 7",
     {"read coupon_stock table='coupon_stock' key=[7] pos=- label=remain lock=none"}},
    {"column_after_star", "SELECT s.*, remain FROM coupon_stock s WHERE campaign_id = 7",
     {"read coupon_stock table='coupon_stock s' alias=s key=[7] pos=- label=remain lock=none"}},
    {"table_alias", "SELECT s.remain FROM coupon_stock s WHERE s.campaign_id = ?",
     {"read coupon_stock table='coupon_stock s' alias=s key=[?0] pos=0 label=remain lock=none"}},
    {"qualified_by_table_name", "SELECT coupon_stock.remain FROM coupon_stock WHERE coupon_stock.campaign_id = 7",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"foreign_qualifier_is_not_the_counter", "SELECT x.remain FROM coupon_stock s WHERE s.campaign_id = 7", {}},
    {"foreign_qualifier_is_not_the_key", "SELECT remain FROM coupon_stock s WHERE x.campaign_id = 7", {}},
    {"no_key", "SELECT remain FROM coupon_stock WHERE id = 3", {}},
    {"no_where", "SELECT remain FROM coupon_stock", {}},
    {"in_single_value", "SELECT remain FROM coupon_stock WHERE campaign_id IN (7)",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"in_several_values", "SELECT remain FROM coupon_stock WHERE campaign_id IN (7, 8)", {}},
    {"range_is_not_a_key", "SELECT remain FROM coupon_stock WHERE campaign_id > 7", {}},
    {"no_counter", "SELECT id FROM coupon_stock WHERE campaign_id = 7", {}},
    {"counter_in_expression_only", "SELECT remain - 1 FROM coupon_stock WHERE campaign_id = 7", {}},
    {"reversed_key", "SELECT remain FROM coupon_stock WHERE 7 = campaign_id",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"null_safe_key", "SELECT remain FROM coupon_stock WHERE campaign_id <=> 7",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"null_key", "SELECT remain FROM coupon_stock WHERE campaign_id = NULL", {}},
    {"comment_inside_literal", "SELECT remain FROM coupon_stock WHERE campaign_id = - /* x */ 7", {}},
    {"other_table", "SELECT remain FROM coupon_stock_old WHERE campaign_id = 7", {}},
    {"upper_case", "SELECT REMAIN FROM COUPON_STOCK WHERE CAMPAIGN_ID = 7",
     {"read coupon_stock table='COUPON_STOCK' key=[7] pos=0 label=REMAIN lock=none"}},
    {"backticks", "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 7",
     {"read coupon_stock table='`coupon_stock`' key=[7] pos=0 label=`remain` lock=none"}},
    {"extra_conditions", "SELECT remain FROM coupon_stock WHERE campaign_id = 7 AND status = 1",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=none"}},
    {"share_mode", "SELECT remain FROM coupon_stock WHERE campaign_id = 7 LOCK IN SHARE MODE",
     {"read coupon_stock table='coupon_stock' key=[7] pos=0 label=remain lock=share_mode"}},
    {"mybatis_1_eq_1", "select remain from coupon_stock where 1=1 and campaign_id = ?",
     {"read coupon_stock table='coupon_stock' key=[?0] pos=0 label=remain lock=none"}},
    {"string_key", "SELECT remain FROM coupon_stock WHERE campaign_id = 'spring-7'",
     {"read coupon_stock table='coupon_stock' key=['spring-7'] pos=0 label=remain lock=none"}},
    {"schema_rule", "SELECT qty FROM shop.inventory WHERE sku = 'A' AND warehouse = 2",
     {"read inventory table='shop.inventory' schema=shop key=['A',2] pos=0 label=qty lock=none"}},
    {"schema_rule_other_schema", "SELECT qty FROM other.inventory WHERE sku = 'A' AND warehouse = 2", {}},
    {"schema_rule_unqualified_unknown_db", "SELECT qty FROM inventory WHERE warehouse = 2 AND sku = 'A'",
     {"read inventory table='inventory' key=['A',2] pos=0 label=qty lock=none"}},
    {"schema_rule_unqualified_in_shop", "SELECT qty FROM inventory WHERE sku = 'A' AND warehouse = 2",
     {"read inventory table='inventory' key=['A',2] pos=0 label=qty lock=none"}, "shop"},
    {"schema_rule_unqualified_elsewhere", "SELECT qty FROM inventory WHERE sku = 'A' AND warehouse = 2", {}, "other"},
    {"schema_rule_missing_key_column", "SELECT qty FROM shop.inventory WHERE sku = 'A'", {}},
    {"schema_rule_backticks", "SELECT `qty` FROM `shop`.`inventory` WHERE `sku` = ? AND `warehouse` = ?",
     {"read inventory table='`shop`.`inventory`' schema=`shop` key=[?0,?1] pos=0 label=`qty` lock=none"}},
    {"claim_table_read", "SELECT * FROM coupon_order WHERE user_id = 1", {}},
    {"ansi_quoted_names", "SELECT \"remain\" FROM \"coupon_stock\" WHERE \"campaign_id\" = 7",
     {"read coupon_stock table='\"coupon_stock\"' key=[7] pos=0 label=\"remain\" lock=none"}, std::nullopt,
     [] { sql::lexer_options o; o.ansi_quotes = true; return o; }()},
};

const match_case write_cases[] = {
    {"incident", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=99 at=0 version=-"}},
    {"prepared", "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?",
     {"write coupon_stock table='coupon_stock' key=[?1] value=?0 at=0 version=-"}},
    {"with_version", "UPDATE coupon_stock SET remain = 99, version = 4 WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=99 at=0 version=1"}},
    {"version_first", "UPDATE coupon_stock SET version = version + 1, remain = 99 WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=99 at=1 version=0"}},
    {"compare_and_set", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND remain = 100",
     {"write coupon_stock table='coupon_stock' key=[7] extra value=99 expected=100 at=0 version=-"}},
    {"partial_key", "UPDATE coupon_stock SET remain = 99 WHERE id = 3",
     {"write coupon_stock table='coupon_stock' key=[-] partial extra value=99 at=0 version=-"}},
    {"no_where", "UPDATE coupon_stock SET remain = 0",
     {"write coupon_stock table='coupon_stock' key=[-] partial value=0 at=0 version=-"}},
    {"alias", "UPDATE coupon_stock s SET s.remain = 99 WHERE s.campaign_id = 7",
     {"write coupon_stock table='coupon_stock s' alias=s key=[7] value=99 at=0 version=-"}},
    {"string_value", "UPDATE coupon_stock SET remain = '99' WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value='99' at=0 version=-"}},
    {"other_assignments", "UPDATE coupon_stock SET updated_at = NOW(), remain = 99 WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=99 at=1 version=-"}},
    {"null_value", "UPDATE coupon_stock SET remain = NULL WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=NULL at=0 version=-"}},
    {"default_value", "UPDATE coupon_stock SET remain = DEFAULT WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=DEFAULT at=0 version=-"}},
    {"expression_value", "UPDATE coupon_stock SET remain = GREATEST(remain - 1, 0) WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=expr(GREATEST(remain - 1, 0)) at=0 version=-"}},
    {"assigned_twice", "UPDATE coupon_stock SET remain = 1, remain = 2 WHERE campaign_id = 7", {"unmodeled coupon_stock"}},
    {"other_column_base", "UPDATE coupon_stock SET remain = total - 1 WHERE campaign_id = 7",
     {"write coupon_stock table='coupon_stock' key=[7] value=expr(1) at=0 version=-"}},
    {"counter_untouched", "UPDATE coupon_stock SET status = 0 WHERE campaign_id = 7", {}},
    {"schema_rule", "UPDATE shop.inventory SET qty = 10 WHERE sku = 'A' AND warehouse = 2",
     {"write inventory table='shop.inventory' schema=shop key=['A',2] value=10 at=0 version=-"}},
    {"claim_table_update", "UPDATE coupon_order SET status = 1 WHERE user_id = 1", {}},
    {"mybatis_plus_lock", "UPDATE coupon_stock SET remain=?, version=? WHERE campaign_id=? AND version=?",
     {"write coupon_stock table='coupon_stock' key=[?2] extra value=?0 at=0 version=1"}},
};

const match_case change_cases[] = {
    {"unguarded", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    {"guard_gt_zero", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain > 0",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=sufficient >0 at=0 version=-"}},
    {"guard_ge_one", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=sufficient >=1 at=0 version=-"}},
    {"guard_too_weak", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 7 AND remain > 0",
     {"change coupon_stock table='coupon_stock' key=[7] -2 delta=-2 guard=insufficient >0 at=0 version=-"}},
    {"guard_enough_for_two", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 7 AND remain >= 2",
     {"change coupon_stock table='coupon_stock' key=[7] -2 delta=-2 guard=sufficient >=2 at=0 version=-"}},
    {"strongest_guard_wins", "UPDATE coupon_stock SET remain = remain - 2 WHERE remain > 0 AND campaign_id = 7 AND remain >= 5",
     {"change coupon_stock table='coupon_stock' key=[7] -2 delta=-2 guard=sufficient >=5 at=0 version=-"}},
    {"mirrored_guard", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND 0 < remain",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=sufficient >0 at=0 version=-"}},
    {"upper_bound_is_not_a_guard", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain < 100",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    {"equality_guard", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain = 5",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=sufficient >=5 at=0 version=-"}},
    {"placeholders", "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain >= ?",
     {"change coupon_stock table='coupon_stock' key=[?1] -?0 delta=- guard=unknown >=?2 at=0 version=-"}},
    {"placeholder_amount_unguarded", "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?",
     {"change coupon_stock table='coupon_stock' key=[?1] -?0 delta=- guard=none at=0 version=-"}},
    {"placeholder_guard", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain > ?",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=unknown >?0 at=0 version=-"}},
    {"increment", "UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] +1 delta=1 guard=none at=0 version=-"}},
    {"minus_negative_is_increment", "UPDATE coupon_stock SET remain = remain - -1 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] --1 delta=1 guard=none at=0 version=-"}},
    {"minus_minus_without_space", "UPDATE coupon_stock SET remain = remain--1 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] --1 delta=1 guard=none at=0 version=-"}},
    {"plus_negative_is_decrement", "UPDATE coupon_stock SET remain = remain + -2 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] +-2 delta=-2 guard=none at=0 version=-"}},
    {"alias", "UPDATE coupon_stock AS s SET s.remain = s.remain - 1 WHERE s.campaign_id = ?",
     {"change coupon_stock table='coupon_stock AS s' alias=s key=[?0] -1 delta=-1 guard=none at=0 version=-"}},
    {"with_version", "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=none at=0 version=1"}},
    {"floor_too_weak", "UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2 AND qty > 0",
     {"change inventory table='shop.inventory' schema=shop key=['A',2] -1 delta=-1 guard=insufficient >0 at=0 version=-"}},
    {"floor_respected", "UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2 AND qty >= 6",
     {"change inventory table='shop.inventory' schema=shop key=['A',2] -1 delta=-1 guard=sufficient >=6 at=0 version=-"}},
    {"decimal_amount", "UPDATE coupon_stock SET remain = remain - 1.5 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] -1.5 delta=- guard=none at=0 version=-"}},
    {"whole_decimal_amount", "UPDATE coupon_stock SET remain = remain - 2.0 WHERE campaign_id = 7",
     {"change coupon_stock table='coupon_stock' key=[7] -2.0 delta=-2 guard=none at=0 version=-"}},
    {"guard_on_other_column", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND total > 0",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    {"no_where", "UPDATE coupon_stock SET remain = remain - 1",
     {"change coupon_stock table='coupon_stock' key=[-] partial -1 delta=-1 guard=none at=0 version=-"}},
    {"limit_kept", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 LIMIT 1",
     {"change coupon_stock table='coupon_stock' key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    // Guards in arithmetic forms (the P12 and MyBatis' `remain - #{num} >= 0`).
    {"guard_minus_ge_zero", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1 AND remain - 2 >= 0",
     {"change coupon_stock table='coupon_stock' key=[1] -2 delta=-2 guard=sufficient bounds=[>=0+2] at=0 version=-"}},
    {"guard_minus_ge_zero_too_weak", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1 AND remain - 1 >= 0",
     {"change coupon_stock table='coupon_stock' key=[1] -2 delta=-2 guard=insufficient bounds=[>=0+1] at=0 version=-"}},
    {"guard_minus_gt_zero", "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1 AND remain - 1 > 0",
     {"change coupon_stock table='coupon_stock' key=[1] -2 delta=-2 guard=sufficient bounds=[>0+1] at=0 version=-"}},
    {"guard_plus_ge", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain + 1 >= 2",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=sufficient bounds=[>=2-1] at=0 version=-"}},
    {"guard_plus_too_weak", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain + 1 >= 1",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=insufficient bounds=[>=1-1] at=0 version=-"}},
    {"guard_value_first_minus", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND 0 <= remain - 1",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=sufficient bounds=[>=0+1] at=0 version=-"}},
    {"guard_value_first", "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 1 AND 3 <= remain",
     {"change coupon_stock table='coupon_stock' key=[1] -3 delta=-3 guard=sufficient >=3 at=0 version=-"}},
    {"guard_gt_n_minus_one", "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 1 AND remain > 3 - 1",
     {"change coupon_stock table='coupon_stock' key=[1] -3 delta=-3 guard=sufficient bounds=[>3-1] at=0 version=-"}},
    {"guard_ge_n_plus_zero", "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 1 AND remain >= 3 + 0",
     {"change coupon_stock table='coupon_stock' key=[1] -3 delta=-3 guard=sufficient bounds=[>=3+0] at=0 version=-"}},
    {"guard_overflow_proves_nothing",
     "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain - 1 >= 9223372036854775807",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=none bounds=[>=9223372036854775807+1] at=0 "
      "version=-"}},
    {"guard_decimal_term_proves_nothing", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain - 0.5 >= 0",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=none bounds=[>=0+0.5] at=0 version=-"}},
    {"guard_upper_arithmetic_is_no_guard", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain - 1 <= 5",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=none at=0 version=-"}},
    {"guard_mybatis_placeholders", "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0",
     {"change coupon_stock table='coupon_stock' key=[?1] -?0 delta=- guard=unknown bounds=[>=0+?2] at=0 version=-"}},
    {"guard_placeholder_bound_literal_amount", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain - ? >= 0",
     {"change coupon_stock table='coupon_stock' key=[1] -1 delta=-1 guard=unknown bounds=[>=0+?0] at=0 version=-"}},
    {"guard_floor_arithmetic", "UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2 AND qty - 1 >= 5",
     {"change inventory table='shop.inventory' schema=shop key=['A',2] -1 delta=-1 guard=sufficient bounds=[>=5+1] at=0 "
      "version=-"}},
    {"guard_floor_arithmetic_too_weak", "UPDATE shop.inventory SET qty = qty - 1 WHERE sku = 'A' AND warehouse = 2 AND qty - 1 >= 0",
     {"change inventory table='shop.inventory' schema=shop key=['A',2] -1 delta=-1 guard=insufficient bounds=[>=0+1] at=0 "
      "version=-"}},
    {"key_arithmetic_is_no_key", "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id + 0 = 7 AND remain > 0",
     {"change coupon_stock table='coupon_stock' key=[-] partial -1 delta=-1 guard=sufficient >0 at=0 version=-"}},
    // Multi-table UPDATE: the stock table found among the joined ones, the guard on its alias.
    {"join_guarded", "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
                     "WHERE s.campaign_id = 7 AND s.remain > 0 AND c.status = 'ON'",
     {"change coupon_stock table='coupon_stock s' alias=s key=[7] -1 delta=-1 guard=sufficient >0 at=0 version=-"}},
    {"join_guard_in_on", "UPDATE campaign c JOIN coupon_stock s ON c.id = s.campaign_id AND s.remain >= 1 "
                         "SET s.remain = s.remain - 1 WHERE s.campaign_id = 7",
     {"change coupon_stock table='coupon_stock s' alias=s key=[7] -1 delta=-1 guard=sufficient >=1 at=0 version=-"}},
    {"join_unguarded", "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
                       "WHERE s.campaign_id = 7 AND c.status = 'ON'",
     {"change coupon_stock table='coupon_stock s' alias=s key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    {"join_other_tables_counter_is_no_guard", "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id "
                                              "SET s.remain = s.remain - 1 WHERE s.campaign_id = 7 AND c.remain > 0",
     {"change coupon_stock table='coupon_stock s' alias=s key=[7] -1 delta=-1 guard=none at=0 version=-"}},
    {"join_key_only_by_join_condition", "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id "
                                        "SET s.remain = s.remain - 1 WHERE c.id = 7 AND s.remain > 0",
     {"change coupon_stock table='coupon_stock s' alias=s key=[-] partial -1 delta=-1 guard=sufficient >0 at=0 version=-"}},
    {"comma_join", "UPDATE coupon_stock s, campaign c SET s.remain = s.remain - 1, c.sold = c.sold + 1 "
                   "WHERE s.campaign_id = 7 AND c.id = s.campaign_id AND s.remain - 1 >= 0",
     {"change coupon_stock table='coupon_stock s' alias=s key=[7] -1 delta=-1 guard=sufficient bounds=[>=0+1] at=0 "
      "version=-"}},
    {"join_absolute_write", "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = 5 "
                            "WHERE s.campaign_id = 7",
     {"write coupon_stock table='coupon_stock s' alias=s key=[7] extra value=5 at=0 version=-"}},
};

const match_case claim_cases[] = {
    {"plain", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"with_request_id", "INSERT INTO coupon_order (user_id, campaign_id, request_id) VALUES (42, 7, 'r-1')",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[42,7] key='r-1' stock=[7]}]"}},
    {"rows_and_placeholders", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?), (43, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[?0,?1] key=- stock=[?1]} {idem=[43,7] key=- stock=[7]}]"}},
    {"column_order", "INSERT INTO coupon_order (campaign_id, note, user_id) VALUES (7, 'x', 42)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"missing_column", "INSERT INTO coupon_order (campaign_id) VALUES (7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[-,7] key=- stock=[7]}]"}},
    {"no_column_list", "INSERT INTO coupon_order VALUES (1, 42, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' no_columns rows=[{idem=[-,-] key=- stock=[-]}]"}},
    {"set_form", "INSERT INTO coupon_order SET user_id = 42, campaign_id = ?",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[42,?0] key=- stock=[?0]}]"}},
    {"ignore", "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' ignore rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"replace", "REPLACE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' replace rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"on_duplicate", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7) ON DUPLICATE KEY UPDATE n = n + 1",
     {"claim coupon_order stock=coupon_stock table='coupon_order' on_dup rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"expression_value", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (UUID(), 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[expr(UUID()),7] key=- stock=[7]}]"}},
    {"null_and_default", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (NULL, DEFAULT)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[NULL,DEFAULT] key=- stock=[DEFAULT]}]"}},
    {"mapped_columns", "INSERT INTO shop.orders (order_no, item_sku, wh) VALUES ('o-1', 'A', 2)",
     {"claim shop_order stock=inventory table='shop.orders' schema=shop rows=[{idem=['o-1'] stock=['A',2]}]"}},
    {"mapped_columns_unqualified_in_shop", "INSERT INTO orders (wh, item_sku, order_no) VALUES (2, 'A', 'o-1')",
     {"claim shop_order stock=inventory table='orders' rows=[{idem=['o-1'] stock=['A',2]}]"}, "shop"},
    {"mapped_columns_unqualified_elsewhere", "INSERT INTO orders (order_no) VALUES ('o-1')", {}, "other"},
    {"stock_table_insert", "INSERT INTO coupon_stock (campaign_id, remain) VALUES (8, 100)", {}},
    {"case_and_backticks", "insert into `COUPON_ORDER` (`USER_ID`, `Campaign_Id`) values (42, 7)",
     {"claim coupon_order stock=coupon_stock table='`COUPON_ORDER`' rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"qualified_columns", "INSERT INTO coupon_order (coupon_order.user_id, campaign_id) VALUES (42, 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[42,7] key=- stock=[7]}]"}},
    {"escaped_string_value", "INSERT INTO coupon_order (user_id, campaign_id) VALUES ('a\\'b', 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=['a\\'b',7] key=- stock=[7]}]"}},
    {"introducer_value", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (_utf8mb4'u1', 7)",
     {"claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[_utf8mb4'u1',7] key=- stock=[7]}]"}},
};

const match_case session_cases[] = {
    {"begin", "BEGIN", {"txn begin"}},
    {"start_read_only", "START TRANSACTION READ ONLY", {"txn begin read_only"}},
    {"commit_chain", "COMMIT AND CHAIN", {"txn commit chain"}},
    {"commit_no_chain", "COMMIT AND NO CHAIN", {"txn commit"}},
    {"rollback_release", "ROLLBACK RELEASE", {"txn rollback release"}},
    {"savepoint", "SAVEPOINT a", {"txn savepoint"}},
    {"rollback_to", "ROLLBACK TO a", {"txn rollback_to"}},
    {"release_savepoint", "RELEASE SAVEPOINT a", {"txn release"}},
    {"autocommit_0", "SET autocommit=0", {"txn autocommit_off"}},
    {"autocommit_1", "SET autocommit = 1", {"txn autocommit_on"}},
    {"autocommit_on_word", "SET autocommit = ON", {"txn autocommit_on"}},
    {"autocommit_off_string", "SET autocommit = 'OFF'", {"txn autocommit_off"}},
    {"autocommit_true", "SET autocommit = TRUE", {"txn autocommit_on"}},
    {"autocommit_session_prefix", "SET @@session.autocommit=0", {"txn autocommit_off"}},
    {"autocommit_variable", "SET autocommit = @x", {"txn autocommit_unknown"}},
    {"autocommit_placeholder", "SET autocommit = ?", {"txn autocommit_unknown"}},
    {"autocommit_two", "SET autocommit = 2", {"txn autocommit_unknown"}},
    {"autocommit_global_ignored", "SET GLOBAL autocommit = 0", {}},
    {"sql_mode_ansi_quotes", "SET sql_mode = 'ANSI_QUOTES'", {"session sql_mode ansi=1 nbe=0"}},
    {"sql_mode_nbe", "SET @@sql_mode = 'NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES'", {"session sql_mode ansi=0 nbe=1"}},
    {"sql_mode_concat", "SET sql_mode = concat(@@sql_mode, ',ANSI_QUOTES')", {"session sql_mode unknown"}},
    {"sql_mode_default", "SET SESSION sql_mode = DEFAULT", {"session sql_mode unknown"}},
    {"sql_mode_global_ignored", "SET GLOBAL sql_mode = 'ANSI'", {}},
    {"names_gbk", "SET NAMES gbk", {"session charset gbk"}},
    {"names_quoted_sjis", "SET NAMES 'sjis'", {"session charset sjis"}},
    {"names_collate", "SET NAMES big5 COLLATE big5_bin", {"session charset big5"}},
    {"names_utf8mb4", "SET NAMES utf8mb4", {"session charset utf8mb4/latin1 (no ASCII trail bytes)"}},
    {"names_default", "SET NAMES DEFAULT", {"session charset unknown"}},
    {"names_unknown", "SET NAMES klingon", {"session charset unknown"}},
    {"character_set", "SET CHARACTER SET cp932", {"session charset cp932"}},
    {"character_set_client", "SET character_set_client = gb18030", {"session charset gb18030"}},
    {"driver_setup", "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES'), session_track_schema=1",
     {"txn autocommit_on", "session sql_mode unknown"}},
    {"use", "USE shop", {"session database shop"}},
    {"use_backticks", "USE `shop`", {"session database `shop`"}},
    {"user_variable", "SET @x = 1", {}},
    {"versioned_names", "/*!40101 SET NAMES gbk */", {"session charset gbk"}},
};

const match_case unmodeled_cases[] = {
    {"join_on_stock_is_a_read", "SELECT remain FROM coupon_stock s JOIN x ON x.id = s.id", {}},
    // A join is read now: without an equality on every key column it is a write the engine refuses
    // (no_full_key), as decide_test checks.
    {"join_on_stock_update", "UPDATE coupon_stock s JOIN x ON x.id = s.id SET remain = 1",
     {"write coupon_stock table='coupon_stock s' alias=s key=[-] partial extra value=1 at=0 version=-"}},
    {"join_of_two_stock_tables", "UPDATE coupon_stock s JOIN inventory i ON i.wh = s.campaign_id "
                                 "SET s.remain = s.remain - 1 WHERE s.campaign_id = 7 AND s.remain > 0",
     {"unmodeled coupon_stock", "unmodeled inventory"}},
    {"self_join", "UPDATE coupon_stock s JOIN coupon_stock t ON t.campaign_id = s.campaign_id "
                  "SET s.remain = s.remain - 1 WHERE s.campaign_id = 7 AND s.remain > 0",
     {"unmodeled coupon_stock"}},
    {"join_alias_named_like_the_stock", "UPDATE coupon_stock s JOIN campaign coupon_stock ON coupon_stock.id = "
                                        "s.campaign_id SET s.remain = s.remain - 1 WHERE s.campaign_id = 7 AND "
                                        "coupon_stock.remain > 0",
     {"unmodeled coupon_stock"}},
    {"left_join_is_not_ours", "UPDATE coupon_stock s LEFT JOIN campaign c ON c.id = s.campaign_id AND s.remain > 0 "
                              "SET s.remain = s.remain - 1 WHERE s.campaign_id = 7",
     {"unmodeled coupon_stock"}},
    {"or_on_stock", "UPDATE coupon_stock SET remain = 1 WHERE campaign_id = 7 OR 1 = 1", {"unmodeled coupon_stock"}},
    {"insert_select_claim", "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, 7", {"unmodeled coupon_order"}},
    {"several_statements", "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7; INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
     {"unmodeled coupon_stock", "unmodeled coupon_order"}},
    {"delete_is_unmodeled", "DELETE FROM coupon_stock WHERE campaign_id = 7", {"unmodeled coupon_stock"}},
    {"unrelated_join", "SELECT a FROM x JOIN y ON 1", {}},
    {"lex_error_on_stock", "UPDATE coupon_stock SET remain = 'x WHERE campaign_id = 7", {"unmodeled coupon_stock"}},
};

// DELETE of claim rows (cancellations): what the WHERE pins. A DELETE of a stock row, or of every
// claim row, is unmodeled (the codes: match_delete.unmodeled_codes).
const match_case delete_cases[] = {
    {"by_idempotency",
     "DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 1",
     {"delete coupon_order stock=coupon_stock table='coupon_order' idem=[1,1] stock_key=[1]"}},
    {"placeholders_reversed",
     "DELETE FROM coupon_order WHERE campaign_id = ? AND ? = user_id",
     {"delete coupon_order stock=coupon_stock table='coupon_order' idem=[?1,?0] stock_key=[?0]"}},
    {"by_id",
     "DELETE FROM coupon_order WHERE id = 42",
     {"delete coupon_order stock=coupon_stock table='coupon_order' idem=[-,-] partial stock_key=[-] unpinned extra"}},
    {"by_id_and_campaign",
     "DELETE FROM coupon_order WHERE id = 42 AND campaign_id = 7",
     {"delete coupon_order stock=coupon_stock table='coupon_order' idem=[-,7] partial stock_key=[7] extra"}},
    {"alias_and_limit",
     "DELETE FROM coupon_order o WHERE o.user_id = 1 AND o.campaign_id = 7 LIMIT 1",
     {"delete coupon_order stock=coupon_stock table='coupon_order o' alias=o idem=[1,7] stock_key=[7] extra"}},
    {"mapped_stock_key",
     "DELETE FROM shop.orders WHERE order_no = 'A1' AND item_sku = 3 AND wh = 'w'",
     {"delete shop_order stock=inventory table='shop.orders' schema=shop idem=['A1'] stock_key=[3,'w']"}},
    {"in_list_is_not_a_pin",
     "DELETE FROM coupon_order WHERE user_id IN (1, 2) AND campaign_id = 7",
     {"delete coupon_order stock=coupon_stock table='coupon_order' idem=[-,7] partial stock_key=[7]"}},
    {"other_table", "DELETE FROM coupon_order_archive WHERE user_id = 1", {}},
    {"stock_row", "DELETE FROM coupon_stock WHERE campaign_id = 7", {"unmodeled coupon_stock"}},
    {"no_where", "DELETE FROM coupon_order", {"unmodeled coupon_order"}},
    {"only_constants", "DELETE FROM coupon_order WHERE 1 = 1", {"unmodeled coupon_order"}},
    {"join",
     "DELETE o FROM coupon_order o JOIN users u ON u.id = o.user_id WHERE u.id = 1",
     {"unmodeled coupon_order"}},
    {"subquery", "DELETE FROM coupon_order WHERE user_id IN (SELECT id FROM users)", {"unmodeled coupon_order"}},
};

// The metric label each unmodeled DELETE gets: a DBA reading claimguard_unmodeled_total sees why.
TEST(match_delete, unmodeled_codes) {
    static const rule_set rules = test::make_rules();
    static const rule_index index(rules);
    const std::pair<std::string_view, std::string_view> cases[] = {
        {"DELETE FROM coupon_stock WHERE campaign_id = 7", "stock_row_delete"},
        {"DELETE FROM coupon_order", "delete_without_where"},
        {"DELETE FROM coupon_order WHERE 1 = 1", "delete_without_where"},
        {"DELETE o FROM coupon_order o JOIN users u ON u.id = o.user_id", "unsupported_syntax"},
        {"DELETE FROM coupon_order WHERE user_id IN (SELECT id FROM users)", "unsupported_syntax"},
        {"DELETE FROM coupon_order WHERE user_id = 1 OR campaign_id = 1", "unsupported_syntax"},
        {"DELETE FROM coupon_order WHERE id = 1; SELECT 1", "several_statements"},
    };
    for (const auto& [text, code] : cases) {
        const auto st = sql::parse(text, {});
        const auto result = match(st, index);
        ASSERT_EQ(result.facts.size(), 1u) << text;
        const auto* u = std::get_if<unmodeled>(&result.facts[0]);
        ASSERT_NE(u, nullptr) << text;
        EXPECT_EQ(u->code, code) << text;
    }
}

class match_table : public ::testing::TestWithParam<match_case> {};

TEST_P(match_table, facts) {
    const auto& c = GetParam();
    static const rule_set rules = test::make_rules();
    static const rule_index index(rules);
    const auto st = sql::parse(c.sql, c.options);
    match_context ctx;
    ctx.current_database = c.database;
    const auto result = match(st, index, ctx);
    std::vector<std::string> got;
    for (const auto& f : result.facts) got.push_back(test::render(f));
    EXPECT_EQ(got, c.facts) << c.sql;
    // The pre-filter never hides a statement that has facts.
    if (!got.empty()) {
        EXPECT_NE(index.filter().classify(c.sql), sql::prefilter_verdict::irrelevant) << c.sql;
    }
}

auto case_name = [](const auto& info) { return std::string(info.param.name); };

INSTANTIATE_TEST_SUITE_P(read, match_table, ::testing::ValuesIn(read_cases), case_name);
INSTANTIATE_TEST_SUITE_P(write, match_table, ::testing::ValuesIn(write_cases), case_name);
INSTANTIATE_TEST_SUITE_P(change, match_table, ::testing::ValuesIn(change_cases), case_name);
INSTANTIATE_TEST_SUITE_P(claim, match_table, ::testing::ValuesIn(claim_cases), case_name);
INSTANTIATE_TEST_SUITE_P(session, match_table, ::testing::ValuesIn(session_cases), case_name);
INSTANTIATE_TEST_SUITE_P(delete_, match_table, ::testing::ValuesIn(delete_cases), case_name);
INSTANTIATE_TEST_SUITE_P(unmodeled, match_table, ::testing::ValuesIn(unmodeled_cases), case_name);

TEST(matcher, literal_facts_keep_decoded_values) {
    const rule_set rules = test::make_rules();
    const rule_index index(rules);
    const auto st = sql::parse("UPDATE coupon_stock SET remain = 0099 WHERE campaign_id = '7'", {});
    const auto result = match(st, index);
    ASSERT_EQ(result.facts.size(), 1u);
    const auto& w = std::get<counter_write>(result.facts[0]);
    EXPECT_EQ(w.value.text, "0099");
    EXPECT_EQ(w.value.decoded.integer, 99);
    EXPECT_EQ(w.key[0].decoded.kind, sql::literal_kind::string);
    EXPECT_EQ(w.key[0].decoded.bytes, "7");
}

// Reads plain enough for the read cache: plain columns, no modifiers, the key and nothing more in
// the WHERE clause, never the version column (it changes with each decrement).
TEST(matcher, plain_counter_reads) {
    const rule_set rules = test::make_rules();
    const rule_index index(rules);
    const std::pair<std::string_view, bool> cases[] = {
        {"SELECT remain FROM coupon_stock WHERE campaign_id = 7", true},
        {"SELECT campaign_id, remain FROM coupon_stock WHERE campaign_id = ?", true},
        {"select s.remain AS r FROM coupon_stock s WHERE s.campaign_id = '7' LIMIT 1", true},
        {"SELECT remain FROM coupon_stock WHERE campaign_id = 7 FOR UPDATE", true},  // the lock says no
        {"SELECT remain, version FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT * FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT remain, NOW() FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT remain, remain + 1 FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT DISTINCT remain FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT SQL_CALC_FOUND_ROWS remain FROM coupon_stock WHERE campaign_id = 7", false},
        {"SELECT remain FROM coupon_stock WHERE campaign_id = 7 AND remain > 0", false},
        {"SELECT remain FROM coupon_stock WHERE 1 = 1 AND campaign_id = 7", false},
    };
    for (const auto& [sql, plain] : cases) {
        SCOPED_TRACE(sql);
        const auto st = sql::parse(sql, {});
        const auto result = match(st, index);
        ASSERT_EQ(result.facts.size(), 1u);
        EXPECT_EQ(std::get<counter_read>(result.facts[0]).plain, plain);
    }
}

// INSERT without a column list: the table's columns (the session reads them once from
// information_schema) place the values; without them, or with a different width, unknown.
TEST(matcher, insert_without_column_list_uses_the_table_columns) {
    const rule_set rules = test::make_rules();
    const rule_index index(rules);
    static const std::vector<std::string> columns{"id", "user_id", "campaign_id", "created_at"};
    match_context ctx;
    ctx.table_columns = [](const void*, const claim_rule& r,
                           std::string_view schema) -> const std::vector<std::string>* {
        return r.name == "coupon_order" && schema.empty() ? &columns : nullptr;
    };
    const auto st = sql::parse("INSERT INTO coupon_order VALUES (NULL, 42, '7', NOW())", {});
    const auto with = match(st, index, ctx);
    ASSERT_EQ(with.facts.size(), 1u);
    const auto& c = std::get<claim_insert>(with.facts[0]);
    EXPECT_TRUE(c.columns_known);
    ASSERT_EQ(c.rows.size(), 1u);
    EXPECT_EQ(c.rows[0].idempotency[0].text, "42");
    EXPECT_EQ(c.rows[0].idempotency[1].text, "'7'");
    EXPECT_EQ(c.rows[0].stock_key[0].text, "'7'");

    const auto narrow = sql::parse("INSERT INTO coupon_order VALUES (NULL, 42, 7)", {});
    const auto without = match(narrow, index, ctx);
    ASSERT_EQ(without.facts.size(), 1u);
    EXPECT_FALSE(std::get<claim_insert>(without.facts[0]).columns_known);
    EXPECT_FALSE(std::get<claim_insert>(match(st, index).facts[0]).columns_known);
    // A qualified table's columns are asked with its qualifier as written (another database's table).
    ctx.table_columns = [](const void*, const claim_rule&, std::string_view schema) -> const std::vector<std::string>* {
        return schema == "`shop`" ? &columns : nullptr;
    };
    const auto qualified = sql::parse("INSERT INTO `shop`.coupon_order VALUES (NULL, 42, 7, NOW())", {});
    EXPECT_TRUE(std::get<claim_insert>(match(qualified, index, ctx).facts[0]).columns_known);
    EXPECT_FALSE(std::get<claim_insert>(match(st, index, ctx).facts[0]).columns_known);
}

// The unmodeled facts of a statement, as "rule code" strings, and the first one's reason.
struct unmodeled_seen {
    std::vector<std::string> codes;
    std::string first_reason;
};

unmodeled_seen unmodeled_of(std::string_view sql, std::optional<std::string_view> database = std::nullopt) {
    static const rule_set rules = test::make_rules();
    static const rule_index index(rules);
    match_context ctx;
    ctx.current_database = database;
    const auto result = match(sql::parse(sql, {}), index, ctx);
    unmodeled_seen out;
    for (const auto& f : result.facts) {
        const auto* u = std::get_if<unmodeled>(&f);
        if (u == nullptr) {
            out.codes.push_back("not unmodeled: " + test::render(f));
            continue;
        }
        out.codes.push_back((u->stock ? u->stock->name : u->claim->name) + " " + std::string(u->code));
        if (out.first_reason.empty()) out.first_reason = u->reason;
    }
    return out;
}

TEST(matcher, insert_select_has_its_own_code_and_advice) {
    for (const char* sql : {
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, 7",
             "INSERT IGNORE INTO coupon_order (user_id, campaign_id) SELECT 1, 7",
             "REPLACE INTO coupon_order (user_id, campaign_id) SELECT 1, 7",
             "INSERT INTO coupon_order (user_id, campaign_id) (SELECT 1, 7)",
             "INSERT INTO coupon_order TABLE old_orders",
             "INSERT INTO coupon_order (user_id, campaign_id) WITH x AS (SELECT 1 AS u) SELECT u, 7 FROM x",
         }) {
        const auto seen = unmodeled_of(sql);
        EXPECT_EQ(seen.codes, std::vector<std::string>{"coupon_order insert_select"}) << sql;
        EXPECT_NE(seen.first_reason.find("INSERT ... VALUES"), std::string::npos) << sql;
        EXPECT_NE(seen.first_reason.find("c = c - 1 WHERE key = ? AND c >= 1"), std::string::npos) << sql;
    }
    // The statement names the stock table too: both rules, the same code and advice.
    const auto seen = unmodeled_of(
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE remain > 0");
    EXPECT_EQ(seen.codes, (std::vector<std::string>{"coupon_stock insert_select", "coupon_order insert_select"}));
    EXPECT_NE(seen.first_reason.find("INSERT ... VALUES"), std::string::npos);
    // Near misses keep their verdicts: a subquery inside VALUES, a plain claim insert.
    EXPECT_EQ(unmodeled_of("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, (SELECT 7))").codes,
              std::vector<std::string>{"coupon_order unsupported_syntax"});
    EXPECT_EQ(unmodeled_of("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)").codes.size(), 1u);
    EXPECT_EQ(unmodeled_of("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)").codes[0].rfind("not", 0),
              0u);
    // An INSERT ... SELECT into a table no rule protects and from none: nothing.
    EXPECT_TRUE(unmodeled_of("INSERT INTO report SELECT * FROM other").codes.empty());
}

// A claim by INSERT ... SELECT from its stock row (issue "Refuse less"): modelled where its meaning is
// certain (one row at most, for the key the WHERE pins), refused with the advice otherwise.
TEST(matcher, insert_select_from_the_stock_row_is_a_claim) {
    static const rule_set rules = test::make_rules();
    static const rule_index index(rules);
    auto facts_of = [&](std::string_view sql) {
        std::vector<std::string> out;
        for (const auto& f : match(sql::parse(sql, {}), index).facts) out.push_back(test::render(f));
        return out;
    };
    const std::string claim_7 =
        "claim coupon_order stock=coupon_stock table='coupon_order' rows=[{idem=[1,7] key=- stock=[7]}]";
    EXPECT_EQ(facts_of("INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock "
                       "WHERE campaign_id = 7 AND remain > 0"),
              std::vector<std::string>{claim_7 + " from_select guarded"});
    // The key's literal in the SELECT list, an alias, the guard as >= 1, IN (one value), no guard at all.
    EXPECT_EQ(facts_of("INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, 7 FROM coupon_stock s "
                       "WHERE s.campaign_id IN (7) AND s.remain >= 1"),
              std::vector<std::string>{claim_7 + " from_select guarded"});
    EXPECT_EQ(facts_of("INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock "
                       "WHERE campaign_id = 7"),
              std::vector<std::string>{claim_7 + " from_select"});
    // IGNORE, placeholders (the key's ? is the WHERE's), a request id, NULL, an arithmetic guard.
    EXPECT_EQ(facts_of("INSERT IGNORE INTO coupon_order (request_id, user_id, campaign_id, note) SELECT ?, ?, "
                       "campaign_id, NULL FROM coupon_stock WHERE campaign_id = ? AND remain - 1 >= 0"),
              std::vector<std::string>{"claim coupon_order stock=coupon_stock table='coupon_order' ignore "
                                       "rows=[{idem=[?1,?2] key=?0 stock=[?2]}] from_select guarded"});
    // Two key columns through consumes' mapping.
    EXPECT_EQ(facts_of("INSERT INTO shop.orders (order_no, item_sku, wh) SELECT 'A-1', sku, warehouse FROM "
                       "shop.inventory WHERE warehouse = 2 AND sku = 'A' AND qty >= 6"),
              std::vector<std::string>{"claim shop_order stock=inventory table='shop.orders' schema=shop "
                                       "rows=[{idem=['A-1'] stock=['A',2]}] from_select guarded"});

    // Everything else keeps the refusal with its advice.
    for (const char* sql : {
             // no key equality, a range on the key, the key twice, a key of NULL
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE remain > 0",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id > 6 AND remain > 0",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND campaign_id = 8",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id <=> NULL",
             // another condition, a bound the take does not imply, a bound with a placeholder, an upper bound
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND version = 3",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND remain > 5",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND remain > ?",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND remain < 100",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 AND 1 = 1",
             // a select item from a non-key column, an expression, a star
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT remain, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1 + 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7",
             "INSERT INTO coupon_order (campaign_id) SELECT * FROM coupon_stock WHERE campaign_id = 7",
             // the claim's stock key is not the row the WHERE pins
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, 8 FROM coupon_stock WHERE campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, ? FROM coupon_stock WHERE campaign_id = ?",
             // ORDER BY, LIMIT, a lock, DISTINCT, a join, GROUP BY, UNION, a subquery
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 ORDER BY campaign_id",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 LIMIT 1",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 FOR UPDATE",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT DISTINCT 1, campaign_id FROM coupon_stock "
             "WHERE campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, s.campaign_id FROM coupon_stock s JOIN "
             "campaign c ON c.id = s.campaign_id WHERE s.campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 GROUP BY campaign_id",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 UNION SELECT 2, 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = (SELECT 7)",
             // ON DUPLICATE KEY UPDATE, REPLACE, no column list, parentheses
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7 ON DUPLICATE KEY UPDATE user_id = 1",
             "REPLACE INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7",
             "INSERT INTO coupon_order SELECT 1, campaign_id FROM coupon_stock WHERE campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) (SELECT 1, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 7)",
             // from another table (a stock table other than the claim's, or none), an idempotency column missing
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM other WHERE campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, 7 FROM shop.inventory WHERE sku = 'A' AND "
             "warehouse = 2",
             "INSERT INTO coupon_order (campaign_id) SELECT campaign_id FROM coupon_stock WHERE campaign_id = 7",
         }) {
        const auto seen = unmodeled_of(sql);
        ASSERT_FALSE(seen.codes.empty()) << sql;
        for (const auto& code : seen.codes) EXPECT_EQ(code.rfind("not unmodeled", 0), std::string::npos) << sql;
        EXPECT_NE(seen.first_reason.find("INSERT ... VALUES"), std::string::npos) << sql;
    }
}

TEST(matcher, counter_from_subquery_has_its_own_code_and_advice) {
    for (const char* sql : {
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM x WHERE campaign_id = 7) "
             "WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = (SELECT n FROM x) WHERE campaign_id = 7",
             "UPDATE coupon_stock s SET s.version = s.version + 1, s.remain = (SELECT n FROM x) WHERE campaign_id = 7",
             "UPDATE coupon_stock SET `remain` = GREATEST(0, (SELECT n FROM x))",
         }) {
        const auto seen = unmodeled_of(sql);
        EXPECT_EQ(seen.codes, std::vector<std::string>{"coupon_stock counter_from_subquery"}) << sql;
        EXPECT_NE(seen.first_reason.find("relative change (UPDATE stock SET c = c - n WHERE key = ? AND c >= n)"),
                  std::string::npos)
            << sql;
    }
    // The statement, the count of one key's claims, is a recompute the engine decides on (absorbed
    // after a claim by INSERT ... SELECT of the connection, refused otherwise: decide.cpp).
    const auto recompute = unmodeled_of(
        "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7) "
        "WHERE campaign_id = 7");
    EXPECT_EQ(recompute.codes, std::vector<std::string>{"not unmodeled: write coupon_stock table='coupon_stock' "
                                                        "key=[7] value=expr() at=0 version=- recomputed "
                                                        "counted=coupon_order[7]"});
    EXPECT_EQ(unmodeled_of("UPDATE coupon_stock SET remain = (SELECT 100 - COUNT(*) FROM coupon_order o WHERE "
                           "o.campaign_id = ?) WHERE campaign_id = ?")
                  .codes,
              std::vector<std::string>{"not unmodeled: write coupon_stock table='coupon_stock' key=[?1] value=expr() "
                                       "at=0 version=- recomputed counted=coupon_order[?0]"});
    // Other recomputes keep the refusal: both rules, the same code (the stock's first).
    for (const char* sql : {
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order) WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7 AND "
             "user_id > 3) WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE user_id = 7) WHERE "
             "campaign_id = 7",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7) WHERE "
             "campaign_id = 7 AND version = 2",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7)",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7) - 1 "
             "WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = 100 - (SELECT SUM(n) FROM coupon_order WHERE campaign_id = 7) WHERE "
             "campaign_id = 7",
             "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 7), "
             "version = 3 WHERE campaign_id = 7",
         }) {
        const auto seen = unmodeled_of(sql);
        EXPECT_EQ(seen.codes, (std::vector<std::string>{"coupon_stock counter_from_subquery",
                                                        "coupon_order counter_from_subquery"}))
            << sql;
    }
    // A schema-qualified stock table, in and out of the current database.
    EXPECT_EQ(unmodeled_of("UPDATE shop.inventory SET qty = (SELECT 1) WHERE sku = 1 AND warehouse = 2").codes,
              std::vector<std::string>{"inventory counter_from_subquery"});
    EXPECT_EQ(unmodeled_of("UPDATE inventory SET qty = (SELECT 1) WHERE sku = 1", "other").codes,
              std::vector<std::string>{"inventory unsupported_syntax"});
    // Near misses keep their verdicts: another column from a subquery, a subquery in WHERE, an
    // arithmetic counter value (an absolute write: a take of the rule's units).
    EXPECT_EQ(unmodeled_of("UPDATE coupon_stock SET note = (SELECT 1) WHERE campaign_id = 7").codes,
              std::vector<std::string>{"coupon_stock unsupported_syntax"});
    EXPECT_EQ(unmodeled_of("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = (SELECT 7)").codes,
              std::vector<std::string>{"coupon_stock unsupported_syntax"});
    EXPECT_EQ(unmodeled_of("UPDATE other SET remain = (SELECT 1 FROM coupon_stock) WHERE campaign_id = 7").codes,
              std::vector<std::string>{"coupon_stock unsupported_syntax"});
    const auto take = unmodeled_of("UPDATE coupon_stock SET remain = 100 - 3 WHERE campaign_id = 7");
    ASSERT_EQ(take.codes.size(), 1u);
    EXPECT_EQ(take.codes[0].rfind("not unmodeled: write", 0), 0u) << take.codes[0];
}

TEST(matcher, facts_point_at_the_rules) {
    const rule_set rules = test::make_rules();
    const rule_index index(rules);
    const auto st = sql::parse("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)", {});
    const auto result = match(st, index);
    ASSERT_EQ(result.facts.size(), 1u);
    const auto& c = std::get<claim_insert>(result.facts[0]);
    EXPECT_EQ(c.rule, &rules.claims[0]);
    EXPECT_EQ(c.stock, &rules.stocks[0]);
}

}  // namespace
}  // namespace claimguard::rules::match
