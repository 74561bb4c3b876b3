// reserve: the pool of reserved units (refill sizes, the shrink near sell-out, serving, give-backs,
// idle and reload give-backs) and a transaction's take served from it (never sent, no row lock),
// settled by COMMIT (consumed), ROLLBACK, a savepoint or a duplicate claim (back to the pool).
#include <gtest/gtest.h>

#include "proxy/engine/reserve_pool.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

using namespace std::chrono_literals;
using events = std::vector<event>;
using clock = reserve_pool::clock;

const std::string rule = "coupon_stock";
const key_tuple key1{"1"};
const std::string take_sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1";

reserve_target target_of(std::int64_t block, std::chrono::milliseconds idle = 1s) {
    reserve_target t;
    t.rule.name = rule;
    t.rule.table.name = "coupon_stock";
    t.rule.key_columns = {"campaign_id"};
    t.rule.counter_column = "remain";
    t.rule.reserve = rules::reserve_limits{block, idle};
    t.key = {{"1", true}};
    return t;
}

// A refill of `taken` units for key1, as the reserve connection reports it.
void refill(reserve_pool& pool, std::int64_t taken, clock::time_point now, std::int64_t block = 10) {
    auto job = pool.begin_refill(target_of(block), key1, 1, now);
    ASSERT_TRUE(job.has_value());
    EXPECT_TRUE(pool.refilling(rule, key1));
    pool.end_refill(rule, key1, taken, false, now);
}

// ---- the pool -----------------------------------------------------------------------------------

TEST(reserve_pool, refill_takes_a_block_and_shrinks_near_sell_out) {
    EXPECT_EQ(reserve_pool::refill_size(50, 1, 100000), 50);  // plenty: the block
    EXPECT_EQ(reserve_pool::refill_size(50, 1, 160), 20);     // an eighth of what is left
    EXPECT_EQ(reserve_pool::refill_size(50, 1, 7), 1);        // at least one take
    EXPECT_EQ(reserve_pool::refill_size(50, 1, 1), 1);
    EXPECT_EQ(reserve_pool::refill_size(50, 1, 0), 0);     // nothing left: nothing taken
    EXPECT_EQ(reserve_pool::refill_size(50, 3, 2), 0);     // less than one take left
    EXPECT_EQ(reserve_pool::refill_size(50, 3, 100), 12);  // whole takes only
    EXPECT_EQ(reserve_pool::refill_size(50, 3, 3), 3);
}

TEST(reserve_pool, serves_takes_from_a_refill_and_takes_back_what_did_not_commit) {
    reserve_pool pool;
    const auto t0 = clock::now();
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::empty);
    refill(pool, 3, t0);
    EXPECT_FALSE(pool.refilling(rule, key1));
    EXPECT_FALSE(pool.begin_refill(target_of(10), key1, 1, t0));  // units are here: no refill
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::empty);
    EXPECT_EQ(pool.stats().handed, 3);
    pool.consumed(rule, key1, 1);       // committed
    pool.give_back(rule, key1, 1, t0);  // rolled back: served again
    EXPECT_EQ(pool.pooled(rule, key1), 1);
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    const auto s = pool.stats();
    EXPECT_EQ(s.pooled, 0);
    EXPECT_EQ(s.handed, 2);
    EXPECT_EQ(s.served, 4u);
    EXPECT_EQ(s.returned, 1u);
    EXPECT_EQ(s.refills, 1u);
}

TEST(reserve_pool, one_refill_per_key_at_a_time) {
    reserve_pool pool;
    const auto t0 = clock::now();
    auto first = pool.begin_refill(target_of(10), key1, 1, t0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->units, 1);
    EXPECT_FALSE(pool.begin_refill(target_of(10), key1, 1, t0));                       // wait for the one on its way
    EXPECT_TRUE(pool.begin_refill(target_of(10), key_tuple{"2"}, 1, t0).has_value());  // another key
    pool.end_refill(rule, key1, 0, true, t0);  // failed: not sold out; the takes go to the row for a while
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::empty);
    EXPECT_FALSE(pool.begin_refill(target_of(10), key1, 1, t0 + 999ms));
    EXPECT_TRUE(pool.begin_refill(target_of(10), key1, 1, t0 + reserve_pool::failure_backoff).has_value());
}

TEST(reserve_pool, a_sidecar_holds_at_most_one_block_of_a_key) {
    reserve_pool pool;
    const auto t0 = clock::now();
    auto job = pool.begin_refill(target_of(3), key1, 1, t0);
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->room, 3);
    pool.end_refill(rule, key1, 3, false, t0);
    for (int i = 0; i < 2; ++i) ASSERT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    // One unit left in the pool, two handed out: a refill may take one more at most.
    ASSERT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    EXPECT_FALSE(pool.begin_refill(target_of(3), key1, 1, t0));  // three handed out: the block is all out
    pool.consumed(rule, key1, 1);
    job = pool.begin_refill(target_of(3), key1, 1, t0);
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->room, 1);
}

TEST(reserve_pool, an_empty_row_answers_sold_out_for_a_while_then_asks_again) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 0, t0);  // the row had less than one take
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::sold_out);
    EXPECT_FALSE(pool.begin_refill(target_of(10), key1, 1, t0 + 50ms));
    EXPECT_EQ(pool.take(rule, key1, 1, t0 + reserve_pool::sold_out_hold), reserve_pool::serve::empty);
    EXPECT_TRUE(pool.begin_refill(target_of(10), key1, 1, t0 + reserve_pool::sold_out_hold).has_value());
    EXPECT_EQ(pool.stats().empty_refills, 1u);
}

TEST(reserve_pool, a_unit_given_back_ends_the_sold_out_state) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 1, t0);
    ASSERT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    ASSERT_TRUE(pool.begin_refill(target_of(10), key1, 1, t0));
    pool.end_refill(rule, key1, 0, false, t0);
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::sold_out);
    pool.give_back(rule, key1, 1, t0);  // its transaction rolled back
    EXPECT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
}

TEST(reserve_pool, idle_units_go_back_to_the_row_and_units_handed_out_stay) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 5, t0);
    ASSERT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);
    EXPECT_TRUE(pool.take_idle(t0 + 999ms).empty());  // idle: 1s
    auto back = pool.take_idle(t0 + 1s);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].units, 4);
    EXPECT_EQ(back[0].key, key1);
    EXPECT_EQ(back[0].target.rule.name, rule);
    EXPECT_EQ(pool.pooled(rule, key1), 0);
    EXPECT_EQ(pool.stats().handed, 1);  // still the open transaction's
    EXPECT_TRUE(pool.take_idle(t0 + 2s).empty());
    pool.give_back(rule, key1, 1, t0 + 2s);  // it rolled back: in the pool again, back to the row when idle
    back = pool.take_idle(t0 + 3s);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].units, 1);
    EXPECT_EQ(pool.stats().given_back, 5u);
}

TEST(reserve_pool, the_last_units_go_back_as_soon_as_a_read_finds_the_row_empty) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 3, t0);
    ASSERT_EQ(pool.take(rule, key1, 1, t0), reserve_pool::serve::served);  // handed: stays
    EXPECT_TRUE(pool.take_idle(t0 + 10ms).empty());                        // not idle yet
    pool.row_seen_empty(rule, key1);
    auto back = pool.take_idle(t0 + 20ms);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].units, 2);
    EXPECT_EQ(pool.stats().handed, 1);
    EXPECT_TRUE(pool.take_idle(t0 + 30ms).empty());  // once
    pool.row_seen_empty(rule, key1);                 // nothing pooled: nothing to release
    pool.give_back(rule, key1, 1, t0 + 40ms);        // the transaction rolled back later
    EXPECT_TRUE(pool.take_idle(t0 + 50ms).empty());  // the read's release was not kept for it
}

TEST(reserve_pool, a_give_back_the_server_refused_keeps_its_units) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 4, t0);
    auto back = pool.take_idle(t0 + 1s);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(pool.stats().given_back, 4u);
    pool.give_back_refused(back[0], t0 + 1s);  // a lock wait timeout: nothing applied
    EXPECT_EQ(pool.pooled(rule, key1), 4);
    EXPECT_EQ(pool.stats().given_back, 0u);
    EXPECT_EQ(pool.take(rule, key1, 1, t0 + 1s), reserve_pool::serve::served);
    EXPECT_TRUE(pool.take_idle(t0 + 1500ms).empty());  // idle counts from the refusal (and the take)
    back = pool.take_idle(t0 + 2s);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].units, 3);
}

TEST(reserve_pool, shutdown_and_reload_give_back_the_pool) {
    reserve_pool pool;
    const auto t0 = clock::now();
    refill(pool, 5, t0);
    auto other = target_of(10);
    other.rule.name = "other";
    ASSERT_TRUE(pool.begin_refill(other, key1, 1, t0));
    pool.end_refill("other", key1, 7, false, t0);
    auto dropped = pool.take_unless([](const rules::stock_rule& r) { return r.name == "other"; });
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].units, 5);
    auto all = pool.take_all();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].units, 7);
    EXPECT_EQ(pool.stats().pooled, 0);
}

TEST(reserve_pool, a_reload_keeps_the_units_only_of_a_rule_it_did_not_change) {
    const auto then = target_of(10).rule;
    EXPECT_TRUE(reserve_unchanged(then, then));
    auto now = then;
    now.exhausted.message = "another answer";  // nothing about the row or the reserve
    EXPECT_TRUE(reserve_unchanged(then, now));
    now = then;
    now.reserve.reset();  // reserve dropped
    EXPECT_FALSE(reserve_unchanged(then, now));
    now = then;
    now.reserve->block = 20;
    EXPECT_FALSE(reserve_unchanged(then, now));
    now = then;
    now.floor = 5;
    EXPECT_FALSE(reserve_unchanged(then, now));
    now = then;
    now.table.schema = "other";
    EXPECT_FALSE(reserve_unchanged(then, now));
    now = then;
    now.units = 2;
    EXPECT_FALSE(reserve_unchanged(then, now));
}

// ---- a transaction's take served from the pool ---------------------------------------------------

struct served_session {
    reserve_pool pool;
    session s{variant_id::reserve};
    served_session() { s.reserve = &pool; }
};

TEST(reserve_op, take_in_a_transaction_is_served_from_the_pool_and_never_sent) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 2, clock::now());
    auto t = r.s.exec(take_sql, {}, in_trans);
    EXPECT_EQ(t.d.what, verdict::take);
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.deferred(), events{event::reserve_served});
    ASSERT_EQ(r.s.memory.deferred.size(), 1u);
    EXPECT_TRUE(r.s.memory.deferred[0].reserved);
    EXPECT_EQ(r.pool.pooled(rule, key1), 1);
    // The claim that follows is backed by it: sent as is.
    auto claim = r.s.exec(r.s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(claim.sent().size(), 1u);
    // COMMIT sends nothing first; its end consumes the unit.
    auto commit = r.s.exec("COMMIT", {}, in_trans);
    EXPECT_TRUE(commit.sent().empty());
    auto dropped = r.s.end(true);
    auto settled = settle_reserved(r.pool, dropped, true);
    ASSERT_EQ(settled.size(), 1u);
    EXPECT_EQ(settled[0].first, event::reserve_committed);
    EXPECT_TRUE(dropped.empty());
    EXPECT_EQ(r.pool.stats().handed, 0);
    EXPECT_EQ(r.pool.pooled(rule, key1), 1);
}

TEST(reserve_op, rollback_puts_the_unit_back_in_the_pool) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 1, clock::now());
    (void)r.s.exec(take_sql, {}, in_trans);
    EXPECT_EQ(r.pool.pooled(rule, key1), 0);
    auto dropped = r.s.end(false);
    auto settled = settle_reserved(r.pool, dropped, false);
    ASSERT_EQ(settled.size(), 1u);
    EXPECT_EQ(settled[0].first, event::reserve_returned);
    EXPECT_EQ(r.pool.pooled(rule, key1), 1);
    EXPECT_EQ(r.pool.stats().handed, 0);
}

TEST(reserve_op, empty_pool_sends_the_take_to_the_row_as_without_reserve) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    auto t = r.s.exec(take_sql, {ok_rows(1, in_trans)}, in_trans);
    ASSERT_EQ(t.sent().size(), 1u);
    EXPECT_NE(t.sent()[0].find("remain >= 1"), std::string::npos) << t.sent()[0];
    EXPECT_TRUE(t.has(event::took));
    EXPECT_TRUE(r.s.memory.deferred.empty());
}

TEST(reserve_op, sold_out_pool_answers_exhausted_without_the_database) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 0, clock::now());
    auto t = r.s.exec(take_sql, {}, in_trans);
    EXPECT_TRUE(t.sent().empty());
    EXPECT_TRUE(t.has(event::exhausted));
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::error);
    EXPECT_EQ(t.last().answer.code, 1644);
    // Its claim is refused as after any refused take.
    auto claim = r.s.exec(r.s.claim_sql("7", "1"), {}, in_trans);
    EXPECT_TRUE(claim.sent().empty());
}

TEST(reserve_op, autocommit_take_is_served_and_consumed_at_once) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 5, clock::now());
    auto t = r.s.exec(take_sql, {}, autocommit);
    EXPECT_TRUE(t.sent().empty());  // never sent: the unit left the row with the block
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.last().status & protocol::status::in_trans, 0);  // no transaction left open
    EXPECT_EQ(t.deferred(), (events{event::reserve_served, event::reserve_committed}));
    EXPECT_TRUE(r.s.memory.deferred.empty());  // nothing for a COMMIT to settle
    EXPECT_EQ(r.pool.pooled(rule, key1), 4);
    EXPECT_EQ(r.pool.stats().handed, 0);  // consumed, not handed to a transaction
    // The claim that follows (on any connection) is backed by it, as by a take the row committed.
    auto claim = r.s.exec(r.s.claim_sql("7", "1"), {ok_rows(1)}, autocommit);
    EXPECT_EQ(claim.sent().size(), 1u);
    EXPECT_FALSE(claim.has(event::claim_unbacked));
}

TEST(reserve_op, autocommit_duplicate_gives_the_unit_back_to_the_row) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 1, clock::now());
    (void)r.s.exec(take_sql, {}, autocommit);
    EXPECT_EQ(r.pool.pooled(rule, key1), 0);
    // The unit was consumed when the take was answered: a duplicate claim gives it back to the row,
    // as it would a take the row committed.
    auto dup = r.s.exec(r.s.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)}, autocommit);
    ASSERT_EQ(dup.sent().size(), 2u);
    EXPECT_NE(dup.sent()[1].find("`remain` = `remain` + 1"), std::string::npos) << dup.sent()[1];
    EXPECT_TRUE(dup.has(event::compensated));
    EXPECT_EQ(r.pool.stats().handed, 0);
}

TEST(reserve_op, no_pool_sends_the_take_to_the_row) {
    session plain(variant_id::reserve);  // no pool: the sidecar has no reserve connection
    ASSERT_TRUE(plain.ready()) << plain.error();
    auto u = plain.exec(take_sql, {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(u.sent().size(), 1u);
    auto v = plain.exec(take_sql, {ok_rows(1)}, autocommit);
    EXPECT_EQ(v.sent().size(), 1u);
}

TEST(reserve_op, a_read_that_finds_the_row_empty_releases_the_last_units) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 2, clock::now());
    const std::string read = "SELECT remain FROM coupon_stock WHERE campaign_id = 1";
    (void)r.s.exec(read, {counter_row(5)}, autocommit);  // stock in the row: the units stay
    EXPECT_TRUE(r.pool.take_idle(clock::now()).empty());
    // The app holds the row's lock (FOR UPDATE in its transaction): a give-back would wait for it.
    (void)r.s.exec(read + " FOR UPDATE", {counter_row(0, in_trans)}, in_trans);
    EXPECT_TRUE(r.pool.take_idle(clock::now()).empty());
    (void)r.s.exec("COMMIT", {}, in_trans);
    (void)r.s.end(true);
    // The row empty, read without its lock: an app answering "sold out" itself would leave these two.
    (void)r.s.exec(read, {counter_row(0)}, autocommit);
    auto back = r.pool.take_idle(clock::now());
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].units, 2);
}

TEST(reserve_op, duplicate_claim_returns_the_unit_to_the_pool) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 1, clock::now());
    (void)r.s.exec(take_sql, {}, in_trans);
    auto dup = r.s.exec(r.s.claim_sql("7", "1"), {error_reply(1062, in_trans)}, in_trans);
    EXPECT_EQ(dup.sent().size(), 1u);  // the claim only: no give-back of a unit the row never lost
    EXPECT_TRUE(dup.has(event::compensated));
    EXPECT_EQ(dup.deferred(), events{event::reserve_returned});
    EXPECT_TRUE(r.s.memory.deferred.empty());
    EXPECT_EQ(r.pool.pooled(rule, key1), 1);
    EXPECT_EQ(r.pool.stats().handed, 0);
}

TEST(reserve_op, rollback_to_a_savepoint_before_the_take_returns_its_unit) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 3, clock::now());
    (void)r.s.exec(take_sql, {}, in_trans);  // before the savepoint: stays
    r.s.memory.set_savepoint("a", 0);
    (void)r.s.exec(take_sql, {}, in_trans);  // after it: undone by ROLLBACK TO SAVEPOINT a
    std::vector<session_memory::returned_take> returned;
    ASSERT_TRUE(r.s.memory.rollback_to_savepoint("A", returned));
    ASSERT_EQ(r.s.memory.reserve_undone.size(), 1u);
    auto settled = settle_reserved(r.pool, r.s.memory.reserve_undone, false);
    ASSERT_EQ(settled.size(), 1u);
    EXPECT_EQ(settled[0].first, event::reserve_returned);
    EXPECT_EQ(r.pool.pooled(rule, key1), 2);
    ASSERT_EQ(r.s.memory.deferred.size(), 1u);  // the first take is the transaction's still
    auto dropped = r.s.end(true);
    EXPECT_EQ(settle_reserved(r.pool, dropped, true).size(), 1u);
    EXPECT_EQ(r.pool.stats().handed, 0);
}

TEST(reserve_op, commit_turned_rollback_returns_the_served_units) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 1, clock::now());
    (void)r.s.exec(take_sql, {}, in_trans);  // served: the block's one unit
    (void)r.s.exec(r.s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    (void)r.s.exec(r.s.claim_sql("8", "1"), {ok_rows(1, in_trans)}, in_trans);  // a claim before its take
    ASSERT_TRUE(r.pool.begin_refill(target_of(10), key1, 1, clock::now()));
    r.pool.end_refill(rule, key1, 0, false, clock::now());  // the row is empty
    auto refused = r.s.exec(take_sql, {}, in_trans);
    EXPECT_TRUE(refused.has(event::exhausted));
    EXPECT_TRUE(r.s.memory.transaction_poisoned);
    // COMMIT becomes ROLLBACK: nothing committed, the served unit goes back to the block.
    auto commit = r.s.exec("COMMIT", {ok_rows(0, autocommit)}, in_trans);
    EXPECT_EQ(commit.sent(), std::vector<std::string>{"ROLLBACK"});
    EXPECT_EQ(commit.deferred(), events{event::reserve_returned});
    EXPECT_EQ(r.pool.pooled(rule, key1), 1);
    EXPECT_EQ(r.pool.stats().handed, 0);
}

TEST(reserve_op, a_statement_on_the_table_sends_nothing_first) {
    served_session r;
    ASSERT_TRUE(r.s.ready()) << r.s.error();
    refill(r.pool, 3, clock::now());
    (void)r.s.exec(take_sql, {}, in_trans);
    auto read = r.s.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 1", {counter_row(9, in_trans)}, in_trans);
    EXPECT_EQ(read.sent().size(), 1u);  // the read only
    EXPECT_EQ(r.s.memory.deferred.size(), 1u);
}

}  // namespace
}  // namespace claimguard::engine::test
