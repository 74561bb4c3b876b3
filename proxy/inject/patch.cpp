// Decides whether a pod gets the claimguard sidecar and answers the AdmissionReview.
#include "proxy/inject/patch.hpp"

#include "proxy/inject/base64.hpp"
#include "proxy/inject/sidecar.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace claimguard::inject {

namespace {

using json = nlohmann::json;

constexpr std::string_view default_review_api_version = "admission.k8s.io/v1";
constexpr std::string_view warning_prefix = "claimguard: not injected: ";

// A string member of an object, or nullopt when absent or not a string.
std::optional<std::string> string_member(const json& object, std::string_view key) {
    if (!object.is_object()) return std::nullopt;
    const auto it = object.find(key);
    if (it == object.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

const json& member_or_null(const json& object, std::string_view key) {
    static const json null_value;
    if (!object.is_object()) return null_value;
    const auto it = object.find(key);
    return it == object.end() ? null_value : *it;
}

// Quotes a value for a warning, cut to max_warning_value_chars on a UTF-8 character boundary
// (the response is JSON: a cut inside a character would make it invalid).
std::string quote_value(std::string_view value) {
    if (value.size() <= max_warning_value_chars) return fmt::format("\"{}\"", value);
    std::size_t cut = max_warning_value_chars;
    constexpr unsigned char continuation_mask = 0xc0;
    constexpr unsigned char continuation_bits = 0x80;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & continuation_mask) == continuation_bits) --cut;
    return fmt::format("\"{}...\"", value.substr(0, cut));
}

injection_plan skip(std::string reason) {
    injection_plan plan;
    plan.reason = std::move(reason);
    return plan;
}

injection_plan refuse(std::string warning) {
    injection_plan plan;
    plan.reason = warning;
    plan.warnings.push_back(fmt::format("{}{}", warning_prefix, warning));
    return plan;
}

// Looks through containers and init containers for a name or a port the sidecar needs.
struct pod_conflicts {
    std::optional<std::string> port_owner;  // "container \"app\" already uses port 3306"
    bool has_sidecar = false;
};

pod_conflicts find_conflicts(const json& spec, const injection_config& config) {
    pod_conflicts found;
    for (const std::string_view list : {"initContainers", "containers"}) {
        const json& containers = member_or_null(spec, list);
        if (!containers.is_array()) continue;
        for (const json& c : containers) {
            const std::string name = string_member(c, "name").value_or("");
            if (name == sidecar_name) found.has_sidecar = true;
            const json& ports = member_or_null(c, "ports");
            if (!ports.is_array() || found.port_owner) continue;
            for (const json& p : ports) {
                const json& number = member_or_null(p, "containerPort");
                if (!number.is_number_integer()) continue;
                const auto port = number.get<std::int64_t>();
                if (port == config.listen_port || port == config.admin_port || port == config.control_port) {
                    found.port_owner = fmt::format("container {} already uses port {}", quote_value(name), port);
                    break;
                }
            }
        }
    }
    return found;
}

bool has_volume(const json& spec, std::string_view name) {
    const json& volumes = member_or_null(spec, "volumes");
    if (!volumes.is_array()) return false;
    return std::any_of(volumes.begin(), volumes.end(),
                       [&](const json& v) { return string_member(v, "name").value_or("") == name; });
}

// The annotation's value, or the default; a present but invalid value is an error message.
struct resolved {
    std::string value;
    std::optional<std::string> error;
};

resolved resolve_host_port(const json& annotations, std::string_view key, const std::string& fallback) {
    const json& raw = member_or_null(annotations, key);
    if (raw.is_null()) return {fallback, std::nullopt};
    if (!raw.is_string() || !validate_host_port(raw.get<std::string>()))
        return {{},
                fmt::format("annotation {} {} is not host:port", key,
                            quote_value(raw.is_string() ? raw.get<std::string>() : raw.dump()))};
    return {raw.get<std::string>(), std::nullopt};
}

std::string pod_display_name(const json& pod, std::string_view ns) {
    const json& metadata = member_or_null(pod, "metadata");
    if (auto name = string_member(metadata, "name"); name && !name->empty()) return fmt::format("{}/{}", ns, *name);
    if (auto generate = string_member(metadata, "generateName")) return fmt::format("{}/{}*", ns, *generate);
    return fmt::format("{}/<unnamed>", ns);
}

// Adds `key: value` under /metadata/<field> for each pair absent there (annotations, labels).
void add_metadata(json& ops, const json& pod, std::string_view field,
                  const std::vector<std::pair<std::string, std::string>>& pairs) {
    const json& metadata = member_or_null(pod, "metadata");
    const json& existing = member_or_null(metadata, field);
    json missing = json::object();
    for (const auto& [k, v] : pairs)
        if (!existing.is_object() || !existing.contains(k)) missing[k] = v;
    if (missing.empty()) return;
    if (!metadata.is_object()) {
        // build_patch adds /metadata first when it is absent; here it exists.
        ops.push_back({{"op", "add"}, {"path", fmt::format("/metadata/{}", field)}, {"value", missing}});
    } else if (!existing.is_object()) {
        ops.push_back({{"op", "add"}, {"path", fmt::format("/metadata/{}", field)}, {"value", missing}});
    } else {
        for (const auto& [k, v] : missing.items())
            ops.push_back(
                {{"op", "add"}, {"path", fmt::format("/metadata/{}/{}", field, json_pointer_token(k))}, {"value", v}});
    }
}

json build_patch(const json& pod, const injection_config& config, const sidecar_target& target) {
    const json& spec = pod.at("spec");
    json ops = json::array();
    const bool hold = !target.native && config.hold_application;
    if (target.native) {
        // First, so the app's own init containers (migrations, warm-ups) can use it too.
        const json& init = member_or_null(spec, "initContainers");
        if (init.is_array() && !init.empty())
            ops.push_back(
                {{"op", "add"}, {"path", "/spec/initContainers/0"}, {"value", sidecar_container(config, target)}});
        else
            ops.push_back({{"op", "add"},
                           {"path", "/spec/initContainers"},
                           {"value", json::array({sidecar_container(config, target)})}});
    } else if (hold) {
        // First: the kubelet starts containers in order and waits for each postStart hook.
        ops.push_back({{"op", "add"}, {"path", "/spec/containers/0"}, {"value", sidecar_container(config, target)}});
    } else {
        // Last, so `kubectl logs` and `exec` still default to the app's first container.
        ops.push_back({{"op", "add"}, {"path", "/spec/containers/-"}, {"value", sidecar_container(config, target)}});
    }
    if (!config.unix_socket.empty()) {
        // Every app container sees the socket at the same path (after the insert above when held).
        const json& containers = spec.at("containers");
        const std::string dir = config.unix_socket.substr(0, std::max<std::size_t>(config.unix_socket.rfind('/'), 1));
        for (std::size_t i = 0; i < containers.size(); ++i) {
            const std::size_t at = hold ? i + 1 : i;
            const json mount = {{"name", socket_volume_name}, {"mountPath", dir}};
            if (member_or_null(containers[i], "volumeMounts").is_array())
                ops.push_back(
                    {{"op", "add"}, {"path", fmt::format("/spec/containers/{}/volumeMounts/-", at)}, {"value", mount}});
            else
                ops.push_back({{"op", "add"},
                               {"path", fmt::format("/spec/containers/{}/volumeMounts", at)},
                               {"value", json::array({mount})}});
        }
    }
    const json volumes = sidecar_volumes(config, target.rules_configmap);
    if (member_or_null(spec, "volumes").is_array())
        for (const json& v : volumes) ops.push_back({{"op", "add"}, {"path", "/spec/volumes/-"}, {"value", v}});
    else
        ops.push_back({{"op", "add"}, {"path", "/spec/volumes"}, {"value", volumes}});

    const json& metadata = member_or_null(pod, "metadata");
    if (!metadata.is_object())
        ops.push_back({{"op", "add"},
                       {"path", "/metadata"},
                       {"value", {{"annotations", {{annotation_status, status_injected}}}}}});
    else if (!member_or_null(metadata, "annotations").is_object())
        ops.push_back(
            {{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{annotation_status, status_injected}}}});
    else
        ops.push_back({{"op", "add"},
                       {"path", fmt::format("/metadata/annotations/{}", json_pointer_token(annotation_status))},
                       {"value", status_injected}});
    // The patched pod: metadata and annotations exist from here on.
    json patched_meta = metadata.is_object() ? metadata : json::object();
    if (!patched_meta.contains("annotations") || !patched_meta["annotations"].is_object())
        patched_meta["annotations"] = json::object();
    const json patched = {{"metadata", patched_meta}};
    std::vector<std::pair<std::string, std::string>> annotations;
    if (hold) {
        // `kubectl logs` and `exec` keep defaulting to the app, not the sidecar now first.
        const json& containers = spec.at("containers");
        const std::string first = containers.empty() ? "" : string_member(containers[0], "name").value_or("");
        if (!first.empty()) annotations.emplace_back("kubectl.kubernetes.io/default-container", first);
    }
    if (config.scrape_annotations) {
        annotations.emplace_back("prometheus.io/scrape", "true");
        annotations.emplace_back("prometheus.io/port", std::to_string(config.admin_port));
        annotations.emplace_back("prometheus.io/path", "/metrics");
    }
    add_metadata(ops, patched, "annotations", annotations);
    if (config.sidecar_label) add_metadata(ops, patched, "labels", {{std::string(label_sidecar), "true"}});
    return ops;
}

// A pod's overrides of the injector's settings (annotation_image ...), or the first error.
std::optional<std::string> apply_overrides(const json& annotations, injection_config& c, bool& native) {
    const auto text = [&](std::string_view key) -> std::optional<std::string> {
        const json& v = member_or_null(annotations, key);
        if (v.is_null()) return std::nullopt;
        return v.is_string() ? v.get<std::string>() : v.dump();
    };
    const auto bad = [&](std::string_view key, const std::string& value, std::string_view want) {
        return fmt::format("annotation {} {} is not {}", key, quote_value(value), want);
    };
    if (auto v = text(annotation_image)) {
        if (v->empty() || v->find_first_of(" \t\n\"") != std::string::npos)
            return bad(annotation_image, *v, "an image");
        c.image = *v;
    }
    const std::pair<std::string_view, std::string*> quantities[] = {
        {annotation_cpu_request, &c.resources.cpu_request},
        {annotation_cpu_limit, &c.resources.cpu_limit},
        {annotation_memory_request, &c.resources.memory_request},
        {annotation_memory_limit, &c.resources.memory_limit}};
    for (const auto& [key, field] : quantities)
        if (auto v = text(key)) {
            if (!v->empty() && !is_quantity(*v)) return bad(key, *v, "a Kubernetes quantity");
            *field = *v;
        }
    if (auto v = text(annotation_log_level)) {
        static constexpr std::string_view levels[] = {"trace", "debug", "info", "warn", "error"};
        if (std::find(std::begin(levels), std::end(levels), *v) == std::end(levels))
            return bad(annotation_log_level, *v, "trace, debug, info, warn or error");
        c.extra_args.emplace_back("--log-level");
        c.extra_args.push_back(*v);
    }
    if (auto v = text(annotation_mode_override)) {
        if (*v != "observe" && *v != "off") return bad(annotation_mode_override, *v, "observe or off");
        c.extra_args.emplace_back("--mode-override");
        c.extra_args.push_back(*v);
    }
    if (auto v = text(annotation_extra_args)) {
        const json args = json::parse(*v, nullptr, false);
        if (!args.is_array() || !std::all_of(args.begin(), args.end(), [](const json& a) { return a.is_string(); }))
            return bad(annotation_extra_args, *v, "a JSON array of strings");
        for (const json& a : args) c.extra_args.push_back(a.get<std::string>());
    }
    if (auto v = text(annotation_sidecar_mode)) {
        if (*v != "native" && *v != "plain") return bad(annotation_sidecar_mode, *v, "native or plain");
        native = *v == "native";
    }
    if (auto v = text(annotation_hold_application)) {
        if (*v != "true" && *v != "false") return bad(annotation_hold_application, *v, "\"true\" or \"false\"");
        c.hold_application = *v == "true";
    }
    return std::nullopt;
}

}  // namespace

std::size_t json_depth(std::string_view text, std::size_t limit) {
    std::size_t depth = 0;
    std::size_t deepest = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;  // skip the escaped character, which may be a quote
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return deepest;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

injection_plan plan_injection(const json& pod, std::string_view ns, const injection_config& config, opt_in source) {
    const std::string ns_string(ns);
    if (std::find(config.excluded_namespaces.begin(), config.excluded_namespaces.end(), ns_string) !=
        config.excluded_namespaces.end())
        return skip(fmt::format("namespace {} is excluded", ns));

    const json& metadata = member_or_null(pod, "metadata");
    const json& labels = member_or_null(metadata, "labels");
    if (labels.is_object() && labels.contains(label_injector)) return skip("the injector's own pod");
    const json& annotations = member_or_null(metadata, "annotations");
    if (string_member(annotations, annotation_status) == status_injected) return skip("already injected");

    const json& inject = member_or_null(annotations, annotation_inject);
    if (inject.is_string() && inject.get<std::string>() == "false") return skip("opted out by annotation");
    if (inject.is_null()) {
        if (source == opt_in::pod_annotation) return skip("not opted in");
    } else if (!inject.is_string() || inject.get<std::string>() != "true") {
        return refuse(fmt::format("annotation {} must be \"true\" or \"false\", not {}", annotation_inject,
                                  quote_value(inject.is_string() ? inject.get<std::string>() : inject.dump())));
    }

    const json& spec = member_or_null(pod, "spec");
    if (!member_or_null(spec, "containers").is_array()) return refuse("the pod has no containers");
    const pod_conflicts conflicts = find_conflicts(spec, config);
    if (conflicts.has_sidecar) return refuse(fmt::format("the pod already has a container named {}", sidecar_name));
    if (member_or_null(spec, "hostNetwork") == true) return refuse("hostNetwork pods share the node's ports");
    if (conflicts.port_owner) return refuse(*conflicts.port_owner);
    for (const std::string_view volume :
         {rules_volume_name, socket_volume_name, redis_auth_volume_name, redis_tls_volume_name})
        if (has_volume(spec, volume)) return refuse(fmt::format("the pod already has a volume named {}", volume));

    sidecar_target target;
    const json& configmap = member_or_null(annotations, annotation_rules_configmap);
    if (configmap.is_null()) {
        if (config.default_rules_configmap.empty())
            return refuse(fmt::format("no rules: set annotation {} to a ConfigMap name", annotation_rules_configmap));
        target.rules_configmap = config.default_rules_configmap;
    } else if (!configmap.is_string() || !is_dns_subdomain(configmap.get<std::string>())) {
        return refuse(
            fmt::format("annotation {} {} is not a ConfigMap name", annotation_rules_configmap,
                        quote_value(configmap.is_string() ? configmap.get<std::string>() : configmap.dump())));
    } else {
        target.rules_configmap = configmap.get<std::string>();
    }

    resolved backend = resolve_host_port(annotations, annotation_backend, config.default_backend);
    if (backend.error) return refuse(*backend.error);
    if (backend.value.empty())
        return refuse(fmt::format("no backend: set annotation {} to host:port", annotation_backend));
    target.backend = std::move(backend.value);
    resolved redis = resolve_host_port(annotations, annotation_redis, config.default_redis);
    if (redis.error) return refuse(*redis.error);
    target.redis = std::move(redis.value);

    target.native = config.cluster_version >= native_sidecar_version;
    injection_config effective = config;
    if (auto error = apply_overrides(annotations, effective, target.native)) return refuse(*error);
    injection_plan plan;
    plan.inject = true;
    plan.native = target.native;
    plan.patch = build_patch(pod, effective, target);
    plan.reason = fmt::format("injected ({} sidecar, rules ConfigMap {}, backend {})",
                              target.native ? "native" : "plain", target.rules_configmap, target.backend);
    const auto restart = string_member(spec, "restartPolicy");
    if (!target.native && restart && *restart != "Always")
        plan.warnings.push_back(fmt::format(
            "claimguard: a plain sidecar (Kubernetes < {}.{}) keeps a restartPolicy {} pod running until it gets "
            "POST /quitquitquit",
            native_sidecar_version.major, native_sidecar_version.minor, *restart));
    return plan;
}

result<review_outcome> review(std::string_view body, const injection_config& config, opt_in source) {
    if (json_depth(body, max_json_depth) > max_json_depth) return make_error_code(errc::too_deep);
    const json document = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (document.is_discarded()) return make_error_code(errc::not_json);
    if (!document.is_object()) return make_error_code(errc::not_admission_review);
    if (const auto kind = string_member(document, "kind"); kind && *kind != "AdmissionReview")
        return make_error_code(errc::not_admission_review);
    const json& request = member_or_null(document, "request");
    if (!request.is_object()) return make_error_code(errc::not_admission_review);
    const auto uid = string_member(request, "uid");
    if (!uid) return make_error_code(errc::missing_uid);

    const std::string ns = string_member(request, "namespace").value_or("");
    const json& object = member_or_null(request, "object");
    const std::string kind = string_member(member_or_null(request, "kind"), "kind").value_or("");
    const std::string operation = string_member(request, "operation").value_or("");
    const std::string subresource = string_member(request, "subResource").value_or("");

    review_outcome outcome;
    if (kind != "Pod" || operation != "CREATE" || !subresource.empty()) {
        outcome.plan = skip(fmt::format("not a pod creation ({} {})", operation, kind));
        outcome.pod = ns;
    } else if (!object.is_object()) {
        return make_error_code(errc::bad_object);
    } else {
        outcome.plan = plan_injection(object, ns, config, source);
        outcome.pod = pod_display_name(object, ns);
    }

    json response = {{"uid", *uid}, {"allowed", true}};
    if (outcome.plan.inject) {
        response["patchType"] = "JSONPatch";
        response["patch"] = base64_encode(outcome.plan.patch.dump());
    }
    if (!outcome.plan.warnings.empty()) response["warnings"] = outcome.plan.warnings;
    const json answer = {
        {"apiVersion", string_member(document, "apiVersion").value_or(std::string(default_review_api_version))},
        {"kind", "AdmissionReview"},
        {"response", std::move(response)},
    };
    outcome.response = answer.dump();
    return outcome;
}

}  // namespace claimguard::inject
