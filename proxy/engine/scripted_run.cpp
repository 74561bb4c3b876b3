// A statement_operation run with scripted inputs: each action recorded, then answered.
#include "scripted_run.hpp"

namespace claimguard::engine {

std::optional<statement_input> input_script::next() {
    if (next_ == inputs_.size()) return std::nullopt;
    return inputs_[next_++];
}

std::optional<statement_input> perform_from_script(const scripted_step& step, input_script& script) {
    using k = statement_action::kind;
    if (step.act.type == k::redis_release || step.act.type == k::redis_commit)
        return statement_input::redis_carried_out();
    return script.next();
}

const char* action_name(statement_action::kind k) {
    using a = statement_action::kind;
    switch (k) {
        case a::relay: return "relay";
        case a::send_statement: return "send_statement";
        case a::send_sql: return "send_sql";
        case a::redis_acquire: return "redis_acquire";
        case a::redis_release: return "redis_release";
        case a::redis_commit: return "redis_commit";
        case a::wait_turn: return "wait_turn";
        case a::answer: return "answer";
        case a::reply_kept: return "reply_kept";
        case a::fail: return "fail";
        case a::wait_refresh: return "wait_refresh";
        case a::serve_cached: return "serve_cached";
        case a::reply_rebuilt: return "reply_rebuilt";
        case a::wait_group: return "wait_group";
    }
    return "?";
}

std::string scripted_run::failure() const {
    switch (end) {
        case ending::final_action: return {};
        case ending::script_ran_out:
            return "step " + std::to_string(steps.size()) + " (" + action_name(last().act.type) +
                   ") has no scripted input: the script ran out after " + std::to_string(inputs_used) +
                   (inputs_used == 1 ? " input" : " inputs");
        case ending::step_limit:
            return "the operation did not end within " + std::to_string(steps.size()) +
                   (steps.size() == 1 ? " step" : " steps") + " (the last: " + action_name(last().act.type) + ")";
    }
    return "?";
}

namespace {

// What the operation keeps for `a` until the next resume, copied (the keys handed over).
scripted_step record(statement_operation& op, const statement_action& a) {
    using k = statement_action::kind;
    scripted_step s;
    s.act = a;
    s.claim = op.claim_action();
    s.report = op.report();
    switch (a.type) {
        case k::redis_release:
        case k::redis_commit: s.keys = op.take_keys(); break;
        case k::wait_turn: s.turn = op.turn(); break;
        case k::serve_cached:
            s.cached = op.cached_reply();
            s.cached_value = op.cached_value();
            break;
        default: break;
    }
    return s;
}

}  // namespace

scripted_run run_scripted(statement_operation& op, input_script& script, const scripted_performer& perform,
                          std::size_t max_steps) {
    scripted_run run;
    auto a = op.resume(statement_input::start());
    for (;;) {
        run.steps.push_back(record(op, a));
        auto& step = run.steps.back();
        if (a.final()) {
            run.end = scripted_run::ending::final_action;
            break;
        }
        if (run.steps.size() >= max_steps) {
            run.end = scripted_run::ending::step_limit;
            break;
        }
        const auto before = script.used();
        step.input = perform(step, script);
        step.scripted = script.used() != before;
        if (!step.input) {
            run.end = scripted_run::ending::script_ran_out;
            break;
        }
        a = op.resume(*step.input);
    }
    run.inputs_used = script.used();
    run.inputs_left = script.left();
    return run;
}

}  // namespace claimguard::engine
