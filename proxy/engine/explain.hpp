// `claimguard explain`: a dry run of one statement through the same decide() and claim
// operation the proxy runs, with scripted database replies. Pure: writes text only.
#pragma once

#include <ostream>
#include <string_view>

#include "rules/match/describe.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

// Prints the pre-filter verdict, the facts, the decision, and what the proxy sends and answers
// for each outcome that matters (one row / zero rows; claimed / duplicate / no take).
// Placeholders of a prepared statement are taken as bound to 1. False (and an error line) when the
// dry run's scripted replies did not cover what the operation asked for.
bool explain(const rules::match::rule_index& rules, std::string_view sql, const rules::match::explain_options& options,
             std::ostream& out);

}  // namespace claimguard::engine
