// Builds the injected claimguard container and the rules volume, and validates the config.
#include "proxy/inject/sidecar.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
    if (!target.redis.empty()) {
        args.emplace_back("--redis");
        args.push_back(target.redis);
    }
    args.insert(args.end(), config.extra_args.begin(), config.extra_args.end());
    return args;
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
    if (json r = resources_of(config.resources); !r.empty()) c["resources"] = std::move(r);
    if (target.native) {
        c["restartPolicy"] = "Always";
    } else {
        // `claimguard shutdown` POSTs /quitquitquit to the loopback control port (POST only, so no
        // httpGet hook; and the kubelet could not reach a loopback port anyway).
        c["lifecycle"] = {{"preStop",
                           {{"exec",
                             {{"command", json::array({sidecar_binary, "shutdown", "--control",
                                                       fmt::format("127.0.0.1:{}", sidecar_control_port)})}}}}}};
    }
    return c;
}

json rules_volume(const std::string& configmap) {
    return {{"name", rules_volume_name}, {"configMap", {{"name", configmap}}}};
}

void validate(const injection_config& config) {
    const auto fail = [](std::string what) { throw std::invalid_argument(std::move(what)); };
    if (config.image.empty()) fail("the sidecar image is empty");
    if (config.image_pull_policy != "Always" && config.image_pull_policy != "IfNotPresent" &&
        config.image_pull_policy != "Never")
        fail(fmt::format("image pull policy \"{}\": expected Always, IfNotPresent or Never", config.image_pull_policy));
    if (config.listen_port == 0 || config.admin_port == 0 || config.listen_port == config.admin_port)
        fail("the sidecar listen and admin ports must be distinct and non-zero");
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
}

}  // namespace claimguard::inject
