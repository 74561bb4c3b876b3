// group_update: the admission gate's hand-off of queued takes to a leader (join, max_batch, queue
// order, a member that went away, the leader's answers), the split of a batch that changed no row
// (group_take), and the leader's and followers' statement operations driven step by step.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "proxy/engine/admission_gate.hpp"
#include "proxy/engine/group_take.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

using namespace std::chrono_literals;
using sa = statement_action::kind;

const std::string rule = "coupon_stock";
const key_tuple key1{"1"};

rules::admission_limits one_in_flight() { return {1, 2000ms, 100}; }

// ---- the gate's hand-off ------------------------------------------------------------------------

TEST(group_gate, leader_takes_groupable_waiters_in_queue_order_up_to_most) {
    admission_gate g;
    std::vector<int> woken;
    auto leader = g.enter_groupable(rule, key1, one_in_flight(), 1, 10, [] {});
    ASSERT_EQ(leader.what, admission::admitted);
    std::vector<admission_gate::ticket> ids;
    for (int i = 0; i < 4; ++i) {
        auto e = g.enter_groupable(rule, key1, one_in_flight(), i + 1, 11 + i, [&woken, i] { woken.push_back(i); });
        ASSERT_EQ(e.what, admission::queued);
        ids.push_back(e.id);
    }
    EXPECT_EQ(g.groupable_behind(leader.id), 4u);
    auto members = g.take_group(leader.id, 3);
    ASSERT_EQ(members.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(members[i].id, ids[i]);
        EXPECT_EQ(members[i].units, static_cast<std::int64_t>(i + 1));
        EXPECT_EQ(members[i].session, 11u + i);
        EXPECT_EQ(g.resolve(ids[i]), admission::grouped);  // waits on: no timeout, no slot
    }
    EXPECT_EQ(g.queued(rule, key1), 1u);  // the fourth keeps its place
    EXPECT_TRUE(woken.empty());
    // The leader decides them: each is woken with its own outcome, once.
    EXPECT_TRUE(g.settle(ids[0], {admission::grouped_taken, 0, 4, 77}));
    EXPECT_TRUE(g.settle(ids[1], {admission::grouped_sold_out, 0, 4, 77}));
    EXPECT_TRUE(g.settle(ids[2], {admission::grouped_failed, 1213, 4, 77}));
    EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
    group_result r;
    EXPECT_EQ(g.resolve(ids[0], r), admission::grouped_taken);
    EXPECT_EQ(r.batch, 4u);
    EXPECT_EQ(r.leader_thread, 77u);
    EXPECT_EQ(g.resolve(ids[1], r), admission::grouped_sold_out);
    EXPECT_EQ(g.resolve(ids[2], r), admission::grouped_failed);
    EXPECT_EQ(r.error_code, 1213);
    // The leader's slot still orders the rest: released, the fourth is admitted.
    EXPECT_EQ(g.in_flight(rule, key1), 1u);
    g.release(leader.id);
    EXPECT_EQ(woken.back(), 3);
    EXPECT_EQ(g.resolve(ids[3]), admission::admitted);
    g.release(ids[3]);
    EXPECT_EQ(g.tickets(), 0u);
    EXPECT_EQ(g.keys(), 0u);
}

TEST(group_gate, a_batch_never_jumps_a_waiter_that_is_not_groupable) {
    admission_gate g;
    auto leader = g.enter_groupable(rule, key1, one_in_flight(), 1, 1, [] {});
    auto a = g.enter_groupable(rule, key1, one_in_flight(), 1, 2, [] {});
    auto own = g.enter(rule, key1, one_in_flight(), 1, [] {});  // a take in a transaction
    auto b = g.enter_groupable(rule, key1, one_in_flight(), 1, 3, [] {});
    EXPECT_EQ(g.groupable_behind(leader.id), 1u);
    auto members = g.take_group(leader.id, 31);
    ASSERT_EQ(members.size(), 1u);
    EXPECT_EQ(members[0].id, a.id);
    EXPECT_EQ(g.queued(rule, key1), 2u);
    EXPECT_TRUE(g.settle(a.id, {admission::grouped_taken, 0, 2, 0}));
    g.release(leader.id);
    EXPECT_EQ(g.resolve(own.id), admission::admitted);  // then the take that is not groupable, in order
    EXPECT_EQ(g.resolve(b.id), admission::queued);
    g.release(own.id);
    g.release(b.id);
    (void)g.resolve(a.id);
    EXPECT_EQ(g.tickets(), 0u);
}

TEST(group_gate, member_gone_after_joining_is_not_answered_and_leaves_nothing) {
    admission_gate g;
    int woken = 0;
    auto leader = g.enter_groupable(rule, key1, one_in_flight(), 1, 1, [] {});
    auto a = g.enter_groupable(rule, key1, one_in_flight(), 1, 2, [&] { ++woken; });
    ASSERT_EQ(g.take_group(leader.id, 5).size(), 1u);
    g.abandon(a.id);  // its client hung up while the batch was on its way
    EXPECT_FALSE(g.settle(a.id, {admission::grouped_taken, 0, 2, 0}));  // the leader keeps its unit in the ledger
    EXPECT_EQ(woken, 0);
    g.release(leader.id);
    EXPECT_EQ(g.tickets(), 0u);
    EXPECT_EQ(g.keys(), 0u);
}

TEST(group_gate, expired_waiter_is_timed_out_not_grouped_and_only_an_admitted_leader_gathers) {
    admission_gate g;
    const auto t0 = admission_gate::clock::now();
    auto leader = g.enter_groupable(
        rule, key1, one_in_flight(), 1, 1, [] {}, t0);
    auto late = g.enter_groupable(
        rule, key1, {1, 10ms, 100}, 1, 2, [] {}, t0);
    EXPECT_TRUE(g.take_group(late.id, 5).empty());  // a queued ticket leads nothing
    EXPECT_TRUE(g.take_group(leader.id, 5, t0 + 20ms).empty());
    EXPECT_EQ(g.resolve(late.id, t0 + 20ms), admission::timed_out);
    g.release(leader.id);
    EXPECT_EQ(g.tickets(), 0u);
}

// ---- the split ----------------------------------------------------------------------------------

TEST(group_take, one_row_changed_takes_every_member) {
    group_take g({1, 1, 1});
    auto b = g.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->units, 3);
    EXPECT_EQ(b->takes, 3);
    g.on_changed(true);
    EXPECT_FALSE(g.next());
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(g.of(i), group_take::outcome::taken);
    EXPECT_EQ(g.taken_units(), 3);
    EXPECT_EQ(g.statements(), 1u);
}

// Stock 2 for a batch of 5 takes of one unit: the first two in queue order take, the rest are sold
// out, and the units taken are exactly 2.
TEST(group_take, no_row_changed_splits_until_each_take_is_decided_exactly) {
    std::int64_t stock = 2;
    group_take g({1, 1, 1, 1, 1});
    std::vector<std::int64_t> sent;
    while (auto b = g.next()) {
        sent.push_back(b->units);
        const bool fits = stock >= b->units;
        if (fits) stock -= b->units;
        g.on_changed(fits);
    }
    EXPECT_EQ(sent, (std::vector<std::int64_t>{5, 2, 3, 1}));  // all, first half, the rest, its first half
    EXPECT_EQ(g.of(0), group_take::outcome::taken);
    EXPECT_EQ(g.of(1), group_take::outcome::taken);
    for (std::size_t i = 2; i < 5; ++i) EXPECT_EQ(g.of(i), group_take::outcome::sold_out);
    EXPECT_EQ(g.taken_units(), 2);
    EXPECT_EQ(stock, 0);
    EXPECT_EQ(g.sold_out_units(), 1);
}

// Whatever the stock and units, the units taken are the stock used, never more than the stock, and a
// take is sold out only if it did not fit when tried.
TEST(group_take, units_taken_always_equal_the_stock_used) {
    for (std::int64_t start = 0; start <= 12; ++start) {
        std::int64_t stock = start;
        group_take g({2, 1, 3, 1, 1, 2, 1});
        while (auto b = g.next()) {
            const bool fits = stock >= b->units;
            if (fits) stock -= b->units;
            g.on_changed(fits);
        }
        EXPECT_EQ(g.taken_units(), start - stock) << "stock " << start;
        EXPECT_GE(stock, 0);
        for (std::size_t i = 0; i < g.size(); ++i) {
            EXPECT_NE(g.of(i), group_take::outcome::undecided);
            if (g.of(i) == group_take::outcome::sold_out) {
                EXPECT_LT(stock, g.units(i)) << "stock " << start;
            }
        }
    }
}

TEST(group_take, error_fails_every_undecided_take) {
    group_take g({1, 1, 1, 1});
    ASSERT_TRUE(g.next());
    g.on_changed(false);
    ASSERT_TRUE(g.next());
    g.on_changed(true);  // the first two took
    ASSERT_TRUE(g.next());
    g.on_error(1213);
    EXPECT_FALSE(g.next());
    EXPECT_EQ(g.of(0), group_take::outcome::taken);
    EXPECT_EQ(g.of(1), group_take::outcome::taken);
    EXPECT_EQ(g.of(2), group_take::outcome::failed);
    EXPECT_EQ(g.of(3), group_take::outcome::failed);
    EXPECT_EQ(g.error_code(), 1213);
    EXPECT_EQ(g.taken_units(), 2);
}

// ---- the statement operations -------------------------------------------------------------------

// coupon.yaml with admission and group_update on coupon_stock.
const rules_env& group_env() {
    static std::unique_ptr<rules_env> env = [] {
        auto text = read_coupon_yaml();
        if (!replace_once(text, "    units: 1 ",
                          "    admission: {max_in_flight: 1, queue_timeout: 2s}\n"
                          "    group_update: {max_batch: 4, max_wait: 1ms}\n"
                          "    read_cache: 10s\n    units: 1 ")) {
            auto e = std::make_unique<rules_env>();
            e->error = "coupon.yaml changed: cannot add group_update";
            return e;
        }
        return env_of_text(text);
    }();
    return *env;
}

// One app connection's statement, driven by hand: the leader's and the followers' steps interleave.
struct conn {
    conn(std::uint64_t id, admission_gate& gate, take_ledger& ledger, read_cache* cache, std::string sql,
         std::uint16_t status = autocommit)
        : id(id), st(std::move(sql), *group_env().index) {
        memory.next_command();
        d = decide(st.facts(), *group_env().rules, resolve_literal, memory);
        plan_deferred(d, st.facts(), st.text(), memory);
        ctx = {{id, status, false}, &gate, &*group_env().rules, cache, nullptr, static_cast<std::uint32_t>(100 + id)};
        op = std::make_unique<statement_operation>(d, st.parsed(), memory, ledger, transaction, slots, ctx);
        op->set_database("shop");
    }
    // The first step; a wait_turn enters the gate as the session does.
    statement_action start(admission_gate& gate) {
        auto a = op->resume(statement_input::start());
        if (a.type != sa::wait_turn) return a;
        const auto& t = op->turn();
        entry = t.groupable ? gate.enter_groupable(t.rule, t.key, *t.limits, t.units, t.session, [] {})
                            : gate.enter(t.rule, t.key, *t.limits, t.units, [] {});
        return a;
    }
    // What the gate said (admitted at once, or what became of the queued ticket).
    statement_action turn(admission_gate& gate) {
        if (entry.what != admission::queued) return op->resume(statement_input::of_turn(entry.what, entry.id));
        group_result r;
        const auto what = gate.resolve(entry.id, r);
        return op->resume(statement_input::of_turn(what, entry.id, r));
    }

    std::uint64_t id;
    statement st;
    decision d;
    session_memory memory;
    transaction_tracker transaction;
    admission_slots slots;
    statement_context ctx;
    std::unique_ptr<statement_operation> op;
    admission_gate::entry_result entry;
};

const std::string take_sql = "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 1";

struct group_op : testing::Test {
    admission_gate gate;
    take_ledger ledger;
    read_cache cache;
    void SetUp() override { ASSERT_TRUE(group_env().error.empty()) << group_env().error; }
};

TEST_F(group_op, leader_sends_one_update_for_the_batch_and_each_member_gets_its_own_ok) {
    conn leader(1, gate, ledger, &cache, take_sql), f1(2, gate, ledger, &cache, take_sql),
        f2(3, gate, ledger, &cache, take_sql);
    ASSERT_EQ(leader.d.what, verdict::take);
    ASSERT_EQ(leader.start(gate).type, sa::wait_turn);
    EXPECT_TRUE(leader.op->turn().groupable);
    ASSERT_EQ(leader.entry.what, admission::admitted);
    ASSERT_EQ(f1.start(gate).type, sa::wait_turn);
    ASSERT_EQ(f2.start(gate).type, sa::wait_turn);
    ASSERT_EQ(f1.entry.what, admission::queued);
    // Two wait behind it, fewer than max_batch - 1: it waits max_wait once for more.
    ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
    EXPECT_EQ(leader.op->group_wait(), 1ms);
    auto a = leader.op->resume(statement_input::gather_done());
    ASSERT_EQ(a.type, sa::send_sql);
    EXPECT_EQ(leader.op->claim_action().sql.sql,
              "UPDATE `shop`.`coupon_stock` SET `remain` = `remain` - 3, `version` = `version` + 3 WHERE "
              "`campaign_id` = 1 AND `remain` >= 3");
    a = leader.op->resume(statement_input::of_reply(ok_rows(1)));
    ASSERT_EQ(a.type, sa::answer);
    EXPECT_EQ(leader.op->claim_action().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(leader.op->claim_action().ok_rows, 1u);
    ASSERT_EQ(leader.op->report().groups.size(), 1u);
    EXPECT_EQ(leader.op->report().groups[0].takes, 3u);
    EXPECT_EQ(leader.op->report().groups[0].taken, 3u);
    for (auto* f : {&f1, &f2}) {
        auto fa = f->turn(gate);
        ASSERT_EQ(fa.type, sa::answer);
        EXPECT_EQ(f->op->claim_action().answer.type, rules::answer::kind::ok);
        EXPECT_EQ(f->op->claim_action().ok_rows, 1u);
        ASSERT_EQ(f->op->report().admission.size(), 1u);
        EXPECT_EQ(f->op->report().admission[0].what, admission_note::kind::grouped);
        EXPECT_EQ(f->op->report().admission[0].batch, 3u);
        EXPECT_EQ(f->op->report().admission[0].leader_thread, 101u);
        EXPECT_TRUE(f->slots.empty());  // a member holds no slot
    }
    EXPECT_EQ(ledger.waiting_takes(rule, leader.d.key), 3u);  // each take waits for its claim
    leader.slots.release_all(gate);
    EXPECT_EQ(gate.tickets(), 0u);
    EXPECT_EQ(gate.keys(), 0u);
}

TEST_F(group_op, no_row_changed_splits_and_members_hear_exact_outcomes) {
    conn leader(1, gate, ledger, nullptr, take_sql), f1(2, gate, ledger, nullptr, take_sql),
        f2(3, gate, ledger, nullptr, take_sql), f3(4, gate, ledger, nullptr, take_sql);
    (void)leader.start(gate);
    for (auto* f : {&f1, &f2, &f3}) (void)f->start(gate);
    // Three behind: max_batch - 1 already, no wait.
    auto a = leader.turn(gate);
    ASSERT_EQ(a.type, sa::send_sql);
    std::int64_t stock = 1;
    std::vector<std::string> sent;
    while (a.type == sa::send_sql) {
        sent.push_back(leader.op->claim_action().sql.sql);
        const auto& sql = leader.op->claim_action().sql.sql;
        const auto units = std::stoll(sql.substr(sql.find("`remain` - ") + 11));
        const bool fits = stock >= units;
        if (fits) stock -= units;
        a = leader.op->resume(statement_input::of_reply(ok_rows(fits ? 1 : 0)));
    }
    ASSERT_EQ(sent.size(), 4u);  // 4 units, 2, 1 (the leader's: taken), 1 (sold out: the rest too)
    EXPECT_NE(sent[3].find("`version` = `version` + 1 "), std::string::npos) << sent[3];
    ASSERT_EQ(a.type, sa::answer);
    EXPECT_EQ(leader.op->claim_action().answer.type, rules::answer::kind::ok);  // first in line: taken
    EXPECT_EQ(stock, 0);
    for (auto* f : {&f1, &f2, &f3}) {
        ASSERT_EQ(f->turn(gate).type, sa::answer);
        EXPECT_EQ(f->op->claim_action().answer.code, 1644);  // the rule's exhausted answer
    }
    leader.slots.release_all(gate);
    // The key is sold out in the gate now: the next take is answered without the database.
    conn next(5, gate, ledger, nullptr, take_sql);
    (void)next.start(gate);
    EXPECT_EQ(next.entry.what, admission::sold_out);
}

TEST_F(group_op, error_on_the_batch_is_every_members_answer) {
    conn leader(1, gate, ledger, nullptr, take_sql), f1(2, gate, ledger, nullptr, take_sql);
    (void)leader.start(gate);
    (void)f1.start(gate);
    ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
    ASSERT_EQ(leader.op->resume(statement_input::gather_done()).type, sa::send_sql);
    auto a = leader.op->resume(statement_input::of_reply(error_reply(1213)));
    ASSERT_EQ(a.type, sa::answer);
    EXPECT_EQ(leader.op->claim_action().answer.code, 1213);
    ASSERT_EQ(f1.turn(gate).type, sa::answer);
    EXPECT_EQ(f1.op->claim_action().answer.code, 1213);
    EXPECT_NE(f1.op->claim_action().answer.message.find("nothing was taken"), std::string::npos);
    leader.slots.release_all(gate);
    EXPECT_EQ(ledger.waiting_units().count(rule), 0u);
}

TEST_F(group_op, member_whose_client_left_keeps_its_take_in_the_ledger) {
    conn leader(1, gate, ledger, nullptr, take_sql), f1(2, gate, ledger, nullptr, take_sql);
    (void)leader.start(gate);
    (void)f1.start(gate);
    ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
    ASSERT_EQ(leader.op->resume(statement_input::gather_done()).type, sa::send_sql);
    gate.abandon(f1.entry.id);  // f1's client hung up after joining
    ASSERT_EQ(leader.op->resume(statement_input::of_reply(ok_rows(1))).type, sa::answer);
    const auto waiting = ledger.waiting_units();
    ASSERT_EQ(waiting.count(rule), 1u);
    EXPECT_EQ(waiting.at(rule), 2);  // the leader's and the member's: each waits for its claim
    leader.slots.release_all(gate);
    EXPECT_EQ(gate.tickets(), 0u);
}

TEST_F(group_op, connection_lost_under_the_batch_answers_the_members) {
    conn leader(1, gate, ledger, nullptr, take_sql), f1(2, gate, ledger, nullptr, take_sql);
    (void)leader.start(gate);
    (void)f1.start(gate);
    ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
    ASSERT_EQ(leader.op->resume(statement_input::gather_done()).type, sa::send_sql);
    EXPECT_EQ(leader.op->resume(statement_input::lost()).type, sa::fail);
    ASSERT_EQ(f1.turn(gate).type, sa::answer);
    EXPECT_EQ(f1.op->claim_action().answer.code, 2013);
}

TEST_F(group_op, leader_stopped_before_its_batch_is_decided_still_answers_the_members) {
    conn f1(2, gate, ledger, nullptr, take_sql);
    {
        conn leader(1, gate, ledger, nullptr, take_sql);
        (void)leader.start(gate);
        (void)f1.start(gate);
        ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
        ASSERT_EQ(leader.op->resume(statement_input::gather_done()).type, sa::send_sql);
        leader.slots.release_all(gate);
    }  // the session went away with the UPDATE on its way
    ASSERT_EQ(f1.turn(gate).type, sa::answer);
    EXPECT_EQ(f1.op->claim_action().answer.code, 2013);
}

TEST_F(group_op, alone_in_the_queue_the_take_goes_as_without_group_update) {
    conn leader(1, gate, ledger, nullptr, take_sql);
    (void)leader.start(gate);
    auto a = leader.turn(gate);
    ASSERT_EQ(a.type, sa::send_sql);                                                 // no wait: nobody queues behind it
    EXPECT_EQ(leader.op->claim_action().sql.sql.find("`shop`"), std::string::npos);  // the app's own, rewritten
    EXPECT_EQ(leader.op->resume(statement_input::of_reply(ok_rows(1))).type, sa::reply_kept);
}

TEST_F(group_op, takes_that_cannot_join_are_not_groupable) {
    // In a transaction, with the app's own version condition, with another assignment.
    conn transaction(1, gate, ledger, nullptr, take_sql, in_trans);
    conn optimistic(2, gate, ledger, nullptr,
                    "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND version = 3");
    conn other(3, gate, ledger, nullptr,
               "UPDATE coupon_stock SET remain = remain - 1, note = 'x' WHERE campaign_id = 1");
    for (auto* c : {&transaction, &optimistic, &other}) {
        auto a = c->op->resume(statement_input::start());
        if (a.type == sa::wait_turn) {
            EXPECT_FALSE(c->op->turn().groupable) << c->st.text();
        }
    }
}

TEST_F(group_op, read_cache_follows_every_take_of_the_batch) {
    conn leader(1, gate, ledger, &cache, take_sql), f1(2, gate, ledger, &cache, take_sql);
    (void)leader.start(gate);
    (void)f1.start(gate);
    ASSERT_EQ(leader.turn(gate).type, sa::wait_group);
    ASSERT_EQ(leader.op->resume(statement_input::gather_done()).type, sa::send_sql);
    ASSERT_EQ(leader.op->resume(statement_input::of_reply(ok_rows(1))).type, sa::answer);
    bool took = false;
    for (auto e : leader.op->report().events) took = took || e == event::took;
    EXPECT_TRUE(took);
    ASSERT_EQ(f1.turn(gate).type, sa::answer);
    took = false;
    for (auto e : f1.op->report().events) took = took || e == event::took;
    EXPECT_TRUE(took);
}

}  // namespace
}  // namespace claimguard::engine::test
