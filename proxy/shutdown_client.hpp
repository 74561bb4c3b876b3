// `claimguard shutdown`: POST /quitquitquit to a running claimguard's control endpoint (preStop hooks).
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace claimguard {

// `address` is host:port, [v6]:port or a name; 0 when the sidecar answered 200, 1 when it could not be
// reached or answered otherwise, 2 when the address is malformed.
int shutdown_command(const std::string& address, std::chrono::milliseconds timeout, std::ostream& out,
                     std::ostream& err);

}  // namespace claimguard
