// Builds the injected claimguard container and the rules volume, and validates the config.
#include "proxy/inject/sidecar.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace claimguard::inject {

namespace {

using json = nlohmann::json;

constexpr std::string_view path_startup = "/startup";
constexpr std::string_view path_liveness = "/liveness";
constexpr std::string_view path_readiness = "/readiness";

json http_probe(std::string_view path, std::uint16_t port, int period_s, int failure_threshold) {
    return json{{"httpGet", {{"path", path}, {"port", port}}},
                {"periodSeconds", period_s},
                {"timeoutSeconds", probe_timeout_s},
                {"failureThreshold", failure_threshold}};
}

// The directory of the socket path (the emptyDir's mount point), as Helm's `dir` gives it.
std::string socket_directory(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

json resources_of(const sidecar_resources& r) {
    json requests = json::object();
    json limits = json::object();
    if (!r.cpu_request.empty()) requests["cpu"] = r.cpu_request;
    if (!r.memory_request.empty()) requests["memory"] = r.memory_request;
    if (!r.cpu_limit.empty()) limits["cpu"] = r.cpu_limit;
    if (!r.memory_limit.empty()) limits["memory"] = r.memory_limit;
    json out = json::object();
    if (!requests.empty()) out["requests"] = std::move(requests);
    if (!limits.empty()) out["limits"] = std::move(limits);
    return out;
}

}  // namespace

std::vector<std::string> sidecar_args(const injection_config& config, const sidecar_target& target) {
    std::vector<std::string> args = {"serve",
                                     "--listen",
                                     fmt::format("127.0.0.1:{}", config.listen_port),
                                     "--backend",
                                     target.backend,
                                     "--admin",
                                     fmt::format("{}:{}", config.admin_address, config.admin_port),
                                     "--rules-dir",
                                     config.rules_mount_path};
    // serve's own default is 127.0.0.1:9091: the flag only when the setting moved it (as the chart does).
    if (config.control_port != default_sidecar_control_port) {
        args.emplace_back("--control");
        args.push_back(fmt::format("127.0.0.1:{}", config.control_port));
    }
    if (!target.redis.empty()) {
        args.emplace_back("--redis");
        args.push_back(target.redis);
    }
    // The same flags, in the same order, as the chart's claimguard.redisArgs.
    const redis_settings& r = config.redis;
    const auto add = [&](std::string_view flag, std::string value) {
        args.emplace_back(flag);
        args.push_back(std::move(value));
    };
    // Switches bare (--redis-tls, --no-redis-tls-verify), as the chart writes them.
    if (r.cluster) args.emplace_back("--redis-cluster");
    if (!r.user.empty()) add("--redis-user", r.user);
    if (!r.password_secret.empty())
        add("--redis-password-file", fmt::format("{}/{}", redis_auth_mount_path, r.password_key));
    if (r.tls) {
        args.emplace_back("--redis-tls");
        if (!r.tls_verify) args.emplace_back("--no-redis-tls-verify");
        if (!r.tls_server_name.empty()) add("--redis-tls-server-name", r.tls_server_name);
        if (!r.tls_secret.empty()) {
            add("--redis-tls-ca", fmt::format("{}/ca.crt", redis_tls_mount_path));
            if (r.tls_client_certificate) {
                add("--redis-tls-cert", fmt::format("{}/tls.crt", redis_tls_mount_path));
                add("--redis-tls-key", fmt::format("{}/tls.key", redis_tls_mount_path));
            }
        }
    }
    if (!config.unix_socket.empty()) add("--listen-unix", config.unix_socket);
    args.insert(args.end(), config.extra_args.begin(), config.extra_args.end());
    return args;
}

std::vector<std::string> hold_application_command(const injection_config& config) {
    const int tries = hold_application_timeout_s * 10;
    return {"/bin/bash", "-c",
            fmt::format("for i in $(seq 1 {0}); do if exec 3<>/dev/tcp/127.0.0.1/{1}; then "
                        "printf 'GET /startup HTTP/1.0\\r\\n\\r\\n' >&3; "
                        "if head -n 1 <&3 | grep -q ' 200 '; then exit 0; fi; exec 3<&-; fi 2>/dev/null; "
                        "sleep 0.1; done; echo 'claimguard: not started after {2} s' >&2; exit 1",
                        tries, config.admin_port, hold_application_timeout_s)};
}

json sidecar_container(const injection_config& config, const sidecar_target& target) {
    json c = {
        {"name", sidecar_name},
        {"image", config.image},
        {"imagePullPolicy", config.image_pull_policy},
        {"args", sidecar_args(config, target)},
        {"ports",
         json::array({{{"name", admin_port_name}, {"containerPort", config.admin_port}, {"protocol", "TCP"}}})},
        {"startupProbe",
         http_probe(path_startup, config.admin_port, startup_probe_period_s, startup_probe_failure_threshold)},
        {"livenessProbe",
         http_probe(path_liveness, config.admin_port, liveness_probe_period_s, liveness_probe_failure_threshold)},
        {"readinessProbe",
         http_probe(path_readiness, config.admin_port, readiness_probe_period_s, readiness_probe_failure_threshold)},
        {"securityContext",
         {{"runAsNonRoot", true},
          {"runAsUser", config.run_as_user},
          {"runAsGroup", config.run_as_user},
          {"readOnlyRootFilesystem", true},
          {"allowPrivilegeEscalation", false},
          {"capabilities", {{"drop", json::array({"ALL"})}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
        {"volumeMounts",
         json::array({{{"name", rules_volume_name}, {"mountPath", config.rules_mount_path}, {"readOnly", true}}})},
    };
    auto& mounts = c["volumeMounts"];
    if (!config.unix_socket.empty())
        mounts.push_back({{"name", socket_volume_name}, {"mountPath", socket_directory(config.unix_socket)}});
    if (!config.redis.password_secret.empty())
        mounts.push_back({{"name", redis_auth_volume_name}, {"mountPath", redis_auth_mount_path}, {"readOnly", true}});
    if (config.redis.tls && !config.redis.tls_secret.empty())
        mounts.push_back({{"name", redis_tls_volume_name}, {"mountPath", redis_tls_mount_path}, {"readOnly", true}});
    json env = json::array();
    for (const auto& e : config.env) env.push_back({{"name", e.name}, {"value", e.value}});
    if (!config.schema_check_secret.empty()) {
        const auto from_secret = [&](std::string_view name, const std::string& key) {
            return json{{"name", name},
                        {"valueFrom", {{"secretKeyRef", {{"name", config.schema_check_secret}, {"key", key}}}}}};
        };
        env.push_back(from_secret(env_schema_check_user, config.schema_check_user_key));
        env.push_back(from_secret(env_schema_check_password, config.schema_check_password_key));
    }
    if (!env.empty()) c["env"] = std::move(env);
    if (json r = resources_of(config.resources); !r.empty()) c["resources"] = std::move(r);
    if (target.native) {
        c["restartPolicy"] = "Always";
    } else {
        // `claimguard shutdown` POSTs /quitquitquit to the loopback control port (POST only, so no
        // httpGet hook; and the kubelet could not reach a loopback port anyway).
        c["lifecycle"] = {{"preStop",
                           {{"exec",
                             {{"command", json::array({sidecar_binary, "shutdown", "--control",
                                                       fmt::format("127.0.0.1:{}", config.control_port)})}}}}}};
        if (config.hold_application)
            c["lifecycle"]["postStart"] = {{"exec", {{"command", hold_application_command(config)}}}};
    }
    return c;
}

json rules_volume(const std::string& configmap) {
    return {{"name", rules_volume_name}, {"configMap", {{"name", configmap}}}};
}

json sidecar_volumes(const injection_config& config, const std::string& configmap) {
    json volumes = json::array({rules_volume(configmap)});
    if (!config.unix_socket.empty())
        volumes.push_back({{"name", socket_volume_name}, {"emptyDir", {{"medium", "Memory"}}}});
    const redis_settings& r = config.redis;
    if (!r.password_secret.empty())
        volumes.push_back({{"name", redis_auth_volume_name},
                           {"secret",
                            {{"secretName", r.password_secret},
                             {"items", json::array({{{"key", r.password_key}, {"path", r.password_key}}})}}}});
    if (r.tls && !r.tls_secret.empty())
        volumes.push_back({{"name", redis_tls_volume_name}, {"secret", {{"secretName", r.tls_secret}}}});
    return volumes;
}

void validate(const injection_config& config) {
    const auto fail = [](std::string what) { throw std::invalid_argument(std::move(what)); };
    if (config.image.empty()) fail("the sidecar image is empty");
    if (config.image_pull_policy != "Always" && config.image_pull_policy != "IfNotPresent" &&
        config.image_pull_policy != "Never")
        fail(fmt::format("image pull policy \"{}\": expected Always, IfNotPresent or Never", config.image_pull_policy));
    if (config.listen_port == 0 || config.admin_port == 0 || config.control_port == 0 ||
        config.listen_port == config.admin_port || config.listen_port == config.control_port ||
        config.admin_port == config.control_port)
        fail("the sidecar listen, admin and control ports must be distinct and non-zero");
    if (config.admin_address.empty()) fail("the sidecar admin address is empty");
    if (config.rules_mount_path.empty() || config.rules_mount_path.front() != '/')
        fail(fmt::format("rules mount path \"{}\" is not absolute", config.rules_mount_path));
    for (const auto* value : {&config.default_backend, &config.default_redis})
        if (!value->empty() && !validate_host_port(*value))
            fail(fmt::format("default \"{}\" is not host:port", *value));
    if (!config.default_rules_configmap.empty() && !is_dns_subdomain(config.default_rules_configmap))
        fail(fmt::format("default rules ConfigMap \"{}\" is not a valid name", config.default_rules_configmap));
    for (const auto& ns : config.excluded_namespaces)
        if (!is_dns_label(ns)) fail(fmt::format("excluded namespace \"{}\" is not a valid name", ns));
    const sidecar_resources& r = config.resources;
    for (const auto* q : {&r.cpu_request, &r.memory_request, &r.cpu_limit, &r.memory_limit})
        if (!q->empty() && !is_quantity(*q))
            fail(fmt::format("resource quantity \"{}\" is not a Kubernetes quantity", *q));
    if (config.run_as_user <= 0) fail("the sidecar must run as a non-root user id");
    if (!config.unix_socket.empty() && (config.unix_socket.front() != '/' || config.unix_socket.size() < 2 ||
                                        config.unix_socket.size() > 107 || config.unix_socket.back() == '/'))
        fail(fmt::format("unix socket \"{}\" is not an absolute socket path of at most 107 characters",
                         config.unix_socket));
    for (const auto* name : {&config.redis.password_secret, &config.redis.tls_secret, &config.schema_check_secret})
        if (!name->empty() && !is_dns_subdomain(*name)) fail(fmt::format("Secret name \"{}\" is not valid", *name));
    if (config.redis.tls_client_certificate && config.redis.tls_secret.empty())
        fail("a Redis client certificate needs the Redis TLS Secret");
    for (const auto& e : config.env) {
        const bool ok = !e.name.empty() && (std::isalpha(static_cast<unsigned char>(e.name[0])) || e.name[0] == '_') &&
                        std::all_of(e.name.begin(), e.name.end(),
                                    [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
        if (!ok) fail(fmt::format("environment variable name \"{}\" is not valid", e.name));
    }
}

}  // namespace claimguard::inject
