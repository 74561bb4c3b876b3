// Unit tests for the serve settings: YAML file, CLAIMGUARD_* environment, flags, durations, validate().
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "proxy/config/settings.hpp"

namespace {

using namespace claimguard::config;
using namespace std::chrono_literals;

// Writes `text` to a fresh file under the GTest temp dir and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
    auto dir = std::filesystem::path(testing::TempDir()) / "claimguard_config_test";
    std::filesystem::create_directories(dir);
    auto path = (dir / name).string();
    std::ofstream(path, std::ios::trunc) << text;
    return path;
}

// The message of the config_error that `f` throws; fails the test when it throws nothing.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const config_error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a config_error";
    return {};
}

using env_map = std::map<std::string, std::string>;

auto getenv_from(const env_map& env) {
    return [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
}

std::string show(const proxy_options& o, std::string_view name) {
    for (const auto& s : serve_settings())
        if (s.name == name) return s.show(o);
    ADD_FAILURE() << "no setting " << name;
    return {};
}

// --- precedence ---------------------------------------------------------------------------------

struct precedence_case {
    std::string name;
    std::string key;
    std::string file_value, env_value, flag_value;
    std::string expect_file, expect_env, expect_flag;  // show() after each source
};

class precedence : public testing::TestWithParam<precedence_case> {};

TEST_P(precedence, file_then_env_then_flag) {
    const auto& c = GetParam();
    proxy_options o;
    auto path = write_temp("precedence_" + c.name + ".yaml", c.key + ": " + c.file_value + "\n");
    apply_config_file(path, o);
    EXPECT_EQ(show(o, c.key), c.expect_file);

    env_map env{{env_name(c.key), c.env_value}};
    apply_environment(o, getenv_from(env));
    EXPECT_EQ(show(o, c.key), c.expect_env);

    apply_setting(o, c.key, {c.flag_value}, "--" + flag_name(c.key));
    EXPECT_EQ(show(o, c.key), c.expect_flag);
}

INSTANTIATE_TEST_SUITE_P(
    settings, precedence,
    testing::Values(precedence_case{"max_connections", "max_connections", "10", "20", "30", "10", "20", "30"},
                    precedence_case{"log_format", "log_format", "json", "text", "json", "json", "text", "json"},
                    precedence_case{"idle_timeout", "idle_timeout", "2m", "90s", "1h", "2m", "90s", "1h"},
                    precedence_case{"backend", "backend", "a:1", "b:2", "c:3", "a:1", "b:2", "c:3"},
                    precedence_case{"rules_list_replaced", "rules", "[f1.yaml, f2.yaml]", "e1.yaml", "g1.yaml",
                                    "f1.yaml,f2.yaml", "e1.yaml", "g1.yaml"}),
    [](const auto& info) { return info.param.name; });

TEST(defaults, one_io_thread) {
    // One per core of the node would start dozens of threads in a sidecar limited to a fraction of a CPU.
    EXPECT_EQ(proxy_options{}.threads, 1u);
}

TEST(precedence, unset_environment_keeps_the_file_value) {
    proxy_options o;
    apply_config_file(write_temp("unset_env.yaml", "max_connections: 7\n"), o);
    env_map env{{"CLAIMGUARD_THREADS", "3"}};
    apply_environment(o, getenv_from(env));
    EXPECT_EQ(o.max_connections, 7u);
    EXPECT_EQ(o.threads, 3u);
}

TEST(listen_unix, off_by_default_a_path_when_set_and_too_long_refused) {
    proxy_options o;
    EXPECT_TRUE(o.listen_unix.empty());
    apply_setting(o, "listen_unix", {"/var/run/claimguard/mysql.sock"}, "--listen-unix");
    EXPECT_EQ(o.listen_unix, "/var/run/claimguard/mysql.sock");
    const std::string longest = "/" + std::string(106, 'a');  // sun_path: 107 bytes and the NUL
    EXPECT_NO_THROW(apply_setting(o, "listen_unix", {longest}, "--listen-unix"));
    EXPECT_THROW(apply_setting(o, "listen_unix", {longest + "a"}, "--listen-unix"), config_error);
}

// --- durations ----------------------------------------------------------------------------------

// The parser itself is rules/model/duration.hpp (tests/rules/model/duration_test.cpp); here: that
// every duration setting uses it, and that its errors name the setting and the accepted forms.

struct duration_case {
    std::string name;
    std::string text;
    std::chrono::milliseconds expect;
};

class duration_forms : public testing::TestWithParam<duration_case> {};

TEST_P(duration_forms, parses) {
    const auto& c = GetParam();
    EXPECT_EQ(parse_duration(c.text).count(), c.expect.count());
}

INSTANTIATE_TEST_SUITE_P(parse_duration, duration_forms,
                         testing::Values(duration_case{"ms", "250ms", 250ms}, duration_case{"s", "5s", 5000ms},
                                         duration_case{"m", "2m", 120'000ms}, duration_case{"h", "8h", 28'800'000ms},
                                         duration_case{"zero_seconds", "0s", 0ms},
                                         duration_case{"fraction", "1.5s", 1500ms},
                                         duration_case{"zero_ms", "0ms", 0ms},
                                         duration_case{"leading_zeros", "007s", 7000ms}),
                         [](const auto& info) { return info.param.name; });

struct bad_duration_case {
    std::string name;
    std::string text;
};

class bad_durations : public testing::TestWithParam<bad_duration_case> {};

TEST_P(bad_durations, are_rejected) {
    EXPECT_THROW((void)parse_duration(GetParam().text), std::invalid_argument) << GetParam().text;
}

TEST_P(bad_durations, are_config_errors_naming_the_source) {
    proxy_options o;
    auto msg = error_of([&] { apply_setting(o, "connect_timeout", {GetParam().text}, "--connect-timeout"); });
    EXPECT_NE(msg.find("--connect-timeout: connect_timeout:"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(parse_duration, bad_durations,
                         testing::Values(bad_duration_case{"empty", ""}, bad_duration_case{"unit_only", "ms"},
                                         bad_duration_case{"unknown_unit", "5x"}, bad_duration_case{"days", "1d"},
                                         bad_duration_case{"long_unit", "5sec"}, bad_duration_case{"upper_case", "5S"},
                                         bad_duration_case{"space", "5 s"}, bad_duration_case{"negative", "-1s"},
                                         bad_duration_case{"bare_number", "1500"}, bad_duration_case{"bare_zero", "0"},
                                         bad_duration_case{"sub_millisecond", "0.5ms"},
                                         bad_duration_case{"two_units", "1m30s"},
                                         bad_duration_case{"too_big", "99999999999999h"}),
                         [](const auto& info) { return info.param.name; });

TEST(durations, unknown_unit_message_lists_the_units) {
    try {
        (void)parse_duration("5x");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("units ms, s, m, h"), std::string::npos) << e.what();
    }
}

// Issue 22: a bare number meant milliseconds for some settings and seconds for others.
TEST(durations, a_bare_number_is_refused_in_every_duration_setting_with_its_name) {
    int checked = 0;
    for (const auto& s : serve_settings()) {
        if (s.type.find("DURATION") == std::string_view::npos) continue;
        ++checked;
        proxy_options o;
        const auto flag = "--" + flag_name(s.name);
        auto msg = error_of([&] { apply_setting(o, s.name, {"2"}, flag); });
        EXPECT_EQ(msg.rfind(flag + ": " + std::string(s.name) + ": '2' has no unit", 0), 0u) << msg;
        EXPECT_NE(msg.find("250ms, 1.5s, 2m or 8h"), std::string::npos) << msg;
    }
    EXPECT_GE(checked, 9);
}

// Bug: idle_timeout and packet_timeout are whole seconds; a sub-second value is truncated to 0,
// and idle_timeout 0 means "never". `idle_timeout: 500ms` silently disables the timeout.
// Expected: an error (or rounding up), never a silent 0.
// Regression: 500ms used to become 0 (= never).
TEST(durations, sub_second_idle_timeout_is_not_silently_never) {
    proxy_options o;
    try {
        apply_setting(o, "idle_timeout", {"500ms"}, "--idle-timeout");
    } catch (const config_error&) {
        return;  // rejecting it is fine
    }
    EXPECT_NE(o.idle_timeout.count(), 0) << "500ms became 0 = never";
}

// --- backend keepalive and orphaned transactions (issue 13) -------------------------------------------

TEST(orphan_settings, defaults_and_values) {
    proxy_options o;
    EXPECT_EQ(o.backend_keepalive_idle, 10s);
    EXPECT_EQ(o.backend_keepalive_interval, 5s);
    EXPECT_EQ(o.backend_keepalive_count, 3u);
    EXPECT_TRUE(o.orphan_kill);
    EXPECT_EQ(o.orphan_kill_deadline, 300s);
    apply_setting(o, "backend_keepalive_idle", {"0s"}, "--backend-keepalive-idle");  // kernel defaults
    apply_setting(o, "backend_keepalive_interval", {"2s"}, "--backend-keepalive-interval");
    apply_setting(o, "backend_keepalive_count", {"9"}, "--backend-keepalive-count");
    apply_setting(o, "orphan_kill", {"off"}, "--orphan-kill");
    apply_setting(o, "orphan_kill_deadline", {"2m"}, "--orphan-kill-deadline");
    EXPECT_EQ(o.backend_keepalive_idle, 0s);
    EXPECT_EQ(o.backend_keepalive_interval, 2s);
    EXPECT_EQ(o.backend_keepalive_count, 9u);
    EXPECT_FALSE(o.orphan_kill);
    EXPECT_EQ(o.orphan_kill_deadline, 120s);
    EXPECT_EQ(show(o, "orphan_kill_deadline"), "2m");
    EXPECT_EQ(show(o, "orphan_kill"), "false");
}

// --- watch_unlisted_tables (issue 21): off by default, a bounded count ---------------------------------

TEST(watch_unlisted_tables, off_by_default_a_count_when_set_and_bounded) {
    proxy_options o;
    EXPECT_EQ(o.watch_unlisted_tables, 0u);
    apply_setting(o, "watch_unlisted_tables", {"16"}, "--watch-unlisted-tables");
    EXPECT_EQ(o.watch_unlisted_tables, 16u);
    EXPECT_EQ(show(o, "watch_unlisted_tables"), "16");
    const auto msg =
        error_of([&] { apply_setting(o, "watch_unlisted_tables", {"100000"}, "--watch-unlisted-tables"); });
    EXPECT_NE(msg.find("watch"), std::string::npos) << msg;
    EXPECT_FALSE(
        error_of([&] { apply_setting(o, "watch_unlisted_tables", {"many"}, "--watch-unlisted-tables"); }).empty());
}

struct bad_setting_case {
    std::string name;
    std::string setting;
    std::string value;
};

class orphan_bad_settings : public testing::TestWithParam<bad_setting_case> {};

TEST_P(orphan_bad_settings, are_config_errors) {
    proxy_options o;
    const auto& c = GetParam();
    auto msg = error_of([&] { apply_setting(o, c.setting, {c.value}, "--" + flag_name(c.setting)); });
    EXPECT_NE(msg.find(c.setting), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(cases, orphan_bad_settings,
                         testing::Values(bad_setting_case{"sub_second_idle", "backend_keepalive_idle", "500ms"},
                                         bad_setting_case{"idle_past_linux_limit", "backend_keepalive_idle", "10h"},
                                         bad_setting_case{"zero_interval", "backend_keepalive_interval", "0s"},
                                         bad_setting_case{"zero_count", "backend_keepalive_count", "0"},
                                         bad_setting_case{"count_past_linux_limit", "backend_keepalive_count", "128"},
                                         bad_setting_case{"not_a_bool", "orphan_kill", "sometimes"},
                                         bad_setting_case{"zero_deadline", "orphan_kill_deadline", "0s"},
                                         bad_setting_case{"sub_second_deadline", "orphan_kill_deadline", "500ms"}),
                         [](const auto& info) { return info.param.name; });

// --- config file errors ---------------------------------------------------------------------------

struct file_error_case {
    std::string name;
    std::string text;
    std::string where;    // ":line:column" after the path
    std::string message;  // a part of the message
};

class file_errors : public testing::TestWithParam<file_error_case> {};

TEST_P(file_errors, name_file_line_column) {
    const auto& c = GetParam();
    auto path = write_temp("error_" + c.name + ".yaml", c.text);
    proxy_options o;
    auto msg = error_of([&] { apply_config_file(path, o); });
    EXPECT_EQ(msg.rfind(path + c.where, 0), 0u) << msg;
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    apply_config_file, file_errors,
    testing::Values(
        file_error_case{"unknown_key", "listen: 127.0.0.1:1\n\nmax_conections: 5\n",
                        ":3:1:", "unknown setting 'max_conections'"},
        file_error_case{"unknown_key_in_flow_mapping", "{threads: 1,  bogus: 1}\n",
                        ":1:15:", "unknown setting 'bogus'"},
        file_error_case{"bad_value", "threads: 2\nmax_connections: lots\n",
                        ":2:1:", "max_connections: expected a whole number"},
        file_error_case{"list_for_scalar", "max_connections: [1, 2]\n", ":1:1:", "takes one value, not a list"},
        file_error_case{"block_list_for_scalar", "# c\nbackend:\n  - a:1\n", ":2:1:", "takes one value, not a list"},
        file_error_case{"mapping_for_scalar", "listen:\n  host: a\n  port: 1\n", ":1:1:", "not a mapping"},
        file_error_case{"mapping_in_list", "rules:\n  - {a: b}\n", ":1:1:", "list items must be plain values"},
        file_error_case{"nested_list", "rules: [[a.yaml]]\n", ":1:1:", "list items must be plain values"},
        file_error_case{"bad_endpoint", "listen: nohost\n", ":1:1:", "expected host:port"},
        file_error_case{"bad_port", "\n\nadmin: 127.0.0.1:99999\n", ":3:1:", "bad port"},
        file_error_case{"bad_bool", "watch_rules: maybe\n", ":1:1:", "expected true or false"},
        file_error_case{"bad_choice", "log_format: xml\n", ":1:1:", "expected one of: text, json"},
        file_error_case{"bad_duration", "redis_timeout: 5 sec\n", ":1:1:", "redis_timeout"},
        file_error_case{"too_many_threads", "threads: 100000\n", ":1:1:", "at most"},
        file_error_case{"not_a_mapping", "- listen\n- backend\n", ":1:1:", "must be a mapping"}),
    [](const auto& info) { return info.param.name; });

TEST(apply_config_file, yaml_syntax_error_has_line_and_column) {
    auto path = write_temp("syntax.yaml", "threads: 1\nlisten: [unclosed\n");
    proxy_options o;
    auto msg = error_of([&] { apply_config_file(path, o); });
    ASSERT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
    std::smatch m;
    auto rest = msg.substr(path.size());
    ASSERT_TRUE(std::regex_search(rest, m, std::regex("^:([0-9]+):([0-9]+): .+"))) << msg;
    EXPECT_GE(std::stoi(m[1]), 2) << "the error is not on line 1: " << msg;
}

TEST(apply_config_file, missing_file_is_a_config_error) {
    proxy_options o;
    auto msg = error_of([&] { apply_config_file("/nonexistent/claimguard.yaml", o); });
    EXPECT_NE(msg.find("/nonexistent/claimguard.yaml"), std::string::npos) << msg;
}

TEST(apply_config_file, empty_file_changes_nothing) {
    proxy_options o;
    apply_config_file(write_temp("empty.yaml", "# only a comment\n"), o);
    proxy_options d;
    for (const auto& s : serve_settings()) EXPECT_EQ(s.show(o), s.show(d)) << s.name;
}

TEST(apply_config_file, scalar_rules_is_one_file_and_empty_redis_is_none) {
    proxy_options o;
    o.redis = {endpoint{"r", 1}};
    apply_config_file(write_temp("scalars.yaml", "rules: one.yaml\nredis:\n"), o);
    EXPECT_EQ(o.rules_files, std::vector<std::string>{"one.yaml"});
    EXPECT_TRUE(o.redis.empty());
}

// --- endpoints --------------------------------------------------------------------------------------

struct endpoint_case {
    std::string name;
    std::string text;
    bool ok;
    std::string host;
    std::uint16_t port;
};

class endpoints : public testing::TestWithParam<endpoint_case> {};

TEST_P(endpoints, parse) {
    const auto& c = GetParam();
    proxy_options o;
    if (!c.ok) {
        auto msg = error_of([&] { apply_setting(o, "backend", {c.text}, "CLAIMGUARD_BACKEND"); });
        EXPECT_EQ(msg.rfind("CLAIMGUARD_BACKEND: backend:", 0), 0u) << msg;
        return;
    }
    apply_setting(o, "backend", {c.text}, "--backend");
    EXPECT_EQ(o.backend.host, c.host);
    EXPECT_EQ(o.backend.port, c.port);
}

INSTANTIATE_TEST_SUITE_P(settings, endpoints,
                         testing::Values(endpoint_case{"host_port", "db.internal:3306", true, "db.internal", 3306},
                                         endpoint_case{"ipv6", "[::1]:3307", true, "::1", 3307},
                                         endpoint_case{"max_port", "h:65535", true, "h", 65535},
                                         endpoint_case{"no_port", "nohost", false, "", 0},
                                         endpoint_case{"empty_host", ":3306", false, "", 0},
                                         endpoint_case{"empty_port", "h:", false, "", 0},
                                         endpoint_case{"port_too_big", "h:65536", false, "", 0},
                                         endpoint_case{"port_not_number", "h:db", false, "", 0},
                                         endpoint_case{"port_trailing", "h:33x", false, "", 0},
                                         endpoint_case{"negative_port", "h:-1", false, "", 0},
                                         endpoint_case{"empty", "", false, "", 0}),
                         [](const auto& info) { return info.param.name; });

TEST(endpoints, admin_off_disables_the_admin_port) {
    proxy_options o;
    apply_setting(o, "admin", {"off"}, "--admin");
    EXPECT_FALSE(o.admin_enabled);
    apply_setting(o, "admin", {"0.0.0.0:9191"}, "--admin");
    EXPECT_TRUE(o.admin_enabled);
    EXPECT_EQ(o.admin.port, 9191);
}

// --- flags and environment ----------------------------------------------------------------------------

TEST(apply_setting, unknown_and_multiple_values_are_errors) {
    proxy_options o;
    EXPECT_NE(error_of([&] { apply_setting(o, "nope", {"1"}, "--nope"); }).find("unknown setting 'nope'"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  apply_setting(o, "threads", {"1", "2"}, "--threads");
              }).find("takes one value"),
              std::string::npos);
}

TEST(names, flag_and_env_names_follow_the_key) {
    EXPECT_EQ(flag_name("max_shutdown_delay"), "max-shutdown-delay");
    EXPECT_EQ(env_name("max_shutdown_delay"), "CLAIMGUARD_MAX_SHUTDOWN_DELAY");
    std::set<std::string> seen;
    for (const auto& s : serve_settings()) EXPECT_TRUE(seen.insert(std::string(s.name)).second) << s.name;
}

struct env_list_case {
    std::string name;
    std::string value;
    std::vector<std::string> expect;
};

class env_rules_list : public testing::TestWithParam<env_list_case> {};

TEST_P(env_rules_list, splits_on_commas) {
    const auto& c = GetParam();
    proxy_options o;
    o.rules_files = {"from_file.yaml"};
    env_map env{{"CLAIMGUARD_RULES", c.value}};
    apply_environment(o, getenv_from(env));
    EXPECT_EQ(o.rules_files, c.expect);
}

INSTANTIATE_TEST_SUITE_P(
    apply_environment, env_rules_list,
    testing::Values(env_list_case{"one", "a.yaml", {"a.yaml"}},
                    env_list_case{"two", "a.yaml,b.yaml", {"a.yaml", "b.yaml"}},
                    env_list_case{"three_with_paths", "/r/a.yaml,/r/b.yml,c.yaml", {"/r/a.yaml", "/r/b.yml", "c.yaml"}},
                    env_list_case{"trailing_comma", "a.yaml,", {"a.yaml"}}, env_list_case{"empty_clears", "", {}}),
    [](const auto& info) { return info.param.name; });

TEST(apply_environment, bad_value_names_the_variable) {
    proxy_options o;
    env_map env{{"CLAIMGUARD_MAX_CONNECTIONS", "many"}};
    auto msg = error_of([&] { apply_environment(o, getenv_from(env)); });
    EXPECT_EQ(msg.rfind("CLAIMGUARD_MAX_CONNECTIONS: max_connections:", 0), 0u) << msg;
}

TEST(apply_environment, non_list_setting_keeps_commas) {
    proxy_options o;
    env_map env{{"CLAIMGUARD_AUDIT_LOG", "/var/log/a,b.log"}};
    apply_environment(o, getenv_from(env));
    EXPECT_EQ(o.audit_log, "/var/log/a,b.log");
}

// --- validate() --------------------------------------------------------------------------------------

struct validate_case {
    std::string name;
    std::vector<std::pair<std::string, std::string>> settings;
    std::string error;  // empty: valid
};

class validate_rules : public testing::TestWithParam<validate_case> {};

TEST_P(validate_rules, checks_across_settings) {
    const auto& c = GetParam();
    proxy_options o;
    o.backend = {"db", 3306};
    for (const auto& [k, v] : c.settings) apply_setting(o, k, {v}, "test");
    if (c.error.empty()) {
        EXPECT_NO_THROW(validate(o));
        return;
    }
    auto msg = error_of([&] { validate(o); });
    EXPECT_NE(msg.find(c.error), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    validate, validate_rules,
    testing::Values(
        validate_case{"defaults", {}, ""},
        validate_case{"zero_connections", {{"max_connections", "0"}}, "max_connections must be at least 1"},
        validate_case{"one_connection", {{"max_connections", "1"}}, ""},
        validate_case{"packet_too_small", {{"max_packet_bytes", "1023"}}, "max_packet_bytes must be at least 1024"},
        validate_case{"packet_minimum", {{"max_packet_bytes", "1024"}}, ""},
        validate_case{"min_over_max_shutdown",
                      {{"min_shutdown_delay", "10s"}, {"max_shutdown_delay", "5s"}},
                      "min_shutdown_delay must not exceed max_shutdown_delay"},
        validate_case{"min_equals_max_shutdown", {{"min_shutdown_delay", "5s"}, {"max_shutdown_delay", "5000ms"}}, ""},
        validate_case{"verify_without_tls", {{"backend_tls_verify", "true"}}, ""},
        validate_case{"verify_with_tls", {{"backend_tls", "on"}, {"backend_tls_verify", "yes"}}, ""},
        validate_case{"tls_without_verify", {{"backend_tls", "on"}, {"backend_tls_verify", "no"}}, ""},
        validate_case{"control_ipv6_loopback", {{"control", "[::1]:9091"}}, ""},
        validate_case{"control_loopback_range", {{"control", "127.0.0.2:9091"}}, ""},
        validate_case{"control_localhost", {{"control", "localhost:9091"}}, ""},
        validate_case{"control_off", {{"control", "off"}}, ""},
        validate_case{"control_any_address", {{"control", "0.0.0.0:9091"}}, "is not a loopback address"},
        validate_case{"control_pod_ip", {{"control", "10.1.2.3:9091"}}, "is not a loopback address"},
        validate_case{"control_ipv6_any", {{"control", "[::]:9091"}}, "is not a loopback address"},
        validate_case{"control_name", {{"control", "claimguard.local:9091"}}, "is not a loopback address"},
        validate_case{"control_any_allowed", {{"control", "0.0.0.0:9091"}, {"control_allow_non_loopback", "true"}}, ""},
        validate_case{"control_equals_admin", {{"control", "127.0.0.1:9090"}}, "control and admin must be different"}),
    [](const auto& info) { return info.param.name; });

TEST(validate_backend, is_required_with_every_source_named) {
    proxy_options o;
    auto msg = error_of([&] { validate(o); });
    EXPECT_NE(msg.find("backend is required"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--backend"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CLAIMGUARD_BACKEND"), std::string::npos) << msg;
    apply_setting(o, "backend", {"db:3306"}, "--backend");
    EXPECT_NO_THROW(validate(o));
}

TEST(defaults, backend_tls_is_verified_and_control_is_loopback) {
    const proxy_options o;
    EXPECT_TRUE(o.backend_tls.verify);
    EXPECT_FALSE(o.backend_tls.enabled);
    EXPECT_TRUE(o.control_enabled);
    EXPECT_TRUE(is_loopback_host(o.control.host));
    EXPECT_NE(o.control.port, o.admin.port);
}

TEST(loopback, hosts) {
    for (auto h : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) EXPECT_TRUE(is_loopback_host(h)) << h;
    for (auto h : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "::ffff:127.0.0.1", "", "local"})
        EXPECT_FALSE(is_loopback_host(h)) << h;
}

// --- the effective configuration (validate --print-config) -----------------------------------------

TEST(render_config, round_trips_through_the_config_file_and_redacts_secrets) {
    proxy_options o;
    apply_setting(o, "backend", {"db.internal:3306"}, "--backend");
    apply_setting(o, "connect_timeout", {"1.5s"}, "--connect-timeout");
    apply_setting(o, "rules", {"/a.yaml", "/b.yaml"}, "--rules");
    apply_setting(o, "schema_check_password", {"hunter2-db"}, "--schema-check-password");
    apply_setting(o, "audit_log", {"-"}, "--audit-log");
    o.redis_password = "hunter2-redis";
    const auto text = render_config(o);
    EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
    EXPECT_NE(text.find("# schema_check_password: (redacted)"), std::string::npos) << text;
    EXPECT_NE(text.find("connect_timeout: 1500ms"), std::string::npos) << text;
    // What it prints is a config file that gives the same settings back (the secrets aside).
    proxy_options back;
    ASSERT_NO_THROW(apply_config_file(write_temp("rendered.yaml", text), back)) << text;
    for (const auto& s : serve_settings())
        if (!s.secret) {
            EXPECT_EQ(s.show(back), s.show(o)) << s.name;
        }
}

// --- the example config ------------------------------------------------------------------------------

const std::string example_path = std::string(CLAIMGUARD_SOURCE_DIR) + "/config/claimguard.example.yaml";

TEST(example_config, loads_and_validates) {
    proxy_options o;
    ASSERT_NO_THROW(apply_config_file(example_path, o));
    EXPECT_NO_THROW(validate(o));
    EXPECT_EQ(o.backend.host, "db.internal");
    EXPECT_EQ(o.backend.port, 3306);
    EXPECT_EQ(o.rules_files, std::vector<std::string>{"/etc/claimguard/rules/coupon.yaml"});
    EXPECT_EQ(o.idle_timeout, 8h);
    EXPECT_EQ(o.redis_timeout, 50ms);
    EXPECT_TRUE(o.redis.empty());
}

// --- Redis (issue 12) -------------------------------------------------------------------------------

TEST(redis_settings, cluster_seeds_are_a_comma_separated_list) {
    proxy_options o;
    o.backend = {"db", 3306};
    apply_setting(o, "redis", {"10.0.0.1:7000,10.0.0.2:7001,[::1]:7002"}, "--redis");
    apply_setting(o, "redis_cluster", {"true"}, "--redis-cluster");
    ASSERT_EQ(o.redis.size(), 3u);
    EXPECT_EQ(o.redis[1].host, "10.0.0.2");
    EXPECT_EQ(o.redis[2].port, 7002);
    EXPECT_NO_THROW(validate(o));
    o.redis_cluster = false;
    EXPECT_THROW(validate(o), config_error);  // several nodes without redis_cluster: a typo, not a choice
}

TEST(redis_settings, password_comes_from_the_environment_only) {
    for (const auto& s : serve_settings()) EXPECT_NE(s.name, "redis_password") << "a secret must never be a flag";
    proxy_options o;
    o.backend = {"db", 3306};
    apply_environment(o, [](const char* name) -> const char* {
        if (std::string_view(name) == "CLAIMGUARD_REDIS_PASSWORD") return "s3cret";
        if (std::string_view(name) == "CLAIMGUARD_REDIS_USER") return "claimguard";
        return nullptr;
    });
    EXPECT_EQ(o.redis_password, "s3cret");
    EXPECT_EQ(o.redis_user, "claimguard");
    for (const auto& s : serve_settings()) EXPECT_EQ(s.show(o).find("s3cret"), std::string::npos) << s.name;
    o.redis_password_file = "/run/secrets/redis";
    EXPECT_THROW(validate(o), config_error);  // two sources for one secret
}

TEST(redis_settings, tls_client_certificate_needs_its_key) {
    proxy_options o;
    o.backend = {"db", 3306};
    o.redis = {endpoint{"r", 6380}};
    o.redis_tls = true;
    o.redis_tls_cert = "client.crt";
    EXPECT_THROW(validate(o), config_error);
    o.redis_tls_key = "client.key";
    EXPECT_NO_THROW(validate(o));
    o.redis_tls = false;
    EXPECT_THROW(validate(o), config_error);
}

TEST(example_config, documents_every_setting) {
    auto root = YAML::LoadFile(example_path);
    std::set<std::string> keys;
    for (const auto& kv : root) keys.insert(kv.first.as<std::string>());
    for (const auto& s : serve_settings()) EXPECT_TRUE(keys.count(std::string(s.name))) << s.name << " is missing";
    EXPECT_EQ(keys.size(), serve_settings().size());
}

}  // namespace
