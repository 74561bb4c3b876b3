// The end of each command for a transaction's claim bookkeeping (engine::transaction_tracker): the
// no-leak invariant's "a take enters the ledger only when its transaction committed", decided from
// what the command said and what the server's reply says, without a session or a socket.
#include <gtest/gtest.h>

#include "proxy/engine/transaction_tracker.hpp"

namespace claimguard::engine::test {
namespace {

namespace match = rules::match;
using ev = match::transaction_event;

constexpr std::uint16_t autocommit = 0x0002;
constexpr std::uint16_t in_trans = 0x0003;
constexpr std::uint64_t session_id = 7;
const std::string rule = "coupon_stock";
const key_tuple key{"77"};

match::match_result boundary(ev e, std::string_view savepoint = {}) {
    match::match_result r;
    match::transaction_boundary b;
    b.event = e;
    b.savepoint = savepoint;
    r.facts.emplace_back(b);
    return r;
}

struct transaction_end : ::testing::Test {
    session_memory memory;
    take_ledger ledger;
    transaction_tracker tracker;

    // A take of the open transaction, as a claim operation records it.
    void take_in_transaction() { memory.entry(rule, key).transaction_takes.push_back(1); }
    transaction_tracker::end_steps finish(bool was_in, std::uint16_t status, bool failed = false) {
        return tracker.finish({was_in, status, failed}, memory, ledger, session_id);
    }
    std::size_t waiting() const { return ledger.waiting_takes(rule, key); }
};

TEST_F(transaction_end, commit_moves_the_takes_into_the_ledger_and_keeps_the_keys) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::commit));
    auto steps = finish(true, autocommit);
    EXPECT_TRUE(steps.ended);
    EXPECT_TRUE(steps.committed);
    EXPECT_TRUE(steps.release.empty());
    ASSERT_EQ(steps.committed_keys.size(), 1u);  // marked committed: a later claim of it is a duplicate
    EXPECT_EQ(steps.committed_keys[0].key, "lock:1:77");
    EXPECT_EQ(waiting(), 1u);
    EXPECT_EQ(tracker.held(), 0u);
}

TEST_F(transaction_end, rollback_gives_back_the_keys_and_no_take_enters_the_ledger) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::rollback));
    auto steps = finish(true, autocommit);
    EXPECT_TRUE(steps.ended);
    EXPECT_FALSE(steps.committed);
    ASSERT_EQ(steps.release.size(), 1u);
    EXPECT_EQ(steps.release[0].key, "lock:1:77");
    EXPECT_TRUE(steps.committed_keys.empty());
    EXPECT_EQ(waiting(), 0u);
}

// A deadlock: the ERR ends the transaction (the flags say so), nothing was committed.
TEST_F(transaction_end, an_error_that_ended_the_transaction_is_a_rollback) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    auto steps = finish(true, autocommit, true);
    EXPECT_TRUE(steps.ended);
    EXPECT_FALSE(steps.committed);
    EXPECT_EQ(steps.release.size(), 1u);
    EXPECT_EQ(waiting(), 0u);
}

// A COMMIT the server refused (not a deadlock): the transaction is still open on the server, so
// nothing of it ends here.
TEST_F(transaction_end, a_failed_commit_that_left_the_transaction_open_ends_nothing) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::commit));
    auto steps = finish(true, in_trans, true);
    EXPECT_FALSE(steps.ended);
    EXPECT_EQ(tracker.held(), 1u);
    EXPECT_EQ(memory.entry(rule, key).transaction_takes.size(), 1u);
}

// BEGIN inside a transaction commits it and opens the next: the flags say "in transaction" before
// and after, the statement says it ended.
TEST_F(transaction_end, begin_inside_a_transaction_commits_it) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::begin));
    auto steps = finish(true, in_trans);
    EXPECT_TRUE(steps.ended);
    EXPECT_TRUE(steps.committed);
    EXPECT_EQ(waiting(), 1u);
    EXPECT_TRUE(steps.release.empty());
    EXPECT_EQ(tracker.held(), 0u);  // the committed claim's key is not the next transaction's
}

TEST_F(transaction_end, a_statement_inside_the_transaction_ends_nothing) {
    take_in_transaction();
    auto steps = finish(true, in_trans);
    EXPECT_FALSE(steps.ended);
    EXPECT_EQ(waiting(), 0u);
}

TEST_F(transaction_end, rollback_to_savepoint_releases_the_keys_taken_after_it) {
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::savepoint, "s"));
    (void)finish(true, in_trans);
    tracker.hold({"lock:2:77", "t2"});
    take_in_transaction();
    tracker.expect(boundary(ev::rollback_to_savepoint, "`s`"));
    auto steps = finish(true, in_trans);
    EXPECT_FALSE(steps.ended);
    ASSERT_EQ(steps.release.size(), 1u);
    EXPECT_EQ(steps.release[0].key, "lock:2:77");
    EXPECT_EQ(tracker.held(), 1u);
    EXPECT_TRUE(memory.entry(rule, key).transaction_takes.empty());  // the take after s is undone
    tracker.expect(boundary(ev::commit));
    (void)finish(true, autocommit);
    EXPECT_EQ(waiting(), 0u);
}

TEST_F(transaction_end, a_failed_rollback_to_savepoint_undoes_nothing) {
    tracker.expect(boundary(ev::savepoint, "s"));
    (void)finish(true, in_trans);
    take_in_transaction();
    tracker.expect(boundary(ev::rollback_to_savepoint, "s"));
    (void)finish(true, in_trans, true);
    EXPECT_EQ(memory.entry(rule, key).transaction_takes.size(), 1u);
}

// XA PREPARE detaches the transaction (the flags may say it ended); XA COMMIT ends it.
TEST_F(transaction_end, xa_transactions_end_at_xa_commit_or_rollback_not_at_prepare) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::xa_prepare));
    auto prepared = finish(true, autocommit);
    EXPECT_FALSE(prepared.ended);
    EXPECT_EQ(waiting(), 0u);
    tracker.expect(boundary(ev::xa_commit));
    auto committed = finish(false, autocommit);
    EXPECT_TRUE(committed.ended);
    EXPECT_TRUE(committed.committed);
    EXPECT_EQ(waiting(), 1u);

    take_in_transaction();
    tracker.hold({"lock:2:77", "t2"});
    tracker.expect(boundary(ev::xa_prepare));
    (void)finish(true, autocommit);
    tracker.expect(boundary(ev::xa_rollback));
    auto rolled_back = finish(false, autocommit);
    EXPECT_TRUE(rolled_back.ended);
    EXPECT_FALSE(rolled_back.committed);
    EXPECT_EQ(rolled_back.release.size(), 1u);
    EXPECT_EQ(waiting(), 1u);  // only the first, committed take
}

TEST_F(transaction_end, release_all_gives_up_every_key) {
    tracker.hold({"a", "1"});
    tracker.hold({"b", "2"});
    EXPECT_EQ(tracker.release_all().size(), 2u);
    EXPECT_EQ(tracker.held(), 0u);
}

}  // namespace
}  // namespace claimguard::engine::test
