// The `serve` settings table and its three sources: YAML file, environment, flags.
#include "settings.hpp"

#include <yaml-cpp/yaml.h>

#include <arpa/inet.h>
#include <sys/un.h>

#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <map>

#include "rules/model/duration.hpp"

namespace claimguard::config {

namespace {

using namespace std::chrono_literals;

std::uint64_t parse_count(std::string_view text, std::uint64_t max) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) throw std::invalid_argument("expected a whole number");
    if (v > max) throw std::invalid_argument(fmt::format("must be at most {}", max));
    return v;
}

bool parse_bool(std::string_view text) {
    if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "0" || text == "no" || text == "off") return false;
    throw std::invalid_argument("expected true or false");
}

std::string one_of(std::string_view text, std::initializer_list<std::string_view> allowed) {
    for (auto a : allowed)
        if (text == a) return std::string(text);
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw std::invalid_argument("expected one of: " + list);
}

std::string show_duration(std::chrono::milliseconds d) { return duration::format(d); }

// Whole seconds for the session timeouts: 0 means "never", so a sub-second value is refused
// rather than silently turned into "never".
std::chrono::seconds parse_whole_seconds(std::string_view text) {
    using namespace std::chrono_literals;
    auto d = parse_duration(text);
    if (d.count() % 1000 != 0) throw std::invalid_argument("must be whole seconds (0 = never), e.g. 30s");
    return std::chrono::duration_cast<std::chrono::seconds>(d);
}

constexpr std::size_t max_keepalive_count = 127;              // Linux's TCP_KEEPCNT ceiling
constexpr std::chrono::seconds max_keepalive_seconds{32767};  // Linux's TCP_KEEPIDLE / TCP_KEEPINTVL ceiling

// Keepalive times: whole seconds (the socket options count seconds), within Linux's limits.
std::chrono::seconds parse_keepalive_seconds(std::string_view text, bool zero_allowed) {
    auto s = parse_whole_seconds(text);
    if (s.count() == 0 && !zero_allowed) throw std::invalid_argument("must be at least 1s");
    if (s > max_keepalive_seconds) throw std::invalid_argument("must be at most 32767s");
    return s;
}

std::string show_endpoint(const endpoint& e) { return e.host + ":" + std::to_string(e.port); }

constexpr std::size_t max_threads = 256;
// watch_unlisted_tables: /digests keeps at most max_statement_digests shapes in all anyway.
constexpr std::size_t max_watched_unlisted_tables = 1024;
constexpr std::size_t max_unix_path_bytes = sizeof(sockaddr_un::sun_path) - 1;  // 107 on Linux
constexpr std::size_t max_connections_limit = 1'000'000;
constexpr std::size_t max_packet_limit = 1u << 30;  // MySQL's own max_allowed_packet ceiling (1 GiB)

std::vector<setting> make_settings() {
    using o = proxy_options;
    std::vector<setting> s;
    auto add = [&](std::string_view name, std::string_view help, auto set, auto show, bool repeatable = false) {
        s.push_back({name, help, repeatable, set, show, "TEXT", "", false});
    };
    add(
        "listen", "Address the app connects to (host:port)",
        [](o& x, std::string_view v) { x.listen = parse_endpoint(std::string(v)); },
        [](const o& x) { return show_endpoint(x.listen); });
    add(
        "listen_unix", "Also listen on this unix socket path (apps in the pod, over a shared volume); empty: off",
        [](o& x, std::string_view v) {
            if (v.size() > max_unix_path_bytes)
                throw std::invalid_argument(fmt::format("a unix socket path is at most {} bytes", max_unix_path_bytes));
            x.listen_unix = v;
        },
        [](const o& x) { return x.listen_unix; });
    add(
        "backend", "The MySQL/MariaDB server (host:port); required",
        [](o& x, std::string_view v) { x.backend = parse_endpoint(std::string(v)); },
        [](const o& x) { return x.backend.host.empty() ? std::string() : show_endpoint(x.backend); });
    add(
        "admin", "Read-only HTTP endpoint: probes, /metrics, /rules (host:port, or off)",
        [](o& x, std::string_view v) {
            x.admin_enabled = v != "off";
            if (x.admin_enabled) x.admin = parse_endpoint(std::string(v));
        },
        [](const o& x) { return x.admin_enabled ? show_endpoint(x.admin) : std::string("off"); });
    add(
        "control", "Control HTTP endpoint: POST /quitquitquit and POST /-/reload (host:port, or off); loopback only",
        [](o& x, std::string_view v) {
            x.control_enabled = v != "off";
            if (x.control_enabled) x.control = parse_endpoint(std::string(v));
        },
        [](const o& x) { return x.control_enabled ? show_endpoint(x.control) : std::string("off"); });
    add(
        "control_allow_non_loopback",
        "Let the control endpoint bind a non-loopback address (anyone who reaches it can stop the sidecar)",
        [](o& x, std::string_view v) { x.control_allow_non_loopback = parse_bool(v); },
        [](const o& x) { return std::string(x.control_allow_non_loopback ? "true" : "false"); });
    add(
        "threads", "I/O threads (0: one per core of the node)",
        [](o& x, std::string_view v) { x.threads = static_cast<unsigned>(parse_count(v, max_threads)); },
        [](const o& x) { return std::to_string(x.threads); });
    add(
        "rules", "Rules files (repeatable)", [](o& x, std::string_view v) { x.rules_files.emplace_back(v); },
        [](const o& x) {
            std::string out;
            for (const auto& f : x.rules_files) out += (out.empty() ? "" : ",") + f;
            return out;
        },
        true);
    add(
        "rules_dir", "A directory of rules files (*.yaml, *.yml), e.g. a mounted ConfigMap",
        [](o& x, std::string_view v) { x.rules_dir = v; }, [](const o& x) { return x.rules_dir; });
    add(
        "watch_rules", "Reload the rules when their files or directory change",
        [](o& x, std::string_view v) { x.watch_rules = parse_bool(v); },
        [](const o& x) { return std::string(x.watch_rules ? "true" : "false"); });
    add(
        "mode_override",
        "observe: every rule observes, whatever the rules files say (the kill switch; also POST "
        "/-/mode-override/observe on the control endpoint); off: the files decide",
        [](o& x, std::string_view v) { x.observe_override = one_of(v, {"off", "observe"}) == "observe"; },
        [](const o& x) { return std::string(x.observe_override ? "observe" : "off"); });
    add(
        "watch_unlisted_tables",
        "Also watch this many tables no rule names: their read-then-write shapes show in /digests as "
        "unlisted:<db>.<table>, for claimguard suggest --digests (0: off; forwarded untouched either way)",
        [](o& x, std::string_view v) { x.watch_unlisted_tables = parse_count(v, max_watched_unlisted_tables); },
        [](const o& x) { return std::to_string(x.watch_unlisted_tables); });
    // --- Redis (issue 12): kept together ---------------------------------------------------------
    add(
        "redis",
        "Redis for the claim rules' first filter: host:port, or a cluster's seed nodes "
        "host:port,host:port; off: the database guard alone",
        [](o& x, std::string_view v) {
            x.redis.clear();
            if (v.empty() || v == "off") return;
            while (!v.empty()) {
                auto comma = v.find(',');
                auto item = v.substr(0, comma);
                if (!item.empty()) x.redis.push_back(parse_endpoint(std::string(item)));
                v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
            }
        },
        [](const o& x) {
            std::string out;
            for (const auto& e : x.redis) out += (out.empty() ? "" : ",") + show_endpoint(e);
            return out.empty() ? std::string("off") : out;
        });
    add(
        "redis_timeout", "The Redis step of a claim (redirects included); then fail open to the database guard",
        [](o& x, std::string_view v) { x.redis_timeout = parse_duration(v); },
        [](const o& x) { return show_duration(x.redis_timeout); });
    add(
        "redis_cluster", "The redis nodes are Redis Cluster seeds: route by key slot, follow MOVED/ASK",
        [](o& x, std::string_view v) { x.redis_cluster = parse_bool(v); },
        [](const o& x) { return std::string(x.redis_cluster ? "true" : "false"); });
    add(
        "redis_user", "ACL user for AUTH user password; empty: AUTH password (requirepass)",
        [](o& x, std::string_view v) { x.redis_user = v; }, [](const o& x) { return x.redis_user; });
    add(
        "redis_password_file", "File whose first line is the Redis password (or set CLAIMGUARD_REDIS_PASSWORD)",
        [](o& x, std::string_view v) { x.redis_password_file = v; }, [](const o& x) { return x.redis_password_file; });
    add(
        "redis_tls", "Speak TLS to Redis", [](o& x, std::string_view v) { x.redis_tls = parse_bool(v); },
        [](const o& x) { return std::string(x.redis_tls ? "true" : "false"); });
    add(
        "redis_tls_verify", "Verify the Redis certificate chain and name (off only for tests)",
        [](o& x, std::string_view v) { x.redis_tls_verify = parse_bool(v); },
        [](const o& x) { return std::string(x.redis_tls_verify ? "true" : "false"); });
    add(
        "redis_tls_ca", "CA bundle for the Redis certificates (default: system CAs)",
        [](o& x, std::string_view v) { x.redis_tls_ca = v; }, [](const o& x) { return x.redis_tls_ca; });
    add(
        "redis_tls_cert", "Client certificate for Redis (tls-auth-clients), with redis_tls_key",
        [](o& x, std::string_view v) { x.redis_tls_cert = v; }, [](const o& x) { return x.redis_tls_cert; });
    add(
        "redis_tls_key", "Its private key", [](o& x, std::string_view v) { x.redis_tls_key = v; },
        [](const o& x) { return x.redis_tls_key; });
    add(
        "redis_tls_server_name", "Expected certificate name and SNI (default: each node's host)",
        [](o& x, std::string_view v) { x.redis_tls_server_name = v; },
        [](const o& x) { return x.redis_tls_server_name; });
    // --- end of Redis -------------------------------------------------------------------------------
    add(
        "audit_log",
        "Audit log of interventions: '-' (standard output; the text log stays on standard error), 'off', or a "
        "file (reopened on SIGUSR1)",
        [](o& x, std::string_view v) { x.audit_log = v; }, [](const o& x) { return x.audit_log; });
    add(
        "max_connections", "Client connections at once; beyond, ERR 1040",
        [](o& x, std::string_view v) { x.max_connections = parse_count(v, max_connections_limit); },
        [](const o& x) { return std::to_string(x.max_connections); });
    add(
        "max_packet_bytes", "Largest packet relayed in either direction; beyond, ERR 1153",
        [](o& x, std::string_view v) { x.max_packet_bytes = parse_count(v, max_packet_limit); },
        [](const o& x) { return std::to_string(x.max_packet_bytes); });
    add(
        "connect_timeout", "Backend connect and handshake",
        [](o& x, std::string_view v) { x.connect_timeout = parse_duration(v); },
        [](const o& x) { return show_duration(x.connect_timeout); });
    add(
        "idle_timeout", "Close client connections silent this long between commands (0: never)",
        [](o& x, std::string_view v) { x.idle_timeout = parse_whole_seconds(v); },
        [](const o& x) { return show_duration(x.idle_timeout); });
    add(
        "packet_timeout", "A client packet once started must arrive within this",
        [](o& x, std::string_view v) { x.packet_timeout = parse_whole_seconds(v); },
        [](const o& x) { return show_duration(x.packet_timeout); });
    add(
        "backend_keepalive_idle", "TCP keepalive on backend sockets: first probe after this idle (0: kernel default)",
        [](o& x, std::string_view v) { x.backend_keepalive_idle = parse_keepalive_seconds(v, true); },
        [](const o& x) { return show_duration(x.backend_keepalive_idle); });
    add(
        "backend_keepalive_interval", "Between unanswered keepalive probes",
        [](o& x, std::string_view v) { x.backend_keepalive_interval = parse_keepalive_seconds(v, false); },
        [](const o& x) { return show_duration(x.backend_keepalive_interval); });
    add(
        "backend_keepalive_count", "Unanswered keepalive probes before the link counts as dead",
        [](o& x, std::string_view v) {
            auto n = parse_count(v, max_keepalive_count);
            if (n == 0) throw std::invalid_argument("must be at least 1");
            x.backend_keepalive_count = static_cast<unsigned>(n);
        },
        [](const o& x) { return std::to_string(x.backend_keepalive_count); });
    add(
        "orphan_kill",
        "A backend link lost inside a transaction: end it with KILL CONNECTION from the user's next connection",
        [](o& x, std::string_view v) { x.orphan_kill = parse_bool(v); },
        [](const o& x) { return std::string(x.orphan_kill ? "true" : "false"); });
    add(
        "orphan_kill_deadline", "An orphaned transaction not killed within this is given up",
        [](o& x, std::string_view v) {
            x.orphan_kill_deadline = parse_whole_seconds(v);
            if (x.orphan_kill_deadline.count() == 0) throw std::invalid_argument("must be at least 1s");
        },
        [](const o& x) { return show_duration(x.orphan_kill_deadline); });
    add(
        "backend_tls", "Speak TLS to the database (SSLRequest)",
        [](o& x, std::string_view v) { x.backend_tls.enabled = parse_bool(v); },
        [](const o& x) { return std::string(x.backend_tls.enabled ? "true" : "false"); });
    add(
        "backend_tls_verify", "Verify the database certificate and host name (--no-backend-tls-verify: only for tests)",
        [](o& x, std::string_view v) { x.backend_tls.verify = parse_bool(v); },
        [](const o& x) { return std::string(x.backend_tls.verify ? "true" : "false"); });
    add(
        "backend_tls_ca", "CA bundle for the database certificate (default: system CAs)",
        [](o& x, std::string_view v) { x.backend_tls.ca_file = v; }, [](const o& x) { return x.backend_tls.ca_file; });
    add(
        "backend_tls_server_name", "Expected certificate name (default: the backend host)",
        [](o& x, std::string_view v) { x.backend_tls.server_name = v; },
        [](const o& x) { return x.backend_tls.server_name; });
    add(
        "min_shutdown_delay", "After SIGTERM, keep accepting new connections this long",
        [](o& x, std::string_view v) { x.min_shutdown_delay = parse_duration(v); },
        [](const o& x) { return show_duration(x.min_shutdown_delay); });
    add(
        "max_shutdown_delay", "After SIGTERM, give open sessions up to this to finish",
        [](o& x, std::string_view v) { x.max_shutdown_delay = parse_duration(v); },
        [](const o& x) { return show_duration(x.max_shutdown_delay); });
    add(
        "log_level", "trace, debug, info, warn, error",
        [](o& x, std::string_view v) {
            x.log_level = one_of(v, {"trace", "debug", "info", "warn", "error"});
        },
        [](const o& x) { return x.log_level; });
    add(
        "log_format", "text or json (one JSON object per line)",
        [](o& x, std::string_view v) {
            x.log_format = one_of(v, {"text", "json"});
        },
        [](const o& x) { return x.log_format; });
    add(
        "schema_check",
        "Check the rules against the database (tables, columns, unique indexes, database code): off, warn, refuse",
        [](o& x, std::string_view v) {
            x.schema_check = one_of(v, {"off", "warn", "refuse"});
        },
        [](const o& x) { return x.schema_check; });
    add(
        "schema_check_user", "Database user for the schema check (without it, the check does not run)",
        [](o& x, std::string_view v) { x.schema_check_user = v; }, [](const o& x) { return x.schema_check_user; });
    add(
        "schema_check_password", "Its password (prefer the environment variable)",
        [](o& x, std::string_view v) { x.schema_check_password = v; },
        [](const o& x) { return x.schema_check_password.empty() ? std::string() : std::string("(set)"); });
    s.back().secret = true;
    add(
        "schema_check_database", "Database the rules' tables live in, when the rules do not say",
        [](o& x, std::string_view v) { x.schema_check_database = v; },
        [](const o& x) { return x.schema_check_database; });
    return s;
}

struct presentation {
    std::string_view type;
    std::string_view group;
};

// What --help shows for each setting: its type (with the unit) and its section.
const std::map<std::string_view, presentation>& presentations() {
    static const std::map<std::string_view, presentation> p = {
        {"listen", {"HOST:PORT", "Listeners"}},
        {"listen_unix", {"PATH", "Listeners"}},
        {"backend", {"HOST:PORT", "Listeners"}},
        {"admin", {"HOST:PORT|off", "Listeners"}},
        {"control", {"HOST:PORT|off", "Listeners"}},
        {"control_allow_non_loopback", {"BOOL", "Listeners"}},
        {"threads", {"COUNT", "Listeners"}},
        {"rules", {"PATH", "Rules"}},
        {"rules_dir", {"DIR", "Rules"}},
        {"watch_rules", {"BOOL", "Rules"}},
        {"mode_override", {"off|observe", "Rules"}},
        {"watch_unlisted_tables", {"COUNT", "Rules"}},
        {"audit_log", {"-|off|PATH", "Logging"}},
        {"redis", {"HOST:PORT[,...]|off", "Redis"}},
        {"redis_timeout", {"DURATION", "Redis"}},
        {"redis_cluster", {"BOOL", "Redis"}},
        {"redis_user", {"NAME", "Redis"}},
        {"redis_password_file", {"PATH", "Redis"}},
        {"redis_tls", {"BOOL", "Redis"}},
        {"redis_tls_verify", {"BOOL", "Redis"}},
        {"redis_tls_ca", {"PATH", "Redis"}},
        {"redis_tls_cert", {"PATH", "Redis"}},
        {"redis_tls_key", {"PATH", "Redis"}},
        {"redis_tls_server_name", {"NAME", "Redis"}},
        {"max_connections", {"COUNT", "Limits and timeouts"}},
        {"max_packet_bytes", {"BYTES", "Limits and timeouts"}},
        {"connect_timeout", {"DURATION", "Limits and timeouts"}},
        {"idle_timeout", {"DURATION (whole s)", "Limits and timeouts"}},
        {"packet_timeout", {"DURATION (whole s)", "Limits and timeouts"}},
        {"backend_keepalive_idle", {"DURATION (whole s)", "Limits and timeouts"}},
        {"backend_keepalive_interval", {"DURATION (whole s)", "Limits and timeouts"}},
        {"backend_keepalive_count", {"COUNT", "Limits and timeouts"}},
        {"orphan_kill", {"BOOL", "Limits and timeouts"}},
        {"orphan_kill_deadline", {"DURATION (whole s)", "Limits and timeouts"}},
        {"backend_tls", {"BOOL", "Backend TLS"}},
        {"backend_tls_verify", {"BOOL", "Backend TLS"}},
        {"backend_tls_ca", {"PATH", "Backend TLS"}},
        {"backend_tls_server_name", {"NAME", "Backend TLS"}},
        {"min_shutdown_delay", {"DURATION", "Shutdown"}},
        {"max_shutdown_delay", {"DURATION", "Shutdown"}},
        {"log_level", {"trace|debug|info|warn|error", "Logging"}},
        {"log_format", {"text|json", "Logging"}},
        {"schema_check", {"off|warn|refuse", "Schema check"}},
        {"schema_check_user", {"NAME", "Schema check"}},
        {"schema_check_password", {"TEXT", "Schema check"}},
        {"schema_check_database", {"NAME", "Schema check"}},
    };
    return p;
}

std::vector<setting> presented(std::vector<setting> s) {
    for (auto& x : s) {
        auto it = presentations().find(x.name);
        if (it == presentations().end()) throw std::logic_error("setting without a type: " + std::string(x.name));
        x.type = it->second.type;
        x.group = it->second.group;
    }
    return s;
}

const setting* find_setting(std::string_view name) {
    for (const auto& s : serve_settings())
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace

const std::vector<setting>& serve_settings() {
    static const std::vector<setting> settings = presented(make_settings());
    return settings;
}

std::string flag_name(std::string_view name) {
    std::string f(name);
    for (auto& c : f)
        if (c == '_') c = '-';
    return f;
}

std::string env_name(std::string_view name) {
    std::string e = "CLAIMGUARD_";
    for (char c : name) e += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    return e;
}

std::chrono::milliseconds parse_duration(std::string_view text) {
    const auto parsed = duration::parse(text);
    if (!parsed.value) throw std::invalid_argument(duration::describe(parsed, text));
    return *parsed.value;
}

bool is_loopback_host(std::string_view host) {
    if (host == "localhost") return true;
    const std::string h(host);
    in_addr v4{};
    if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
    return false;
}

std::string render_config(const proxy_options& options) {
    std::string out = "# claimguard: the effective configuration (defaults < config file < environment < flags)\n";
    std::vector<std::string_view> groups;  // in the order they first appear, as in --help
    for (const auto& s : serve_settings())
        if (std::find(groups.begin(), groups.end(), s.group) == groups.end()) groups.push_back(s.group);
    for (auto group : groups) {
        out += fmt::format("\n# {}\n", group);
        for (const auto& s : serve_settings()) {
            if (s.group != group) continue;
            auto value = s.show(options);
            if (s.secret) {
                out += fmt::format("# {}: {}\n", s.name, value.empty() ? "(not set)" : "(redacted)");
                continue;
            }
            if (s.repeatable) {
                out += fmt::format("{}:", s.name);
                if (value.empty())
                    out += " []\n";
                else {
                    out += "\n";
                    for (const auto& f : options.rules_files) out += fmt::format("  - {}\n", YAML::Dump(YAML::Node(f)));
                }
                continue;
            }
            out += fmt::format("{}: {}\n", s.name, value.empty() ? std::string("\"\"") : YAML::Dump(YAML::Node(value)));
        }
    }
    out += fmt::format("# Redis password ({} or redis_password_file): {}\n", redis_password_env,
                       options.redis_password.empty() ? "(not set)" : "(redacted)");
    return out;
}

void apply_setting(proxy_options& options, std::string_view name, const std::vector<std::string>& values,
                   std::string_view source) {
    const setting* s = find_setting(name);
    if (!s) throw config_error(fmt::format("{}: unknown setting '{}'", source, name));
    if (s->repeatable) {
        options.rules_files.clear();  // a later source replaces the list, it does not append
    } else if (values.size() != 1) {
        throw config_error(fmt::format("{}: '{}' takes one value", source, name));
    }
    for (const auto& v : values) {
        try {
            s->set(options, v);
        } catch (const std::invalid_argument& e) {
            throw config_error(fmt::format("{}: {}: {}", source, name, e.what()));
        }
    }
}

void apply_config_file(const std::string& path, proxy_options& options) {
    YAML::Node root;
    try {
        root = YAML::LoadFile(path);
    } catch (const YAML::BadFile&) {
        throw config_error(path + ": cannot read the config file");
    } catch (const YAML::Exception& e) {
        throw config_error(fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
    }
    if (root.IsNull()) return;
    if (!root.IsMap()) throw config_error(path + ":1:1: the config file must be a mapping of setting: value");
    for (const auto& kv : root) {
        auto mark = kv.first.Mark();
        auto where = fmt::format("{}:{}:{}", path, mark.line + 1, mark.column + 1);
        auto key = kv.first.as<std::string>();
        std::vector<std::string> values;
        const auto& v = kv.second;
        if (v.IsSequence()) {
            for (const auto& item : v) {
                if (!item.IsScalar()) throw config_error(where + ": " + key + ": list items must be plain values");
                values.push_back(item.as<std::string>());
            }
        } else if (v.IsScalar()) {
            values.push_back(v.as<std::string>());
        } else if (v.IsNull()) {
            values.emplace_back();
        } else {
            throw config_error(where + ": " + key + ": expected a value, not a mapping");
        }
        const setting* s = find_setting(key);
        if (!s)
            throw config_error(
                fmt::format("{}: unknown setting '{}' (see config/claimguard.example.yaml)", where, key));
        if (v.IsSequence() && !s->repeatable) throw config_error(where + ": " + key + " takes one value, not a list");
        apply_setting(options, key, values, where);
    }
}

void apply_environment(proxy_options& options, const std::function<const char*(const char*)>& getenv) {
    for (const auto& s : serve_settings()) {
        auto name = env_name(s.name);
        const char* value = getenv(name.c_str());
        if (!value) continue;
        std::vector<std::string> values;
        std::string_view text(value);
        if (s.repeatable) {
            while (!text.empty()) {
                auto comma = text.find(',');
                values.emplace_back(text.substr(0, comma));
                text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
            }
        } else {
            values.emplace_back(text);
        }
        apply_setting(options, s.name, values, name);
    }
    // A secret, so an environment variable only: never a flag or a config file key (issue 12).
    if (const char* password = getenv(redis_password_env)) options.redis_password = password;
}

void validate(const proxy_options& options) {
    if (options.backend.host.empty())
        throw config_error(
            "backend is required: --backend host:port, CLAIMGUARD_BACKEND or 'backend:' in the config file");
    if (options.control_enabled && !options.control_allow_non_loopback && !is_loopback_host(options.control.host))
        throw config_error("control " + show_endpoint(options.control) +
                           " is not a loopback address: POST /quitquitquit and /-/reload would be open to the network; "
                           "bind 127.0.0.1 or ::1, or set control_allow_non_loopback");
    if (options.control_enabled && options.admin_enabled && options.control.port != 0 &&
        options.control.port == options.admin.port && options.control.host == options.admin.host)
        throw config_error("control and admin must be different addresses");
    if (options.max_connections == 0) throw config_error("max_connections must be at least 1");
    if (options.max_packet_bytes < 1024) throw config_error("max_packet_bytes must be at least 1024");
    if (options.min_shutdown_delay > options.max_shutdown_delay)
        throw config_error("min_shutdown_delay must not exceed max_shutdown_delay");
    if (options.redis_cluster && options.redis.empty()) throw config_error("redis_cluster needs redis seed nodes");
    if (!options.redis_cluster && options.redis.size() > 1)
        throw config_error("redis lists several nodes: set redis_cluster: true for a Redis Cluster");
    if (!options.redis_password.empty() && !options.redis_password_file.empty())
        throw config_error(std::string(redis_password_env) + " and redis_password_file are both set: use one");
    if (options.redis_tls_cert.empty() != options.redis_tls_key.empty())
        throw config_error("redis_tls_cert and redis_tls_key go together");
    if (!options.redis_tls && (!options.redis_tls_ca.empty() || !options.redis_tls_cert.empty()))
        throw config_error("redis_tls_ca / redis_tls_cert need redis_tls: true");
}

}  // namespace claimguard::config
