// Issue 22: per-pod override annotations, scrape annotations and the sidecar label, the plain
// sidecar held first with a postStart hook, the unix socket, Redis options, env and the schema
// check's Secret, each applied to a pod and checked on the patched pod.
#include "proxy/inject/patch.hpp"
#include "proxy/inject/sidecar.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

namespace claimguard::inject {
namespace {

using json = nlohmann::json;

injection_config config_for(unsigned minor) {
    injection_config c;
    c.image = "registry.example/claimguard:0.1.0";
    c.cluster_version = {1, minor};
    c.default_backend = "mysql.db.svc:3306";
    c.default_rules_configmap = "claimguard-rules";
    return c;
}

json app_pod(json annotations = json::object()) {
    annotations["claimguard.io/inject"] = "true";
    return {
        {"metadata", {{"name", "api-0"}, {"annotations", annotations}}},
        {"spec",
         {{"containers", json::array({{{"name", "api"}, {"image", "api:1"}},
                                      {{"name", "worker"}, {"image", "api:1"}, {"volumeMounts", json::array()}}})}}}};
}

struct injected {
    injection_plan plan;
    json pod;
};

injected inject(const json& pod, const injection_config& c) {
    injected out{plan_injection(pod, "shop", c, opt_in::pod_annotation), json()};
    if (out.plan.inject) out.pod = pod.patch(out.plan.patch);
    return out;
}

const json& sidecar_of(const json& pod) {
    for (const auto* list : {"initContainers", "containers"})
        if (pod["spec"].contains(list))
            for (const json& c : pod["spec"][list])
                if (c["name"] == "claimguard") return c;
    static const json none;
    ADD_FAILURE() << "no sidecar in " << pod.dump();
    return none;
}

std::vector<std::string> args_after(const json& args, const std::string& flag) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == flag) out.push_back(args[i + 1]);
    return out;
}

TEST(overrides, image_resources_log_level_and_extra_args) {
    auto c = config_for(29);
    c.extra_args = {"--idle-timeout", "30s"};
    const auto r = inject(app_pod({{"claimguard.io/image", "registry.example/claimguard:0.2.0-rc1"},
                                   {"claimguard.io/cpu-limit", "2"},
                                   {"claimguard.io/memory-request", "64Mi"},
                                   {"claimguard.io/memory-limit", ""},
                                   {"claimguard.io/log-level", "debug"},
                                   {"claimguard.io/extra-args", R"(["--max-connections", "64"])"}}),
                          c);
    ASSERT_TRUE(r.plan.inject) << r.plan.reason;
    const json& s = sidecar_of(r.pod);
    EXPECT_EQ(s["image"], "registry.example/claimguard:0.2.0-rc1");
    EXPECT_EQ(s["resources"], (json{{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}, {"limits", {{"cpu", "2"}}}}));
    const json& args = s["args"];
    // The injector's extra args, then the pod's log level, then the pod's extra args.
    const std::vector<std::string> tail(args.end() - 6, args.end());
    EXPECT_EQ(tail,
              (std::vector<std::string>{"--idle-timeout", "30s", "--log-level", "debug", "--max-connections", "64"}));
}

TEST(overrides, mode_override_starts_the_sidecar_observing) {
    const auto r = inject(app_pod({{"claimguard.io/mode-override", "observe"}}), config_for(29));
    ASSERT_TRUE(r.plan.inject) << r.plan.reason;
    EXPECT_EQ(args_after(sidecar_of(r.pod)["args"], "--mode-override"), std::vector<std::string>{"observe"});
    const auto off = inject(app_pod({{"claimguard.io/mode-override", "off"}}), config_for(29));
    ASSERT_TRUE(off.plan.inject) << off.plan.reason;
    EXPECT_EQ(args_after(sidecar_of(off.pod)["args"], "--mode-override"), std::vector<std::string>{"off"});
}

TEST(overrides, no_annotation_changes_nothing) {
    const auto c = config_for(29);
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const sidecar_target t{"mysql.db.svc:3306", "", "claimguard-rules", true};
    EXPECT_EQ(sidecar_of(r.pod), sidecar_container(c, t));
}

struct bad_override {
    const char* key;
    const char* value;
    const char* warning_part;
};

void PrintTo(const bad_override& b, std::ostream* os) { *os << b.key; }

class bad_overrides : public testing::TestWithParam<bad_override> {};

TEST_P(bad_overrides, leave_the_pod_without_the_sidecar_with_a_warning) {
    const auto& b = GetParam();
    const auto r = inject(app_pod({{b.key, b.value}}), config_for(29));
    EXPECT_FALSE(r.plan.inject);
    ASSERT_EQ(r.plan.warnings.size(), 1u);
    EXPECT_NE(r.plan.warnings[0].find(b.key), std::string::npos) << r.plan.warnings[0];
    EXPECT_NE(r.plan.warnings[0].find(b.warning_part), std::string::npos) << r.plan.warnings[0];
}

INSTANTIATE_TEST_SUITE_P(annotations, bad_overrides,
                         testing::Values(bad_override{"claimguard.io/image", "", "an image"},
                                         bad_override{"claimguard.io/image", "a b", "an image"},
                                         bad_override{"claimguard.io/cpu-limit", "lots", "quantity"},
                                         bad_override{"claimguard.io/memory-request", "1GB", "quantity"},
                                         bad_override{"claimguard.io/log-level", "verbose", "trace, debug"},
                                         bad_override{"claimguard.io/mode-override", "enforce", "observe or off"},
                                         bad_override{"claimguard.io/extra-args", "--x", "JSON array"},
                                         bad_override{"claimguard.io/extra-args", "[1]", "JSON array"},
                                         bad_override{"claimguard.io/sidecar-mode", "daemon", "native or plain"},
                                         bad_override{"claimguard.io/hold-application", "yes",
                                                      "\"true\" or \"false\""}));

TEST(overrides, sidecar_mode_forces_the_kind_of_sidecar) {
    const auto plain = inject(app_pod({{"claimguard.io/sidecar-mode", "plain"}}), config_for(30));
    ASSERT_TRUE(plain.plan.inject);
    EXPECT_FALSE(plain.plan.native);
    EXPECT_EQ(plain.pod["spec"]["containers"].back()["name"], "claimguard");
    EXPECT_FALSE(plain.pod["spec"].contains("initContainers"));
    const auto native = inject(app_pod({{"claimguard.io/sidecar-mode", "native"}}), config_for(28));
    ASSERT_TRUE(native.plan.inject);
    EXPECT_EQ(native.pod["spec"]["initContainers"][0]["restartPolicy"], "Always");
}

TEST(hold_application, plain_sidecar_goes_first_with_a_post_start_wait) {
    auto c = config_for(28);
    c.hold_application = true;
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const json& containers = r.pod["spec"]["containers"];
    ASSERT_EQ(containers.size(), 3u);
    EXPECT_EQ(containers[0]["name"], "claimguard");
    EXPECT_EQ(containers[1]["name"], "api");
    const json& command = containers[0]["lifecycle"]["postStart"]["exec"]["command"];
    EXPECT_EQ(command, json(hold_application_command(c)));
    EXPECT_EQ(command[0], "/bin/bash");
    EXPECT_NE(command[2].get<std::string>().find("/dev/tcp/127.0.0.1/9090"), std::string::npos);
    EXPECT_NE(command[2].get<std::string>().find("GET /startup"), std::string::npos);
    EXPECT_TRUE(containers[0]["lifecycle"].contains("preStop"));
    EXPECT_EQ(r.pod["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"], "api");
    // The annotation turns it off for one pod; native sidecars never get the hook.
    const auto off = inject(app_pod({{"claimguard.io/hold-application", "false"}}), c);
    EXPECT_EQ(off.pod["spec"]["containers"].back()["name"], "claimguard");
    EXPECT_FALSE(off.pod["spec"]["containers"].back()["lifecycle"].contains("postStart"));
    c.cluster_version = {1, 29};
    const auto native = inject(app_pod(), c);
    EXPECT_FALSE(sidecar_of(native.pod).contains("lifecycle"));
}

TEST(hold_application, a_pod_with_no_containers_is_still_answered) {
    auto c = config_for(28);
    c.hold_application = true;
    json pod = app_pod();
    pod["spec"]["containers"] = json::array();
    const auto plan = plan_injection(pod, "shop", c, opt_in::pod_annotation);  // must not throw
    ASSERT_TRUE(plan.inject) << plan.reason;
    const json patched = pod.patch(plan.patch);
    EXPECT_EQ(patched["spec"]["containers"][0]["name"], "claimguard");
    EXPECT_FALSE(patched["metadata"]["annotations"].contains("kubectl.kubernetes.io/default-container"));
}

TEST(hold_application, the_wait_follows_the_admin_port) {
    auto c = config_for(28);
    c.admin_port = 9191;
    const auto command = hold_application_command(c);
    EXPECT_NE(command[2].find("/dev/tcp/127.0.0.1/9191"), std::string::npos);
    EXPECT_NE(command[2].find("seq 1 600"), std::string::npos);  // 60 s in 0.1 s steps
}

TEST(scrape_annotations, added_unless_the_pod_has_its_own_and_the_label_for_a_pod_monitor) {
    auto c = config_for(29);
    c.scrape_annotations = true;
    c.sidecar_label = true;
    const auto r = inject(app_pod({{"prometheus.io/path", "/custom"}}), c);
    ASSERT_TRUE(r.plan.inject);
    const json& a = r.pod["metadata"]["annotations"];
    EXPECT_EQ(a["prometheus.io/scrape"], "true");
    EXPECT_EQ(a["prometheus.io/port"], "9090");
    EXPECT_EQ(a["prometheus.io/path"], "/custom");
    EXPECT_EQ(r.pod["metadata"]["labels"], (json{{"claimguard.io/sidecar", "true"}}));
    const auto off = inject(app_pod(), config_for(29));
    EXPECT_FALSE(off.pod["metadata"]["annotations"].contains("prometheus.io/scrape"));
    EXPECT_FALSE(off.pod["metadata"].contains("labels"));
}

// Issue 22: the sidecar's control port is a setting (--sidecar-control-port), not a fixed 9091: the sidecar's
// --control, the plain sidecar's preStop hook and the pod's port-conflict check all follow it.
TEST(webhook_mode_options, the_control_port_follows_the_setting) {
    auto c = config_for(28);  // plain sidecar: the preStop hook posts to the control port
    c.control_port = 9191;
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const json& s = sidecar_of(r.pod);
    EXPECT_EQ(args_after(s["args"], "--control"), std::vector<std::string>{"127.0.0.1:9191"});
    EXPECT_EQ(s["lifecycle"]["preStop"]["exec"]["command"],
              json::array({"/usr/local/bin/claimguard", "shutdown", "--control", "127.0.0.1:9191"}));

    json pod = app_pod();
    pod["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 9191}}});
    EXPECT_FALSE(inject(pod, c).plan.inject) << "an app container on the control port conflicts";
    pod["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 9091}}});
    EXPECT_TRUE(inject(pod, c).plan.inject) << "9091 is free once the control port moved";

    c.control_port = c.admin_port;
    EXPECT_THROW(validate(c), std::invalid_argument) << "control and admin ports must differ";
}

TEST(webhook_mode_options, unix_socket_mounted_in_the_sidecar_and_every_app_container) {
    auto c = config_for(29);
    c.unix_socket = "/var/run/claimguard/mysql.sock";
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const json mount = {{"name", "claimguard-socket"}, {"mountPath", "/var/run/claimguard"}};
    for (const json& app : r.pod["spec"]["containers"]) EXPECT_EQ(app["volumeMounts"], json::array({mount})) << app;
    EXPECT_EQ(args_after(sidecar_of(r.pod)["args"], "--listen-unix"),
              std::vector<std::string>{"/var/run/claimguard/mysql.sock"});
    EXPECT_EQ(sidecar_of(r.pod)["volumeMounts"][1], mount);
    EXPECT_EQ(r.pod["spec"]["volumes"][1], (json{{"name", "claimguard-socket"}, {"emptyDir", {{"medium", "Memory"}}}}));
    // Held plain sidecar: the app containers moved one place down, their mounts still land.
    c.cluster_version = {1, 28};
    c.hold_application = true;
    const auto held = inject(app_pod(), c);
    ASSERT_TRUE(held.plan.inject);
    EXPECT_EQ(held.pod["spec"]["containers"][1]["volumeMounts"], json::array({mount}));
    EXPECT_EQ(held.pod["spec"]["containers"][2]["volumeMounts"], json::array({mount}));
}

TEST(webhook_mode_options, redis_cluster_user_password_and_tls_from_secrets) {
    auto c = config_for(29);
    c.default_redis = "redis-0.redis:6379";
    c.redis = {true, "claimguard", "redis-auth", "pw", true, false, "redis.shop", "redis-tls", true};
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const json& s = sidecar_of(r.pod);
    const json& args = s["args"];
    // Switches bare, as the chart writes them: no "true" value after them.
    EXPECT_EQ(args_after(args, "--redis-cluster"), std::vector<std::string>{"--redis-user"});
    EXPECT_NE(std::find(args.begin(), args.end(), "--redis-tls"), args.end());
    EXPECT_EQ(std::find(args.begin(), args.end(), "true"), args.end());
    EXPECT_EQ(args_after(args, "--redis-user"), std::vector<std::string>{"claimguard"});
    EXPECT_EQ(args_after(args, "--redis-password-file"), std::vector<std::string>{"/etc/claimguard/redis-auth/pw"});
    EXPECT_NE(std::find(args.begin(), args.end(), "--no-redis-tls-verify"), args.end());
    EXPECT_EQ(args_after(args, "--redis-tls-cert"), std::vector<std::string>{"/etc/claimguard/redis-tls/tls.crt"});
    for (const json& a : args) EXPECT_EQ(a.get<std::string>().find("secret"), std::string::npos) << a;
    const json& volumes = r.pod["spec"]["volumes"];
    EXPECT_EQ(volumes[1],
              (json{{"name", "claimguard-redis-auth"},
                    {"secret", {{"secretName", "redis-auth"}, {"items", {{{"key", "pw"}, {"path", "pw"}}}}}}}));
    EXPECT_EQ(volumes[2], (json{{"name", "claimguard-redis-tls"}, {"secret", {{"secretName", "redis-tls"}}}}));
}

TEST(webhook_mode_options, env_and_schema_check_credentials_from_a_secret) {
    auto c = config_for(29);
    c.env = {{"CLAIMGUARD_LOG_FORMAT", "json"}};
    c.schema_check_secret = "claimguard-check";
    const auto r = inject(app_pod(), c);
    ASSERT_TRUE(r.plan.inject);
    const json& s = sidecar_of(r.pod);
    EXPECT_EQ(s["env"], json::parse(R"([
        {"name": "CLAIMGUARD_LOG_FORMAT", "value": "json"},
        {"name": "CLAIMGUARD_SCHEMA_CHECK_USER", "valueFrom": {"secretKeyRef": {"name": "claimguard-check", "key": "username"}}},
        {"name": "CLAIMGUARD_SCHEMA_CHECK_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "claimguard-check", "key": "password"}}}
    ])"));
    for (const json& a : s["args"]) EXPECT_EQ(a.get<std::string>().find("schema-check"), std::string::npos) << a;
}

TEST(webhook_mode_options, validation_refuses_bad_values_at_start_up) {
    const auto refused = [](auto change) {
        auto c = config_for(29);
        change(c);
        try {
            validate(c);
        } catch (const std::invalid_argument&) {
            return true;
        }
        return false;
    };
    EXPECT_TRUE(refused([](injection_config& c) { c.unix_socket = "mysql.sock"; }));
    EXPECT_TRUE(refused([](injection_config& c) { c.env = {{"1BAD", "x"}}; }));
    EXPECT_TRUE(refused([](injection_config& c) { c.schema_check_secret = "Not_A_Name"; }));
    EXPECT_TRUE(refused([](injection_config& c) { c.redis.tls_client_certificate = true; }));
    EXPECT_FALSE(refused([](injection_config& c) { c.unix_socket = "/var/run/claimguard/mysql.sock"; }));
}

}  // namespace
}  // namespace claimguard::inject
