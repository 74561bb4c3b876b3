// claim_operation with scripted database replies: the issue 9 reproducers (pools, stale reads,
// @Version, every insert form) and the bookkeeping across connections of one sidecar.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const std::string conditional_take =
    "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 1 AND remain >= 1";
const std::string give_back_one =
    "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 1";

// R1: A reads 100; B and C each write the stale "remain = 99"; D and E insert. Directly: remain 99
// and 2 orders. With no read on their own connections, each write takes one unit only if it lowers
// the counter: B's does; C's (99 at 99) is a stale write, refused, so E's claim has no take behind it.
TEST(operation, pool_lends_a_connection_per_statement) {
    take_ledger ledger;
    session a(variant_id::coupon, &ledger, 1), b(variant_id::coupon, &ledger, 2), c(variant_id::coupon, &ledger, 3),
        d(variant_id::coupon, &ledger, 4), e(variant_id::coupon, &ledger, 5);
    ASSERT_TRUE(a.ready()) << a.error();
    a.read("1", 100);
    auto tb = b.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {ok_rows(1)});
    ASSERT_EQ(tb.sent(), std::vector<std::string>{conditional_take + " AND remain > 99"});
    EXPECT_EQ(tb.last().type, action::kind::reply_client);
    EXPECT_TRUE(tb.has(event::took));
    auto tc = c.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {ok_rows(0), counter_row(99)});
    EXPECT_TRUE(tc.has(event::not_lower));
    EXPECT_EQ(tc.last().type, action::kind::answer);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 1u);
    auto td = d.exec(d.claim_sql("4", "1"), {ok_rows(1)});
    EXPECT_TRUE(td.has(event::claim_inserted));
    auto te = e.exec(e.claim_sql("5", "1"), {});
    EXPECT_TRUE(te.has(event::blocked));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
}

// The admission queue answers a waiting take sold out: the exhausted answer, the refusal noted, so
// the claim INSERT that follows never reaches the database; nothing is sent.
TEST(operation, sold_out_answer_of_the_admission_queue_for_a_take) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.sold_out("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1");
    ASSERT_EQ(t.d.what, verdict::take);
    EXPECT_TRUE(t.sent().empty());
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.code, 1644);
    EXPECT_EQ(t.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_TRUE(t.has(event::exhausted));
    auto claim = s.exec(s.claim_sql("5", "1"), {});
    EXPECT_TRUE(claim.sent().empty());
    EXPECT_TRUE(claim.has(event::blocked));
}

// ... and the app's own guarded decrement gets the 0-rows OK the server would give.
TEST(operation, sold_out_answer_of_the_admission_queue_for_a_guarded_decrement) {
    session s(variant_id::coupon);
    auto t = s.sold_out("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain >= 1");
    ASSERT_EQ(t.d.what, verdict::track_decrement);
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 0u);
    EXPECT_FALSE(t.has(event::exhausted));  // not a take's answer: counted by the queue's metric only
}

// The same pool when sold out: the write is refused, and the INSERT that follows on another
// connection has no take behind it, so it never reaches the database.
TEST(operation, claim_without_a_take_is_refused_on_any_connection) {
    take_ledger ledger;
    session b(variant_id::coupon, &ledger, 2), c(variant_id::coupon, &ledger, 3);
    ASSERT_TRUE(b.ready()) << b.error();
    auto t = b.exec("UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1", {ok_rows(0), counter_row(0)});
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.code, 1644);
    EXPECT_TRUE(t.has(event::exhausted));
    auto claim = c.exec(c.claim_sql("9", "1"), {});
    EXPECT_TRUE(claim.sent().empty());
    EXPECT_EQ(claim.last().type, action::kind::answer);
    EXPECT_EQ(claim.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_TRUE(claim.has(event::blocked));
}

// strictness: after_refused keeps the old behaviour for apps that insert first in autocommit: the
// claim goes in, counted and audited as not backed.
TEST(operation, lenient_rule_lets_an_unbacked_claim_in_and_counts_it) {
    session c(variant_id::lenient);
    ASSERT_TRUE(c.ready()) << c.error();
    auto claim = c.exec(c.claim_sql("9", "1"), {ok_rows(1)});
    EXPECT_EQ(claim.last().type, action::kind::reply_client);
    EXPECT_TRUE(claim.has(event::claim_unbacked));
}

// R4: the read before START TRANSACTION, then UPDATE = 99; INSERT; COMMIT on two connections.
TEST(operation, read_before_the_transaction_does_not_matter) {
    take_ledger ledger;
    for (std::uint64_t id : {1, 2}) {
        session s(variant_id::coupon, &ledger, id);
        ASSERT_TRUE(s.ready()) << s.error();
        s.read("1", 100);
        auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {ok_rows(1, in_trans)}, in_trans);
        EXPECT_EQ(t.sent(), std::vector<std::string>{conditional_take});
        auto claim = s.exec(s.claim_sql(std::to_string(id), "1"), {ok_rows(1, in_trans)}, in_trans);
        EXPECT_TRUE(claim.has(event::claim_inserted));
        EXPECT_FALSE(claim.has(event::claim_ahead));
        s.end(true);
    }
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);  // each take was used by its claim
}

// R5: Hibernate's @Version write loses the version race while stock is left: the server's 0 rows
// stand (the app retries), never "sold out".
TEST(operation, version_conflict_is_not_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 99, version = 1 WHERE campaign_id = 1 AND version = 0",
                    {ok_rows(0, in_trans), counter_row(99, in_trans)}, in_trans);
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(t.sent()[1], "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 1");
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::conflict));
    EXPECT_FALSE(t.has(event::exhausted));
    // Not refused: a claim that follows is not answered "sold out" by this session's memory.
    const auto* e = s.entry({"1"});
    EXPECT_TRUE(e == nullptr || !e->refused);
}

// A decrement joined with its campaign (`AND c.status = 'ON'`), unguarded: the take keeps the join
// and adds the guard on the stock table's alias; zero rows with stock left is the app's own
// condition failing (its 0 rows stand), never "sold out".
TEST(operation, joined_decrement_whose_other_condition_fails_is_not_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
        "WHERE s.campaign_id = 1 AND c.status = 'ON'",
        {ok_rows(0), counter_row(5)});
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(
        t.sent()[0],
        "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1, s.`version` = "
        "s.`version` + 1 WHERE s.campaign_id = 1 AND c.status = 'ON' AND s.remain >= 1");
    EXPECT_EQ(t.sent()[1], "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 1");
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::conflict));
    EXPECT_FALSE(t.has(event::exhausted));
}

TEST(operation, joined_decrement_when_sold_out_is_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
        "WHERE s.campaign_id = 1 AND c.status = 'ON'",
        {ok_rows(0), counter_row(0)});
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_TRUE(t.has(event::exhausted));
}

// MyBatis `remain - #{num} >= 0`, bound: the app's own guard is sufficient, so its statement goes as
// written and its own 0 rows answer it.
TEST(operation, prepared_arithmetic_guard_is_forwarded_as_written) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const char* sql = "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ? AND remain - ? >= 0";
    auto sold = s.exec(sql, {ok_rows(1)}, autocommit, bound_integers({2, 1, 2}));
    EXPECT_EQ(sold.d.what, verdict::track_decrement);
    EXPECT_EQ(sold.actions.front().type, action::kind::send_statement);
    EXPECT_TRUE(sold.has(event::tracked));
    auto none = s.exec(sql, {ok_rows(0)}, autocommit, bound_integers({2, 1, 2}));
    EXPECT_EQ(none.last().type, action::kind::reply_client);
    EXPECT_FALSE(none.has(event::exhausted));
    // The guard bound lower than the amount does not protect it: the take adds its own.
    auto weak = s.exec(sql, {ok_rows(1)}, autocommit, bound_integers({2, 1, 1}));
    ASSERT_EQ(weak.actions.front().type, action::kind::send_sql);
    EXPECT_EQ(weak.actions.front().sql.sql,
              "UPDATE coupon_stock SET remain = remain - 2, `version` = `version` + 1 WHERE campaign_id = ? AND "
              "remain - ? >= 0 AND remain >= 2");
}

TEST(operation, version_write_when_sold_out_is_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 0, version = 9 WHERE campaign_id = 1 AND version = 8",
                    {ok_rows(0), counter_row(0)});
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_TRUE(t.has(event::exhausted));
}

// Hibernate binds its values: the version predicate and the key keep their placeholders.
TEST(operation, prepared_version_write_keeps_the_app_predicate) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = ?, version = ? WHERE campaign_id = ? AND version = ?",
                    {ok_rows(1)}, autocommit, bound_integers({99, 3, 1, 2}));
    ASSERT_EQ(t.actions.front().type, action::kind::send_sql);
    EXPECT_EQ(t.actions.front().sql.sql,
              "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = ? AND "
              "version = ? AND remain >= 1 AND remain > ?");
    EXPECT_EQ(std::vector<std::uint32_t>(t.actions.front().sql.parameters.begin(), t.actions.front().sql.parameters.end()),
              (std::vector<std::uint32_t>{2, 3, 0}));
}

// Node mysql2 binds JS numbers as DOUBLE: 1.0 is the key 1 and the amount 2.0 is 2 units.
TEST(operation, doubles_compare_as_the_server_compares_them) {
    EXPECT_EQ(resolve_double(1.0).canonical, "1");
    EXPECT_EQ(resolve_double(1.0).integer, 1);
    EXPECT_EQ(resolve_double(-3.0).integer, -3);
    EXPECT_FALSE(resolve_double(1.5).integer.has_value());
    EXPECT_EQ(resolve_double(1.5).canonical, "1.5");
}

// mysql2 execute(): the write and the claim bound as doubles are the key 1 and a claim that uses
// the write's take (before: neither was decoded, 290 orders for 100 coupons).
TEST(operation, mysql2_double_binds) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto take = s.exec("UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", {ok_rows(1)}, autocommit,
                       bound_doubles({99.0, 1.0}));
    EXPECT_EQ(take.d.what, verdict::take) << take.d.note;
    EXPECT_EQ(take.d.key, key_tuple{"1"});
    auto claim = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)", {ok_rows(1)}, autocommit,
                        bound_doubles({7.0, 1.0}));
    EXPECT_EQ(claim.d.idempotency, (key_tuple{"7", "1"}));
    EXPECT_TRUE(claim.has(event::claim_inserted));
    EXPECT_FALSE(claim.has(event::claim_unbacked));
}

// The read right before says 100 and the app writes 90: it means ten units, the rule one; the
// sidecar cannot tell an order of ten from a stale read: refused by default (amount_evidence).
TEST(operation, read_contradicting_the_rule_units_is_refused) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    s.read("1", 100);
    auto t = s.exec("UPDATE coupon_stock SET remain = 90 WHERE campaign_id = 1", {});
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.d.reason, "amount_mismatch");
    EXPECT_TRUE(t.has(event::unmodeled_refused));
}

// A plain duplicate: the database's 1062 becomes "already claimed" and the unit goes back.
TEST(operation, duplicate_gives_the_unit_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec(s.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back_one}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_TRUE(t.has(event::duplicate_db));
    EXPECT_TRUE(t.has(event::compensated));
}

// The units given back are the units taken: an order of 2 refused as a duplicate gives back 2.
TEST(operation, two_unit_order_gives_back_two) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto take = s.exec("UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_EQ(take.d.units, 2);
    auto t = s.exec(s.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)});
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(t.sent()[1],
              "UPDATE `coupon_stock` SET `remain` = `remain` + 2, `version` = `version` + 1 WHERE `campaign_id` = 1");
}

// INSERT IGNORE: a duplicate is OK with 0 rows; the unit goes back and the server's OK stands.
TEST(operation, insert_ignore_duplicate) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (7, 1)", {ok_rows(0), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back_one}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::duplicate_db));
}

// Django on MariaDB 10.5+ inserts with RETURNING: the reply is a result set of the new row
// (caught by the app zoo's apps.django: the INSERT was refused as unmodeled and its take leaked).
TEST(operation, insert_returning_is_a_claim) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    reply_summary one_row;
    one_row.status = autocommit;
    one_row.rows = 1;
    auto t = s.exec("INSERT INTO `coupon_order` (`user_id`, `campaign_id`) VALUES (7, 1) RETURNING `coupon_order`.`id`",
                    {one_row});
    EXPECT_EQ(t.d.what, verdict::claim) << t.d.note;
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

// ON DUPLICATE KEY UPDATE and REPLACE are sent as the plain INSERT first: a duplicate shows as
// 1062, the unit goes back, then the app's own statement runs and its reply is the answer.
TEST(operation, on_duplicate_key_update_duplicate) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1) ON DUPLICATE KEY UPDATE user_id = user_id",
                    {error_reply(1062), ok_rows(1), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1)",
                                                  give_back_one, "<statement>"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

TEST(operation, replace_inserts_plainly_when_new) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec("REPLACE INTO coupon_order (user_id, campaign_id) VALUES (7, 1)", {ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1)"}));
    EXPECT_TRUE(t.has(event::claim_inserted));
}

// The duplicate of a pooled app: the take was made on another connection; it still goes back.
TEST(operation, duplicate_on_another_connection_gives_back_that_take) {
    take_ledger ledger;
    session b(variant_id::coupon, &ledger, 2), c(variant_id::coupon, &ledger, 3);
    ASSERT_TRUE(b.ready()) << b.error();
    (void)b.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = c.exec(c.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back_one}));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
}

// A hand-fixed app gives the unit back itself after "already claimed": absorbed, not applied twice.
TEST(operation, app_give_back_after_ours_is_absorbed) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain >= 1", {ok_rows(1)});
    (void)s.exec(s.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)});
    auto t = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {});
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_TRUE(t.has(event::absorbed));
    // A second increment is a real restock.
    auto again = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_EQ(again.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_TRUE(again.has(event::restocked));
}

// Redis says "already claimed": no insert; the unit goes back.
TEST(operation, redis_duplicate) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec(s.claim_sql("7", "1"), {ok_rows(1)}, autocommit, resolve_literal, redis_reply::held, true);
    EXPECT_EQ(t.actions.front().type, action::kind::redis_acquire);
    EXPECT_EQ(t.sent(), std::vector<std::string>{give_back_one});
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_TRUE(t.has(event::duplicate_redis));
}

// Redis says a claim not committed yet holds the key (issue 17 row 17: an optimistic ORM's losing
// claim, rolled back after): the database's unique index decides, as without claimguard. The claim
// goes in (the other transaction rolled back) and holds no Redis key of its own.
TEST(operation, redis_pending_leaves_the_claim_to_the_database) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = s.exec(s.claim_sql("7", "1"), {ok_rows(1)}, autocommit, resolve_literal, redis_reply::pending, true);
    EXPECT_EQ(t.actions.front().type, action::kind::redis_acquire);
    EXPECT_EQ(t.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_FALSE(t.has(event::duplicate_redis));
    // And when the other transaction committed: the database says duplicate, the unit goes back.
    (void)s.exec("UPDATE coupon_stock SET remain = 4 WHERE campaign_id = 1", {ok_rows(1)});
    auto dup = s.exec(s.claim_sql("7", "1"), {error_reply(1062), ok_rows(1)}, autocommit, resolve_literal,
                      redis_reply::pending, true);
    EXPECT_TRUE(dup.has(event::duplicate_db));
    EXPECT_TRUE(dup.has(event::compensated));
}

// A transaction that borrowed a committed take and rolled back returns it.
TEST(operation, rolled_back_transaction_returns_what_it_borrowed) {
    take_ledger ledger;
    session b(variant_id::coupon, &ledger, 2), c(variant_id::coupon, &ledger, 3);
    ASSERT_TRUE(b.ready()) << b.error();
    (void)b.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1)});
    auto t = c.exec(c.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
    c.end(false);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 1u);
}

// A transaction's take that no claim used goes to the ledger when it commits, not before.
TEST(operation, transaction_take_reaches_the_ledger_at_commit) {
    take_ledger ledger;
    session s(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
    s.end(true);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 1u);
}

// Autocommit off (Hibernate, SQLAlchemy): every statement is in a transaction even before the
// server says IN_TRANS; a take waits for the COMMIT like in BEGIN ... COMMIT.
TEST(operation, autocommit_off_is_a_transaction) {
    take_ledger ledger;
    session s(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1", {ok_rows(1, 0x0001)}, 0);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
    s.end(false);  // rolled back: the take never happened
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
}

// Insert first in a transaction whose decrement never comes: the COMMIT becomes a ROLLBACK.
TEST(operation, claim_ahead_without_its_decrement_rolls_back_at_commit) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto claim = s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    EXPECT_TRUE(claim.has(event::claim_ahead));
    auto commit = s.exec("COMMIT", {ok_rows(0)}, in_trans);
    EXPECT_EQ(commit.d.what, verdict::rollback_instead);
    EXPECT_EQ(commit.sent(), std::vector<std::string>{"ROLLBACK"});
    EXPECT_EQ(commit.last().answer.code, 1644);
    // Not "sold out": no decrement was refused, none came (issue 17 row 7, TypeORM's save of an
    // unchanged stock row).
    EXPECT_NE(commit.last().answer.message.find("no decrement"), std::string::npos) << commit.last().answer.message;
    EXPECT_EQ(commit.last().answer.message.find("sold out"), std::string::npos);
}

// A refused decrement does not outlive its transaction: the connection's next attempt (a pool
// reusing it) is decided afresh (caught by incident.modes.insert_first_transaction).
TEST(operation, refusal_ends_with_the_transaction) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    auto refused = s.exec("UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1",
                          {ok_rows(0, in_trans), counter_row(0, in_trans)}, in_trans);
    EXPECT_TRUE(refused.has(event::exhausted));
    (void)s.exec("COMMIT", {ok_rows(0)}, in_trans);
    auto next = s.exec(s.claim_sql("8", "1"), {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(next.d.what, verdict::claim) << next.d.note;
    EXPECT_TRUE(next.has(event::claim_ahead));
}

// Insert first in a transaction, then the decrement: the decrement backs the claim, COMMIT stands.
TEST(operation, claim_ahead_backed_by_its_decrement_commits) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    (void)s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {ok_rows(1, in_trans)}, in_trans);
    auto commit = s.exec("COMMIT", {}, in_trans);
    EXPECT_EQ(commit.d.what, verdict::forward);
    EXPECT_EQ(commit.last().type, action::kind::relay);
}

// Not modelled: refused with an ERR naming the rule, or forwarded by policy; counted either way.
TEST(operation, unmodeled_refused_and_forwarded) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1; INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1)", {});
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_NE(t.last().answer.message.find("rule coupon_stock refuses this statement"), std::string::npos)
        << t.last().answer.message;
    EXPECT_TRUE(t.has(event::unmodeled_refused));

    session f(variant_id::forward_unmodeled);
    ASSERT_TRUE(f.ready()) << f.error();
    auto fwd = f.exec("UPDATE coupon_stock SET remain = remain - 1", {});
    EXPECT_EQ(fwd.last().type, action::kind::relay);
    EXPECT_TRUE(fwd.has(event::unmodeled_forwarded));
}

// Observe mode: nothing changes on the wire; the memory and ledger follow enforce mode.
TEST(operation, observe_mode_relays_and_reports) {
    take_ledger ledger;
    session s(variant_id::observe, &ledger, 1);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {});
    EXPECT_EQ(t.last().type, action::kind::relay);
    EXPECT_TRUE(t.has(event::would));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 1u);
    auto claim = s.exec(s.claim_sql("7", "1"), {});
    EXPECT_EQ(claim.last().type, action::kind::relay);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);
}

// The ledger's limits: old takes expire (counted), the per-key list is bounded.
TEST(take_ledger_test, takes_expire_and_are_counted) {
    take_ledger ledger;
    const auto t0 = take_ledger::clock::now();
    ledger.add_take("r", {"1"}, 1, 1, t0);
    EXPECT_FALSE(ledger.pop_take("r", {"1"}, 2, t0 + take_ledger::take_lifetime + std::chrono::seconds(1)).has_value());
    EXPECT_EQ(ledger.dropped_takes(), 1u);
    for (std::size_t i = 0; i < take_ledger::max_takes_per_key + 3; ++i) ledger.add_take("r", {"2"}, 1, 1, t0);
    EXPECT_EQ(ledger.waiting_takes("r", {"2"}), take_ledger::max_takes_per_key);
    EXPECT_EQ(ledger.dropped_takes(), 4u);
}

TEST(take_ledger_test, own_take_first) {
    take_ledger ledger;
    ledger.add_take("r", {"1"}, 1, 7);
    ledger.add_take("r", {"1"}, 2, 8);
    EXPECT_EQ(ledger.pop_take("r", {"1"}, 8), 2);
    EXPECT_EQ(ledger.pop_take("r", {"1"}, 8), 1);
    EXPECT_FALSE(ledger.pop_take("r", {"1"}, 8).has_value());
}

// ---- cancellations (DELETE of claim rows) ----------------------------------------------------------

const std::string cancel_sql = "DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 1";

// P15: the refund flow's DELETE was refused (other_statement). With on_cancel's default (keep_stock)
// it is forwarded as written, counted, and the app's own restock after it is a restock.
TEST(operation, p15_cancellation_keeps_stock_by_default) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(1)});
    EXPECT_EQ(t.d.what, verdict::cancel) << t.d.note;
    EXPECT_FALSE(t.d.unmodeled);
    EXPECT_EQ(t.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::cancelled_kept));
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_EQ(restock.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_TRUE(restock.has(event::restocked));
    // A DELETE that found no row is forwarded and not counted as a cancellation.
    auto none = s.exec(cancel_sql, {ok_rows(0)});
    EXPECT_TRUE(none.events.empty());
}

// return_stock in autocommit: our own transaction holds the DELETE and its give-back together; the
// app gets the DELETE's rows in an OK with the status after our COMMIT.
TEST(operation, cancellation_returns_stock_in_its_own_transaction) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(0, in_trans), ok_rows(1, in_trans), ok_rows(1, in_trans), ok_rows(0)});
    EXPECT_EQ(t.d.what, verdict::cancel) << t.d.note;
    EXPECT_TRUE(t.d.returns_stock);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", "<statement>", give_back_one, "COMMIT"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.last().status, autocommit);
    EXPECT_TRUE(t.has(event::cancelled_returned));
    // The app's own restock of that unit right after is the same give-back: answered, not sent.
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {});
    EXPECT_TRUE(restock.sent().empty());
    EXPECT_EQ(restock.last().type, action::kind::answer);
    EXPECT_EQ(restock.last().ok_rows, 1u);
    EXPECT_TRUE(restock.has(event::absorbed));
    // Once: a second increment is a real restock.
    auto again = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_EQ(again.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_TRUE(again.has(event::restocked));
}

// Several rows deleted: their units go back in one give-back, and each row's restock is absorbed once.
TEST(operation, cancellation_of_several_rows_gives_back_each) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE campaign_id = 1 AND created_at < '2026-01-01'",
                    {ok_rows(0, in_trans), ok_rows(2, in_trans), ok_rows(1, in_trans), ok_rows(0)});
    EXPECT_EQ(
        t.sent(),
        (std::vector<std::string>{
            "BEGIN", "<statement>",
            "UPDATE `coupon_stock` SET `remain` = `remain` + 2, `version` = `version` + 1 WHERE `campaign_id` = 1",
            "COMMIT"}));
    EXPECT_EQ(t.last().ok_rows, 2u);
    for (int i = 0; i < 2; ++i) {
        auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {});
        EXPECT_TRUE(restock.has(event::absorbed)) << i;
    }
}

// Nothing deleted (cancelled already, or by another connection that held the row lock): nothing
// goes back, and a restock after it is a real one.
TEST(operation, cancellation_that_deletes_nothing_gives_nothing_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(0, in_trans), ok_rows(0, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", "<statement>", "COMMIT"}));
    EXPECT_EQ(t.last().ok_rows, 0u);
    EXPECT_TRUE(t.events.empty());
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_TRUE(restock.has(event::restocked));
}

// A failed give-back (a lock wait timeout) rolls our transaction back, the DELETE with it: the app
// gets that error, and nothing is absorbed later.
TEST(operation, cancellation_whose_give_back_fails_is_rolled_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(0, in_trans), ok_rows(1, in_trans), error_reply(1205, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", "<statement>", give_back_one, "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);  // the give-back's ERR 1205
    EXPECT_FALSE(t.has(event::cancelled_returned));
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_TRUE(restock.has(event::restocked));
}

// The DELETE's own error: our transaction ends, the app gets the error.
TEST(operation, cancellation_whose_delete_fails_rolls_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(0, in_trans), error_reply(1205, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", "<statement>", "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

// In the app's transaction: no BEGIN/COMMIT of ours; the give-back follows the DELETE in it, the app's
// restock later in it is absorbed, and a ROLLBACK undoes both (nothing left to absorb).
TEST(operation, cancellation_in_a_transaction_gives_back_in_it) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(cancel_sql, {ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back_one}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.last().status, in_trans);
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {}, in_trans);
    EXPECT_TRUE(restock.has(event::absorbed));
    EXPECT_TRUE(restock.sent().empty());

    (void)s.exec(cancel_sql, {ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    s.end(false);  // the app's ROLLBACK: the DELETE and the give-back are undone together
    auto after = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {ok_rows(1)});
    EXPECT_TRUE(after.has(event::restocked));
}

// A refund in a transaction whose app restocks after COMMIT, in autocommit: still absorbed.
TEST(operation, cancellation_committed_then_restock_in_autocommit_is_absorbed) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec(cancel_sql, {ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    s.end(true);
    auto restock = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {});
    EXPECT_TRUE(restock.has(event::absorbed));
}

// return_stock needs the stock row: a DELETE by the row's id alone does not say it, so the rows are
// read first (cancel_by_id_test.cpp); one with ORDER BY / LIMIT is still refused by the rule's
// unmodeled policy (keep_stock forwards both).
TEST(operation, cancellation_without_the_stock_key) {
    session r(variant_id::return_stock);
    ASSERT_TRUE(r.ready()) << r.error();
    const auto by_id = r.run("DELETE FROM coupon_order WHERE id = 42");
    EXPECT_EQ(by_id.what, verdict::cancel);
    EXPECT_TRUE(by_id.read_claim_rows);
    auto refused = r.exec("DELETE FROM coupon_order WHERE id > 42 LIMIT 1", {});
    EXPECT_EQ(refused.d.what, verdict::refuse);
    EXPECT_EQ(refused.d.reason, "cancel_without_stock_key");
    EXPECT_TRUE(refused.has(event::unmodeled_refused));
    session k(variant_id::coupon);
    auto kept = k.exec("DELETE FROM coupon_order WHERE id = 42", {ok_rows(1)});
    EXPECT_EQ(kept.d.what, verdict::cancel);
    EXPECT_TRUE(kept.has(event::cancelled_kept));
}

// A prepared DELETE: the give-back reuses the statement's bound stock key.
TEST(operation, prepared_cancellation_gives_back_the_bound_key) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE user_id = ? AND campaign_id = ?",
                    {ok_rows(0, in_trans), ok_rows(1, in_trans), ok_rows(1, in_trans), ok_rows(0)}, autocommit,
                    bound_integers({5, 3}));
    ASSERT_EQ(t.sent().size(), 4u);
    EXPECT_EQ(t.sent()[2],
              "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = ?");
    ASSERT_EQ(t.actions[2].sql.parameters.size(), 1u);
    EXPECT_EQ(t.actions[2].sql.parameters[0], 1u);  // campaign_id's ?
    EXPECT_EQ(t.d.key, key_tuple{"3"});
}

}  // namespace
}  // namespace claimguard::engine::test
