// The proxy server: listener, worker threads, sessions and the admin endpoint.
#pragma once

#include "proxy/config/proxy_options.hpp"

namespace claimguard::session {

// Runs until SIGINT/SIGTERM. Returns the process exit code.
int run_server(const config::proxy_options& options);

}  // namespace claimguard::session
