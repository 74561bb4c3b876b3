// The end of each client command (engine::command_end) with scripted replies, without a session or
// a socket: a commit keeps the Redis keys and moves the takes into the ledger, a rollback gives
// them back; ERR 1205 in a transaction asks the server whether the transaction survived
// (innodb_rollback_on_timeout); the give-backs a rollback leaves are sent in autocommit and each
// reply says compensated or not; the I/O lost under either; admission slots go back only outside a
// transaction; COM_RESET_CONNECTION / COM_CHANGE_USER abandon the transaction.
#include <gtest/gtest.h>

#include "proxy/engine/command_end.hpp"

namespace claimguard::engine::test {
namespace {

namespace match = rules::match;
using ev = match::transaction_event;
using ca = command_end_action::kind;

constexpr std::uint16_t autocommit = 0x0002;
constexpr std::uint16_t in_trans = 0x0003;
constexpr std::uint16_t er_lock_wait_timeout = 1205;
constexpr std::uint64_t session_id = 7;
const std::string rule = "coupon_stock";
const key_tuple key{"77"};
const std::string give_back_sql = "UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 77";

match::match_result boundary(ev e) {
    match::match_result r;
    match::transaction_boundary b;
    b.event = e;
    r.facts.emplace_back(b);
    return r;
}

command_outcome ok_outcome(bool was_in, std::uint16_t status) { return {was_in, status, false, 0}; }
command_outcome err_outcome(bool was_in, std::uint16_t status, std::uint16_t code) {
    return {was_in, status, true, code};
}

// One action with what the operation kept for it (command_end::sql(), rule(), settlement()).
struct recorded_action {
    ca type = ca::done;
    std::string sql;
    std::string rule;
    command_settlement settlement;
    [[nodiscard]] bool final() const { return type == ca::done || type == ca::fail; }
};

// What one command end asked for, and what it reported.
struct end_result {
    std::vector<recorded_action> actions;
    std::vector<give_back_result> results;
    std::uint16_t status = 0;
    [[nodiscard]] const recorded_action& last() const { return actions.back(); }
    [[nodiscard]] std::vector<ca> kinds() const {
        std::vector<ca> out;
        for (const auto& a : actions) out.push_back(a.type);
        return out;
    }
    // The one settle action's settlement.
    [[nodiscard]] const command_settlement& settled() const {
        for (const auto& a : actions)
            if (a.type == ca::settle) return a.settlement;
        static const command_settlement none;
        ADD_FAILURE() << "the command end did not settle";
        return none;
    }
};

struct command_end_test : ::testing::Test {
    session_memory memory;
    take_ledger ledger;
    transaction_tracker tracker;
    admission_slots slots;

    // A take of the open transaction, as a claim operation records it.
    void take_in_transaction() { memory.entry(rule, key).transaction_takes.push_back(1); }
    // A give-back this transaction made for a claim that did not happen, of a take committed before it.
    void give_back_of_a_committed_take() {
        memory.entry(rule, key).give_backs_of_committed_takes.push_back(give_back_sql);
    }
    std::size_t waiting() const { return ledger.waiting_takes(rule, key); }

    // Runs one command end: `script` answers its sends (ask_transaction, give_back) in order;
    // settle is carried out at once. Fails the test when the operation uses more or fewer inputs.
    end_result run(const command_outcome& o, std::vector<command_end_input> script = {}, bool with_ledger = true) {
        command_end end(o, memory, with_ledger ? &ledger : nullptr, tracker, slots, session_id);
        end_result r;
        auto a = end.resume(command_end_input::start());
        std::size_t next = 0;
        for (int guard = 0; guard < 32; ++guard) {
            recorded_action rec{a.type, std::string(end.sql()), std::string(end.rule()), {}};
            if (a.type == ca::settle) rec.settlement = std::move(end.settlement());
            r.actions.push_back(std::move(rec));
            for (auto& g : end.take_results()) r.results.push_back(std::move(g));
            if (a.final()) break;
            if (a.type == ca::settle) {
                a = end.resume(command_end_input::carried_out());
                continue;
            }
            EXPECT_LT(next, script.size()) << "the command end asked for more than the script answers";
            if (next >= script.size()) break;
            a = end.resume(script[next++]);
        }
        EXPECT_EQ(next, script.size()) << "the command end used fewer inputs than scripted";
        r.status = end.status();
        return r;
    }
};

TEST_F(command_end_test, commit_keeps_the_keys_and_moves_the_takes_into_the_ledger) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::commit));
    auto r = run(ok_outcome(true, autocommit));
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::done}));
    const auto& s = r.settled();
    EXPECT_TRUE(s.committed);
    EXPECT_TRUE(s.release.empty());
    ASSERT_EQ(s.committed_keys.size(), 1u);  // marked committed: a later claim of it is a duplicate
    EXPECT_EQ(s.committed_keys[0].key, "lock:1:77");
    EXPECT_EQ(waiting(), 1u);
    EXPECT_EQ(tracker.held(), 0u);
    EXPECT_EQ(r.status, autocommit);
}

TEST_F(command_end_test, rollback_releases_the_keys_and_no_take_enters_the_ledger) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    tracker.expect(boundary(ev::rollback));
    auto r = run(ok_outcome(true, autocommit));
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::done}));
    const auto& s = r.settled();
    EXPECT_FALSE(s.committed);
    ASSERT_EQ(s.release.size(), 1u);
    EXPECT_EQ(s.release[0].key, "lock:1:77");
    EXPECT_TRUE(s.committed_keys.empty());
    EXPECT_EQ(waiting(), 0u);
}

// A commit claimguard did not see coming (the flags say it ended) with deferred takes never sent:
// reported dropped, as an error (claims went in without them).
TEST_F(command_end_test, deferred_takes_never_sent_are_reported_dropped_with_how_the_transaction_ended) {
    memory.deferred.push_back({rule, "coupon_stock", key, {"campaign_id"}, 1, "UPDATE ...", {}});
    auto r = run(ok_outcome(true, autocommit));
    const auto& s = r.settled();
    EXPECT_TRUE(s.committed);
    ASSERT_EQ(s.dropped.size(), 1u);
    EXPECT_EQ(s.dropped[0].rule, rule);
    EXPECT_TRUE(memory.deferred.empty());
}

TEST_F(command_end_test, a_statement_inside_the_transaction_ends_nothing) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    auto r = run(ok_outcome(true, in_trans));
    const auto& s = r.settled();
    EXPECT_TRUE(s.release.empty());
    EXPECT_TRUE(s.committed_keys.empty());
    EXPECT_EQ(tracker.held(), 1u);
    EXPECT_EQ(waiting(), 0u);
}

// ERR 1205 carries no status flags: in a transaction the server is asked, with a diagnostics
// statement. Without innodb_rollback_on_timeout only the statement rolled back: the transaction,
// its take and its key stay.
TEST_F(command_end_test, lock_wait_timeout_in_a_transaction_the_server_still_holds) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    auto r = run(err_outcome(true, in_trans, er_lock_wait_timeout),
                 {command_end_input::of_reply(reply_summary::ok_rows(0, in_trans))});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::ask_transaction, ca::settle, ca::done}));
    EXPECT_EQ(r.actions[0].sql, "SHOW COUNT(*) WARNINGS");
    const auto& s = r.settled();
    EXPECT_FALSE(s.timeout_rolled_back);
    EXPECT_TRUE(s.release.empty());
    EXPECT_EQ(tracker.held(), 1u);
    EXPECT_EQ(memory.entry(rule, key).transaction_takes.size(), 1u);
    EXPECT_EQ(r.status, in_trans);
}

// innodb_rollback_on_timeout: the whole transaction rolled back; the server's answer says so (no
// transaction open), and the end is a rollback: keys released, no take into the ledger, the
// admission slots back.
TEST_F(command_end_test, lock_wait_timeout_that_rolled_the_whole_transaction_back) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    slots.add({rule, key, 1});
    auto r = run(err_outcome(true, in_trans, er_lock_wait_timeout),
                 {command_end_input::of_reply(reply_summary::ok_rows(0, autocommit))});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::ask_transaction, ca::settle, ca::done}));
    const auto& s = r.settled();
    EXPECT_TRUE(s.timeout_rolled_back);
    EXPECT_FALSE(s.committed);
    ASSERT_EQ(s.release.size(), 1u);
    EXPECT_TRUE(s.release_admission);
    EXPECT_EQ(waiting(), 0u);
    EXPECT_EQ(r.status, autocommit);  // the session's flags: no transaction open
}

TEST_F(command_end_test, lock_wait_timeout_outside_a_transaction_or_another_error_asks_nothing) {
    EXPECT_EQ(run(err_outcome(false, autocommit, er_lock_wait_timeout)).kinds(),
              (std::vector<ca>{ca::settle, ca::done}));
    // the statement opened the transaction (BEGIN ...; its first statement): nothing to ask about before it
    EXPECT_EQ(run(err_outcome(false, in_trans, er_lock_wait_timeout)).kinds(), (std::vector<ca>{ca::settle, ca::done}));
    // the flags already say it ended (a deadlock)
    EXPECT_EQ(run(err_outcome(true, autocommit, er_lock_wait_timeout)).kinds(),
              (std::vector<ca>{ca::settle, ca::done}));
    EXPECT_EQ(run(err_outcome(true, in_trans, 1062)).kinds(), (std::vector<ca>{ca::settle, ca::done}));
}

// The link failed under the question: nothing of the transaction ends here (the session ends, and
// abandons it).
TEST_F(command_end_test, io_lost_while_asking_about_the_transaction_ends_nothing) {
    take_in_transaction();
    tracker.hold({"lock:1:77", "t1"});
    auto r = run(err_outcome(true, in_trans, er_lock_wait_timeout), {command_end_input::lost()});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::ask_transaction, ca::fail}));
    EXPECT_EQ(tracker.held(), 1u);
    EXPECT_EQ(memory.entry(rule, key).transaction_takes.size(), 1u);
}

// Without rules there is no ledger: the question after 1205 and the admission slots still apply.
TEST_F(command_end_test, without_a_ledger_only_the_question_and_the_admission_slots_apply) {
    slots.add({rule, key, 1});
    tracker.hold({"lock:1:77", "t1"});
    auto r = run(err_outcome(true, in_trans, er_lock_wait_timeout),
                 {command_end_input::of_reply(reply_summary::ok_rows(0, autocommit))}, false);
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::ask_transaction, ca::settle, ca::done}));
    const auto& s = r.settled();
    EXPECT_TRUE(s.release.empty());
    EXPECT_TRUE(s.release_admission);
    EXPECT_EQ(tracker.held(), 1u);
}

// The rollback undid this transaction's give-back of a take committed before it: the unit goes
// back again after the rollback, in autocommit; one row changed is a compensation.
TEST_F(command_end_test, give_back_after_a_rollback_that_changed_a_row_is_compensated) {
    give_back_of_a_committed_take();
    tracker.expect(boundary(ev::rollback));
    auto r = run(ok_outcome(true, autocommit), {command_end_input::of_reply(reply_summary::ok_rows(1))});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::give_back, ca::done}));
    EXPECT_EQ(r.actions[1].sql, give_back_sql);
    EXPECT_EQ(r.actions[1].rule, rule);
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].what, event::compensated);
    EXPECT_EQ(r.results[0].rule, rule);
    EXPECT_TRUE(memory.after_rollback.empty());
}

TEST_F(command_end_test, give_back_that_changed_no_row_is_a_failed_compensation) {
    give_back_of_a_committed_take();
    tracker.expect(boundary(ev::rollback));
    auto r = run(ok_outcome(true, autocommit), {command_end_input::of_reply(reply_summary::ok_rows(0))});
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].what, event::compensation_failed);
}

TEST_F(command_end_test, give_back_answered_with_an_error_is_a_failed_compensation) {
    give_back_of_a_committed_take();
    tracker.expect(boundary(ev::rollback));
    auto r = run(ok_outcome(true, autocommit), {command_end_input::of_reply(reply_summary::error(1205))});
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].what, event::compensation_failed);
}

// The link failed under a give-back: the session ends; the give-backs not sent are not kept.
TEST_F(command_end_test, io_lost_during_a_give_back_ends_the_command_and_loses_the_rest) {
    give_back_of_a_committed_take();
    give_back_of_a_committed_take();
    tracker.expect(boundary(ev::rollback));
    auto r = run(ok_outcome(true, autocommit),
                 {command_end_input::of_reply(reply_summary::ok_rows(1)), command_end_input::lost()});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::give_back, ca::give_back, ca::fail}));
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].what, event::compensated);
    EXPECT_TRUE(memory.after_rollback.empty());
}

// Give-backs wait while a transaction is open (ROLLBACK AND CHAIN opened the next one).
TEST_F(command_end_test, give_backs_wait_while_a_transaction_is_open) {
    memory.after_rollback.push_back({rule, give_back_sql});
    auto r = run(ok_outcome(true, in_trans));
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::done}));
    EXPECT_EQ(memory.after_rollback.size(), 1u);
    // ... and go at the end of the next command outside one (a statement that neither opened nor ended one)
    auto later = run(ok_outcome(false, autocommit), {command_end_input::of_reply(reply_summary::ok_rows(1))});
    EXPECT_EQ(later.kinds(), (std::vector<ca>{ca::settle, ca::give_back, ca::done}));
}

// An autocommit decrement's admission turn ends with its reply; a transaction's with the transaction.
TEST_F(command_end_test, admission_slots_go_back_only_outside_a_transaction) {
    EXPECT_FALSE(run(ok_outcome(false, autocommit)).settled().release_admission);  // none held
    slots.add({rule, key, 1});
    EXPECT_FALSE(run(ok_outcome(false, in_trans)).settled().release_admission);
    EXPECT_FALSE(run(ok_outcome(true, in_trans)).settled().release_admission);
    EXPECT_TRUE(run(ok_outcome(false, autocommit)).settled().release_admission);
    EXPECT_TRUE(run(ok_outcome(true, autocommit)).settled().release_admission);  // COMMIT
}

TEST_F(command_end_test, an_input_the_operation_did_not_ask_for_fails) {
    command_end end(ok_outcome(false, autocommit), memory, &ledger, tracker, slots, session_id);
    EXPECT_EQ(end.resume(command_end_input::start()).type, ca::settle);
    EXPECT_EQ(end.resume(command_end_input::of_reply(reply_summary::ok_rows(1))).type, ca::fail);
}

// COM_RESET_CONNECTION, COM_CHANGE_USER: the server rolls the open transaction back without a
// reply saying so. Every key goes, no take enters the ledger, takes borrowed from it go back,
// deferred takes are dropped, and give-backs of committed takes are left to the end of the command.
TEST_F(command_end_test, reset_or_change_user_abandons_the_transaction) {
    take_in_transaction();
    ledger.add_take(rule, key, 1, 3);
    ASSERT_TRUE(ledger.pop_take(rule, key, session_id));
    memory.entry(rule, key).borrowed.push_back(1);
    give_back_of_a_committed_take();
    memory.deferred.push_back({rule, "coupon_stock", key, {"campaign_id"}, 1, "UPDATE ...", {}});
    tracker.hold({"lock:1:77", "t1"});
    tracker.hold({"lock:2:77", "t2"});
    auto steps = abandon_transaction(tracker, memory, &ledger, session_id);
    EXPECT_EQ(steps.release.size(), 2u);
    EXPECT_EQ(steps.dropped.size(), 1u);
    EXPECT_EQ(tracker.held(), 0u);
    EXPECT_EQ(waiting(), 1u);  // only the borrowed take, back; not this transaction's own
    EXPECT_TRUE(memory.entry(rule, key).transaction_takes.empty());
    EXPECT_EQ(memory.after_rollback.size(), 1u);
}

// The command that reset the connection ends a transaction the reset already abandoned: its end
// keeps the give-backs the reset left and sends them (before, the end of the reset's own command
// replaced them with none: the units stayed taken, a leak).
TEST_F(command_end_test, the_give_backs_a_reset_left_are_sent_at_the_end_of_its_command) {
    give_back_of_a_committed_take();
    (void)abandon_transaction(tracker, memory, &ledger, session_id);
    auto r = run(ok_outcome(true, autocommit), {command_end_input::of_reply(reply_summary::ok_rows(1))});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::give_back, ca::done}));
    ASSERT_EQ(r.results.size(), 1u);
    EXPECT_EQ(r.results[0].what, event::compensated);
}

// ROLLBACK AND CHAIN leaves give-backs while the chained transaction is open; that transaction's
// own end (a commit too) keeps them, and they are sent after it.
TEST_F(command_end_test, the_give_backs_of_a_chained_rollback_survive_the_next_transaction) {
    give_back_of_a_committed_take();
    tracker.expect(boundary(ev::rollback));
    auto chained = run(ok_outcome(true, in_trans));
    EXPECT_EQ(chained.kinds(), (std::vector<ca>{ca::settle, ca::done}));
    take_in_transaction();
    tracker.expect(boundary(ev::commit));
    auto r = run(ok_outcome(true, autocommit), {command_end_input::of_reply(reply_summary::ok_rows(1))});
    EXPECT_EQ(r.kinds(), (std::vector<ca>{ca::settle, ca::give_back, ca::done}));
    EXPECT_EQ(waiting(), 1u);  // the chained transaction's own take committed
}

TEST_F(command_end_test, reset_without_a_ledger_only_releases_the_keys) {
    memory.deferred.push_back({rule, "coupon_stock", key, {"campaign_id"}, 1, "UPDATE ...", {}});
    tracker.hold({"lock:1:77", "t1"});
    auto steps = abandon_transaction(tracker, memory, nullptr, session_id);
    EXPECT_EQ(steps.release.size(), 1u);
    EXPECT_TRUE(steps.dropped.empty());
    EXPECT_EQ(memory.deferred.size(), 1u);
}

}  // namespace
}  // namespace claimguard::engine::test
