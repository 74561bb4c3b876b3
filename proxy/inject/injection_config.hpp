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
// Written by the injector; its presence makes a second review a no-op.
inline constexpr std::string_view annotation_status = "claimguard.io/status";
inline constexpr std::string_view status_injected = "injected";
// Pods of the injector itself carry this label and are never mutated.
inline constexpr std::string_view label_injector = "claimguard.io/injector";

inline constexpr std::string_view sidecar_name = "claimguard";
// The binary in the image (Dockerfile); the plain sidecar's preStop hook runs `<it> shutdown`.
inline constexpr std::string_view sidecar_binary = "/usr/local/bin/claimguard";
inline constexpr std::string_view rules_volume_name = "claimguard-rules";
inline constexpr std::string_view default_rules_mount_path = "/etc/claimguard/rules";
inline constexpr std::string_view admin_port_name = "cg-admin";  // at most 15 characters
inline constexpr std::string_view default_image = "claimguard:0.1.0";
inline constexpr std::uint16_t default_sidecar_listen_port = 3306;
inline constexpr std::uint16_t default_sidecar_admin_port = 9090;
// `claimguard serve`'s default control endpoint (POST /quitquitquit, /-/reload): loopback only, so
// the preStop hook, which runs in the sidecar's network namespace, is its only caller.
inline constexpr std::uint16_t sidecar_control_port = 9091;
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

struct injection_config {
    std::string image{default_image};
    std::string image_pull_policy = "IfNotPresent";
    k8s_version cluster_version = native_sidecar_version;  // decides native sidecar vs plain container

    std::uint16_t listen_port = default_sidecar_listen_port;  // the app's 127.0.0.1:<port>
    std::string admin_address{default_sidecar_admin_address};
    std::uint16_t admin_port = default_sidecar_admin_port;
    std::string rules_mount_path{default_rules_mount_path};

    // Used when the pod has no annotation of its own; empty: the annotation is required.
    std::string default_backend;
    std::string default_redis;
    std::string default_rules_configmap;

    std::vector<std::string> excluded_namespaces{"kube-system"};
    sidecar_resources resources;
    std::int64_t run_as_user = default_run_as_user;
    std::vector<std::string> extra_args;  // appended to `claimguard serve ...`
};

// Throws std::invalid_argument naming the first bad field (a start-up check: a bad value here
// would make the API server reject every pod the webhook mutates).
void validate(const injection_config& config);

}  // namespace claimguard::inject
