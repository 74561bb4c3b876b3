// What the injector adds to a pod, and the annotation and label names it reads and writes.
#pragma once

#include "proxy/inject/k8s_values.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::inject {

// Pod annotations (users set these).
inline constexpr std::string_view annotation_inject = "claimguard.io/inject";                    // "true" / "false"
inline constexpr std::string_view annotation_rules_configmap = "claimguard.io/rules-configmap";  // ConfigMap name
inline constexpr std::string_view annotation_backend = "claimguard.io/backend";                  // host:port
inline constexpr std::string_view annotation_redis = "claimguard.io/redis";                      // host:port
// Per-pod overrides of the injector's settings (issue 22); a bad value leaves the pod without
// the sidecar, with a warning, like the annotations above.
inline constexpr std::string_view annotation_image = "claimguard.io/image";
inline constexpr std::string_view annotation_cpu_request = "claimguard.io/cpu-request";  // a quantity, "" for none
inline constexpr std::string_view annotation_cpu_limit = "claimguard.io/cpu-limit";
inline constexpr std::string_view annotation_memory_request = "claimguard.io/memory-request";
inline constexpr std::string_view annotation_memory_limit = "claimguard.io/memory-limit";
inline constexpr std::string_view annotation_log_level = "claimguard.io/log-level";  // trace ... error
// "observe": the sidecar starts with --mode-override observe (the kill switch for new pods); "off": the default.
inline constexpr std::string_view annotation_mode_override = "claimguard.io/mode-override";
// native or plain: the kind of sidecar, whatever the cluster's version says (native needs >= 1.29,
// or 1.28 with the SidecarContainers feature gate).
inline constexpr std::string_view annotation_sidecar_mode = "claimguard.io/sidecar-mode";
// A JSON array of strings appended to `claimguard serve`, e.g. ["--idle-timeout", "30s"].
inline constexpr std::string_view annotation_extra_args = "claimguard.io/extra-args";
// "true" / "false": hold the app until the plain sidecar started (see hold_application).
inline constexpr std::string_view annotation_hold_application = "claimguard.io/hold-application";
// Pods with the sidecar carry this label (value "true") when sidecar_label is on (PodMonitor).
inline constexpr std::string_view label_sidecar = "claimguard.io/sidecar";
// Written by the injector; its presence makes a second review a no-op.
inline constexpr std::string_view annotation_status = "claimguard.io/status";
inline constexpr std::string_view status_injected = "injected";
// Pods of the injector itself carry this label and are never mutated.
inline constexpr std::string_view label_injector = "claimguard.io/injector";

inline constexpr std::string_view sidecar_name = "claimguard";
// The binary in the image (Dockerfile); the plain sidecar's preStop hook runs `<it> shutdown`.
inline constexpr std::string_view sidecar_binary = "/usr/local/bin/claimguard";
inline constexpr std::string_view rules_volume_name = "claimguard-rules";
inline constexpr std::string_view socket_volume_name = "claimguard-socket";
inline constexpr std::string_view redis_auth_volume_name = "claimguard-redis-auth";
inline constexpr std::string_view redis_tls_volume_name = "claimguard-redis-tls";
inline constexpr std::string_view redis_auth_mount_path = "/etc/claimguard/redis-auth";
inline constexpr std::string_view redis_tls_mount_path = "/etc/claimguard/redis-tls";
// The schema check's credentials come from a Secret as these variables (never in args).
inline constexpr std::string_view env_schema_check_user = "CLAIMGUARD_SCHEMA_CHECK_USER";
inline constexpr std::string_view env_schema_check_password = "CLAIMGUARD_SCHEMA_CHECK_PASSWORD";
// How long a plain sidecar's postStart hook waits for /startup before it fails (the startup
// probe allows as long).
inline constexpr int hold_application_timeout_s = 60;
inline constexpr std::string_view default_rules_mount_path = "/etc/claimguard/rules";
inline constexpr std::string_view admin_port_name = "cg-admin";  // at most 15 characters
inline constexpr std::string_view default_image = "claimguard:0.1.0";
inline constexpr std::uint16_t default_sidecar_listen_port = 3306;
inline constexpr std::uint16_t default_sidecar_admin_port = 9090;
// `claimguard serve`'s default control endpoint (POST /quitquitquit, /-/reload): loopback only, so
// the preStop hook, which runs in the sidecar's network namespace, is its only caller.
inline constexpr std::uint16_t default_sidecar_control_port = 9091;
// The kubelet probes the admin server over the pod IP, so it cannot stay on loopback.
inline constexpr std::string_view default_sidecar_admin_address = "0.0.0.0";
inline constexpr std::int64_t default_run_as_user = 65532;  // the image's non-root user

// Probe timing of the injected container, in seconds. The startup probe allows 60 s for rules
// loading and the first backend check; liveness only asks whether the process answers.
inline constexpr int startup_probe_period_s = 1;
inline constexpr int startup_probe_failure_threshold = 60;
inline constexpr int liveness_probe_period_s = 10;
inline constexpr int liveness_probe_failure_threshold = 3;
inline constexpr int readiness_probe_period_s = 5;
inline constexpr int readiness_probe_failure_threshold = 3;
inline constexpr int probe_timeout_s = 2;

struct sidecar_resources {
    std::string cpu_request = "50m";
    std::string memory_request = "32Mi";
    std::string cpu_limit;  // empty: none (a CPU limit throttles the database path)
    std::string memory_limit = "256Mi";
};

// The sidecar's Redis beyond host:port, as the chart's redis.* values (Secrets in the pod's namespace).
struct redis_settings {
    bool cluster = false;         // --redis-cluster true: the host:port list are a cluster's seeds
    std::string user;             // ACL user
    std::string password_secret;  // a Secret whose password_key is mounted and passed as --redis-password-file
    std::string password_key = "password";
    bool tls = false;
    bool tls_verify = true;
    std::string tls_server_name;
    std::string tls_secret;  // ca.crt (and tls.crt, tls.key with tls_client_certificate)
    bool tls_client_certificate = false;
};

struct env_var {
    std::string name;
    std::string value;
};

struct injection_config {
    std::string image{default_image};
    std::string image_pull_policy = "IfNotPresent";
    k8s_version cluster_version = native_sidecar_version;  // decides native sidecar vs plain container

    std::uint16_t listen_port = default_sidecar_listen_port;  // the app's 127.0.0.1:<port>
    std::string admin_address{default_sidecar_admin_address};
    std::uint16_t admin_port = default_sidecar_admin_port;
    // The sidecar's loopback-only control listener (/quitquitquit for the preStop hook, /-/reload).
    std::uint16_t control_port = default_sidecar_control_port;
    std::string rules_mount_path{default_rules_mount_path};

    // Used when the pod has no annotation of its own; empty: the annotation is required.
    std::string default_backend;
    std::string default_redis;
    std::string default_rules_configmap;

    std::vector<std::string> excluded_namespaces{"kube-system"};
    sidecar_resources resources;
    std::int64_t run_as_user = default_run_as_user;
    std::vector<std::string> extra_args;  // appended to `claimguard serve ...`

    redis_settings redis;
    std::string unix_socket;   // --listen-unix; an emptyDir at its directory in the sidecar and every app container
    std::vector<env_var> env;  // plain environment of the sidecar
    // A Secret with the schema check's user and password (env_schema_check_*); empty: none.
    std::string schema_check_secret;
    std::string schema_check_user_key = "username";
    std::string schema_check_password_key = "password";
    // Plain sidecars: first in the containers list with a postStart hook that waits for /startup,
    // so the kubelet starts the app only then (Istio's holdApplicationUntilProxyStarts).
    bool hold_application = false;
    // prometheus.io/scrape, /port, /path annotations on the pod (a pod's own values win).
    bool scrape_annotations = false;
    // The label claimguard.io/sidecar: "true" on the pod (a PodMonitor selects it).
    bool sidecar_label = false;
};

// Throws std::invalid_argument naming the first bad field (a start-up check: a bad value here
// would make the API server reject every pod the webhook mutates).
void validate(const injection_config& config);

}  // namespace claimguard::inject
