// Claims whose stock the claim table's trigger decrements (claim rule decremented_by_trigger): the
// INSERT is the take, never blocked for want of a take of the sidecar's; the counter read around it
// under the row lock decides the answer, whatever the trigger's guard is.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const std::string claim = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1)";
const std::string before_read = "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 1 FOR UPDATE";
const std::string after_read = "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 1";

// The trigger took one unit: our transaction commits, the app gets the INSERT's own OK (its affected
// rows and insert id) with the status after our COMMIT.
TEST(trigger_claims, autocommit_claim_is_the_take) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(5, in_trans), ok_rows(1, in_trans),
                            counter_row(4, in_trans), ok_rows(0)});
    EXPECT_EQ(t.d.what, verdict::claim) << t.d.note;
    EXPECT_TRUE(t.d.by_trigger);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", after_read, "COMMIT"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.last().kept_status);
    EXPECT_EQ(t.last().status, autocommit);
    EXPECT_TRUE(t.has(event::claimed_by_trigger));
    EXPECT_TRUE(t.has(event::claim_inserted));
    EXPECT_FALSE(t.has(event::blocked));
}

// The same rules without the field: the claim has no take of the sidecar's behind it and is blocked.
TEST(trigger_claims, without_the_field_the_claim_is_blocked) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {});
    EXPECT_FALSE(t.d.by_trigger);
    EXPECT_TRUE(t.sent().empty());
    EXPECT_TRUE(t.has(event::blocked));
}

// A guarded trigger that SIGNALs: the server undid the statement; its error is forwarded as sent.
TEST(trigger_claims, trigger_signal_is_forwarded) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(1, in_trans), error_reply(1644, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);  // the trigger's own ERR
    EXPECT_FALSE(t.last().kept_status);
    EXPECT_FALSE(t.has(event::claimed_by_trigger));
}

// No stock left when the row is locked: the INSERT is still sent, so a guarded trigger's own SIGNAL
// is what the app sees, as directly; a trigger that lets the row in without taking: sold out.
TEST(trigger_claims, sold_out_before_the_insert) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(0, in_trans), error_reply(1644, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);  // the trigger's SIGNAL
    auto quiet = s.exec(claim, {ok_rows(0, in_trans), counter_row(0, in_trans), ok_rows(1, in_trans),
                                counter_row(0, in_trans), ok_rows(0)});
    EXPECT_EQ(quiet.last().type, action::kind::answer);
    EXPECT_EQ(quiet.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(quiet.last().status, autocommit);
    EXPECT_TRUE(quiet.has(event::trigger_exhausted));
}

// No stock row at all: nothing to take.
TEST(trigger_claims, no_stock_row_is_sold_out) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        claim, {ok_rows(0, in_trans), ok_rows(0, in_trans), ok_rows(1, in_trans), ok_rows(0, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", after_read, "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_TRUE(t.has(event::trigger_exhausted));
}

// A trigger without a guard drove the counter below the floor: rolled back, the exhausted answer.
TEST(trigger_claims, unguarded_trigger_below_the_floor_is_rolled_back) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    // before 1, after -1: below floor 0 (checked first, whatever the amount).
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(1, in_trans), ok_rows(1, in_trans),
                            counter_row(-1, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", after_read, "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_TRUE(t.has(event::trigger_exhausted));
    EXPECT_FALSE(t.has(event::claim_inserted));
}

// A guard without SIGNAL updated no row: the row went in but nothing was taken. Rolled back, sold out.
TEST(trigger_claims, guard_without_signal_leaving_the_counter_is_sold_out) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(3, in_trans), ok_rows(1, in_trans),
                            counter_row(3, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", after_read, "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_TRUE(t.has(event::trigger_exhausted));
}

// The trigger took another amount than the rule's units: rolled back and refused, naming the rule.
TEST(trigger_claims, other_amount_is_refused) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(5, in_trans), ok_rows(1, in_trans),
                            counter_row(3, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", after_read, "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_NE(t.last().answer.message.find("rule coupon_order"), std::string::npos) << t.last().answer.message;
    EXPECT_NE(t.last().answer.message.find("by -2, not by -1"), std::string::npos) << t.last().answer.message;
    EXPECT_TRUE(t.has(event::trigger_mismatch));
}

// A duplicate (ERR 1062): rolled back, the rule's duplicate answer.
TEST(trigger_claims, duplicate_gets_the_duplicate_answer) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(5, in_trans), error_reply(1062, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", before_read, "<statement>", "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_EQ(t.last().status, autocommit);
    EXPECT_TRUE(t.has(event::duplicate_db));
}

// Redis says a committed claim holds the key: the duplicate answer without the database.
TEST(trigger_claims, redis_duplicate_answers_without_the_database) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {}, autocommit, resolve_literal, redis_reply::held, true);
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_TRUE(t.has(event::duplicate_redis));
}

// Inside the app's transaction: a savepoint instead of our own transaction.
TEST(trigger_claims, in_a_transaction_uses_a_savepoint) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim,
                    {ok_rows(0, in_trans), counter_row(2, in_trans), ok_rows(1, in_trans), counter_row(1, in_trans),
                     ok_rows(0, in_trans)},
                    in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"SAVEPOINT claimguard_trigger", before_read, "<statement>",
                                                  after_read, "RELEASE SAVEPOINT claimguard_trigger"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_FALSE(t.last().kept_status);  // the INSERT's OK says "in transaction", as it is
    EXPECT_TRUE(t.has(event::claimed_by_trigger));
    // No claim waits for a decrement: the COMMIT goes through.
    auto commit = s.exec("COMMIT", {}, in_trans);
    EXPECT_NE(commit.d.what, verdict::rollback_instead);
    EXPECT_EQ(commit.last().type, action::kind::relay);
}

// ... and sold out there: back to the savepoint, the app's transaction goes on.
TEST(trigger_claims, in_a_transaction_sold_out_rolls_back_to_the_savepoint) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim,
                    {ok_rows(0, in_trans), counter_row(2, in_trans), ok_rows(1, in_trans), counter_row(2, in_trans),
                     ok_rows(0, in_trans)},
                    in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"SAVEPOINT claimguard_trigger", before_read, "<statement>",
                                                  after_read, "ROLLBACK TO SAVEPOINT claimguard_trigger"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().status, in_trans);
    EXPECT_TRUE(t.has(event::trigger_exhausted));
}

// ... and the trigger's SIGNAL there: the server undid the statement; no savepoint rollback needed.
TEST(trigger_claims, in_a_transaction_an_error_is_forwarded) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(claim, {ok_rows(0, in_trans), counter_row(2, in_trans), error_reply(1644, in_trans)}, in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"SAVEPOINT claimguard_trigger", before_read, "<statement>"}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

// Shapes other than a one-row plain INSERT get the rule's unmodeled policy (reason trigger).
TEST(trigger_claims, other_shapes_are_unmodeled) {
    session s(variant_id::by_trigger);
    ASSERT_TRUE(s.ready()) << s.error();
    for (const std::string sql : {"INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (7, 1)",
                                  "INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, 1), (8, 1)",
                                  "REPLACE INTO coupon_order (user_id, campaign_id) VALUES (7, 1)"}) {
        auto d = s.run(sql);
        EXPECT_TRUE(d.unmodeled) << sql;
        EXPECT_EQ(d.reason, "trigger") << sql;
        EXPECT_EQ(d.what, verdict::refuse) << sql;
    }
}

// Observe mode changes nothing on the wire.
TEST(trigger_claims, observe_mode_forwards) {
    auto env = env_of_text([] {
        std::string text = read_coupon_yaml();
        replace_once(text, "default_mode: enforce", "default_mode: observe");
        replace_once(text, "    strictness: require_decrement",
                     "    decremented_by_trigger: true\n    strictness: require_decrement");
        return text;
    }());
    ASSERT_TRUE(env->error.empty()) << env->error;
    statement st(claim, *env->index);
    session_memory memory;
    take_ledger ledger;
    auto d = decide(st.facts(), *env->rules, resolve_literal, memory);
    ASSERT_TRUE(d.by_trigger);
    claim_operation op(d, st.parsed(), memory, ledger, operation_context{1, autocommit, false});
    EXPECT_EQ(op.start().type, action::kind::relay);
    auto events = op.take_events();
    EXPECT_EQ(events, std::vector<event>{event::would});
}

}  // namespace
}  // namespace claimguard::engine::test
