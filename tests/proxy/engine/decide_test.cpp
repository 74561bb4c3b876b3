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
    bool untracked = false;
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
        s.absolute_decrement(c.read_key, c.counter - 1, c.state == before::decremented, false);

    const decision d = s.run(c.sql, bound_integers(c.params));
    EXPECT_EQ(verdict_name(d.what), verdict_name(c.what)) << d.note;
    EXPECT_EQ(d.untracked, c.untracked) << d.note;
    EXPECT_EQ(d.observe, c.observe);
    if (c.what != verdict::forward || !c.key.empty()) {
        EXPECT_EQ(d.key, c.key);
    }
    if (c.what == verdict::decrement || c.what == verdict::track_decrement || c.what == verdict::restock) {
        EXPECT_EQ(d.units, c.units);
    }
    if (c.what == verdict::claim) {
        EXPECT_EQ(d.idempotency, c.idempotency);
        EXPECT_EQ(d.redis_key, c.redis_key);
        ASSERT_NE(d.claim, nullptr);
        EXPECT_EQ(d.claim->name, "coupon_order");
    }
    if (c.what != verdict::forward && c.what != verdict::rollback_instead) {
        ASSERT_NE(d.stock, nullptr);
        EXPECT_EQ(d.stock->name, "coupon_stock");
    }
    EXPECT_EQ(d.amount_placeholder, c.amount_placeholder);
}

const decide_case cases[] = {
    // Reads.
    {.name = "read_of_the_counter", .sql = "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
     .what = verdict::remember_read, .key = {"7"}},
    {.name = "prepared_read", .sql = "SELECT remain FROM coupon_stock WHERE campaign_id = ?", .params = {9},
     .what = verdict::remember_read, .key = {"9"}},

    // Absolute writes (the incident).
    {.name = "absolute_write_one_below_the_read", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::decrement, .units = 1,
     .key = {"7"}},
    {.name = "absolute_write_five_below_the_read", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 95, version = version + 1 WHERE campaign_id = 7",
     .what = verdict::decrement, .units = 5, .key = {"7"}},
    {.name = "absolute_write_to_zero", .state = before::read, .counter = 1,
     .sql = "UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 7", .what = verdict::decrement, .units = 1,
     .key = {"7"}},
    {.name = "absolute_write_equal_to_the_read", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 100 WHERE campaign_id = 7", .what = verdict::restock, .units = 100,
     .key = {"7"}},
    {.name = "absolute_write_above_the_read", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 150 WHERE campaign_id = 7", .what = verdict::restock, .units = 150,
     .key = {"7"}},
    {.name = "absolute_write_without_a_read", .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7",
     .what = verdict::forward, .untracked = true, .key = {"7"}},
    {.name = "absolute_write_after_a_read_of_another_key", .state = before::read, .read_key = "8",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::forward,
     .untracked = true, .key = {"7"}},
    {.name = "absolute_write_without_the_full_key", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE remain > 0", .what = verdict::forward, .untracked = true},
    {.name = "compare_and_set_is_forwarded", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND remain = 100",
     .what = verdict::forward},
    {.name = "prepared_absolute_write", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", .params = {97, 7},
     .what = verdict::decrement, .units = 3, .key = {"7"}},
    {.name = "prepared_absolute_write_unbound", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", .what = verdict::forward,
     .untracked = true},
    {.name = "absolute_write_without_version_column", .rules = variant_id::no_version, .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::decrement, .units = 1,
     .key = {"7"}},

    // Key canonicalisation: '7', 007 and 7 name one row.
    {.name = "string_read_numeric_write", .state = before::read, .read_key = "'7'",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::decrement, .units = 1,
     .key = {"7"}},
    {.name = "numeric_read_padded_string_write", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 98 WHERE campaign_id = ' 007'", .what = verdict::decrement,
     .units = 2, .key = {"7"}},
    {.name = "numeric_read_bound_write", .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = ?", .params = {7},
     .what = verdict::decrement, .units = 1, .key = {"7"}},
    {.name = "string_key_with_quotes", .state = before::read, .read_key = "'o''brien'",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'o\\'brien'", .what = verdict::decrement,
     .units = 1, .key = {"o'brien"}},
    {.name = "string_key_is_not_another_string", .state = before::read, .read_key = "'o''brien'",
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'obrien'", .what = verdict::forward,
     .untracked = true, .key = {"obrien"}},

    // Relative changes.
    {.name = "unguarded_decrement", .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7",
     .what = verdict::decrement, .units = 1, .key = {"7"}},
    {.name = "unguarded_decrement_by_three",
     .sql = "UPDATE coupon_stock SET remain = remain - 3 WHERE campaign_id = 7", .what = verdict::decrement,
     .units = 3, .key = {"7"}},
    {.name = "guarded_decrement",
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "guard_too_low_for_floor_5", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1",
     .what = verdict::decrement, .units = 1, .key = {"7"}},
    {.name = "guard_enough_for_floor_5", .rules = variant_id::floor5,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 6",
     .what = verdict::track_decrement, .units = 1, .key = {"7"}},
    {.name = "prepared_decrement_amount", .sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?",
     .params = {2, 7}, .what = verdict::decrement, .units = 2, .key = {"7"}, .amount_placeholder = 0},
    {.name = "increment_is_forwarded", .sql = "UPDATE coupon_stock SET remain = remain + 3 WHERE campaign_id = 7",
     .what = verdict::forward},
    {.name = "prepared_increment_is_forwarded",
     .sql = "UPDATE coupon_stock SET remain = remain + ? WHERE campaign_id = 7", .params = {4},
     .what = verdict::forward},
    {.name = "decrement_without_the_full_key", .sql = "UPDATE coupon_stock SET remain = remain - 1",
     .what = verdict::forward, .untracked = true},

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
    {.name = "claim_after_a_refused_decrement", .state = before::refused,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::exhausted,
     .key = {"7"}},
    {.name = "claim_of_another_key_after_a_refused_decrement", .state = before::refused, .read_key = "8",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "strict_claim_without_a_decrement", .rules = variant_id::strict, .state = before::read,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::exhausted,
     .key = {"7"}},
    {.name = "strict_claim_after_a_decrement", .rules = variant_id::strict, .state = before::decremented,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "multi_row_claim_insert",
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7), (43, 7)", .what = verdict::forward,
     .untracked = true},
    {.name = "claim_insert_without_column_list",
     .sql = "INSERT INTO coupon_order VALUES (NULL, 42, 7, NOW())", .what = verdict::forward, .untracked = true},
    {.name = "claim_insert_unbound", .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)",
     .what = verdict::forward, .untracked = true},

    // Observe mode: the verdict is computed and flagged.
    {.name = "observe_absolute_write", .rules = variant_id::observe, .state = before::read,
     .sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", .what = verdict::decrement,
     .observe = true, .units = 1, .key = {"7"}},
    {.name = "observe_unguarded_decrement", .rules = variant_id::observe,
     .sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", .what = verdict::decrement,
     .observe = true, .units = 1, .key = {"7"}},
    {.name = "observe_claim", .rules = variant_id::observe,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::claim,
     .observe = true, .key = {"7"}, .idempotency = {"42", "7"}, .redis_key = "lock:coupon:42:7"},
    {.name = "observe_claim_after_refused", .rules = variant_id::observe, .state = before::refused,
     .sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)", .what = verdict::exhausted,
     .observe = true, .key = {"7"}},
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

}  // namespace
}  // namespace claimguard::engine::test
