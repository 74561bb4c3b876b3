// The injected claimguard container and its rules volume, as Kubernetes JSON (pure).
#pragma once

#include "proxy/inject/injection_config.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace claimguard::inject {

// What one pod's annotations (or the defaults) resolved to.
struct sidecar_target {
    std::string backend;          // host:port
    std::string redis;            // host:port; empty: no Redis filter
    std::string rules_configmap;  // mounted read-only at config.rules_mount_path
    bool native = true;           // an init container with restartPolicy: Always (>= 1.29)
};

// The arguments after the image's entrypoint: `serve --listen ... --backend ...`.
[[nodiscard]] std::vector<std::string> sidecar_args(const injection_config& config, const sidecar_target& target);
// The container object: probes on the admin port, non-root, read-only root, no capabilities.
// Native: restartPolicy Always (kubelet starts the app after the startup probe passes and stops
// the sidecar after the app). Plain: a preStop hook, `claimguard shutdown`, that starts the
// graceful shutdown (readiness 503, --min-shutdown-delay, then draining).
[[nodiscard]] nlohmann::json sidecar_container(const injection_config& config, const sidecar_target& target);
// The volume that projects the rules ConfigMap as a directory (watched for ..data swaps).
[[nodiscard]] nlohmann::json rules_volume(const std::string& configmap);
// Every volume the sidecar mounts: the rules, then the unix socket's emptyDir and the Redis
// Secrets when configured.
[[nodiscard]] nlohmann::json sidecar_volumes(const injection_config& config, const std::string& configmap);
// The plain sidecar's postStart command when config.hold_application: a bash loop (the image is
// Debian slim) that asks GET /startup on the admin port until it answers 200, for at most
// hold_application_timeout_s; the kubelet starts the next container only after it returns.
[[nodiscard]] std::vector<std::string> hold_application_command(const injection_config& config);

}  // namespace claimguard::inject
