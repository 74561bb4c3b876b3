// One catalogue of what the claim engine reports: for each engine::event the audit action word,
// whether it gets an audit line, and which metric counts it (family name and the fixed values of
// its labels after `rule`); for each admission note its audit word. The session's metrics and
// audit log are a loop over these tables, and observe mode names what enforce mode would have
// done with the same words ("would-" + word).
// No I/O and no metrics dependency: the family names are only names here.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "claim_operation.hpp"
#include "decide.hpp"
#include "statement_operation.hpp"

namespace claimguard::engine {

inline constexpr std::size_t event_count = static_cast<std::size_t>(event::absorbed_recompute) + 1;

// A label value the decision gives rather than the row (claimguard_unmodeled_total's reason, the
// observe mode's action).
inline constexpr std::string_view from_decision = "*";

struct event_row {
    event what;
    std::string_view action;  // the audit action word (docs/OPERATIONS.md; observe: "would-" + it)
    bool audited;             // gets an audit line (false: counted only, e.g. a claim row audited by its outcome)
    std::string_view metric;  // the counter family that counts it (empty: none)
    std::array<std::string_view, 2> labels;  // its label values after rule (empty: fewer labels)
    // Reported with its take (rule, key) by the deferred takes' report, not with the statement.
    bool with_take = false;

    [[nodiscard]] std::size_t label_count() const { return labels[0].empty() ? 0 : labels[1].empty() ? 1 : 2; }
};

// Every event, in the order of the enum: catalogue()[i].what == event(i).
[[nodiscard]] const std::array<event_row, event_count>& catalogue();
[[nodiscard]] inline const event_row& row_of(event e) { return catalogue()[static_cast<std::size_t>(e)]; }
// The audit action word of `e`.
[[nodiscard]] inline std::string_view action_of(event e) { return row_of(e).action; }

// What the admission gate did for a statement (admission_note), catalogued like the events: its
// audit word, and whether it gets an audit line (only the ERR 1205 answers do; each note is
// counted by its claimguard_admission_*_total family, claim_metrics.hpp's admission_count).
struct admission_row {
    admission_note::kind what;
    std::string_view action;  // the audit action word (docs/OPERATIONS.md)
    bool audited;             // gets an audit line
};
inline constexpr std::size_t admission_note_count = static_cast<std::size_t>(admission_note::kind::grouped) + 1;
// Every admission note, in the order of the enum.
[[nodiscard]] const std::array<admission_row, admission_note_count>& admission_catalogue();
[[nodiscard]] inline const admission_row& row_of(admission_note::kind k) {
    return admission_catalogue()[static_cast<std::size_t>(k)];
}

// Observe mode: the event enforce mode would have produced for this decision (`blocked`: the
// observed claim would have been answered exhausted without a take behind it). Its word, without
// "would-", is the action label of claimguard_would_rewrite_total.
// A refusal (unmodeled or ambiguous) is refused-unmodeled; a forward is only ever observed as an
// unmodeled statement's.
[[nodiscard]] event enforce_event(verdict what, bool blocked = false);
// The events enforce_event can name (the would{action} label values), in catalogue order.
[[nodiscard]] const std::array<event, 10>& observable_events();
inline constexpr std::string_view observe_prefix = "would-";
// The audit action of an observed decision: "would-" + the word of enforce_event().
[[nodiscard]] inline std::string observe_action(event enforce) {
    return std::string(observe_prefix) + std::string(action_of(enforce));
}

}  // namespace claimguard::engine
