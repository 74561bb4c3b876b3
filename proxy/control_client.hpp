// The control endpoint's client: `claimguard shutdown` (POST /quitquitquit, preStop hooks) and
// `claimguard mode-override` (the kill switch).
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <string_view>

namespace claimguard {

// POSTs `path` to a running claimguard's control endpoint. `address` is host:port, [v6]:port or a
// name; `command` names the subcommand in messages. 0 when it answered 200 (its body is printed on
// `out` unless `said` is given), 1 when it could not be reached or answered otherwise, 2 when the
// address is malformed.
int control_post(std::string_view command, const std::string& address, std::string_view path,
                 std::chrono::milliseconds timeout, std::ostream& out, std::ostream& err,
                 std::string_view said = {});

}  // namespace claimguard
