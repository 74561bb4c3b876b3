// The claimguard binary: `serve` runs the sidecar; validate, lint, ddl, explain, check,
// inject and shutdown are the DBA's and the platform's tools around it.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <map>

#include "proxy/config/settings.hpp"
#include "proxy/engine/explain_cli.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/inject/inject_cli.hpp"
#include "proxy/schema/check_cli.hpp"
#include "proxy/session/server.hpp"
#include "proxy/control_client.hpp"
#include "rules/cli/rules_cli.hpp"

#ifndef CLAIMGUARD_VERSION
#error "CLAIMGUARD_VERSION comes from CMake's project(VERSION)"
#endif

namespace {

using namespace claimguard;

// CLI11's help with the flag defaults ({true}) left out of the names: "--watch-rules, --no-watch-rules".
class help_formatter : public CLI::Formatter {
public:
    std::string make_option_name(const CLI::Option* opt, bool positional) const override {
        auto name = CLI::Formatter::make_option_name(opt, positional);
        std::string out;
        bool in_braces = false;
        for (char c : name) {
            if (c == '{')
                in_braces = true;
            else if (c == '}')
                in_braces = false;
            else if (!in_braces)
                out += c == ',' ? std::string(", ") : std::string(1, c);
        }
        return out;
    }
};

// Every usage error (unknown flag or subcommand, missing or extra value) exits 2 (docs/OPERATIONS.md).
constexpr int usage_error = 2;

struct settings_flags {
    std::string config_path;
    std::map<std::string, std::vector<std::string>> values;
    std::map<std::string, CLI::Option*> options;

    void add_to(CLI::App* cmd) {
        cmd->add_option("--config", config_path, "YAML config file (keys as below, '_' for '-')")
            ->type_name("PATH")
            ->check(CLI::ExistingFile);
        const config::proxy_options defaults;
        for (const auto& s : config::serve_settings()) {
            std::string name(s.name);
            std::string help = std::string(s.help) + " [env " + config::env_name(s.name) + "]";
            auto flag = "--" + config::flag_name(s.name);
            CLI::Option* opt = nullptr;
            if (s.is_bool()) {
                // A switch: --x sets true, --no-x false, --x=false too; the last one wins.
                opt = cmd->add_flag(flag + "{true},!--no-" + config::flag_name(s.name), values[name], help);
                // An explicit value stays accepted after a space too (--redis-tls true, as older charts
                // write it); a word that is not a boolean is then a usage error, not a positional.
                opt->expected(0, 1);
            } else {
                opt = cmd->add_option(flag, values[name], help);
                opt->type_name(std::string(s.type));
                if (!s.repeatable) opt->expected(1);
            }
            if (!s.repeatable) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
            const auto shown = s.show(defaults);
            if (s.is_bool())
                opt->option_text("  (switch; default " + shown + ")");
            else if (!s.secret && !shown.empty())
                opt->default_str(shown);
            opt->group(std::string(s.group));
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
            auto v = values.at(name);
            if (v.size() > 1 && name != "rules") v.erase(v.begin(), v.end() - 1);  // the last one wins
            config::apply_setting(o, name, v, "--" + config::flag_name(name));
        }
        if (o.schema_check_password.empty())
            if (const char* pw = std::getenv("CLAIMGUARD_SCHEMA_CHECK_PASSWORD")) o.schema_check_password = pw;
        config::validate(o);
        return o;
    }
};

int validate_command(const settings_flags& flags, bool print_config) {
    config::proxy_options o;
    try {
        o = flags.resolve();
    } catch (const std::exception& e) {
        std::cerr << "claimguard validate: " << e.what() << "\n";
        return 1;
    }
    if (print_config) std::cout << config::render_config(o) << "\n";
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

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"claimguard: a MySQL-protocol sidecar that makes stock claims safe without changing the app"};
    app.formatter(std::make_shared<help_formatter>());
    app.require_subcommand(1);
    app.set_version_flag("--version", "claimguard " CLAIMGUARD_VERSION, "Print the version and exit");

    settings_flags serve_flags, validate_flags;
    auto* serve_cmd = app.add_subcommand("serve", "Run the sidecar proxy");
    serve_flags.add_to(serve_cmd);
    auto* validate_cmd =
        app.add_subcommand("validate", "Check the config and the rules; non-zero exit with file:line on errors");
    validate_flags.add_to(validate_cmd);
    bool print_config = false;
    validate_cmd->add_flag("--print-config", print_config,
                           "Print the effective configuration (defaults < file < env < flags), secrets redacted");

    std::vector<std::string> lint_files;
    auto* lint_cmd = app.add_subcommand("lint", "Check rules files; exits non-zero on any error");
    lint_cmd->add_option("RULES", lint_files, "Rules files, or directories of *.yaml/*.yml (a mounted ConfigMap)")
        ->type_name("PATH|DIR")
        ->required();

    std::vector<std::string> ddl_files;
    std::vector<std::string> suggest_files;
    std::vector<std::string> suggest_digests;
    auto* suggest_cmd = app.add_subcommand(
        "suggest",
        "Draft a rules file from what the app sent: a general log or a .sql script of its statements, or "
        "a sidecar's /digests with watch_unlisted_tables on");
    auto* suggest_logs =
        suggest_cmd->add_option("LOG", suggest_files, "General log or script files (- for standard input)")
            ->type_name("PATH");
    auto* suggest_digests_opt =
        suggest_cmd
            ->add_option("--digests", suggest_digests,
                         "A saved GET /digests JSON (curl http://ADMIN/digests > FILE) of a sidecar with "
                         "watch_unlisted_tables on (repeatable: one per sidecar)")
            ->type_name("FILE");
    schema::check_options suggest_db;  // --backend: the claim tables' existing unique keys
    suggest_cmd
        ->add_option("--backend", suggest_db.backend,
                     "Read each claim table's UNIQUE indexes from this server (host:port) to name the "
                     "idempotency columns after an existing one")
        ->type_name("HOST:PORT");
    suggest_cmd->add_option("--user", suggest_db.user, "With --backend: the database user (as for check)");
    suggest_cmd->add_option("--password", suggest_db.password,
                            "With --backend: its password (default: CLAIMGUARD_CHECK_PASSWORD, then MYSQL_PWD)");
    suggest_cmd->add_option("--database", suggest_db.database,
                            "With --backend: the application's database (for tables named without a schema)");
    suggest_cmd->callback([suggest_logs, suggest_digests_opt] {
        if (suggest_logs->count() == 0 && suggest_digests_opt->count() == 0)
            throw CLI::RequiredError("LOG or --digests");
    });
    auto* ddl_cmd = app.add_subcommand("ddl", "Print the UNIQUE indexes that back each claim rule");
    ddl_cmd->add_option("RULES", ddl_files, "Rules files or directories")->type_name("PATH|DIR")->required();

    engine::explain_request explain_req;
    auto* explain_cmd = app.add_subcommand("explain", "Show what claimguard would do with a statement, or with each "
                                                      "statement of a file");
    // One file per --rules (repeat it for several): the statement after it is the SQL, not a file.
    explain_cmd->add_option("--rules", explain_req.rules_paths, "Rules files")->required()->allow_extra_args(false);
    explain_cmd->add_option("--read", explain_req.read_value, "Counter value this session read before");
    explain_cmd->add_option("--user", explain_req.user, "The database user sending it (trusted users pass untouched)");
    auto* explain_file = explain_cmd->add_option("--file", explain_req.file,
                                                 "A file of statements separated by ';' (- for standard input): one "
                                                 "summary row each");
    explain_cmd->add_option("--format", explain_req.format, "With --file: table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    explain_cmd->add_option("SQL", explain_req.sql, "The statement")->excludes(explain_file);

    schema::check_options check_opts;
    auto* check_cmd = schema::add_check_command(app, check_opts);

    inject::inject_options inject_opts;
    auto* inject_cmd = app.add_subcommand("inject", "Run the Kubernetes admission webhook that injects the sidecar");
    inject::add_inject_options(*inject_cmd, inject_opts);

    const config::proxy_options defaults;
    std::string shutdown_control = defaults.control.host + ":" + std::to_string(defaults.control.port);
    std::string shutdown_timeout = "5s";
    auto* shutdown_cmd = app.add_subcommand("shutdown", "Ask a running claimguard to shut down gracefully (preStop)");
    shutdown_cmd->add_option("--control", shutdown_control, "Its control endpoint (host:port, [v6]:port)")
        ->type_name("HOST:PORT")
        ->capture_default_str();
    shutdown_cmd->add_option("--timeout", shutdown_timeout, "Connect, send and read the answer within this")
        ->type_name("DURATION")
        ->capture_default_str();

    std::string override_control = shutdown_control;
    std::string override_timeout = "5s";
    std::string override_mode;
    auto* override_cmd = app.add_subcommand(
        "mode-override", "The kill switch: make every rule of a running claimguard observe (observe), or let the "
                         "rules files decide again (off), without a reload or a restart");
    override_cmd->add_option("MODE", override_mode, "observe or off")
        ->required()
        ->check(CLI::IsMember({"observe", "off"}));
    override_cmd->add_option("--control", override_control, "Its control endpoint (host:port, [v6]:port)")
        ->type_name("HOST:PORT")
        ->capture_default_str();
    override_cmd->add_option("--timeout", override_timeout, "Connect, send and read the answer within this")
        ->type_name("DURATION")
        ->capture_default_str();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);  // prints help, the version, or the error with a hint
        return rc == 0 ? 0 : usage_error;
    }

    if (*serve_cmd) {
        config::proxy_options options;
        try {
            options = serve_flags.resolve();
        } catch (const std::exception& e) {
            std::cerr << "claimguard: " << e.what() << "\n";
            return usage_error;
        }
        return session::run_server(options);
    }
    if (*validate_cmd) return validate_command(validate_flags, print_config);
    if (*lint_cmd) return rules_cli::lint(lint_files, std::cout, std::cerr);
    if (*ddl_cmd) return rules_cli::ddl(ddl_files, std::cout, std::cerr);
    if (*suggest_cmd) {
        rules_cli::unique_keys_lookup unique_keys;
        if (!suggest_db.backend.empty()) {
            try {
                unique_keys = schema::unique_index_lookup(suggest_db, [](const char* n) { return std::getenv(n); });
            } catch (const std::exception& e) {
                std::cerr << "claimguard suggest: --backend: " << e.what() << "\n";
                return usage_error;
            }
        }
        return rules_cli::suggest(suggest_files, suggest_digests, unique_keys, std::cout, std::cerr);
    }
    if (*explain_cmd) return engine::explain_command(explain_req, std::cout, std::cerr);
    // The control endpoint's clients: --timeout is a duration with its unit.
    const auto post_to_control = [](std::string_view command, const std::string& control, const std::string& path,
                                    const std::string& timeout_text) {
        std::chrono::milliseconds timeout;
        try {
            timeout = config::parse_duration(timeout_text);
        } catch (const std::exception& e) {
            std::cerr << "claimguard " << command << ": --timeout: " << e.what() << "\n";
            return usage_error;
        }
        return control_post(command, control, path, timeout, std::cout, std::cerr,
                            command == "shutdown" ? "claimguard is shutting down" : "");
    };
    if (*shutdown_cmd) return post_to_control("shutdown", shutdown_control, "/quitquitquit", shutdown_timeout);
    if (*override_cmd)
        return post_to_control("mode-override", override_control, "/-/mode-override/" + override_mode,
                               override_timeout);
    if (*check_cmd) return schema::run_check(check_opts, std::cout, std::cerr);
    if (*inject_cmd) return inject::run_inject(inject_opts);
    return 2;
}
