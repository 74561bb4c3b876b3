// statement_operation with scripted inputs: admission turns (admitted, sold out, timed out, queue
// full, the transaction's own slot, a locking read), the Redis key's settlement (committed,
// released, kept for the transaction), the I/O lost mid-claim, and the read cache's decision
// (bypass, hit, miss, refresh, wait).
#include <gtest/gtest.h>

#include <functional>

#include "proxy/engine/scripted_run.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

// coupon.yaml with per-key admission on coupon_stock: one decrement of a key in flight, one waiting.
const rules_env& admission_env() {
    static std::unique_ptr<rules_env> env = [] {
        auto e = std::make_unique<rules_env>();
        auto text = read_coupon_yaml();
        if (!replace_once(text, "    units: 1 ",
                          "    admission:\n      max_in_flight: 1\n      queue_timeout: 200ms\n      max_queue: 1\n"
                          "    read_cache: 10s\n    units: 1 ")) {
            e->error = "coupon.yaml changed: cannot add admission";
            return e;
        }
        return env_of_text(text);
    }();
    return *env;
}

// The same with read_cache_sold_out: a sold-out key's reads back off from 10s to a minute.
const rules_env& sold_out_env() {
    static std::unique_ptr<rules_env> env = [] {
        auto e = std::make_unique<rules_env>();
        auto text = read_coupon_yaml();
        if (!replace_once(text, "    units: 1 ",
                          "    admission:\n      max_in_flight: 1\n      queue_timeout: 200ms\n      max_queue: 1\n"
                          "    read_cache: 10s\n    read_cache_sold_out: 1m\n    units: 1 ")) {
            e->error = "coupon.yaml changed: cannot add read_cache_sold_out";
            return e;
        }
        return env_of_text(text);
    }();
    return *env;
}

using sa = statement_action::kind;

// An action as the session saw it: its kind and flags, with what the operation kept for it
// (claim_action, take_keys, turn, cached_reply / cached_value), as the scripted run recorded it.
struct seen_action {
    sa type = sa::relay;
    action op;                     // send_*, redis_acquire, answer
    std::vector<redis_hold> keys;  // redis_release, redis_commit
    bool wait = false;
    std::string rule;  // wait_turn
    key_tuple key;
    std::int64_t units = 0;
    bool keep_template = false;
    std::shared_ptr<const protocol::counter_reply> cached;  // serve_cached
    std::int64_t value = 0;
};

seen_action seen(const scripted_step& step) {
    seen_action s;
    s.type = step.act.type;
    s.wait = step.act.wait;
    s.keep_template = step.act.keep_template;
    s.op = step.claim;
    s.keys = step.keys;
    if (step.turn) {
        s.rule = step.turn->rule;
        s.key = step.turn->key;
        s.units = step.turn->units;
    }
    s.cached = step.cached;
    s.value = step.cached_value;
    return s;
}

struct run_result {
    decision d;
    std::vector<seen_action> actions;
    std::vector<event> events;
    std::vector<admission_note> notes;
    std::vector<read_note> reads;
    [[nodiscard]] const seen_action& last() const { return actions.back(); }
    [[nodiscard]] bool has(event e) const { return std::find(events.begin(), events.end(), e) != events.end(); }
    [[nodiscard]] std::vector<sa> kinds() const {
        std::vector<sa> out;
        for (const auto& a : actions) out.push_back(a.type);
        return out;
    }
    [[nodiscard]] std::vector<read_note::kind> read_kinds() const {
        std::vector<read_note::kind> out;
        for (const auto& n : reads) out.push_back(n.what);
        return out;
    }
    [[nodiscard]] std::vector<admission_note::kind> note_kinds() const {
        std::vector<admission_note::kind> out;
        for (const auto& n : notes) out.push_back(n.what);
        return out;
    }
};

// One connection with the sidecar's gate and ledger; the session's part (sends, Redis, the wait)
// answered from a script by the engine's scripted run.
class connection {
public:
    connection(admission_gate& gate, take_ledger& ledger, std::uint64_t id = 1, bool redis = false,
               const rules_env& env = admission_env())
        : env_(env), gate_(gate), ledger_(ledger), id_(id), redis_(redis) {}

    [[nodiscard]] bool ready() const { return env_.error.empty(); }
    [[nodiscard]] const std::string& error() const { return env_.error; }

    // `script` answers the operation's sends and Redis acquires in order, and a wait_turn the gate
    // queued. A wait_turn the gate answers at once is answered so; Redis releases and commits are
    // carried out at once.
    run_result run(std::string sql, std::vector<statement_input> script, std::uint16_t status = autocommit) {
        memory.next_command();
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        const auto& s = *statements_.back();
        run_result r;
        r.d = decide(s.facts(), *env_.rules, resolve_literal, memory);
        plan_deferred(r.d, s.facts(), s.text(), memory);
        statement_context ctx{{id_, status, redis_}, &gate_, &*env_.rules, cache, &read};
        statement_operation op(r.d, s.parsed(), memory, ledger_, transaction, slots, ctx);
        // The rest of the sidecar: the gate answers a turn at once unless it queues it; a queued
        // turn's scripted answer gets the ticket the gate gave.
        const auto perform = [&](const scripted_step& step, input_script& sc) -> std::optional<statement_input> {
            if (on_action) on_action(step.act);
            if (step.act.type == sa::wait_turn) {
                const auto& t = *step.turn;
                auto entry = gate_.enter(t.rule, t.key, *t.limits, t.units, [] {});
                if (entry.what != admission::queued) return statement_input::of_turn(entry.what, entry.id);
                queued_ticket = entry.id;
            }
            auto in = perform_from_script(step, sc);
            if (in && in->type == statement_input::kind::turn && in->turn == admission::admitted)
                in->ticket = queued_ticket;
            return in;
        };
        input_script inputs(std::move(script));
        const auto run = run_scripted(op, inputs, perform);
        for (const auto& step : run.steps) {
            r.actions.push_back(seen(step));
            for (auto e : step.report.events) r.events.push_back(e);
            for (const auto& n : step.report.admission) r.notes.push_back(n);
            for (const auto& n : step.report.reads) r.reads.push_back(n);
        }
        if (on_action && run.finished()) on_action(run.last().act);
        EXPECT_TRUE(run.finished()) << run.failure();
        EXPECT_EQ(run.inputs_left, 0u) << "the operation used fewer inputs than scripted";
        return r;
    }

    std::string claim_sql(std::string_view user, std::string_view key) {
        return "INSERT INTO coupon_order (user_id, campaign_id) VALUES (" + std::string(user) + ", " +
               std::string(key) + ")";
    }
    // The transaction ended (what the session's after_command does): takes to the ledger or back.
    void end(bool committed) {
        (void)end_transaction(memory, ledger_, committed, id_);
        if (committed) (void)transaction.release_all();
        slots.release_all(gate_);
    }

    session_memory memory;
    transaction_tracker transaction;
    admission_slots slots;
    admission_gate::ticket queued_ticket = 0;
    read_cache* cache = nullptr;                             // the sidecar's read cache, when the test gives one
    cached_read read{{}, "T-E-33\n\nshape"};                 // what the session knows of a counter read
    std::function<void(const statement_action&)> on_action;  // the rest of the sidecar, between two steps

private:
    const rules_env& env_;
    admission_gate& gate_;
    take_ledger& ledger_;
    std::uint64_t id_;
    bool redis_;
    std::vector<std::unique_ptr<statement>> statements_;
};

const std::string take_sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 1";
const key_tuple key1{"1"};

statement_input reply(const reply_summary& r) { return statement_input::of_reply(r); }
statement_input redis(redis_reply r) { return statement_input::of_redis(r, "token-1"); }

// What every case shares: the sidecar's admission gate, take ledger and read cache.
struct statement_op : testing::Test {
    admission_gate gate;
    take_ledger ledger;
    read_cache cache;
};

// ---- admission ----------------------------------------------------------------------------------

TEST_F(statement_op, admitted_take_waits_its_turn_then_goes) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    auto r = c.run(take_sql, {reply(ok_rows(1))});
    ASSERT_EQ(r.d.what, verdict::take);
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::send_sql, sa::reply_kept}));
    EXPECT_EQ(r.actions[0].rule, "coupon_stock");
    EXPECT_EQ(r.actions[0].key, key1);
    EXPECT_EQ(r.actions[0].units, 1);
    EXPECT_TRUE(r.has(event::took));
    EXPECT_TRUE(r.notes.empty());
    EXPECT_EQ(c.slots.size(), 1u);  // held until the session gives it back (after the reply)
    EXPECT_EQ(gate.in_flight("coupon_stock", key1), 1u);
    c.slots.release_all(gate);
    EXPECT_EQ(gate.in_flight("coupon_stock", key1), 0u);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", key1), 1u);
}

TEST_F(statement_op, queued_take_admitted_later_holds_the_slot) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    const auto* limits = &*admission_env().rules->find_stock("coupon_stock")->admission;
    auto other = gate.enter("coupon_stock", key1, *limits, 1, [] {});
    ASSERT_EQ(other.what, admission::admitted);
    auto r = c.run(take_sql, {statement_input::of_turn(admission::admitted), reply(ok_rows(1))});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::send_sql, sa::reply_kept}));
    EXPECT_EQ(c.slots.size(), 1u);
}

TEST_F(statement_op, sold_out_key_is_answered_without_the_database) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    gate.note_sold_out("coupon_stock", key1, 1);
    auto r = c.run(take_sql, {});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::answer}));
    EXPECT_EQ(r.last().op.answer.code, 1644);
    EXPECT_EQ(r.last().op.answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(r.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::sold_out});
    EXPECT_TRUE(r.has(event::exhausted));
    EXPECT_TRUE(c.slots.empty());
    // The refusal is remembered: the claim that follows is blocked too.
    auto claim = c.run(c.claim_sql("5", "1"), {});
    EXPECT_EQ(claim.kinds(), std::vector<sa>{sa::answer});
    EXPECT_TRUE(claim.has(event::blocked));
}

TEST_F(statement_op, timed_out_wait_answers_1205) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    const auto& limits = *admission_env().rules->find_stock("coupon_stock")->admission;
    ASSERT_EQ(gate.enter("coupon_stock", key1, limits, 1, [] {}).what, admission::admitted);
    auto r = c.run(take_sql, {statement_input::of_turn(admission::timed_out)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::answer}));
    EXPECT_EQ(r.last().op.answer.code, 1205);
    EXPECT_EQ(r.last().op.answer.sql_state, "HY000");
    EXPECT_EQ(
        r.last().op.answer.message,
        "claimguard: waited more than queue_timeout (200ms) for key campaign_id=1 of rule coupon_stock; try again");
    EXPECT_EQ(r.last().op.status, autocommit);
    EXPECT_EQ(r.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::timed_out});
    EXPECT_TRUE(r.events.empty());
    EXPECT_TRUE(c.slots.empty());
}

TEST_F(statement_op, full_queue_answers_1205_at_once) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    const auto& limits = *admission_env().rules->find_stock("coupon_stock")->admission;
    ASSERT_EQ(gate.enter("coupon_stock", key1, limits, 1, [] {}).what, admission::admitted);
    ASSERT_EQ(gate.enter("coupon_stock", key1, limits, 1, [] {}).what, admission::queued);
    auto r = c.run(take_sql, {});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::answer}));
    EXPECT_EQ(r.last().op.answer.code, 1205);
    EXPECT_EQ(
        r.last().op.answer.message,
        "claimguard: the queue for key campaign_id=1 of rule coupon_stock is full (1 statements wait); try again");
    EXPECT_EQ(r.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::queue_full});
}

TEST_F(statement_op, client_gone_while_queued_fails_the_command) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    const auto& limits = *admission_env().rules->find_stock("coupon_stock")->admission;
    ASSERT_EQ(gate.enter("coupon_stock", key1, limits, 1, [] {}).what, admission::admitted);
    auto r = c.run(take_sql, {statement_input::closing()});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::fail}));
    EXPECT_TRUE(c.slots.empty());
}

// The transaction holds the key's slot from its first decrement: the next one goes without a wait;
// one of another key goes at once too (waiting could close a cycle with the slot it holds).
TEST_F(statement_op, transaction_goes_on_its_own_slot) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    auto first = c.run(take_sql, {reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_EQ(first.kinds(), (std::vector<sa>{sa::wait_turn, sa::send_sql, sa::reply_kept}));
    auto again = c.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1 AND remain >= 1",
                       {reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_EQ(again.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    EXPECT_TRUE(again.notes.empty());
    auto other =
        c.run("UPDATE coupon_stock SET remain = 10 WHERE campaign_id = 2", {reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_EQ(other.kinds(), (std::vector<sa>{sa::send_sql, sa::reply_kept}));
    EXPECT_EQ(other.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::lock_held});
    EXPECT_EQ(c.slots.size(), 1u);
    c.end(true);
    EXPECT_TRUE(c.slots.empty());
    EXPECT_EQ(gate.in_flight("coupon_stock", key1), 0u);
}

// A locking read of the key first: the decrement goes at once (a slot holder may wait for its row lock).
TEST_F(statement_op, locking_read_does_not_wait) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    auto read = c.run("SELECT remain FROM coupon_stock WHERE campaign_id = 1 FOR UPDATE",
                      {reply(counter_row(5, in_trans))}, in_trans);
    ASSERT_EQ(read.d.what, verdict::remember_read);
    EXPECT_EQ(read.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    auto r = c.run("UPDATE coupon_stock SET remain = 4 WHERE campaign_id = 1", {reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_TRUE(r.d.holds_row_lock);
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_sql, sa::reply_kept}));
    EXPECT_EQ(r.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::lock_held});
    EXPECT_TRUE(c.slots.empty());
}

// What the database says about the key reaches the gate: a take that found the floor makes the
// key sold out for the next arrival.
TEST_F(statement_op, exhausted_take_marks_the_key_sold_out_in_the_gate) {
    connection c(gate, ledger), d(gate, ledger, 2);
    ASSERT_TRUE(c.ready()) << c.error();
    auto r =
        c.run("UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1", {reply(ok_rows(0)), reply(counter_row(0))});
    EXPECT_TRUE(r.has(event::exhausted));
    c.slots.release_all(gate);
    auto next = d.run(take_sql, {});
    EXPECT_EQ(next.kinds(), (std::vector<sa>{sa::wait_turn, sa::answer}));
    EXPECT_EQ(next.note_kinds(), std::vector<admission_note::kind>{admission_note::kind::sold_out});
}

// ---- the Redis key ------------------------------------------------------------------------------

TEST_F(statement_op, committed_claim_marks_its_redis_key) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1))});
    c.slots.release_all(gate);
    auto r = c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), reply(ok_rows(1))});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::redis_commit, sa::reply_kept}));
    EXPECT_EQ(r.actions[0].op.ttl, std::chrono::milliseconds(3000));
    ASSERT_EQ(r.actions[2].keys.size(), 1u);
    EXPECT_EQ(r.actions[2].keys[0].key, r.d.redis_key);
    EXPECT_EQ(r.actions[2].keys[0].token, "token-1");
    EXPECT_EQ(r.actions[2].keys[0].ttl, std::chrono::milliseconds(3000));
    EXPECT_EQ(c.transaction.held(), 0u);
    EXPECT_TRUE(r.has(event::claim_inserted));
}

// A duplicate the database found: the unit goes back, and the key is released before the answer.
TEST_F(statement_op, duplicate_claim_releases_its_redis_key_first) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1))});
    c.slots.release_all(gate);
    auto r = c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), reply(error_reply(1062)), reply(ok_rows(1))});
    EXPECT_EQ(r.kinds(),
              (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::send_sql, sa::redis_release, sa::answer}));
    EXPECT_TRUE(r.actions[3].wait);
    ASSERT_EQ(r.actions[3].keys.size(), 1u);
    EXPECT_EQ(r.actions[3].keys[0].key, r.d.redis_key);
    EXPECT_EQ(r.last().op.answer.message, "claimguard: already claimed");
    EXPECT_TRUE(r.has(event::compensated));
}

// A cancellation (DELETE of the claim by its key) releases the claim's Redis key before the answer,
// whoever's claim set it (no token): the user may claim again, as the unique index now allows. A
// DELETE that removed nothing, or that does not name the claim's key, releases nothing.
TEST_F(statement_op, cancellation_releases_the_claims_redis_key) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    auto r = c.run("DELETE FROM coupon_order WHERE user_id = 7 AND campaign_id = 1", {reply(ok_rows(1))});
    ASSERT_EQ(r.d.what, verdict::cancel) << r.d.note;
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_statement, sa::redis_release, sa::reply_kept}));
    EXPECT_TRUE(r.actions[1].wait);
    ASSERT_EQ(r.actions[1].keys.size(), 1u);
    EXPECT_EQ(r.actions[1].keys[0].key, r.d.redis_key);
    EXPECT_EQ(r.actions[1].keys[0].token, "");
    EXPECT_TRUE(r.has(event::cancelled_kept));
    auto none = c.run("DELETE FROM coupon_order WHERE user_id = 7 AND campaign_id = 1", {reply(ok_rows(0))});
    EXPECT_EQ(none.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    auto by_id = c.run("DELETE FROM coupon_order WHERE id = 3", {reply(ok_rows(1))});
    EXPECT_EQ(by_id.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
}

// In a transaction the key is kept until the transaction ends (the session's transaction tracker).
TEST_F(statement_op, claim_in_a_transaction_keeps_its_key_for_the_transaction) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1, in_trans))}, in_trans);
    auto r = c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::reply_kept}));
    ASSERT_EQ(c.transaction.held(), 1u);
    auto keys = c.transaction.release_all();
    EXPECT_EQ(keys[0].key, r.d.redis_key);
    EXPECT_EQ(keys[0].token, "token-1");
}

// Held (a committed claim): a duplicate without the database; pending or unavailable: no key of its own.
TEST_F(statement_op, redis_held_pending_unavailable_hold_no_key) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1))});
    c.slots.release_all(gate);
    auto held = c.run(c.claim_sql("7", "1"), {redis(redis_reply::held), reply(ok_rows(1))});
    EXPECT_EQ(held.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_sql, sa::answer}));
    EXPECT_TRUE(held.has(event::duplicate_redis));
    for (auto answer : {redis_reply::pending, redis_reply::unavailable}) {
        (void)c.run("UPDATE coupon_stock SET remain = 98 WHERE campaign_id = 1", {reply(ok_rows(1))});
        c.slots.release_all(gate);
        auto r = c.run(c.claim_sql("8", "1"), {redis(answer), reply(ok_rows(1))});
        EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::reply_kept}));
        EXPECT_EQ(c.transaction.held(), 0u);
    }
}

// A COMMIT that became a ROLLBACK: the transaction's claims' keys go (in the background) before the answer.
TEST_F(statement_op, commit_turned_rollback_releases_the_transaction_keys) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    auto claim = c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), reply(ok_rows(1, in_trans))}, in_trans);
    EXPECT_TRUE(claim.has(event::claim_ahead));
    EXPECT_EQ(c.transaction.held(), 1u);
    auto commit = c.run("COMMIT", {reply(ok_rows(0))}, in_trans);
    ASSERT_EQ(commit.d.what, verdict::rollback_instead);
    EXPECT_EQ(commit.kinds(), (std::vector<sa>{sa::send_sql, sa::redis_release, sa::answer}));
    EXPECT_FALSE(commit.actions[1].wait);
    ASSERT_EQ(commit.actions[1].keys.size(), 1u);
    EXPECT_EQ(commit.actions[1].keys[0].key, claim.d.redis_key);
    EXPECT_EQ(c.transaction.held(), 0u);
}

// ---- I/O lost mid-claim --------------------------------------------------------------------------

// After the Redis acquire, the INSERT's connection fails: the key is released, the take the claim
// used is not given back to the ledger (the INSERT may have committed), the command fails.
TEST_F(statement_op, io_lost_after_the_redis_acquire_releases_the_key) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1))});
    c.slots.release_all(gate);
    ASSERT_EQ(ledger.waiting_takes("coupon_stock", key1), 1u);
    auto r = c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), statement_input::lost()});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::redis_release, sa::fail}));
    EXPECT_FALSE(r.actions[2].wait);
    ASSERT_EQ(r.actions[2].keys.size(), 1u);
    EXPECT_EQ(r.actions[2].keys[0].key, r.d.redis_key);
    EXPECT_EQ(r.actions[2].keys[0].token, "token-1");
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", key1), 0u);
    EXPECT_FALSE(r.has(event::claim_inserted));
    EXPECT_FALSE(r.has(event::compensated));
}

// In a transaction: the claim's key and those of the transaction's earlier claims go together.
TEST_F(statement_op, io_lost_in_a_transaction_releases_every_key_it_holds) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    (void)c.run(take_sql, {reply(ok_rows(1, in_trans))}, in_trans);
    (void)c.run(c.claim_sql("7", "1"), {redis(redis_reply::acquired), reply(ok_rows(1, in_trans))}, in_trans);
    ASSERT_EQ(c.transaction.held(), 1u);
    (void)c.run("UPDATE coupon_stock SET remain = 98 WHERE campaign_id = 1", {reply(ok_rows(1, in_trans))}, in_trans);
    auto r = c.run(c.claim_sql("8", "1"), {redis(redis_reply::acquired), statement_input::lost()}, in_trans);
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::redis_release, sa::fail}));
    EXPECT_EQ(r.actions[2].keys.size(), 2u);
    EXPECT_EQ(c.transaction.held(), 0u);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", key1), 0u);
}

// The take's connection fails: nothing is recorded as taken, no key to release.
TEST_F(statement_op, io_lost_under_a_take_records_nothing) {
    connection c(gate, ledger, 1, true);
    ASSERT_TRUE(c.ready()) << c.error();
    auto r = c.run(take_sql, {statement_input::lost()});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::send_sql, sa::fail}));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", key1), 0u);
    EXPECT_TRUE(r.events.empty());
}

// ---- the read cache ------------------------------------------------------------------------------

const std::string read_sql = "SELECT remain FROM coupon_stock WHERE campaign_id = 1";

std::shared_ptr<const protocol::counter_reply> kept_reply(std::int64_t value) {
    auto t = std::make_shared<protocol::counter_reply>();
    t->value = value;
    return t;
}
statement_input server_read(std::int64_t value) { return statement_input::of_read({}, kept_reply(value)); }

// The first read asks the server and keeps its reply; the next (another connection) is answered
// from it, and the connection's memory sees the value as its read.
TEST_F(statement_op, read_missed_then_answered_from_the_cache) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = b.cache = &cache;
    auto first = a.run(read_sql, {server_read(5)});
    ASSERT_EQ(first.d.what, verdict::remember_read);
    EXPECT_EQ(first.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    EXPECT_TRUE(first.actions[0].keep_template);
    EXPECT_EQ(first.read_kinds(), (std::vector<read_note::kind>{read_note::kind::miss, read_note::kind::stored}));
    EXPECT_EQ(a.memory.find("coupon_stock", key1)->last_read, 5);
    EXPECT_EQ(cache.keys(), 1u);
    auto second = b.run(read_sql, {statement_input::of_rebuilt(true)});
    EXPECT_EQ(second.kinds(), (std::vector<sa>{sa::serve_cached, sa::reply_rebuilt}));
    EXPECT_EQ(second.actions[0].value, 5);
    ASSERT_TRUE(second.actions[0].cached);
    EXPECT_EQ(second.read_kinds(), std::vector<read_note::kind>{read_note::kind::hit});
    EXPECT_EQ(b.memory.find("coupon_stock", key1)->last_read, 5);
}

// A value the kept reply cannot carry (the session could not rebuild it): the server is asked.
TEST_F(statement_op, read_not_rebuilt_goes_to_the_server) {
    connection a(gate, ledger, 1);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = &cache;
    (void)a.run(read_sql, {server_read(5)});
    auto r = a.run(read_sql, {statement_input::of_rebuilt(false), server_read(6)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::serve_cached, sa::send_statement, sa::reply_kept}));
    EXPECT_EQ(r.read_kinds(), (std::vector<read_note::kind>{read_note::kind::refresh, read_note::kind::stored}));
    EXPECT_EQ(a.memory.find("coupon_stock", key1)->last_read, 6);
}

// Not cacheable (a cursor): the read goes as any read, said why.
TEST_F(statement_op, read_bypassing_the_cache_goes_as_usual) {
    connection a(gate, ledger, 1);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = &cache;
    a.read.situation.cursor = true;
    auto r = a.run(read_sql, {reply(counter_row(5))});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    EXPECT_FALSE(r.actions[0].keep_template);
    ASSERT_EQ(r.read_kinds(), std::vector<read_note::kind>{read_note::kind::bypass});
    EXPECT_EQ(r.reads[0].why, "a cursor");
    EXPECT_EQ(cache.keys(), 0u);
}

// Another read is refreshing the key: this one waits for its answer and is served from it.
TEST_F(statement_op, read_waits_for_another_refresh_then_hits) {
    connection a(gate, ledger, 1);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = &cache;
    (void)a.run(read_sql, {server_read(5)});
    cache.invalidate("coupon_stock", key1);
    const auto other = cache.find("coupon_stock", key1, a.read.shape, std::chrono::seconds(10));
    ASSERT_EQ(other.what, read_cache::outcome::refresh);
    int waits = 0;
    a.on_action = [&](const statement_action& act) {
        if (act.type == sa::wait_refresh && ++waits == 2)
            cache.store("coupon_stock", key1, a.read.shape, kept_reply(7), 7, other.generation,
                        read_cache::clock::now());
    };
    auto r = a.run(read_sql, {statement_input::refresh_done(), statement_input::refresh_done(),
                              statement_input::of_rebuilt(true)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_refresh, sa::wait_refresh, sa::serve_cached, sa::reply_rebuilt}));
    EXPECT_EQ(r.actions[2].value, 7);
    EXPECT_EQ(r.read_kinds(), std::vector<read_note::kind>{read_note::kind::hit});
    // The session closing while it waits ends the command.
    cache.invalidate("coupon_stock", key1);
    ASSERT_EQ(cache.find("coupon_stock", key1, a.read.shape, std::chrono::seconds(10)).what,
              read_cache::outcome::refresh);
    a.on_action = nullptr;
    auto closing = a.run(read_sql, {statement_input::closing()});
    EXPECT_EQ(closing.kinds(), (std::vector<sa>{sa::wait_refresh, sa::fail}));
}

// A read inside a transaction may see an older snapshot: its reply is never the key's value.
TEST_F(statement_op, read_in_a_transaction_is_not_kept) {
    connection a(gate, ledger, 1);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = &cache;
    auto r = a.run(read_sql, {server_read(5)}, in_trans);
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    EXPECT_EQ(r.read_kinds(), std::vector<read_note::kind>{read_note::kind::miss});
    EXPECT_EQ(cache.templates(), 0u);
    EXPECT_EQ(a.memory.find("coupon_stock", key1)->last_read, 5);
}

// The read's connection fails: its refresh ends, so the next read asks the server at once.
TEST_F(statement_op, io_lost_under_a_refresh_ends_it) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = b.cache = &cache;
    (void)a.run(read_sql, {server_read(5)});
    cache.invalidate("coupon_stock", key1);
    auto lost = a.run(read_sql, {statement_input::lost()});
    EXPECT_EQ(lost.kinds(), (std::vector<sa>{sa::send_statement, sa::fail}));
    EXPECT_EQ(lost.read_kinds(), std::vector<read_note::kind>{read_note::kind::refresh});
    auto next = b.run(read_sql, {server_read(4)});
    EXPECT_EQ(next.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));  // no wait
    EXPECT_EQ(next.read_kinds(), (std::vector<read_note::kind>{read_note::kind::refresh, read_note::kind::stored}));
}

// read_cache_sold_out: the operation asks the cache with the rule's backoff and keeps the
// server's answer with it. The clock is real: the key's earlier reads are stored as if long ago.
TEST_F(statement_op, a_sold_out_key_is_read_with_the_rules_backoff) {
    using namespace std::chrono_literals;
    connection a(gate, ledger, 1, false, sold_out_env());
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = &cache;
    const sold_out_backoff backoff{1min, 0};
    const auto kept_at = [&](read_cache::clock::time_point at) {  // the server said 0 at `at`
        auto l = cache.find("coupon_stock", key1, a.read.shape, 10s, at, true, read_cache::max_refresh_wait, backoff);
        cache.store("coupon_stock", key1, a.read.shape, kept_reply(0), 0, l.generation, at, backoff);
    };
    const auto t0 = read_cache::clock::now();
    kept_at(t0 - 50s);  // first seen sold out: kept 10s
    auto refreshed = a.run(read_sql, {server_read(0)});
    EXPECT_EQ(refreshed.read_kinds(),
              (std::vector<read_note::kind>{read_note::kind::refresh, read_note::kind::stored}));
    // Still sold out: kept 20s now. Without the backoff the TTL (10s) would have ended at +15s.
    const auto after = read_cache::clock::now();
    EXPECT_EQ(
        cache.find("coupon_stock", key1, a.read.shape, 10s, after + 15s, true, read_cache::max_refresh_wait, backoff)
            .what,
        read_cache::outcome::hit);
    // ... and the operation's own lookup uses it: 15s after one more refresh still sold out (kept
    // 40s from there), a hit where the TTL alone would have asked the server.
    kept_at(t0 - 15s);
    auto hit = a.run(read_sql, {statement_input::of_rebuilt(true)});
    EXPECT_EQ(hit.kinds(), (std::vector<sa>{sa::serve_cached, sa::reply_rebuilt}));
    EXPECT_EQ(hit.actions[0].value, 0);
}

// ---- the read cache follows the claims ------------------------------------------------------------

// A take in autocommit: the kept value goes down by its units, and the next read is answered from it.
TEST_F(statement_op, take_in_autocommit_lowers_the_cached_value) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = b.cache = &cache;
    (void)a.run(read_sql, {server_read(5)});
    auto take = a.run("UPDATE coupon_stock SET remain = 4 WHERE campaign_id = 1", {reply(ok_rows(1))});
    ASSERT_TRUE(take.has(event::took));
    a.slots.release_all(gate);
    auto r = b.run(read_sql, {statement_input::of_rebuilt(true)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::serve_cached, sa::reply_rebuilt}));
    EXPECT_EQ(r.actions[0].value, 4);
}

// A take whose reply says the session is in a transaction may still roll back: the key is
// invalidated, and the next read goes to the server. The reply's status decides, not the one before
// (autocommit off: the take itself opened the transaction).
TEST_F(statement_op, take_in_a_transaction_invalidates_the_key) {
    for (std::uint16_t before : {in_trans, std::uint16_t{0}}) {
        SCOPED_TRACE(before);
        read_cache fresh;
        connection a(gate, ledger, 1), b(gate, ledger, 2);
        ASSERT_TRUE(a.ready()) << a.error();
        a.cache = b.cache = &fresh;
        (void)b.run(read_sql, {server_read(5)});
        auto take = a.run(take_sql, {reply(ok_rows(1, in_trans))}, before);
        ASSERT_TRUE(take.has(event::took));
        auto r = b.run(read_sql, {server_read(5)});
        EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
        EXPECT_EQ(r.read_kinds(), (std::vector<read_note::kind>{read_note::kind::refresh, read_note::kind::stored}));
        a.end(false);
    }
}

// A take that found the floor: the key is kept as sold out (the floor), read from the cache.
TEST_F(statement_op, exhausted_take_keeps_the_floor) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = b.cache = &cache;
    (void)b.run(read_sql, {server_read(5)});
    auto take = a.run(take_sql, {reply(ok_rows(0)), reply(counter_row(0))});
    ASSERT_TRUE(take.has(event::exhausted));
    a.slots.release_all(gate);
    auto r = b.run(read_sql, {statement_input::of_rebuilt(true)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::serve_cached, sa::reply_rebuilt}));
    EXPECT_EQ(r.actions[0].value, 0);
}

// A restock may raise the counter: the next read goes to the server.
TEST_F(statement_op, restock_invalidates_the_key) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.cache = b.cache = &cache;
    (void)b.run(read_sql, {server_read(5)});
    auto restock = a.run("UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 1", {reply(ok_rows(1))});
    ASSERT_TRUE(restock.has(event::restocked));
    auto r = b.run(read_sql, {server_read(10)});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::send_statement, sa::reply_kept}));
    EXPECT_EQ(r.read_kinds(), (std::vector<read_note::kind>{read_note::kind::refresh, read_note::kind::stored}));
}

// Without a read cache for the statement's connection nothing is kept or followed.
TEST_F(statement_op, no_cache_follows_nothing) {
    connection a(gate, ledger, 1), b(gate, ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    b.cache = &cache;
    (void)b.run(read_sql, {server_read(5)});
    (void)a.run(take_sql, {reply(ok_rows(1))});
    a.slots.release_all(gate);
    auto r = b.run(read_sql, {statement_input::of_rebuilt(true)});
    EXPECT_EQ(r.actions[0].value, 5);
}

// ---- one report per step ---------------------------------------------------------------------------

// What a step reported is there until the next resume, and only that step's.
TEST_F(statement_op, report_is_the_last_steps) {
    const auto& env = admission_env();
    ASSERT_TRUE(env.error.empty()) << env.error;
    session_memory memory;
    transaction_tracker transaction;
    admission_slots slots;
    memory.next_command();
    const statement s(take_sql, *env.index);
    const auto d = decide(s.facts(), *env.rules, resolve_literal, memory);
    const statement_context ctx{{1, autocommit, false}, &gate, &*env.rules, nullptr, nullptr};
    statement_operation op(d, s.parsed(), memory, ledger, transaction, slots, ctx);
    auto a = op.resume(statement_input::start());
    ASSERT_EQ(a.type, sa::wait_turn);
    EXPECT_TRUE(op.report().empty());
    a = op.resume(statement_input::of_turn(admission::sold_out));
    ASSERT_EQ(a.type, sa::answer);
    ASSERT_EQ(op.report().admission.size(), 1u);
    EXPECT_EQ(op.report().admission[0].what, admission_note::kind::sold_out);
    EXPECT_EQ(op.report().events, std::vector<event>{event::exhausted});
    EXPECT_TRUE(op.report().deferred.empty());
    EXPECT_TRUE(op.report().reads.empty());
    EXPECT_EQ(op.claim_action().answer.code, 1644);
    // The operation is done: another input fails it, and the report holds nothing of the last step.
    a = op.resume(statement_input::of_turn(admission::admitted));
    EXPECT_EQ(a.type, sa::fail);
    EXPECT_TRUE(op.report().empty());
}

// An input the operation did not ask for ends it (the session's bug, never a hang).
TEST_F(statement_op, unexpected_input_fails) {
    connection c(gate, ledger);
    ASSERT_TRUE(c.ready()) << c.error();
    auto r = c.run(take_sql, {statement_input::of_redis(redis_reply::acquired, "t")});
    EXPECT_EQ(r.kinds(), (std::vector<sa>{sa::wait_turn, sa::send_sql, sa::fail}));
}

}  // namespace
}  // namespace claimguard::engine::test
