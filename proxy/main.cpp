// The claimguard binary: `serve` runs the sidecar; validate, lint, ddl, explain, check,
// inject and shutdown are the DBA's and the platform's tools around it.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <cstdlib>
#include <iostream>
#include <map>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/config/settings.hpp"
#include "proxy/engine/explain_cli.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/inject/inject_cli.hpp"
#include "proxy/schema/check_cli.hpp"
#include "proxy/session/server.hpp"
#include "rules/cli/rules_cli.hpp"

namespace {

using namespace claimguard;

// Flags that may be given without a value (--backend-tls means --backend-tls=true).
bool is_switch(std::string_view name) {
    return name == "backend_tls" || name == "backend_tls_verify" || name == "watch_rules";
}

struct settings_flags {
    std::string config_path;
    std::map<std::string, std::vector<std::string>> values;
    std::map<std::string, CLI::Option*> options;

    void add_to(CLI::App* cmd) {
        cmd->add_option("--config", config_path, "YAML config file (keys as below, '_' for '-')");
        for (const auto& s : config::serve_settings()) {
            std::string name(s.name);
            std::string help = std::string(s.help) + " [env " + config::env_name(s.name) + "]";
            auto flag = "--" + config::flag_name(s.name);
            CLI::Option* opt = is_switch(s.name) ? cmd->add_flag(flag + "{true}", values[name], help)
                                                 : cmd->add_option(flag, values[name], help);
            if (!s.repeatable) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
            options[name] = opt;
        }
    }

    // defaults < config file < environment < flags
    config::proxy_options resolve() const {
        config::proxy_options o;
        if (!config_path.empty()) config::apply_config_file(config_path, o);
        config::apply_environment(o, [](const char* n) { return std::getenv(n); });
        for (const auto& [name, opt] : options) {
            if (opt->count() == 0) continue;
            const auto& v = values.at(name);
            config::apply_setting(o, name, v, "--" + config::flag_name(name));
        }
        if (o.schema_check_password.empty())
            if (const char* pw = std::getenv("CLAIMGUARD_SCHEMA_CHECK_PASSWORD")) o.schema_check_password = pw;
        config::validate(o);
        return o;
    }
};

int validate_command(const settings_flags& flags) {
    config::proxy_options o;
    try {
        o = flags.resolve();
    } catch (const std::exception& e) {
        std::cerr << "claimguard validate: " << e.what() << "\n";
        return 1;
    }
    auto paths = engine::rules_paths(o.rules_files, o.rules_dir);
    if (paths.empty()) {
        std::cout << "ok: config valid; no rules (a plain relay)\n";
        return 0;
    }
    auto loaded = engine::load_rules_files(paths);
    for (const auto& e : loaded.errors)
        std::cerr << e.pos.file << ":" << e.pos.line << ":" << e.pos.column << ": error: " << e.message << "\n";
    if (!loaded.rules) return 1;
    std::cout << "ok: config valid; " << loaded.rules->stocks.size() << " stock rules, " << loaded.rules->claims.size()
              << " claim rules (version " << loaded.rules->version_hash << ")\n";
    return 0;
}

// POST /quitquitquit to a running claimguard's admin endpoint (for preStop hooks).
int shutdown_command(const std::string& admin) {
    config::endpoint ep;
    try {
        ep = config::parse_endpoint(admin);
    } catch (const std::exception& e) {
        std::cerr << "claimguard shutdown: " << e.what() << "\n";
        return 2;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(ep.port);
    if (inet_pton(AF_INET, ep.host == "localhost" ? "127.0.0.1" : ep.host.c_str(), &addr.sin_addr) != 1) {
        std::cerr << "claimguard shutdown: the admin address must be an IPv4 literal\n";
        return 2;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        std::cerr << "claimguard shutdown: cannot reach the admin endpoint at " << admin << "\n";
        if (fd >= 0) ::close(fd);
        return 1;
    }
    std::string request = "POST /quitquitquit HTTP/1.1\r\nHost: " + ep.host + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    bool ok = ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size());
    char reply[256] = {};
    ssize_t n = ok ? ::recv(fd, reply, sizeof reply - 1, 0) : -1;
    ::close(fd);
    std::string_view head(reply, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (head.starts_with("HTTP/1.1 200")) {
        std::cout << "claimguard is shutting down\n";
        return 0;
    }
    std::cerr << "claimguard shutdown: unexpected answer: " << head.substr(0, head.find('\r')) << "\n";
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"claimguard: a MySQL-protocol sidecar that makes stock claims safe without changing the app"};
    app.require_subcommand(1);

    settings_flags serve_flags, validate_flags;
    auto* serve_cmd = app.add_subcommand("serve", "Run the sidecar proxy");
    serve_flags.add_to(serve_cmd);
    auto* validate_cmd = app.add_subcommand("validate", "Check the config and the rules; non-zero exit with file:line on errors");
    validate_flags.add_to(validate_cmd);

    std::vector<std::string> lint_files;
    auto* lint_cmd = app.add_subcommand("lint", "Check rules files; exits non-zero on any error");
    lint_cmd->add_option("RULES", lint_files, "Rules files")->required();

    std::vector<std::string> ddl_files;
    auto* ddl_cmd = app.add_subcommand("ddl", "Print the UNIQUE indexes that back each claim rule");
    ddl_cmd->add_option("RULES", ddl_files, "Rules files")->required();

    std::vector<std::string> explain_rules;
    std::optional<std::string> explain_read;
    std::string explain_sql;
    auto* explain_cmd = app.add_subcommand("explain", "Show what claimguard would do with a statement");
    explain_cmd->add_option("--rules", explain_rules, "Rules files")->required();
    explain_cmd->add_option("--read", explain_read, "Counter value this session read before");
    explain_cmd->add_option("SQL", explain_sql, "The statement")->required();

    schema::check_options check_opts;
    auto* check_cmd = schema::add_check_command(app, check_opts);

    inject::inject_options inject_opts;
    auto* inject_cmd = app.add_subcommand("inject", "Run the Kubernetes admission webhook that injects the sidecar");
    inject::add_inject_options(*inject_cmd, inject_opts);

    std::string shutdown_admin = "127.0.0.1:9090";
    auto* shutdown_cmd = app.add_subcommand("shutdown", "Ask a running claimguard to shut down gracefully (preStop)");
    shutdown_cmd->add_option("--admin", shutdown_admin, "Its admin endpoint")->capture_default_str();

    CLI11_PARSE(app, argc, argv);

    if (*serve_cmd) {
        config::proxy_options options;
        try {
            options = serve_flags.resolve();
        } catch (const std::exception& e) {
            std::cerr << "claimguard: " << e.what() << "\n";
            return 2;
        }
        return session::run_server(options);
    }
    if (*validate_cmd) return validate_command(validate_flags);
    if (*lint_cmd) return rules_cli::lint(lint_files, std::cout, std::cerr);
    if (*ddl_cmd) return rules_cli::ddl(ddl_files, std::cout, std::cerr);
    if (*explain_cmd) return engine::explain_command(explain_rules, explain_read, explain_sql, std::cout, std::cerr);
    if (*shutdown_cmd) return shutdown_command(shutdown_admin);
    if (*check_cmd) return schema::run_check(check_opts, std::cout, std::cerr);
    if (*inject_cmd) return inject::run_inject(inject_opts);
    return 2;
}
