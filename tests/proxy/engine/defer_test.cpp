// defer_decrement with scripted replies: takes in transactions answered OK at once and sent just
// before COMMIT (or before the transaction's next statement on the table); refused at COMMIT,
// the COMMIT becomes ROLLBACK + the exhausted answer.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const std::string deferred_take_1 =
    "UPDATE `coupon_stock` SET `remain` = `remain` - 1, `version` = `version` + 1 WHERE `campaign_id` = 1 AND "
    "`remain` >= 1";
// An unguarded decrement: deferred whatever was read. (An absolute write is deferred only after a
// read in the transaction: without one it must lower the counter, which only the database can tell.)
const std::string absolute_write = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1";
const std::string read_counter = "SELECT remain FROM coupon_stock WHERE campaign_id = 1";
using events = std::vector<event>;
using sent = std::vector<std::string>;

// The take of a transaction: nothing reaches the database, the app hears OK 1 row.
trace deferred_write(session& s, std::uint16_t status = in_trans) {
    auto t = s.exec(absolute_write, {}, status);
    EXPECT_EQ(t.d.what, verdict::take);
    EXPECT_TRUE(t.sent().empty());
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_TRUE(t.has(event::deferred));
    return t;
}

TEST(defer, absolute_write_is_deferred_after_a_read_in_the_transaction) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec(read_counter, {counter_row(100, in_trans)}, in_trans);
    auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {}, in_trans);
    EXPECT_TRUE(t.has(event::deferred));
    EXPECT_TRUE(t.sent().empty());
}

TEST(defer, absolute_write_without_a_read_is_sent_in_place) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1", {ok_rows(1, in_trans)}, in_trans);
    EXPECT_FALSE(t.has(event::deferred));
    ASSERT_EQ(t.sent().size(), 1u);
    EXPECT_NE(t.sent()[0].find("remain > 99"), std::string::npos) << t.sent()[0];
}

TEST(defer, take_in_a_transaction_is_answered_at_once_and_kept) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = deferred_write(s);
    EXPECT_EQ(t.last().status & 0x0001, 0x0001);
    ASSERT_EQ(s.memory.deferred.size(), 1u);
    EXPECT_EQ(s.memory.deferred[0].sql, deferred_take_1);
    EXPECT_EQ(s.memory.deferred[0].units, 1);
}

TEST(defer, claim_is_backed_by_the_deferred_take_and_commit_sends_it_first) {
    take_ledger ledger;
    session s(variant_id::defer, &ledger);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto claim = s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(claim.sent(), sent{"<statement>"});  // the order table: no flush
    EXPECT_TRUE(claim.has(event::claim_inserted));
    EXPECT_FALSE(claim.has(event::claim_ahead));
    auto commit = s.exec("COMMIT", {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(commit.d.deferred, deferred_step::commit);
    EXPECT_EQ(commit.sent(), sent{deferred_take_1});
    EXPECT_EQ(commit.last().type, action::kind::relay);  // then the app's COMMIT, its reply the answer
    EXPECT_EQ(commit.deferred(), events{event::deferred_committed});
    EXPECT_TRUE(s.end(true).empty());
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"1"}), 0u);  // the claim used it
}

TEST(defer, refused_at_commit_becomes_rollback_and_sold_out) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    (void)s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    auto commit = s.exec("COMMIT", {ok_rows(0, in_trans), ok_rows(0)}, in_trans);
    EXPECT_EQ(commit.sent(), (sent{deferred_take_1, "ROLLBACK"}));
    EXPECT_EQ(commit.last().type, action::kind::answer);
    EXPECT_EQ(commit.last().answer.code, 1644);
    EXPECT_EQ(commit.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(commit.deferred(), (events{event::deferred_refused, event::rolled_back}));
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, second_take_refused_at_commit_rolls_back_the_first) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto second = s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 2", {}, in_trans);
    EXPECT_TRUE(second.has(event::deferred));  // another key: joins, flushes nothing
    auto again = s.exec(absolute_write, {}, in_trans);
    EXPECT_TRUE(again.sent().empty());  // the same rule's take joins the list instead of flushing it
    ASSERT_EQ(s.memory.deferred.size(), 3u);
    auto commit = s.exec("COMMIT", {ok_rows(1, in_trans), ok_rows(0, in_trans), ok_rows(0)}, in_trans);
    ASSERT_EQ(commit.sent().size(), 3u);
    EXPECT_NE(commit.sent()[1].find("`campaign_id` = 2"), std::string::npos);
    EXPECT_EQ(commit.sent()[2], "ROLLBACK");
    EXPECT_EQ(commit.deferred(), (events{event::deferred_committed, event::deferred_refused, event::deferred_dropped,
                                         event::rolled_back}));
}

TEST(defer, rollback_drops_the_takes_unsent) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto rollback = s.exec("ROLLBACK", {}, in_trans);
    EXPECT_EQ(rollback.d.deferred, deferred_step::none);
    EXPECT_TRUE(rollback.sent().empty());
    EXPECT_EQ(s.end(false).size(), 1u);  // the session counts it dropped
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, read_of_the_table_flushes_first_so_the_app_sees_its_write) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto read = s.exec(read_counter, {ok_rows(1, in_trans), counter_row(99, in_trans)}, in_trans);
    EXPECT_EQ(read.d.deferred, deferred_step::flush);
    EXPECT_EQ(read.sent(), (sent{deferred_take_1, "<statement>"}));
    EXPECT_EQ(read.deferred(), events{event::deferred_flushed});
    auto commit = s.exec("COMMIT", {}, in_trans);
    EXPECT_TRUE(commit.sent().empty());
    EXPECT_EQ(commit.last().type, action::kind::relay);
}

TEST(defer, any_statement_naming_the_table_flushes) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto star =
        s.exec("SELECT * FROM shop.coupon_stock s JOIN x ON x.id = s.campaign_id", {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(star.sent().front(), deferred_take_1);
    EXPECT_EQ(star.last().type, action::kind::relay);
}

TEST(defer, use_and_row_count_flush_everything) {
    for (auto sql : {"USE other", "SELECT ROW_COUNT()", "SAVEPOINT a"}) {
        session s(variant_id::defer);
        ASSERT_TRUE(s.ready()) << s.error();
        deferred_write(s);
        auto t = s.exec(sql, {ok_rows(1, in_trans)}, in_trans);
        EXPECT_EQ(t.d.deferred, deferred_step::flush) << sql;
        EXPECT_EQ(t.sent(), sent{deferred_take_1}) << sql;
    }
}

TEST(defer, refused_flush_poisons_the_transaction) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    (void)s.exec(s.claim_sql("7", "1"), {ok_rows(1, in_trans)}, in_trans);
    auto read = s.exec(read_counter, {ok_rows(0, in_trans), counter_row(0, in_trans)}, in_trans);
    EXPECT_EQ(read.deferred(), events{event::deferred_refused});
    EXPECT_EQ(read.last().type, action::kind::reply_client);  // the read itself is answered
    auto commit = s.exec("COMMIT", {ok_rows(0)}, in_trans);
    EXPECT_EQ(commit.d.what, verdict::rollback_instead);
    EXPECT_EQ(commit.sent(), sent{"ROLLBACK"});
    EXPECT_EQ(commit.last().answer.code, 1644);
}

TEST(defer, error_of_a_flush_is_the_answer) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto read = s.exec(read_counter, {error_reply(1205, in_trans)}, in_trans);
    EXPECT_EQ(read.sent(), sent{deferred_take_1});
    EXPECT_EQ(read.last().type, action::kind::reply_client);
    EXPECT_EQ(read.deferred(), events{event::deferred_failed});
    EXPECT_TRUE(s.memory.transaction_poisoned);
}

TEST(defer, statements_on_other_tables_pass_untouched) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    for (auto sql : {"SELECT name FROM users WHERE id = 1", "UPDATE users SET seen = 1 WHERE id = 1",
                     "INSERT INTO audit_trail VALUES (1)"}) {
        auto t = s.exec(sql, {}, in_trans);
        EXPECT_EQ(t.d.deferred, deferred_step::none) << sql;
        EXPECT_EQ(t.last().type, action::kind::relay) << sql;
    }
    EXPECT_EQ(s.memory.deferred.size(), 1u);
}

TEST(defer, implicit_commits_send_them_first) {
    for (auto sql : {"CREATE TABLE t2 (a INT)", "LOCK TABLES users WRITE", "BEGIN", "SET autocommit = 1",
                     "/* c */ ALTER TABLE users ADD b INT", "CALL settle()"}) {
        session s(variant_id::defer);
        ASSERT_TRUE(s.ready()) << s.error();
        deferred_write(s);
        auto t = s.exec(sql, {ok_rows(1, in_trans)}, in_trans);
        EXPECT_EQ(t.d.deferred, deferred_step::commit) << sql;
        EXPECT_EQ(t.sent(), sent{deferred_take_1}) << sql;
    }
}

TEST(defer, autocommit_is_never_deferred) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(absolute_write, {ok_rows(1)}, autocommit);
    EXPECT_EQ(t.sent().size(), 1u);
    EXPECT_TRUE(t.has(event::took));
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, autocommit_off_defers_and_reports_the_transaction_open) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = deferred_write(s, 0);
    EXPECT_EQ(t.last().status & 0x0001, 0x0001);
}

TEST(defer, rule_without_defer_takes_in_place) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(absolute_write, {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.sent().size(), 1u);
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, version_conditioned_writes_stay_in_place) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1 AND version = 3", {ok_rows(1, in_trans)},
                    in_trans);
    EXPECT_EQ(t.sent().size(), 1u);
    EXPECT_TRUE(t.has(event::took));
    auto more = s.exec("UPDATE coupon_stock SET remain = 99, note = 'x' WHERE campaign_id = 1", {ok_rows(1, in_trans)},
                       in_trans);
    EXPECT_EQ(more.sent().size(), 1u);  // another assignment: it would be lost in a deferred UPDATE
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, prepared_statement_keeps_its_bound_key_as_a_literal) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?", {}, in_trans, bound_integers({1, 42}));
    EXPECT_TRUE(t.has(event::deferred));
    ASSERT_EQ(s.memory.deferred.size(), 1u);
    EXPECT_EQ(s.memory.deferred[0].sql,
              "UPDATE `coupon_stock` SET `remain` = `remain` - 1, `version` = `version` + 1 WHERE `campaign_id` = 42 "
              "AND `remain` >= 1");
    EXPECT_TRUE(s.memory.deferred[0].sql.find('?') == std::string::npos);
}

TEST(defer, string_keys_go_as_hex_never_spliced) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 'ab''c'", {}, in_trans);
    (void)s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = '7'", {}, in_trans);
    (void)s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = '007'", {}, in_trans);
    ASSERT_EQ(s.memory.deferred.size(), 3u);
    EXPECT_NE(s.memory.deferred[0].sql.find("`campaign_id` = X'61622763' AND"), std::string::npos)
        << s.memory.deferred[0].sql;
    EXPECT_NE(s.memory.deferred[1].sql.find("`campaign_id` = 7 AND"), std::string::npos) << s.memory.deferred[1].sql;
    EXPECT_NE(s.memory.deferred[2].sql.find("`campaign_id` = X'303037' AND"), std::string::npos)
        << s.memory.deferred[2].sql;
}

TEST(defer, table_without_schema_is_pinned_to_the_current_database) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    const auto& env = env_for(variant_id::defer);
    statement st(absolute_write, *env.index);
    decision d = decide(st.facts(), *env.rules, resolve_literal, s.memory);
    take_ledger ledger;
    claim_operation op(d, st.parsed(), s.memory, ledger, operation_context{1, in_trans, false});
    op.set_database("shop");
    EXPECT_EQ(op.start().type, action::kind::answer);
    ASSERT_EQ(s.memory.deferred.size(), 1u);
    EXPECT_EQ(s.memory.deferred[0].sql.rfind("UPDATE `shop`.`coupon_stock` SET", 0), 0u) << s.memory.deferred[0].sql;
}

TEST(defer, duplicate_claim_cancels_the_deferred_take_instead_of_giving_back) {
    session s(variant_id::defer);
    ASSERT_TRUE(s.ready()) << s.error();
    deferred_write(s);
    auto dup = s.exec(s.claim_sql("7", "1"), {error_reply(1062, in_trans)}, in_trans);
    EXPECT_EQ(dup.sent(), sent{"<statement>"});  // no give-back of a unit never taken
    EXPECT_TRUE(dup.has(event::compensated));
    EXPECT_EQ(dup.deferred(), events{event::deferred_dropped});
    EXPECT_TRUE(s.memory.deferred.empty());
    // The app's own give-back of that unit is absorbed.
    auto give_back = s.exec("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1", {}, in_trans);
    EXPECT_TRUE(give_back.has(event::absorbed));
    auto commit = s.exec("COMMIT", {}, in_trans);
    EXPECT_TRUE(commit.sent().empty());
}

TEST(defer, observe_mode_never_defers) {
    session s(variant_id::observe);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(absolute_write, {}, in_trans);
    EXPECT_TRUE(t.has(event::would));
    EXPECT_TRUE(s.memory.deferred.empty());
}

TEST(defer, implicit_commit_detection) {
    EXPECT_FALSE(may_commit_implicitly("select 1"));
    EXPECT_FALSE(may_commit_implicitly("  (SELECT 1)"));
    EXPECT_FALSE(may_commit_implicitly("/* x */ INSERT INTO t VALUES (1)"));
    EXPECT_FALSE(may_commit_implicitly("SAVEPOINT a"));
    EXPECT_TRUE(may_commit_implicitly("TRUNCATE t"));
    EXPECT_TRUE(may_commit_implicitly("DROP TABLE t"));
    EXPECT_TRUE(may_commit_implicitly(""));
    EXPECT_TRUE(may_commit_implicitly("INSERT INTO t VALUES (1); COMMIT"));
    EXPECT_FALSE(may_commit_implicitly("INSERT INTO t VALUES (1);  "));
    EXPECT_TRUE(may_commit_implicitly("SET @@session.autocommit = ON"));
    EXPECT_FALSE(may_commit_implicitly("SET @a = 1"));
}

}  // namespace
}  // namespace claimguard::engine::test
