// Everything the proxy's listener and sessions are configured with, and the named limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace claimguard::config {

struct endpoint {
    std::string host;
    std::uint16_t port = 0;
};

// Parses "host:port" or "[v6]:port"; throws std::invalid_argument with a clear message.
endpoint parse_endpoint(const std::string& text);

struct backend_tls_options {
    bool enabled = false;     // send SSLRequest and speak TLS to the database
    bool verify = true;       // verify the server certificate (and host name), like Redis TLS
    std::string ca_file;      // CA bundle; empty: system default paths
    std::string server_name;  // SNI and host name check; empty: backend host
};

struct proxy_options {
    endpoint listen{"127.0.0.1", 3306};
    std::string listen_unix;  // a unix socket path the app may connect to as well; empty: none
    endpoint backend;         // required: no default database (config::validate says so)
    // Probes, /metrics and /rules: read-only, may listen on the pod IP for the kubelet and Prometheus.
    endpoint admin{"127.0.0.1", 9090};
    bool admin_enabled = true;
    // POST /quitquitquit and POST /-/reload: loopback only unless control_allow_non_loopback.
    endpoint control{"127.0.0.1", 9091};
    bool control_enabled = true;
    bool control_allow_non_loopback = false;
    backend_tls_options backend_tls;
    unsigned threads = 1;  // 0: one per core. One: a sidecar shares its node (docs/BENCHMARKS.md)

    std::vector<std::string> rules_files;  // empty (and no rules_dir): a plain relay, no claim engine
    std::string rules_dir;                 // every *.yaml/*.yml in it (a mounted ConfigMap)
    bool watch_rules = true;               // reload when the files or the directory change
    bool observe_override = false;         // the kill switch: every rule observes (mode_override: observe)
    // Tables no rule names whose read-then-write shapes /digests shows (unlisted:<db>.<table>) for
    // `claimguard suggest --digests`; 0: off, nothing looked at (engine/unlisted_watch.hpp).
    std::size_t watch_unlisted_tables = 0;
    // The claim rules' Redis first filter (issue 12): one Redis, or a cluster's seed nodes.
    std::vector<endpoint> redis;                  // empty: none
    std::chrono::milliseconds redis_timeout{50};  // the Redis step of a claim, then fail open
    bool redis_cluster = false;                   // Redis Cluster: slot map, MOVED/ASK
    std::string redis_user;                       // ACL user for AUTH; empty: AUTH <password>
    std::string redis_password;                   // only from CLAIMGUARD_REDIS_PASSWORD, never a flag
    std::string redis_password_file;              // or this file's first line (a mounted Secret)
    bool redis_tls = false;
    bool redis_tls_verify = true;  // the certificate chain and name
    std::string redis_tls_ca;      // empty: system CAs
    std::string redis_tls_cert;    // client certificate (mutual TLS), optional
    std::string redis_tls_key;
    std::string redis_tls_server_name;  // empty: each node's host
    std::string audit_log = "-";        // "-": standard error, "off", or a file

    // Limits. Each is enforced at the edge and answered with the MySQL error a
    // client expects (see docs/OPERATIONS.md).
    std::size_t max_connections = 1024;                // ERR 1040 beyond
    std::size_t max_packet_bytes = 64u * 1024 * 1024;  // ERR 1153 beyond (either direction)
    std::chrono::milliseconds connect_timeout{5000};   // backend TCP connect + greeting
    std::chrono::seconds idle_timeout{28800};          // client silent between commands; 0 = never
    std::chrono::seconds packet_timeout{30};           // a started client packet must complete

    // TCP keepalive on backend sockets, so a dead link is noticed in about idle + interval * count
    // instead of the kernel's 2 h 11 min (docs/OPERATIONS.md). backend_keepalive_idle 0: the
    // kernel's defaults (SO_KEEPALIVE only).
    std::chrono::seconds backend_keepalive_idle{10};
    std::chrono::seconds backend_keepalive_interval{5};
    unsigned backend_keepalive_count = 3;

    // A backend link lost inside a transaction: end the orphaned transaction on the server with
    // KILL CONNECTION, sent from the same user's next backend connection (proxy/session/orphans.hpp).
    bool orphan_kill = true;
    std::chrono::seconds orphan_kill_deadline{300};  // not killed by then: given up (counted "expired")

    // Shutdown (SIGTERM, POST /quitquitquit on the control endpoint): readiness turns 503 at once; new connections are
    // still accepted for min_shutdown_delay; open sessions then get up to max_shutdown_delay
    // to finish their command or transaction.
    std::chrono::milliseconds min_shutdown_delay{0};
    std::chrono::milliseconds max_shutdown_delay{30000};

    std::string log_level = "info";
    std::string log_format = "text";  // text or json

    // Start-up schema check of the claim rules' unique indexes (needs credentials).
    std::string schema_check = "warn";  // off, warn, or refuse (readiness stays 503)
    std::string schema_check_user;
    std::string schema_check_password;  // prefer the env var CLAIMGUARD_SCHEMA_CHECK_PASSWORD
    std::string schema_check_database;
};

}  // namespace claimguard::config
