// The values a COM_STMT_EXECUTE bound, made comparable with the statement's literals: what the
// decision reads for a prepared statement's placeholders.
#pragma once

#include <optional>
#include <vector>

#include "decide.hpp"
#include "proxy/protocol/binary_value.hpp"

namespace claimguard::engine {

// A bound parameter made comparable with literals: integers in decimal, doubles and floats (the
// codec widens FLOAT) as the server compares them with an integer column, strings as bytes
// (numeric strings canonicalised as numbers, as the server compares them). Empty: NULL,
// temporals, long data (never a key claimguard tracks).
[[nodiscard]] std::optional<resolved_value> resolve_bound(const protocol::binary_value& v);

// Placeholders from `params` (kept alive by the caller), literals as resolve_literal.
[[nodiscard]] value_resolver bound_resolver(const std::vector<protocol::binary_value>& params);

}  // namespace claimguard::engine
