// The scripted run (run_scripted): every action recorded with what it carried, answered from the
// script in order; a script that runs out or a run past its bound says at which step, and no
// reply is ever invented (explain used to feed "OK, 1 row" when its script ran out).
#include <gtest/gtest.h>

#include "proxy/engine/scripted_run.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

using sa = statement_action::kind;
using ending = scripted_run::ending;

const std::string take_sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7";
const std::string claim_sql = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)";
const key_tuple key7{"7"};

statement_input reply(const reply_summary& r) { return statement_input::of_reply(r); }

// One statement of coupon.yaml as a fresh connection runs it, without gate or cache.
struct one_statement {
    explicit one_statement(std::string sql, bool redis = false)
        : env(env_for(variant_id::coupon)), st(std::move(sql), *env.index) {
        memory.next_command();
        d = decide(st.facts(), *env.rules, resolve_literal, memory);
        ctx.op = {1, autocommit, redis};
    }
    scripted_run run(input_script& script, const scripted_performer& perform = perform_from_script,
                     std::size_t max_steps = scripted_max_steps) {
        op.emplace(d, st.parsed(), memory, ledger, transaction, slots, ctx);
        return run_scripted(*op, script, perform, max_steps);
    }

    const rules_env& env;
    statement st;
    session_memory memory;
    take_ledger ledger;
    transaction_tracker transaction;
    admission_slots slots;
    statement_context ctx;
    decision d;
    std::optional<statement_operation> op;
};

std::vector<sa> kinds(const scripted_run& run) {
    std::vector<sa> out;
    for (const auto& s : run.steps) out.push_back(s.act.type);
    return out;
}

TEST(scripted_run, take_runs_to_its_final_action) {
    one_statement s(take_sql);
    ASSERT_EQ(s.d.what, verdict::take);
    input_script script{reply(ok_rows(1))};
    const auto run = s.run(script);
    EXPECT_TRUE(run.finished());
    EXPECT_EQ(run.failure(), "");
    EXPECT_EQ(kinds(run), (std::vector<sa>{sa::send_sql, sa::reply_kept}));
    EXPECT_EQ(run.steps[0].claim.type, action::kind::send_sql);
    EXPECT_NE(run.steps[0].claim.sql.sql.find("remain >= 1"), std::string::npos) << run.steps[0].claim.sql.sql;
    ASSERT_TRUE(run.steps[0].input);
    EXPECT_TRUE(run.steps[0].scripted);
    EXPECT_EQ(run.steps[0].input->reply.affected_rows, 1u);
    EXPECT_FALSE(run.last().input);  // a final action takes no input
    EXPECT_EQ(run.last().report.events, std::vector<event>{event::took});
    EXPECT_EQ(run.inputs_used, 1u);
    EXPECT_EQ(run.inputs_left, 0u);
    EXPECT_EQ(s.ledger.waiting_takes("coupon_stock", key7), 1u);
}

// The bug this runner guards: a script that runs out ends the run at that step, said so, and the
// operation is not fed an invented "OK, 1 row" (nothing is taken).
TEST(scripted_run, script_running_out_says_which_step) {
    one_statement s(take_sql);
    input_script empty;
    const auto run = s.run(empty);
    EXPECT_FALSE(run.finished());
    EXPECT_EQ(run.end, ending::script_ran_out);
    EXPECT_EQ(kinds(run), std::vector<sa>{sa::send_sql});
    EXPECT_FALSE(run.last().input);
    EXPECT_EQ(run.failure(), "step 1 (send_sql) has no scripted input: the script ran out after 0 inputs");
    EXPECT_EQ(s.ledger.waiting_takes("coupon_stock", key7), 0u);
}

// Zero rows: the take asks the counter next, and the script has no answer for that.
TEST(scripted_run, script_running_out_mid_statement) {
    one_statement s(take_sql);
    input_script script{reply(ok_rows(0))};
    const auto run = s.run(script);
    EXPECT_EQ(run.end, ending::script_ran_out);
    EXPECT_EQ(kinds(run), (std::vector<sa>{sa::send_sql, sa::send_sql}));
    EXPECT_EQ(run.failure(), "step 2 (send_sql) has no scripted input: the script ran out after 1 input");
    EXPECT_EQ(run.inputs_used, 1u);
    for (const auto& step : run.steps) EXPECT_TRUE(step.report.events.empty());
}

TEST(scripted_run, run_past_its_bound_says_so) {
    one_statement s(take_sql);
    input_script script{reply(ok_rows(0)), reply(counter_row(0))};
    const auto run = s.run(script, perform_from_script, 1);
    EXPECT_EQ(run.end, ending::step_limit);
    EXPECT_EQ(run.steps.size(), 1u);
    EXPECT_EQ(run.failure(), "the operation did not end within 1 step (the last: send_sql)");
    EXPECT_EQ(run.inputs_left, 2u);
}

// A committed claim in autocommit: the Redis answer is scripted, the key's commit carried out by
// the runner (it carries no answer) with the key recorded.
TEST(scripted_run, claim_records_redis_key_and_its_commit) {
    one_statement s(claim_sql, true);
    ASSERT_EQ(s.d.what, verdict::claim);
    s.ledger.add_take("coupon_stock", key7, 1, 1);
    input_script script{statement_input::of_redis(redis_reply::acquired, "token-1"), reply(ok_rows(1))};
    const auto run = s.run(script);
    ASSERT_TRUE(run.finished()) << run.failure();
    EXPECT_EQ(kinds(run), (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::redis_commit, sa::reply_kept}));
    EXPECT_EQ(run.steps[0].claim.ttl, std::chrono::milliseconds(3000));
    const auto& commit = run.steps[2];
    ASSERT_EQ(commit.keys.size(), 1u);
    EXPECT_EQ(commit.keys[0].key, s.d.redis_key);
    EXPECT_EQ(commit.keys[0].token, "token-1");
    ASSERT_TRUE(commit.input);
    EXPECT_EQ(commit.input->type, statement_input::kind::redis_done);
    EXPECT_FALSE(commit.scripted);
    EXPECT_EQ(run.inputs_used, 2u);
    // Reported by the resume that took the INSERT's reply, the one that returned the commit.
    EXPECT_TRUE(run.steps[1].report.events.empty());
    EXPECT_EQ(commit.report.events, std::vector<event>{event::claim_inserted});
}

// A performer answers what it can itself (explain: Redis always "acquired") and leaves the rest
// to the script.
TEST(scripted_run, performer_answers_on_its_own) {
    one_statement s(claim_sql, true);
    s.ledger.add_take("coupon_stock", key7, 1, 1);
    const auto redis_acquired = [](const scripted_step& step, input_script& script) -> std::optional<statement_input> {
        if (step.act.type == sa::redis_acquire) return statement_input::of_redis(redis_reply::acquired, "mine");
        return perform_from_script(step, script);
    };
    input_script script{reply(error_reply(1062)), reply(ok_rows(1))};
    const auto run = s.run(script, redis_acquired);
    ASSERT_TRUE(run.finished()) << run.failure();
    EXPECT_EQ(kinds(run),
              (std::vector<sa>{sa::redis_acquire, sa::send_statement, sa::send_sql, sa::redis_release, sa::answer}));
    EXPECT_FALSE(run.steps[0].scripted);
    EXPECT_TRUE(run.steps[1].scripted);
    EXPECT_TRUE(run.steps[3].act.wait);
    EXPECT_EQ(run.steps[3].keys.at(0).token, "mine");
    EXPECT_EQ(run.last().claim.answer.message, "claimguard: already claimed");
}

// Inputs the operation never asked for are counted, not fed.
TEST(scripted_run, unused_inputs_are_counted) {
    one_statement s("SELECT * FROM users");
    input_script script{reply(ok_rows(1))};
    const auto run = s.run(script);
    EXPECT_TRUE(run.finished());
    EXPECT_EQ(kinds(run), std::vector<sa>{sa::relay});
    EXPECT_EQ(run.inputs_used, 0u);
    EXPECT_EQ(run.inputs_left, 1u);
}

// An input of the wrong kind is the operation's to refuse: it fails the command, and the run ends there.
TEST(scripted_run, wrong_input_ends_in_fail) {
    one_statement s(take_sql);
    input_script script{statement_input::of_redis(redis_reply::acquired, "t")};
    const auto run = s.run(script);
    EXPECT_TRUE(run.finished());
    EXPECT_EQ(kinds(run), (std::vector<sa>{sa::send_sql, sa::fail}));
}

TEST(scripted_run, action_names) {
    EXPECT_STREQ(action_name(sa::send_sql), "send_sql");
    EXPECT_STREQ(action_name(sa::wait_turn), "wait_turn");
    EXPECT_STREQ(action_name(sa::reply_rebuilt), "reply_rebuilt");
}

}  // namespace
}  // namespace claimguard::engine::test
