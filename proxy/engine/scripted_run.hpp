// A statement_operation run to its end with scripted inputs, no I/O: the one driver of the engine
// besides the session, shared by `claimguard explain` and the engine's tests. Every action is
// recorded with what it carried; a run whose script runs out, or that does not end within its
// bound, says so at the step where it stopped and never invents an answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "statement_operation.hpp"

namespace claimguard::engine {

// The inputs a run answers the operation's actions with, in order.
class input_script {
public:
    input_script() = default;
    input_script(std::vector<statement_input> inputs) : inputs_(std::move(inputs)) {}
    input_script(std::initializer_list<statement_input> inputs) : inputs_(inputs) {}

    // The next input; none when the script has run out.
    [[nodiscard]] std::optional<statement_input> next();
    [[nodiscard]] std::size_t used() const { return next_; }
    [[nodiscard]] std::size_t left() const { return inputs_.size() - next_; }

private:
    std::vector<statement_input> inputs_;
    std::size_t next_ = 0;
};

// One action the operation returned, with what it carried (copied when it was returned: the
// operation keeps it only until the next resume), what that resume reported, and the input that
// answered it.
struct scripted_step {
    statement_action act;
    action claim;                      // claim_action(): send_*, redis_acquire, answer (and the claim's final one)
    std::vector<redis_hold> keys;      // redis_release, redis_commit: take_keys()
    std::optional<turn_request> turn;  // wait_turn
    std::shared_ptr<const protocol::counter_reply> cached;  // serve_cached: cached_reply()
    std::int64_t cached_value = 0;                          // serve_cached: cached_value()
    statement_report report;                                // what the resume that returned it reported
    std::optional<statement_input> input;                   // what answered it; none: final, or nothing did
    bool scripted = false;                                  // `input` came from the script (not the performer itself)
};

// How a run performs one action: the input that answers it, or none when it has none (the
// script ran out). It may answer from the script (script.next()) or on its own.
using scripted_performer = std::function<std::optional<statement_input>(const scripted_step&, input_script&)>;

// The default performer: a redis_release or redis_commit is carried out at once (it carries no
// answer); every other action takes the script's next input.
[[nodiscard]] std::optional<statement_input> perform_from_script(const scripted_step& step, input_script& script);

// Enough for the longest flow (admission turns, a claim with its give-back, the key's settlement).
inline constexpr std::size_t scripted_max_steps = 32;

// What a scripted run did.
struct scripted_run {
    enum class ending : std::uint8_t {
        final_action,    // the operation returned a final action (steps.back())
        script_ran_out,  // steps.back() asked for an input the script did not have
        step_limit,      // the operation did not end within the run's bound
    };
    std::vector<scripted_step> steps;
    ending end = ending::final_action;
    std::size_t inputs_used = 0;  // from the script
    std::size_t inputs_left = 0;  // of the script, never asked for

    [[nodiscard]] bool finished() const { return end == ending::final_action; }
    [[nodiscard]] const scripted_step& last() const { return steps.back(); }
    // Why the run did not finish, naming the step (1-based) and its action; empty when it finished.
    [[nodiscard]] std::string failure() const;
};

// Starts `op` (statement_input::start()) and performs each action it returns with `perform`
// until a final action, a step with no input, or `max_steps` actions.
[[nodiscard]] scripted_run run_scripted(statement_operation& op, input_script& script,
                                        const scripted_performer& perform = perform_from_script,
                                        std::size_t max_steps = scripted_max_steps);

// The action's name as the header spells it (send_sql, wait_turn, ...).
[[nodiscard]] const char* action_name(statement_action::kind k);

}  // namespace claimguard::engine
