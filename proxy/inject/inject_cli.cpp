// `claimguard inject`: options, certificates, and the webhook's run loop with signal handling.
#include "proxy/inject/inject_cli.hpp"

#include "proxy/inject/self_signed.hpp"

#include "proxy/config/duration_flag.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <csignal>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace claimguard::inject {

namespace asio = boost::asio;

namespace {

struct listen_address {
    std::string host;
    std::uint16_t port = 0;
};

listen_address parse_listen(const std::string& text) {
    if (!validate_host_port(text)) throw std::invalid_argument(fmt::format("--listen \"{}\" is not host:port", text));
    const std::size_t colon = text.rfind(':');
    std::string host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    return {host, static_cast<std::uint16_t>(std::stoul(text.substr(colon + 1)))};
}

void write_ca_bundle(const std::string& where, const std::string& pem) {
    if (where == "-") {
        std::cout << pem << std::flush;
        return;
    }
    std::ofstream out(where, std::ios::binary | std::ios::trunc);
    if (!out || !(out << pem) || !out.flush())
        throw std::runtime_error(fmt::format("cannot write the CA bundle to {}", where));
}

}  // namespace

void add_inject_options(CLI::App& cmd, inject_options& o) {
    injection_config& s = o.injection;
    cmd.add_option("--listen", o.listen, "HTTPS address of the webhook (host:port)")->capture_default_str();
    cmd.add_option("--tls-cert", o.tls_cert_file, "Serving certificate chain (PEM), re-read when it changes");
    cmd.add_option("--tls-key", o.tls_key_file, "Serving key (PEM)");
    cmd.add_flag("--self-signed", o.self_signed, "Generate a CA and serving certificate at start-up");
    cmd.add_option("--dns-name", o.dns_names, "Self-signed SAN (repeatable); default: the service's names");
    cmd.add_option("--service", o.service, "The webhook's Service name (self-signed SANs)")->capture_default_str();
    cmd.add_option("--namespace", o.namespace_name, "The injector's namespace: never injected (env POD_NAMESPACE)")
        ->envname("POD_NAMESPACE");
    cmd.add_option("--ca-bundle-out", o.ca_bundle_out, "Where the self-signed CA goes: a file or '-'")
        ->capture_default_str();
    cmd.add_option("--k8s-version", o.k8s_version, "Cluster version, e.g. 1.29: >= 1.29 gets a native sidecar")
        ->required();
    cmd.add_option("--log-level", o.log_level, "trace, debug, info, warn, error")->capture_default_str();
    cmd.add_option("--max-connections", o.max_connections, "HTTPS connections at once")->capture_default_str();
    cmd.add_option("--body-limit-bytes", o.body_limit, "Largest AdmissionReview accepted")->capture_default_str();
    config::add_duration_flag(cmd, "--request-timeout", o.request_timeout, "Read or write one request");
    config::add_duration_flag(cmd, "--tls-reload-interval", o.tls_reload_interval,
                              "How often the certificate files are re-read (0s: on every connection)");
    config::add_duration_flag(cmd, "--shutdown-delay", o.shutdown_delay, "Keep answering this long after SIGTERM");

    cmd.add_option("--image", s.image, "The sidecar image")->capture_default_str();
    cmd.add_option("--image-pull-policy", s.image_pull_policy, "Always, IfNotPresent or Never")->capture_default_str();
    cmd.add_option("--default-backend", s.default_backend,
                   "Backend (host:port) for pods without claimguard.io/backend");
    cmd.add_option("--default-redis", s.default_redis, "Redis (host:port) for pods without claimguard.io/redis");
    cmd.add_option("--default-rules-configmap", s.default_rules_configmap,
                   "Rules ConfigMap for pods without claimguard.io/rules-configmap");
    cmd.add_option("--exclude-namespace", s.excluded_namespaces, "Never inject in this namespace (repeatable)")
        ->capture_default_str();
    cmd.add_option("--sidecar-listen-port", s.listen_port, "Port the app connects to on 127.0.0.1")
        ->capture_default_str();
    cmd.add_option("--sidecar-admin-address", s.admin_address, "The sidecar's admin address (probed by the kubelet)")
        ->capture_default_str();
    cmd.add_option("--sidecar-admin-port", s.admin_port, "The sidecar's admin port")->capture_default_str();
    cmd.add_option("--sidecar-control-port", s.control_port,
                   "The sidecar's control port on 127.0.0.1 (/quitquitquit for the preStop hook, /-/reload)")
        ->capture_default_str();
    cmd.add_option("--rules-mount-path", s.rules_mount_path, "Where the rules ConfigMap is mounted")
        ->capture_default_str();
    cmd.add_option("--cpu-request", s.resources.cpu_request, "Sidecar CPU request ('' for none)")
        ->capture_default_str();
    cmd.add_option("--memory-request", s.resources.memory_request, "Sidecar memory request")->capture_default_str();
    cmd.add_option("--cpu-limit", s.resources.cpu_limit, "Sidecar CPU limit ('' for none)")->capture_default_str();
    cmd.add_option("--memory-limit", s.resources.memory_limit, "Sidecar memory limit")->capture_default_str();
    cmd.add_option("--run-as-user", s.run_as_user, "Sidecar user and group id")->capture_default_str();
    cmd.add_option("--sidecar-arg", s.extra_args,
                   "Extra `claimguard serve` argument (repeatable; use --sidecar-arg=--flag)");
    cmd.add_option(
        "--sidecar-unix-socket", s.unix_socket,
        "Also listen on this unix socket; an emptyDir at its directory in the sidecar and every app container");
    cmd.add_option("--sidecar-env", o.sidecar_env, "NAME=VALUE in the sidecar's environment (repeatable)");
    cmd.add_option("--schema-check-secret", s.schema_check_secret,
                   "Secret (in the pod's namespace) with the schema check's user and password, passed as env");
    cmd.add_option("--schema-check-user-key", s.schema_check_user_key, "Its key holding the user")
        ->capture_default_str();
    cmd.add_option("--schema-check-password-key", s.schema_check_password_key, "Its key holding the password")
        ->capture_default_str();
    cmd.add_flag("--hold-application", s.hold_application,
                 "Plain sidecars: first in the pod with a postStart hook that waits for /startup");
    cmd.add_flag("--scrape-annotations", s.scrape_annotations, "Add prometheus.io/scrape, port and path annotations");
    cmd.add_flag("--sidecar-label", s.sidecar_label, "Label injected pods claimguard.io/sidecar=true (PodMonitor)");
    cmd.add_flag("--redis-cluster", s.redis.cluster, "The Redis host:port list are Redis Cluster seeds");
    cmd.add_option("--redis-user", s.redis.user, "Redis ACL user");
    cmd.add_option("--redis-password-secret", s.redis.password_secret,
                   "Secret (in the pod's namespace) with the Redis password, mounted as a file");
    cmd.add_option("--redis-password-key", s.redis.password_key, "Its key")->capture_default_str();
    cmd.add_flag("--redis-tls", s.redis.tls, "Speak TLS to Redis");
    cmd.add_option("--redis-tls-verify", s.redis.tls_verify, "Verify the Redis certificate")->capture_default_str();
    cmd.add_option("--redis-tls-server-name", s.redis.tls_server_name, "Expected Redis certificate name");
    cmd.add_option("--redis-tls-secret", s.redis.tls_secret, "Secret with ca.crt (and tls.crt, tls.key)");
    cmd.add_flag("--redis-tls-client-certificate", s.redis.tls_client_certificate,
                 "Also present tls.crt and tls.key from that Secret");
}

injection_config make_injection_config(const inject_options& o) {
    injection_config c = o.injection;
    for (const auto& e : o.sidecar_env) {
        const auto eq = e.find('=');
        if (eq == std::string::npos)
            throw std::invalid_argument(fmt::format("--sidecar-env \"{}\": expected NAME=VALUE", e));
        c.env.push_back({e.substr(0, eq), e.substr(eq + 1)});
    }
    auto version = parse_k8s_version(o.k8s_version);
    if (!version)
        throw std::invalid_argument(fmt::format("--k8s-version \"{}\": {}", o.k8s_version, version.error().message()));
    c.cluster_version = *version;
    if (!o.namespace_name.empty()) {
        auto& excluded = c.excluded_namespaces;
        if (std::find(excluded.begin(), excluded.end(), o.namespace_name) == excluded.end())
            excluded.push_back(o.namespace_name);
    }
    validate(c);
    return c;
}

webhook_options make_webhook_options(const inject_options& o) {
    webhook_options w;
    const listen_address listen = parse_listen(o.listen);
    w.address = listen.host;
    w.port = listen.port;
    w.injection = make_injection_config(o);
    w.max_connections = o.max_connections;
    w.body_limit = o.body_limit;
    w.request_timeout = o.request_timeout;
    w.tls_reload_interval = o.tls_reload_interval;

    if (o.self_signed) {
        if (!o.tls_cert_file.empty() || !o.tls_key_file.empty())
            throw std::invalid_argument("--self-signed and --tls-cert/--tls-key exclude each other");
        std::vector<std::string> names = o.dns_names;
        if (names.empty()) {
            if (o.namespace_name.empty())
                throw std::invalid_argument("--self-signed needs --dns-name or --namespace (for the service's names)");
            names = service_dns_names(o.service, o.namespace_name);
        }
        tls_material material = generate_self_signed(names);
        write_ca_bundle(o.ca_bundle_out, material.ca_pem);
        w.tls.cert_chain_pem = std::move(material.cert_chain_pem);
        w.tls.key_pem = std::move(material.key_pem);
    } else {
        if (o.tls_cert_file.empty() || o.tls_key_file.empty())
            throw std::invalid_argument("give --tls-cert and --tls-key (cert-manager's files), or --self-signed");
        w.tls.cert_file = o.tls_cert_file;
        w.tls.key_file = o.tls_key_file;
    }
    return w;
}

int run_inject(const inject_options& options) {
    spdlog::set_level(spdlog::level::from_str(options.log_level));
    webhook_options w;
    try {
        w = make_webhook_options(options);
    } catch (const std::exception& e) {
        std::cerr << "claimguard inject: " << e.what() << "\n";
        return 2;
    }
    const bool native = w.injection.cluster_version >= native_sidecar_version;

    asio::io_context io;
    webhook_server server(io, w);
    try {
        server.start();
    } catch (const std::exception& e) {
        std::cerr << "claimguard inject: " << e.what() << "\n";
        return 2;
    }
    spdlog::info("inject: webhook listening on https://{}:{} (image {}, {} sidecars)", w.address, server.port(),
                 w.injection.image, native ? "native" : "plain");

    asio::signal_set signals(io, SIGINT, SIGTERM);
    asio::steady_timer delay(io);
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        spdlog::info("inject: signal {}: stopping in {}", signal, duration::format(options.shutdown_delay));
        delay.expires_after(options.shutdown_delay);
        delay.async_wait([&](const boost::system::error_code&) {
            server.stop();
            signals.cancel();
        });
        // A second signal stops at once.
        signals.async_wait([&](const boost::system::error_code& again, int) {
            if (!again) delay.cancel();
        });
    });
    io.run();
    const webhook_counters c = server.counters();
    spdlog::info("inject: stopped after {} reviews ({} injected, {} refused, {} bad requests)", c.reviews, c.injected,
                 c.refused, c.bad_requests);
    return 0;
}

}  // namespace claimguard::inject
