// The claimguard binary: `serve` runs the sidecar; lint, ddl and explain work on rules files.
#include <CLI/CLI.hpp>
#include <iostream>
#include <spdlog/spdlog.h>

#include "proxy/config/proxy_options.hpp"
#include "proxy/session/server.hpp"
#include "rules/cli/rules_cli.hpp"

namespace {

int serve(const std::string& listen, const std::string& backend, const std::string& admin,
          claimguard::config::proxy_options options, const std::string& log_level, unsigned idle_s,
          unsigned connect_ms) {
    using namespace claimguard;
    try {
        options.listen = config::parse_endpoint(listen);
        options.backend = config::parse_endpoint(backend);
        options.admin_enabled = admin != "off";
        if (options.admin_enabled) options.admin = config::parse_endpoint(admin);
    } catch (const std::exception& e) {
        std::cerr << "claimguard: " << e.what() << "\n";
        return 2;
    }
    options.idle_timeout = std::chrono::seconds(idle_s);
    options.connect_timeout = std::chrono::milliseconds(connect_ms);
    spdlog::set_level(spdlog::level::from_str(log_level));
    return session::run_server(options);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"claimguard: a MySQL-protocol sidecar that makes stock claims safe without changing the app"};
    app.require_subcommand(1);

    claimguard::config::proxy_options options;
    std::string listen = "127.0.0.1:3306", backend = "127.0.0.1:3307", admin = "127.0.0.1:9090";
    std::string log_level = "info";
    unsigned idle_s = static_cast<unsigned>(options.idle_timeout.count());
    unsigned connect_ms = static_cast<unsigned>(options.connect_timeout.count());
    auto* serve_cmd = app.add_subcommand("serve", "Run the sidecar proxy");
    serve_cmd->add_option("--listen", listen, "Address the app connects to (host:port)")->capture_default_str();
    serve_cmd->add_option("--backend", backend, "The MySQL/MariaDB server (host:port)")->capture_default_str();
    serve_cmd->add_option("--admin", admin, "Admin HTTP endpoint (host:port, or 'off')")->capture_default_str();
    serve_cmd->add_option("--threads", options.threads, "Worker threads (0: one per core)")->capture_default_str();
    serve_cmd->add_option("--max-connections", options.max_connections, "Client connections accepted at once")
        ->capture_default_str();
    serve_cmd->add_option("--max-packet-bytes", options.max_packet_bytes, "Largest packet relayed, either direction")
        ->capture_default_str();
    serve_cmd->add_option("--connect-timeout-ms", connect_ms, "Backend connect and handshake timeout")
        ->capture_default_str();
    serve_cmd->add_option("--idle-timeout-s", idle_s, "Close client connections idle this long (0: never)")
        ->capture_default_str();
    serve_cmd->add_flag("--backend-tls", options.backend_tls.enabled, "Speak TLS to the database");
    serve_cmd->add_option("--backend-tls-ca", options.backend_tls.ca_file, "CA bundle for the database certificate");
    serve_cmd->add_flag("--backend-tls-verify", options.backend_tls.verify, "Verify the database certificate and name");
    serve_cmd->add_option("--backend-tls-server-name", options.backend_tls.server_name, "Expected certificate name");
    serve_cmd->add_option("--rules", options.rules_files, "Rules files (repeatable); none: a plain relay");
    std::string redis;
    serve_cmd->add_option("--redis", redis, "Redis for the claim rules' first filter (host:port)");
    unsigned redis_timeout_ms = static_cast<unsigned>(options.redis_timeout.count());
    serve_cmd->add_option("--redis-timeout-ms", redis_timeout_ms, "Per Redis command; then fail open to the database guard")
        ->capture_default_str();
    serve_cmd->add_option("--audit-log", options.audit_log, "Audit log: '-' (stderr), 'off', or a file")->capture_default_str();
    serve_cmd->add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();

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

    CLI11_PARSE(app, argc, argv);

    using namespace claimguard;
    if (*serve_cmd) {
        options.redis_timeout = std::chrono::milliseconds(redis_timeout_ms);
        if (!redis.empty()) {
            try {
                options.redis = config::parse_endpoint(redis);
            } catch (const std::exception& e) {
                std::cerr << "claimguard: --redis: " << e.what() << "\n";
                return 2;
            }
        }
        return serve(listen, backend, admin, options, log_level, idle_s, connect_ms);
    }
    if (*lint_cmd) return rules_cli::lint(lint_files, std::cout, std::cerr);
    if (*ddl_cmd) return rules_cli::ddl(ddl_files, std::cout, std::cerr);
    if (*explain_cmd) return rules_cli::explain(explain_rules, explain_read, explain_sql, std::cout, std::cerr);
    return 2;
}
