// engine::decide over real SQL: one statement after a prepared session state, table-driven.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

// The session state before the statement, for campaign `read_key`.
enum class before {
    nothing,
    read,              // the counter was read and answered `counter`
    refused,           // read, then the absolute decrement to counter - 1 was refused
    decremented,       // read, then the absolute decrement to counter - 1 succeeded
};

struct decide_case {
    const char* name;
    variant_id rules = variant_id::coupon;
    before state = before::nothing;
    std::int64_t counter = 100;
    const char* read_key = "7";  // as written in the setup statements
    const char* sql = "";
    std::vector<std::int64_t> params = {};  // bound "?" values, in order
    verdict what = verdict::forward;
    bool unmodeled = false;
    bool observe = false;
    std::int64_t units = 0;
    key_tuple key = {};
    key_tuple idempotency = {};
    std::string redis_key = {};
    std::optional<std::uint32_t> amount_placeholder = std::nullopt;
};

void PrintTo(const decide_case& c, std::ostream* os) { *os << c.name; }

// A plain forward is returned as an empty decision (decide looks on to the next fact).
class decide_table : public ::testing::TestWithParam<decide_case> {};

TEST_P(decide_table, verdict) {
    const auto& c = GetParam();
    session s(c.rules);
    ASSERT_TRUE(s.ready()) << s.error();
    if (c.state != before::nothing) {
        ASSERT_NO_FATAL_FAILURE(s.read(c.read_key, c.counter));
    }
    if (c.state == before::refused || c.state == before::decremented)
        (void)s.absolute_decrement(c.read_key, c.counter - 1, c.state == before::decremented, false);

    const decision d = s.run(c.sql, bound_integers(c.params));
    EXPECT_EQ(verdict_name(d.what), verdict_name(c.what)) << d.note;
    EXPECT_EQ(d.unmodeled, c.unmodeled) << d.note;
    EXPECT_EQ(d.observe, c.observe);
    if (c.what != verdict::forward || !c.key.empty()) {
        EXPECT_EQ(d.key, c.key);
    }
    if (c.what == verdict::take || c.what == verdict::track_decrement || c.what == verdict::restock) {
        EXPECT_EQ(d.units, c.units);
    }
    if (c.what == verdict::claim) {
        EXPECT_EQ(d.idempotency, c.idempotency);
        EXPECT_EQ(d.redis_key, c.redis_key);
        ASSERT_NE(d.claim, nullptr);
        EXPECT_EQ(d.claim->name, "coupon_order");
    }
    if (c.what != verdict::forward && c.what != verdict::rollback_instead && c.what != verdict::refuse) {
        ASSERT_NE(d.stock, nullptr);
        EXPECT_EQ(d.stock->name, "coupon_stock");
    }
    EXPECT_EQ(d.amount_placeholder, c.amount_placeholder);
}

const decide_case cases[] = {
    // Reads (a cross-check only: nothing depends on them).
    {.name = "read_of_the_counter", .sql = "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
     .what = verdict::remember_read, .key = {"7"}},
    {.name = "prepared_read", .sql = "SELECT remain FROM coupon_stock WHERE campaign_id = ?", .params = {9},
     .what = verdict::remember_read, .key = {"9"}},
    {.name = "read_through_a_join_is_no_write", .sql = "SELECT s.remain FROM coupon_stock s JOIN t ON t.id = s.campaign_id",
     .what = verdict::forward},
    {.name = "read_of_an_in_list_is_no_write", .sql = "SELECT remain FROM coupon_stock WHERE campaign_id IN (1, 2)",
     .what = verdict::forward},

    // Absolute writes: a take of the rule's units whatever the value, read or not (issue 9).
    {.name = "absolute_write_one_below_the_read", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::take, .units = 1,
     .key = {"7"}},
    // R8: a read right before says the write means 5 units, the rule says 1: refused by default.
    {.name = "absolute_write_five_below_the_read_is_refused", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 95, version = version + 1 WHERE campaign_id = 7",
     .what = verdict::refuse, .unmodeled = true},
    {.name = "absolute_write_two_units_rule", .rules = variant_id::two_units,
     .sql = "UPDATE coupon_stock SET remain = 98 WHERE campaign_id = 7", .what = verdict::take, .units = 2,
     .key = {"7"}},
    // R7: at or above what was just read: a restock or a stale write, never a take.
    {.name = "absolute_write_equal_to_the_read_is_refused", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 100 WHERE campaign_id = 7", .what = verdict::refuse, .unmodeled = true},
    {.name = "absolute_write_above_the_read_is_refused", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 150 WHERE campaign_id = 7", .what = verdict::refuse, .unmodeled = true},
    {.name = "absolute_write_without_a_read_is_a_take", .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "absolute_write_after_a_read_of_another_key", .state = before::read, .read_key = "8",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::take, .units = 1,
     .key = {"7"}},
    {.name = "absolute_write_from_an_expression", .sql = "UPDATE coupon_stock SET remain = 57 - 1 WHERE campaign_id = 7",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "absolute_write_without_the_full_key_is_refused", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE remain > 0", .what = verdict::refuse, .unmodeled = true},
    {.name = "absolute_write_without_the_full_key_forwarded_by_policy", .rules = variant_id::forward_unmodeled,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE remain > 0", .what = verdict::forward, .unmodeled = true},
    {.name = "compare_and_set_is_tracked", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND remain = 100",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "compare_and_set_below_the_floor_is_a_take",
     .sql = "UPDATE coupon_stock SET remain = -1 WHERE campaign_id = 7 AND remain = 0", .what = verdict::take,
     .units = 1, .key = {"7"}},
    {.name = "prepared_absolute_write", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", .params = {99, 7},
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "prepared_absolute_write_unbound_key_is_refused", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", .what = verdict::refuse,
     .unmodeled = true},
    {.name = "hibernate_version_write",
     .sql = "UPDATE coupon_stock SET remain = ?, version = ? WHERE campaign_id = ? AND version = ?", .params = {99, 3, 7, 2},
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "absolute_write_without_version_column", .rules = variant_id::no_version, .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::take, .units = 1,
     .key = {"7"}},

    // Key canonicalisation: '7', 007 and 7 name one row.
    {.name = "padded_string_key", .sql = "UPDATE coupon_stock SET remain = 98 WHERE campaign_id = ' 007'",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "bound_key", .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = ?", .params = {7},
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "string_key_with_quotes", .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'o\\'brien'",
     .what = verdict::take, .units = 1, .key = {"o'brien"}},

    // Relative changes.
    {.name = "unguarded_decrement", .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "unguarded_decrement_by_three",
     .sql = "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 7", .what = verdict::take,
     .units = 3, .key = {"7"}},
    {.name = "guarded_decrement",
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "guard_too_low_for_floor_5", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "guard_enough_for_floor_5", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 6",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "prepared_decrement_amount", .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?",
     .params = {2, 7}, .what = verdict::take, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "increment_is_a_restock", .sql = "UPDATE coupon_stock SET remain = remain + 3 WHERE campaign_id = 7",
     .what = verdict::restock, .units = 3, .key = {"7"}},
    {.name = "prepared_increment_is_a_restock",
     .sql = "UPDATE coupon_stock SET remain = remain + ? WHERE campaign_id = 7", .params = {4},
     .what = verdict::restock, .units = 4, .key = {"7"}, .amount_placeholder = 0},
    {.name = "decrement_without_the_full_key_is_refused", .sql = "UPDATE coupon_stock SET remain = remain - 1",
     .what = verdict::refuse, .unmodeled = true},
    {.name = "update_with_a_join_is_refused",
     .sql = "UPDATE coupon_stock s JOIN t ON t.id = s.campaign_id SET s.remain = 1", .what = verdict::refuse,
     .unmodeled = true},
    // Guards in arithmetic forms: an already guarded decrement is forwarded as written.
    {.name = "guard_minus_ge_zero_p12",
     .sql = "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1 AND remain - 2 >= 0",
     .what = verdict::track_decrement, .units = 2, .key = {"1"}},
    {.name = "guard_minus_too_weak_gets_the_guard",
     .sql = "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1 AND remain - 1 >= 0",
     .what = verdict::take, .units = 2, .key = {"1"}},
    {.name = "guard_value_first", .sql = "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 7 AND 3 <= remain",
     .what = verdict::track_decrement, .units = 3, .key = {"7"}},
    {.name = "guard_gt_n_minus_one",
     .sql = "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 7 AND remain > 3 - 1",
     .what = verdict::track_decrement, .units = 3, .key = {"7"}},
    {.name = "guard_arithmetic_floor_5_enough", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain - 1 >= 5",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "guard_arithmetic_floor_5_too_low", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain - 1 >= 0",
     .what = verdict::take, .units = 1, .key = {"7"}},
    // MyBatis `remain - #{num} >= 0` prepared: judged on the bound values.
    {.name = "mybatis_guard_bound_equal_amount",
     .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0", .params = {2, 7, 2},
     .what = verdict::track_decrement, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "mybatis_guard_bound_lower_than_amount_gets_the_guard",
     .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0", .params = {2, 7, 1},
     .what = verdict::take, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "mybatis_guard_floor_5_bound_enough", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 5", .params = {2, 7, 2},
     .what = verdict::track_decrement, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "mybatis_guard_floor_5_bound_too_low", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0", .params = {2, 7, 2},
     .what = verdict::take, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "placeholder_guard_bound_enough",
     .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain >= ?", .params = {3, 7, 3},
     .what = verdict::track_decrement, .units = 3, .key = {"7"}, .amount_placeholder = 0},
    {.name = "placeholder_guard_overflowing_proves_nothing",
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain - ? > 9223372036854775807",
     .params = {1}, .what = verdict::take, .units = 1, .key = {"7"}},
    // Multi-table UPDATE with the stock table joined.
    {.name = "join_guarded_decrement",
     .sql = "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
            "WHERE s.campaign_id = 7 AND s.remain > 0 AND c.status = 'ON'",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "join_unguarded_decrement_gets_the_guard",
     .sql = "UPDATE coupon_stock s, campaign c SET s.remain = s.remain - 1 WHERE s.campaign_id = 7 AND c.id = s.campaign_id",
     .what = verdict::take, .units = 1, .key = {"7"}},
    {.name = "join_key_by_join_condition_only_is_refused",
     .sql = "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
            "WHERE c.id = 7 AND s.remain > 0",
     .what = verdict::refuse, .unmodeled = true},
    {.name = "join_of_two_stock_tables_is_refused",
     .sql = "UPDATE coupon_stock s JOIN coupon_stock t ON t.campaign_id = s.campaign_id SET s.remain = s.remain - 1 "
            "WHERE s.campaign_id = 7 AND s.remain > 0",
     .what = verdict::refuse, .unmodeled = true},
    {.name = "several_statements_are_refused",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7; INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
     .what = verdict::refuse, .unmodeled = true},
    // Cancellations (DELETE of claim rows): coupon_order keeps the units (on_cancel's default).
    {.name = "delete_of_a_claim_row_is_a_cancellation", .sql = "DELETE FROM coupon_order WHERE user_id = 1",
     .what = verdict::cancel},
    {.name = "cancellation_by_the_claim_key", .sql = "DELETE FROM coupon_order WHERE user_id = 42 AND campaign_id = 7",
     .what = verdict::cancel, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "delete_of_a_stock_row_is_refused", .sql = "DELETE FROM coupon_stock WHERE campaign_id = 7",
     .what = verdict::refuse, .unmodeled = true},
    {.name = "delete_of_every_claim_row_is_refused", .sql = "DELETE FROM coupon_order", .what = verdict::refuse,
     .unmodeled = true},

    // Claim inserts.
    {.name = "claim_insert", .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "claim_insert_columns_reordered",
     .sql = "INSERT INTO coupon_order (campaign_id, created_at, user_id) VALUES ('7', NOW(), 42)",
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "claim_insert_prepared", .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)",
     .params = {42, 7}, .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"},
     .redis_key = "lock:coupon:42:7"},
    {.name = "claim_insert_string_user_with_quote",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES ('o''brien', 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"o'brien", "7"}, .redis_key = "lock:coupon:o'brien:7"},
    {.name = "claim_insert_ignore", .sql = "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "claim_replace", .sql = "REPLACE INTO coupon_order (user_id, campaign_id) VALUES (42, 7)",
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    // A claim after this connection's refused decrement: decided by the operation (a waiting take of
    // the sidecar's, else the exhausted answer; see silent_paths.claim_after_a_refusal_*).
    {.name = "claim_after_a_refused_decrement", .state = before::refused,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "claim_of_another_key_after_a_refused_decrement", .state = before::refused, .read_key = "8",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    // Several rows (Connector/J rewriteBatchedStatements, PyMySQL executemany): one claim per row
    // (claim_rows: each row's key in decision::rows), the first row's key for the logs, no Redis key.
    {.name = "multi_row_claim_insert", .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, 8)",
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}},
    {.name = "multi_row_claim_insert_prepared",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?), (?, ?)", .params = {42, 7, 43, 7},
     .what = verdict::claim, .key = {"7"}, .idempotency = {"42", "7"}},
    {.name = "multi_row_insert_ignore_one_key",
     .sql = "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"42", "7"}},
    // Which rows an IGNORE skipped is not known: with several stock keys, whose unit goes back is not either.
    {.name = "multi_row_insert_ignore_several_keys_is_refused",
     .sql = "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, 8)", .what = verdict::refuse,
     .unmodeled = true},
    {.name = "multi_row_replace_is_refused",
     .sql = "REPLACE INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, 7)", .what = verdict::refuse,
     .unmodeled = true},
    {.name = "multi_row_claim_insert_with_an_unknown_row_is_refused",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, NULL)", .what = verdict::refuse,
     .unmodeled = true},
    {.name = "claim_insert_without_column_list_is_refused_until_resolved",
     .sql = "INSERT INTO coupon_order VALUES (NULL, 42, 7, NOW())", .what = verdict::refuse, .unmodeled = true},
    {.name = "claim_insert_unbound_is_refused", .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)",
     .what = verdict::refuse, .unmodeled = true},

    // Observe mode: the verdict is computed and flagged.
    {.name = "observe_absolute_write", .rules = variant_id::observe, .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::take,
     .observe = true, .units = 1, .key = {"7"}},
    {.name = "observe_unmodeled", .rules = variant_id::observe,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE remain > 0", .what = verdict::refuse, .unmodeled = true,
     .observe = true},
    {.name = "observe_claim", .rules = variant_id::observe,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .observe = true, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "observe_read_is_not_flagged", .rules = variant_id::observe,
     .sql = "SELECT remain FROM coupon_stock WHERE campaign_id = 7", .what = verdict::remember_read,
     .key = {"7"}},

    // Transaction boundaries without poison.
    {.name = "commit_of_a_clean_transaction", .state = before::refused, .sql = "COMMIT",
     .what = verdict::forward},
    {.name = "unrelated_statement", .sql = "SELECT * FROM users WHERE id = 7", .what = verdict::forward},
};

INSTANTIATE_TEST_SUITE_P(engine, decide_table, ::testing::ValuesIn(cases),
                         [](const ::testing::TestParamInfo<decide_case>& info) { return std::string(info.param.name); });

// Each row of a claim of several rows is a claim of its own: its stock key, its business key, and
// whether this connection's decrement of that key was refused (only with a waiting take then).
TEST(decide_rows, each_row_is_a_claim) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("8", 5));
    (void)s.absolute_decrement("8", 4, false, false);
    const decision d = s.run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7), (2, '8'), (3, 7)");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    ASSERT_EQ(d.rows.size(), 3u);
    EXPECT_EQ(d.rows[0].key, key_tuple{"7"});
    EXPECT_EQ(d.rows[1].key, key_tuple{"8"});
    EXPECT_EQ(d.rows[2].key, key_tuple{"7"});
    EXPECT_EQ(d.rows[1].idempotency, (key_tuple{"2", "8"}));
    EXPECT_FALSE(d.rows[0].after_refusal);
    EXPECT_TRUE(d.rows[1].after_refusal);
    EXPECT_TRUE(d.after_refusal);
    EXPECT_TRUE(d.redis_key.empty());
    // One row is the one-row claim as before: no rows.
    EXPECT_TRUE(s.run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)").rows.empty());
}

}  // namespace
}  // namespace claimguard::engine::test
