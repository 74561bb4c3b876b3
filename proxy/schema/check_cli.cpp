// `claimguard check`: the command line, option checks, and which report is printed where.
#include "proxy/schema/check_cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "proxy/config/duration_flag.hpp"
#include "proxy/config/proxy_options.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/schema/report.hpp"
#include "rules/model/text.hpp"

namespace claimguard::schema {
namespace {

constexpr int usage_exit_code = 2;
constexpr int json_indent = 2;

int usage(std::ostream& err, const std::string& message) {
    err << "claimguard check: " << message << "\n";
    return usage_exit_code;
}

}  // namespace

std::string resolve_password(const std::optional<std::string>& flag, const env_lookup& env) {
    if (flag) return *flag;
    for (const char* name : {password_env_var, mysql_password_env_var})
        if (const char* value = env(name); value != nullptr) return value;
    return {};
}

CLI::App* add_check_command(CLI::App& app, check_options& o) {
    auto* cmd = app.add_subcommand(
        "check", "Check the rules against the database: tables, columns, UNIQUE indexes, and database code");
    cmd->add_option("--rules", o.rules_files, "Rules files (repeatable)")->required();
    cmd->add_option("--backend", o.backend, "The MySQL/MariaDB server (host:port)")->required();
    cmd->add_option("--user", o.user, "Database user (needs SELECT on the claim tables)")->required();
    cmd->add_option("--password", o.password,
                    "Password (visible to other local users: prefer $CLAIMGUARD_CHECK_PASSWORD or $MYSQL_PWD)");
    cmd->add_option("--database", o.database, "The application's database (for tables named without a schema)");
    cmd->add_flag("--json", o.json, "Print the report as JSON");
    cmd->add_flag("--skip-duplicates", o.skip_duplicates, "Do not scan claim tables for existing duplicate rows");
    config::add_duration_flag(*cmd, "--connect-timeout", o.connect_timeout,
                              "Connect timeout (whole seconds, rounded up)");
    config::add_duration_flag(*cmd, "--read-timeout", o.read_timeout,
                              "Per query; the duplicate scan reads the whole table (whole seconds, rounded up)");
    cmd->add_flag("--tls", o.tls.enabled, "Require TLS to the database");
    cmd->add_flag("--tls-verify,!--no-tls-verify", o.tls.verify,
                  "Verify the database certificate and host name (default; --no-tls-verify only for tests)");
    cmd->add_option("--tls-ca", o.tls.ca_file, "CA bundle (PEM) for the database certificate");
    cmd->add_option("--tls-capath", o.tls.ca_path, "Directory of CA certificates");
    cmd->add_option("--tls-cert", o.tls.cert_file, "Client certificate (PEM)");
    cmd->add_option("--tls-key", o.tls.key_file, "Client certificate's private key (PEM)");
    return cmd;
}

int run_check(const check_options& options, std::ostream& out, std::ostream& err) {
    return run_check(options, out, err, [](const char* name) -> const char* { return std::getenv(name); });
}

namespace {

// The connection `check` (and suggest's unique-index lookup) makes from its options; throws
// std::invalid_argument on a bad --backend.
connection_options connection_of(const check_options& options, const env_lookup& env) {
    connection_options conn;
    const auto ep = config::parse_endpoint(options.backend);
    conn.host = ep.host;
    conn.port = ep.port;
    conn.user = options.user;
    conn.password = resolve_password(options.password, env);
    conn.database = options.database;
    conn.connect_timeout = config::whole_seconds_up(options.connect_timeout);
    conn.read_timeout = config::whole_seconds_up(options.read_timeout);
    conn.tls = options.tls;
    return conn;
}

}  // namespace

int run_check(const check_options& options, std::ostream& out, std::ostream& err, const env_lookup& env) {
    if (options.rules_files.empty()) return usage(err, "--rules: give at least one rules file");
    if (options.user.empty()) return usage(err, "--user is required");
    const bool tls_files = !options.tls.ca_file.empty() || !options.tls.ca_path.empty() ||
                           !options.tls.cert_file.empty() || !options.tls.key_file.empty();
    if (!options.tls.enabled && tls_files) return usage(err, "the --tls-* files need --tls");

    connection_options conn;
    try {
        conn = connection_of(options, env);
    } catch (const std::exception& e) {
        return usage(err, std::string("--backend: ") + e.what());
    }

    const auto loaded = engine::load_rules_files(options.rules_files);
    if (!loaded.rules) {
        for (const auto& d : loaded.errors) err << rules::format_diagnostic(d) << "\n";
        return usage(err, "the rules files have errors (see above); nothing was checked");
    }
    if (const auto unnamed = rules_without_schema(*loaded.rules, conn.database); !unnamed.empty())
        return usage(err, "rule '" + rules::printable(unnamed.front()) +
                              "' names its table without a schema: pass --database (the application's database)");

    const auto report =
        check_schema(*loaded.rules, conn, options.skip_duplicates ? duplicate_scan::skip : duplicate_scan::count);
    if (!report.error.empty()) err << "claimguard check: " << rules::printable(report.error) << "\n";
    for (const auto& e : report.rule_errors) err << rules::printable(format_rule_error(e)) << "\n";
    if (options.json)
        out << to_json(report).dump(json_indent, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else if (report.error.empty())
        out << render_text(report);
    return exit_code(report);
}

std::function<std::vector<std::pair<std::string, std::vector<std::string>>>(const std::string&)> unique_index_lookup(
    const check_options& options, const env_lookup& env) {
    const auto conn = connection_of(options, env);  // throws std::invalid_argument: a usage error
    auto db = std::make_shared<std::optional<inspector>>();
    return [conn, db](const std::string& table) {
        if (!db->has_value()) db->emplace(inspector::connect(conn).value());
        rules::table_name name{conn.database, table};
        if (const auto dot = table.find('.'); dot != std::string::npos)
            name = {table.substr(0, dot), table.substr(dot + 1)};
        std::vector<std::pair<std::string, std::vector<std::string>>> out;
        for (const auto& t : (*db)->read_metadata({name}).value().tables)
            for (const auto& i : t.indexes)
                if (i.unique && !i.prefix && !i.expression) out.emplace_back(i.name, i.columns);
        return out;
    };
}

}  // namespace claimguard::schema
