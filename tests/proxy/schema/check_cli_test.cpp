// Unit tests of `claimguard check` that need no database: options, password sources, usage errors.
#include "proxy/schema/check_cli.hpp"

#include "proxy/config/duration_flag.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace claimguard::schema {
namespace {

struct password_case {
    const char* name;
    std::optional<std::string> flag;
    std::map<std::string, std::string> env;
    std::string expected;
};

std::ostream& operator<<(std::ostream& os, const password_case& c) { return os << c.name; }

class password_source : public ::testing::TestWithParam<password_case> {};

TEST_P(password_source, picks_in_order) {
    const auto& c = GetParam();
    const auto env = [&](const char* name) -> const char* {
        const auto it = c.env.find(name);
        return it == c.env.end() ? nullptr : it->second.c_str();
    };
    EXPECT_EQ(resolve_password(c.flag, env), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    check, password_source,
    ::testing::Values(password_case{"flag_wins_over_env",
                                    "from-flag",
                                    {{password_env_var, "a"}, {mysql_password_env_var, "b"}},
                                    "from-flag"},
                      password_case{"explicit_empty_flag_is_no_password", "", {{password_env_var, "a"}}, ""},
                      password_case{"claimguard_var_before_mysql_pwd",
                                    std::nullopt,
                                    {{password_env_var, "a"}, {mysql_password_env_var, "b"}},
                                    "a"},
                      password_case{"mysql_pwd_alone", std::nullopt, {{mysql_password_env_var, "b"}}, "b"},
                      password_case{"nothing_set", std::nullopt, {}, ""}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(check_command, no_tls_verify_turns_verification_off) {
    CLI::App app;
    check_options o;
    add_check_command(app, o);
    std::vector<std::string> args{"check",  "--rules", "a.yaml", "--backend",      "db:3307",
                                  "--user", "u",       "--tls",  "--no-tls-verify"};
    std::reverse(args.begin(), args.end());
    app.parse(args);
    EXPECT_TRUE(o.tls.enabled);
    EXPECT_FALSE(o.tls.verify);
}

TEST(check_command, parses_its_options) {
    CLI::App app;
    check_options o;
    auto* cmd = add_check_command(app, o);
    std::vector<std::string> args{"check",   "--rules",  "a.yaml",  "--rules",        "b.yaml", "--backend",
                                  "db:3307", "--user",   "checker", "--database",     "shop",   "--json",
                                  "--tls",   "--tls-ca", "ca.pem",  "--read-timeout", "7s",     "--skip-duplicates"};
    std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
    app.parse(args);
    EXPECT_TRUE(cmd->parsed());
    EXPECT_EQ(o.rules_files, (std::vector<std::string>{"a.yaml", "b.yaml"}));
    EXPECT_EQ(o.backend, "db:3307");
    EXPECT_EQ(o.user, "checker");
    EXPECT_FALSE(o.password.has_value());
    EXPECT_EQ(o.database, "shop");
    EXPECT_TRUE(o.json);
    EXPECT_TRUE(o.tls.enabled);
    EXPECT_TRUE(o.tls.verify) << "check --tls verifies by default (issue 22)";
    EXPECT_EQ(o.tls.ca_file, "ca.pem");
    EXPECT_EQ(o.read_timeout, std::chrono::seconds(7));
    EXPECT_EQ(o.connect_timeout, default_connect_timeout) << "not given: the default";
    EXPECT_TRUE(o.skip_duplicates);
}

// Issue 22: check's timeouts take the one duration syntax; a bare number or the old -s names are usage errors.
TEST(check_command, timeouts_are_durations_with_units) {
    const auto parse = [](std::vector<std::string> args) {
        CLI::App app;
        check_options o;
        add_check_command(app, o);
        args.insert(args.begin(), {"check", "--rules", "r.yaml", "--backend", "db:3306", "--user", "u"});
        std::reverse(args.begin(), args.end());
        app.parse(args);
        return o;
    };
    EXPECT_EQ(parse({"--connect-timeout", "1.5s", "--read-timeout", "2m"}).connect_timeout,
              std::chrono::milliseconds(1500));
    EXPECT_EQ(parse({"--read-timeout", "2m"}).read_timeout, std::chrono::minutes(2));
    EXPECT_THROW(parse({"--read-timeout", "7"}), CLI::ValidationError) << "a bare number has no unit";
    EXPECT_THROW(parse({"--read-timeout-s", "7"}), CLI::ExtrasError) << "the old name is gone";
    // libmysqlclient counts whole seconds: 1500ms waits 2 s, never 0 (no timeout).
    EXPECT_EQ(config::whole_seconds_up(std::chrono::milliseconds(1500)), std::chrono::seconds(2));
    EXPECT_EQ(config::whole_seconds_up(std::chrono::milliseconds(0)), std::chrono::seconds(1));
}

TEST(check_command, requires_rules_backend_and_user) {
    CLI::App app;
    check_options o;
    add_check_command(app, o);
    std::vector<std::string> args{"check", "--backend", "db:3307"};
    std::reverse(args.begin(), args.end());
    EXPECT_THROW(app.parse(args), CLI::RequiredError);
}

// --- run_check before any connection ------------------------------------------------------------------

const char* const coupon_rules = R"(
stock_rules:
  - name: coupon_stock
    table: coupon_stock
    key_columns: [campaign_id]
    counter_column: remain
claim_rules:
  - name: coupon_order
    table: coupon_order
    idempotency_columns: [user_id, campaign_id]
    consumes: {rule: coupon_stock, columns: {campaign_id: campaign_id}}
)";

std::string write_file(const std::string& name, const std::string& text) {
    // One directory per process: ctest -j runs the cases of this file as separate processes, and
    // one rewriting a file another is reading made the reader see it empty (a flaky exit code).
    const auto dir =
        std::filesystem::path(::testing::TempDir()) / ("claimguard_check_cli_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = (dir / name).string();
    std::ofstream(path) << text;
    return path;
}

// A 127.0.0.1 port nothing listens on: bound, then closed.
std::uint16_t closed_port() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}

struct usage_case {
    const char* name;
    check_options options;
    std::string err_contains;
    int expected;
};

std::ostream& operator<<(std::ostream& os, const usage_case& c) { return os << c.name; }

check_options valid_options() {
    check_options o;
    o.rules_files = {write_file("coupon.yaml", coupon_rules)};
    o.backend = "127.0.0.1:" + std::to_string(closed_port());
    o.user = "checker";
    o.password = "never-printed-secret";
    o.database = "shop";
    o.connect_timeout = std::chrono::seconds(2);
    return o;
}

std::vector<usage_case> usage_cases() {
    std::vector<usage_case> out;
    auto o = valid_options();
    o.rules_files.clear();
    out.push_back({"no_rules_files", o, "--rules", 2});
    o = valid_options();
    o.backend = "db-without-port";
    out.push_back({"backend_without_port", o, "--backend: expected host:port", 2});
    o = valid_options();
    o.user.clear();
    out.push_back({"no_user", o, "--user is required", 2});
    o = valid_options();
    o.rules_files = {write_file("broken.yaml", "claim_rules: [{name: x}]\n")};
    out.push_back({"rules_file_with_errors", o, "the rules files have errors", 2});
    o = valid_options();
    o.rules_files = {(std::filesystem::path(::testing::TempDir()) / "claimguard_no_such_rules.yaml").string()};
    out.push_back({"unreadable_rules_file", o, "cannot read /tmp/claimguard_no_such_rules.yaml", 2});
    o = valid_options();
    o.database.clear();
    out.push_back({"table_without_schema_and_no_database", o, "pass --database", 2});
    o = valid_options();
    o.tls.ca_file = "ca.pem";
    out.push_back({"tls_files_without_tls", o, "need --tls", 2});
    o = valid_options();
    out.push_back({"nothing_listening", o, "connecting to 127.0.0.1:", 2});
    return out;
}

class check_usage : public ::testing::TestWithParam<usage_case> {};

TEST_P(check_usage, exits_2_with_a_message) {
    const auto& c = GetParam();
    std::ostringstream out, err;
    const auto env = [](const char*) -> const char* { return nullptr; };
    EXPECT_EQ(run_check(c.options, out, err, env), c.expected);
    EXPECT_NE(err.str().find(c.err_contains), std::string::npos) << err.str();
    EXPECT_EQ(err.str().find("never-printed-secret"), std::string::npos) << err.str();
    EXPECT_EQ(out.str().find("never-printed-secret"), std::string::npos) << out.str();
}

INSTANTIATE_TEST_SUITE_P(check, check_usage, ::testing::ValuesIn(usage_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(check_json, unreachable_database_still_prints_a_json_report) {
    auto o = valid_options();
    o.json = true;
    std::ostringstream out, err;
    EXPECT_EQ(run_check(o, out, err, [](const char*) -> const char* { return nullptr; }), 2);
    const auto j = nlohmann::json::parse(out.str());
    EXPECT_EQ(j["exit_code"], 2);
    EXPECT_NE(j["error"].get<std::string>().find("connecting to 127.0.0.1:"), std::string::npos);
}

TEST(check_schema, no_claim_rules_needs_no_connection) {
    rules::rule_set empty;
    connection_options o;
    o.port = closed_port();
    const auto r = check_schema(empty, o, duplicate_scan::count);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(exit_code(r), 0);
    EXPECT_NE(render_text(r).find("no claim rules"), std::string::npos);
}

}  // namespace
}  // namespace claimguard::schema
