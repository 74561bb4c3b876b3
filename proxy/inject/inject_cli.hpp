// `claimguard inject`: runs the mutating admission webhook that adds the sidecar to pods.
#pragma once

#include "proxy/inject/injection_config.hpp"
#include "proxy/inject/webhook_server.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace claimguard::inject {

// On SIGTERM the webhook keeps answering this long before it stops listening: the API server
// may still send reviews until the endpoint is removed, and with failurePolicy: Ignore a
// review that fails creates the pod without the sidecar.
inline constexpr std::chrono::seconds default_shutdown_delay{5};

struct inject_options {
    std::string listen = "0.0.0.0:8443";        // host:port of the HTTPS server
    std::string tls_cert_file;                  // PEM chain, e.g. cert-manager's tls.crt
    std::string tls_key_file;                   // e.g. tls.key
    bool self_signed = false;                   // generate a CA and serving certificate at start-up
    std::vector<std::string> dns_names;         // SANs of the self-signed certificate; empty: service names
    std::string service = "claimguard-inject";  // the webhook Service (self-signed SANs)
    std::string namespace_name;                 // the injector's namespace: never injected; SANs
    std::string ca_bundle_out = "-";            // where the self-signed CA PEM goes: a file, or "-" (stdout)
    std::string k8s_version;                    // the cluster's version, e.g. "1.29" (required)
    std::string log_level = "info";
    std::size_t max_connections = default_webhook_max_connections;
    std::size_t body_limit = default_webhook_body_limit;
    std::chrono::milliseconds request_timeout = default_webhook_request_timeout;  // --request-timeout 10s
    std::chrono::milliseconds tls_reload_interval = default_tls_reload_interval;  // --tls-reload-interval 30s
    std::chrono::milliseconds shutdown_delay = default_shutdown_delay;            // --shutdown-delay 5s
    injection_config injection;            // the sidecar: image, defaults, resources, extra args
    std::vector<std::string> sidecar_env;  // NAME=VALUE, into injection.env
};

// Declares the `inject` subcommand's options on `cmd`, bound to `options`.
void add_inject_options(CLI::App& cmd, inject_options& options);

// The sidecar configuration the options describe: the cluster version parsed, the injector's
// own namespace added to the exclusions, everything validated. Throws std::invalid_argument.
[[nodiscard]] injection_config make_injection_config(const inject_options& options);

// Turns the options into the server's, generating certificates when self_signed (the CA is
// written to ca_bundle_out). Throws std::invalid_argument or std::runtime_error (start-up).
[[nodiscard]] webhook_options make_webhook_options(const inject_options& options);

// Runs until SIGTERM or SIGINT. Returns the process exit code: 0 after a clean stop, 2 when the
// options or certificates are unusable.
int run_inject(const inject_options& options);

}  // namespace claimguard::inject
