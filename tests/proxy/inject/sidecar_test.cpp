// Tests of the injected container's arguments and of the start-up validation of its config.
#include "proxy/inject/sidecar.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace claimguard::inject {
namespace {

using json = nlohmann::json;

TEST(sidecar_args, serve_with_rules_dir_backend_and_redis_then_extra_args) {
    injection_config config;
    config.listen_port = 3307;
    config.admin_port = 9191;
    config.extra_args = {"--log-level", "debug"};
    const sidecar_target target{"db:3306", "cache:6379", "rules", true};
    const std::vector<std::string> expected = {
        "serve",        "--listen",    "127.0.0.1:3307",        "--backend", "db:3306",    "--admin",
        "0.0.0.0:9191", "--rules-dir", "/etc/claimguard/rules", "--redis",   "cache:6379", "--log-level",
        "debug"};
    EXPECT_EQ(sidecar_args(config, target), expected);
}

TEST(sidecar_args, no_redis_flag_without_redis) {
    const std::vector<std::string> args = sidecar_args(injection_config{}, sidecar_target{"db:3306", "", "r", true});
    EXPECT_EQ(std::find(args.begin(), args.end(), "--redis"), args.end());
}

// Issue 22: /quitquitquit left the admin port for the loopback-only control port, whatever the admin port is.
TEST(sidecar_container, prestop_hook_targets_the_control_port_not_the_admin_port) {
    injection_config config;
    config.admin_port = 9191;
    const json c = sidecar_container(config, sidecar_target{"db:3306", "", "r", false});
    EXPECT_EQ(c["lifecycle"]["preStop"]["exec"]["command"][2], "--control");
    EXPECT_EQ(c["lifecycle"]["preStop"]["exec"]["command"][3], "127.0.0.1:9091");
}

TEST(sidecar_container, probes_and_ports_follow_the_admin_port) {
    injection_config config;
    config.admin_port = 9191;
    const json c = sidecar_container(config, sidecar_target{"db:3306", "", "r", true});
    for (const char* probe : {"startupProbe", "livenessProbe", "readinessProbe"})
        EXPECT_EQ(c[probe]["httpGet"]["port"], 9191) << probe;
    EXPECT_EQ(c["startupProbe"]["httpGet"]["path"], "/startup");
    EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/liveness");
    EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readiness");
    EXPECT_EQ(c["ports"][0]["containerPort"], 9191);
    EXPECT_FALSE(c.contains("lifecycle"));
    EXPECT_EQ(c["restartPolicy"], "Always");
}

TEST(sidecar_container, plain_container_has_a_prestop_hook_and_no_restart_policy) {
    const json c = sidecar_container(injection_config{}, sidecar_target{"db:3306", "", "r", false});
    EXPECT_FALSE(c.contains("restartPolicy"));
    EXPECT_EQ(c["lifecycle"]["preStop"]["exec"]["command"],
              (json{"/usr/local/bin/claimguard", "shutdown", "--control", "127.0.0.1:9091"}));
}

TEST(sidecar_container, empty_resources_are_left_out) {
    injection_config config;
    config.resources = {"", "", "", ""};
    EXPECT_FALSE(sidecar_container(config, sidecar_target{"db:3306", "", "r", true}).contains("resources"));
    config.resources = {"", "", "1", ""};
    EXPECT_EQ(sidecar_container(config, sidecar_target{"db:3306", "", "r", true})["resources"],
              (json{{"limits", {{"cpu", "1"}}}}));
}

struct invalid_case {
    const char* name;
    std::function<void(injection_config&)> spoil;
};

void PrintTo(const invalid_case& c, std::ostream* os) { *os << c.name; }

const invalid_case invalid_configs[] = {
    {"empty_image", [](injection_config& c) { c.image.clear(); }},
    {"bad_pull_policy", [](injection_config& c) { c.image_pull_policy = "Sometimes"; }},
    {"same_ports", [](injection_config& c) { c.admin_port = c.listen_port; }},
    {"zero_port", [](injection_config& c) { c.listen_port = 0; }},
    {"relative_mount_path", [](injection_config& c) { c.rules_mount_path = "rules"; }},
    {"bad_default_backend", [](injection_config& c) { c.default_backend = "db"; }},
    {"bad_default_redis", [](injection_config& c) { c.default_redis = "cache:99999"; }},
    {"bad_default_configmap", [](injection_config& c) { c.default_rules_configmap = "Rules_1"; }},
    {"bad_excluded_namespace", [](injection_config& c) { c.excluded_namespaces.push_back("a.b"); }},
    {"bad_cpu_request", [](injection_config& c) { c.resources.cpu_request = "fifty"; }},
    {"bad_memory_limit", [](injection_config& c) { c.resources.memory_limit = "1GB"; }},
    {"root_user", [](injection_config& c) { c.run_as_user = 0; }},
    {"empty_admin_address", [](injection_config& c) { c.admin_address.clear(); }},
};

class config_validation : public testing::TestWithParam<invalid_case> {};

TEST_P(config_validation, refuses_at_start_up) {
    injection_config config;
    ASSERT_NO_THROW(validate(config)) << "the defaults must be valid";
    GetParam().spoil(config);
    EXPECT_THROW(validate(config), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(configs, config_validation, testing::ValuesIn(invalid_configs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace claimguard::inject
