// A claim by INSERT ... SELECT from its stock row (issue "Refuse less"): no decrement of the app comes
// before it, so the claim operation takes the unit itself, then sends the row as INSERT ... VALUES;
// without stock the app gets the server's own answer (OK, 0 rows); a duplicate gives the unit back.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const std::string claim =
    "INSERT INTO coupon_order (user_id, campaign_id) SELECT 7, campaign_id FROM coupon_stock WHERE campaign_id = 1 "
    "AND remain > 0";
const std::string take =
    "UPDATE `coupon_stock` SET `remain` = `remain` - 1, `version` = `version` + 1 WHERE `campaign_id` = 1 AND "
    "`remain` >= 1";
const std::string row = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1)";
const std::string give_back =
    "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 1";

TEST(insert_select, autocommit_claim_takes_then_inserts_the_row) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(1), ok_rows(1)});
    EXPECT_EQ(t.d.what, verdict::claim) << t.d.note;
    EXPECT_TRUE(t.d.own_take);
    EXPECT_FALSE(t.d.unmodeled);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take, row}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);  // the INSERT's own OK: 1 row, its insert id
    EXPECT_TRUE(t.has(event::took));
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_FALSE(t.has(event::claim_unbacked));
    EXPECT_FALSE(t.has(event::blocked));
}

// Sold out: nothing inserted, and the app hears what the server says when the SELECT's `remain > 0`
// selects no row: OK, 0 rows.
TEST(insert_select, no_stock_is_the_servers_zero_rows) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take}));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 0u);
    EXPECT_TRUE(t.has(event::exhausted));
    EXPECT_FALSE(t.has(event::claim_inserted));
    // The next attempt on this connection is not blocked by that refusal: its own take decides.
    auto again = s.exec(claim, {ok_rows(1), ok_rows(1)});
    EXPECT_EQ(again.sent(), (std::vector<std::string>{take, row}));
    EXPECT_TRUE(again.has(event::claim_inserted));
}

// Without a bound on the counter the app did not expect the SELECT to find nothing: the rule's
// exhausted answer, as for any take that finds the floor.
TEST(insert_select, no_stock_without_a_guard_is_the_exhausted_answer) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT 7, campaign_id FROM coupon_stock WHERE campaign_id = 1",
        {ok_rows(0)});
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::error);
    EXPECT_EQ(t.last().answer.code, 1644);
    EXPECT_TRUE(t.has(event::exhausted));
}

TEST(insert_select, duplicate_in_the_database_gives_the_unit_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(1), error_reply(1062), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take, row, give_back}));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_TRUE(t.has(event::duplicate_db));
    EXPECT_TRUE(t.has(event::compensated));
}

// Redis is asked before the take: a duplicate it knows takes nothing (no unit held while it is answered).
TEST(insert_select, duplicate_in_redis_takes_nothing) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {}, autocommit, resolve_literal, redis_reply::held, true);
    EXPECT_TRUE(t.sent().empty());
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_TRUE(t.has(event::duplicate_redis));
    EXPECT_FALSE(t.has(event::took));
    EXPECT_FALSE(t.has(event::compensated));
}

TEST(insert_select, redis_acquired_then_take_then_row) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(1), ok_rows(1)}, autocommit, resolve_literal, redis_reply::acquired, true);
    ASSERT_EQ(t.actions.size(), 4u);  // Redis, the take, the row, the INSERT's own OK
    EXPECT_EQ(t.actions[0].type, action::kind::redis_acquire);
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take, row}));
    EXPECT_TRUE(t.has(event::claim_inserted));
    // Sold out after Redis said the key is free: nothing inserted, the 0-row OK.
    auto none = s.exec(
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT 8, campaign_id FROM coupon_stock "
        "WHERE campaign_id = 1 AND remain > 0",
        {ok_rows(0)}, autocommit, resolve_literal, redis_reply::acquired, true);
    EXPECT_EQ(none.sent(), (std::vector<std::string>{take}));
    EXPECT_EQ(none.last().ok_rows, 0u);
    EXPECT_TRUE(none.has(event::exhausted));
}

// INSERT IGNORE ... SELECT of a duplicate: the server's 0 rows stand, the unit goes back.
TEST(insert_select, ignore_duplicate_is_zero_rows_and_the_unit_goes_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "INSERT IGNORE INTO coupon_order (user_id, campaign_id) SELECT 7, campaign_id FROM coupon_stock "
        "WHERE campaign_id = 1 AND remain >= 1",
        {ok_rows(1), ok_rows(0), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{
                            take, "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (7, 1)", give_back}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::duplicate_db));
    EXPECT_TRUE(t.has(event::compensated));
}

// In a transaction whose decrement took the unit already, the claim uses that take: no second take.
TEST(insert_select, a_take_of_the_transaction_pays_for_it) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto d = s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain >= 1",
                    {ok_rows(1, in_trans)}, in_trans);
    EXPECT_TRUE(d.has(event::tracked));
    auto t = s.exec(claim, {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{row}));
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_FALSE(t.has(event::took));
}

// In a transaction of its own (SELECT ... FOR UPDATE first): the take and the row in that transaction.
TEST(insert_select, in_a_transaction_take_and_row_go_in_it) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take, row}));
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_FALSE(t.has(event::claim_ahead));  // backed by its own take: the COMMIT needs nothing more
}

// Prepared: the row's values are the client's bound values, reordered (the key's ? is the WHERE's); the
// take names the key as a literal.
TEST(insert_select, prepared_values_are_the_bound_ones) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT ?, campaign_id FROM coupon_stock WHERE "
        "campaign_id = ? AND remain > 0",
        {ok_rows(1), ok_rows(1)}, autocommit, bound_integers({7, 1}));
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(t.sent()[0], take);
    EXPECT_EQ(t.sent()[1], "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)");
    EXPECT_EQ(std::vector<std::uint32_t>(t.actions[1].sql.parameters.begin(), t.actions[1].sql.parameters.end()),
              (std::vector<std::uint32_t>{0, 1}));
    EXPECT_TRUE(t.has(event::claim_inserted));
}

// The server's error on the take (a lock wait timeout) is the app's answer; nothing was taken.
TEST(insert_select, an_error_of_the_take_is_forwarded) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {error_reply(1205)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{take}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_FALSE(t.has(event::took));
}

// Shapes whose meaning is not certain keep the refusal with its advice; so does a claim table whose
// trigger decrements the stock (its INSERT is the take).
TEST(insert_select, uncertain_shapes_stay_refused) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    for (const char* sql : {
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 7, campaign_id FROM coupon_stock WHERE remain > 0",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT 7, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 1 LIMIT 1",
             "INSERT INTO coupon_order (user_id, campaign_id) SELECT remain, campaign_id FROM coupon_stock WHERE "
             "campaign_id = 1",
         }) {
        auto d = s.run(sql);
        EXPECT_TRUE(d.unmodeled) << sql;
        EXPECT_EQ(d.what, verdict::refuse) << sql;
        EXPECT_EQ(d.reason, "insert_select") << sql;
    }
    session trigger(variant_id::by_trigger);
    ASSERT_TRUE(trigger.ready()) << trigger.error();
    auto d = trigger.run(claim);
    EXPECT_TRUE(d.unmodeled);
    EXPECT_EQ(d.reason, "insert_select");
}

// A COM_STMT_BULK_EXECUTE of a prepared INSERT ... SELECT is not one row: no claim facts (bulk_execute).
TEST(insert_select, bulk_execute_of_it_is_not_a_claim) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec_bulk(
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT ?, campaign_id FROM coupon_stock "
        "WHERE campaign_id = ? AND remain > 0",
        {{7, 1}, {8, 1}}, {});
    EXPECT_EQ(t.d.what, verdict::forward);
    EXPECT_TRUE(t.actions.empty());
}

// The app's recompute of the counter from its claims, right after its claim by INSERT ... SELECT: the
// claim's take already moved the counter, so it is answered OK (1 row) without reaching the database.
const std::string recompute =
    "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 1) WHERE "
    "campaign_id = 1";

TEST(insert_select, recompute_after_the_claim_is_absorbed) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto c = s.exec(claim, {ok_rows(1), ok_rows(1)});
    ASSERT_TRUE(c.has(event::claim_inserted));
    auto t = s.exec(recompute, {});
    EXPECT_TRUE(t.d.absorb_recompute) << t.d.note;
    EXPECT_FALSE(t.d.unmodeled);
    EXPECT_TRUE(t.sent().empty());
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_TRUE(t.has(event::absorbed_recompute));
    // Once: a second recompute has no take of ours in front of it.
    auto again = s.exec(recompute, {});
    EXPECT_TRUE(again.d.unmodeled);
    EXPECT_EQ(again.d.reason, "counter_from_subquery");
    EXPECT_EQ(again.d.what, verdict::refuse);
    EXPECT_TRUE(again.sent().empty());
}

// The app that keeps the counter itself after the claim (INSERT ... SELECT, then remain = remain - 1, or the
// absolute remain = <read - 1>): the claim's own take paid for the unit, so that write is absorbed too, once;
// without it every claim would take two units.
TEST(insert_select, the_apps_own_decrement_after_the_claim_is_absorbed_once) {
    for (const std::string write : {"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1",
                                    "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain > 0",
                                    "UPDATE coupon_stock SET remain = 41 WHERE campaign_id = 1"}) {
        session s(variant_id::coupon);
        ASSERT_TRUE(s.ready()) << s.error();
        auto c = s.exec(claim, {ok_rows(1), ok_rows(1)});
        ASSERT_TRUE(c.has(event::claim_inserted));
        auto t = s.exec(write, {});
        EXPECT_TRUE(t.d.absorb_recompute) << write << ": " << t.d.note;
        EXPECT_TRUE(t.sent().empty()) << write;
        ASSERT_EQ(t.last().type, action::kind::answer) << write;
        EXPECT_EQ(t.last().ok_rows, 1u);
        EXPECT_TRUE(t.has(event::absorbed_recompute));
        // Once: the next decrement is a take of its own (or the app's guarded one, tracked).
        auto again = s.exec(write, {ok_rows(1)});
        EXPECT_FALSE(again.d.absorb_recompute) << write;
        EXPECT_TRUE(again.d.what == verdict::take || again.d.what == verdict::track_decrement)
            << write << ": " << again.d.note;
    }
}

// Another amount than the rule's units is not the claim's unit: not absorbed.
TEST(insert_select, a_decrement_of_other_units_after_the_claim_is_not_absorbed) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_TRUE(s.exec(claim, {ok_rows(1), ok_rows(1)}).has(event::claim_inserted));
    auto t = s.exec("UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_FALSE(t.d.absorb_recompute) << t.d.note;
    EXPECT_EQ(t.d.what, verdict::take);
}

TEST(insert_select, recompute_without_a_claim_of_ours_is_refused_with_advice) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(recompute, {});
    EXPECT_TRUE(t.d.unmodeled);
    EXPECT_EQ(t.d.what, verdict::refuse);
    EXPECT_EQ(t.d.reason, "counter_from_subquery");
    EXPECT_NE(t.d.note.find("relative change (UPDATE stock SET c = c - n WHERE key = ? AND c >= n)"),
              std::string_view::npos);
    EXPECT_TRUE(t.sent().empty());
    // After a claim that found no stock, or a duplicate: nothing was taken for it.
    auto sold_out = s.exec(claim, {ok_rows(0)});
    ASSERT_TRUE(sold_out.has(event::exhausted));
    EXPECT_TRUE(s.exec(recompute, {}).d.unmodeled);
    auto duplicate = s.exec(claim, {ok_rows(1), error_reply(1062), ok_rows(1)});
    ASSERT_TRUE(duplicate.has(event::duplicate_db));
    EXPECT_TRUE(s.exec(recompute, {}).d.unmodeled);
    // Another key, or a count of another key, than the claim's.
    ASSERT_TRUE(s.exec(claim, {ok_rows(1), ok_rows(1)}).has(event::claim_inserted));
    EXPECT_TRUE(s.run("UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id "
                      "= 2) WHERE campaign_id = 1")
                    .unmodeled);
}

// In autocommit the recompute must come right after the claim; another statement in between ends that.
TEST(insert_select, autocommit_recompute_must_follow_the_claim) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_TRUE(s.exec(claim, {ok_rows(1), ok_rows(1)}).has(event::claim_inserted));
    s.run("SELECT 1");
    EXPECT_TRUE(s.exec(recompute, {}).d.unmodeled);
}

// In the app's transaction (SELECT ... FOR UPDATE, INSERT ... SELECT, the recompute, COMMIT): anywhere after
// the claim in that transaction.
TEST(insert_select, recompute_in_the_claims_transaction_is_absorbed) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto c = s.exec(claim, {ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    ASSERT_TRUE(c.has(event::claim_inserted));
    s.run("SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 1");
    auto t = s.exec(recompute, {}, in_trans);
    EXPECT_TRUE(t.has(event::absorbed_recompute)) << t.d.note;
    EXPECT_EQ(t.last().status, in_trans);
}

}  // namespace
}  // namespace claimguard::engine::test
