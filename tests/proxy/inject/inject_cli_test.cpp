// Tests of `claimguard inject`'s options: flag parsing into the options, and their checks.
#include "proxy/inject/inject_cli.hpp"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace claimguard::inject {
namespace {

// Parses `args` (after the program name) as the `inject` subcommand would.
inject_options parse(std::vector<std::string> args) {
    CLI::App app{"test"};
    inject_options o;
    add_inject_options(app, o);
    std::vector<const char*> argv{"claimguard-inject"};
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return o;
}

TEST(inject_cli, flags_fill_the_options) {
    const inject_options o = parse({"--k8s-version",
                                    "v1.30.1",
                                    "--listen",
                                    "0.0.0.0:9443",
                                    "--tls-cert",
                                    "/certs/tls.crt",
                                    "--tls-key",
                                    "/certs/tls.key",
                                    "--image",
                                    "registry.example/claimguard:1.2.3",
                                    "--default-backend",
                                    "mysql:3306",
                                    "--default-rules-configmap",
                                    "rules",
                                    "--exclude-namespace",
                                    "kube-system",
                                    "--exclude-namespace",
                                    "monitoring",
                                    "--sidecar-arg=--min-shutdown-delay=5s",
                                    "--sidecar-arg=--log-level=debug",
                                    "--cpu-limit",
                                    "1",
                                    "--namespace",
                                    "claimguard-system"});
    EXPECT_EQ(o.k8s_version, "v1.30.1");
    EXPECT_EQ(o.listen, "0.0.0.0:9443");
    EXPECT_EQ(o.injection.image, "registry.example/claimguard:1.2.3");
    EXPECT_EQ(o.injection.default_backend, "mysql:3306");
    EXPECT_EQ(o.injection.excluded_namespaces, (std::vector<std::string>{"kube-system", "monitoring"}));
    EXPECT_EQ(o.injection.extra_args, (std::vector<std::string>{"--min-shutdown-delay=5s", "--log-level=debug"}));
    EXPECT_EQ(o.injection.resources.cpu_limit, "1");

    const webhook_options w = make_webhook_options(o);
    EXPECT_EQ(w.address, "0.0.0.0");
    EXPECT_EQ(w.port, 9443);
    EXPECT_EQ(w.injection.cluster_version, (k8s_version{1, 30}));
    EXPECT_EQ(w.tls.cert_file, "/certs/tls.crt");
    // The injector's own namespace joins the exclusions.
    EXPECT_EQ(w.injection.excluded_namespaces,
              (std::vector<std::string>{"kube-system", "monitoring", "claimguard-system"}));
}

// Issue 22: the injector's timeouts take the one duration syntax ("10s", "250ms"); bare numbers are refused.
TEST(inject_cli, timeouts_are_durations_with_units) {
    const inject_options o =
        parse({"--k8s-version", "1.30", "--request-timeout", "2.5s", "--tls-reload-interval", "1m", "--shutdown-delay",
               "250ms", "--tls-cert", "/c/tls.crt", "--tls-key", "/c/tls.key"});
    EXPECT_EQ(o.request_timeout, std::chrono::milliseconds(2500));
    EXPECT_EQ(o.tls_reload_interval, std::chrono::minutes(1));
    EXPECT_EQ(o.shutdown_delay, std::chrono::milliseconds(250));
    const webhook_options w = make_webhook_options(o);
    EXPECT_EQ(w.request_timeout, std::chrono::milliseconds(2500));
    EXPECT_EQ(w.tls_reload_interval, std::chrono::minutes(1));
    EXPECT_EQ(parse({"--k8s-version", "1.30"}).shutdown_delay, default_shutdown_delay);
    EXPECT_THROW(parse({"--k8s-version", "1.30", "--shutdown-delay", "5"}), CLI::ValidationError);
    EXPECT_THROW(parse({"--k8s-version", "1.30", "--request-timeout-ms", "10"}), CLI::ExtrasError);
}

TEST(inject_cli, an_empty_value_clears_a_default_resource) {
    // The chart passes every resource flag; an empty value (a separate argument) removes the default.
    const inject_options o =
        parse({"--k8s-version", "1.29", "--memory-limit", "", "--cpu-request", "", "--cpu-limit=2"});
    EXPECT_EQ(o.injection.resources.memory_limit, "");
    EXPECT_EQ(o.injection.resources.cpu_request, "");
    EXPECT_EQ(o.injection.resources.cpu_limit, "2");
    EXPECT_EQ(o.injection.resources.memory_request, "32Mi");
}

// Issue 22: the webhook-mode options the chart passes.
TEST(inject_cli, webhook_mode_options_fill_the_config) {
    const injection_config c = make_injection_config(parse({"--k8s-version",
                                                            "1.28",
                                                            "--sidecar-unix-socket",
                                                            "/var/run/claimguard/mysql.sock",
                                                            "--sidecar-env=CLAIMGUARD_LOG_FORMAT=json",
                                                            "--sidecar-env",
                                                            "A=b=c",
                                                            "--schema-check-secret",
                                                            "chk",
                                                            "--schema-check-password-key",
                                                            "pw",
                                                            "--hold-application",
                                                            "--scrape-annotations",
                                                            "--sidecar-label",
                                                            "--redis-cluster",
                                                            "--redis-user",
                                                            "cg",
                                                            "--redis-password-secret",
                                                            "redis-auth",
                                                            "--redis-tls",
                                                            "--redis-tls-verify=false",
                                                            "--redis-tls-secret",
                                                            "redis-tls",
                                                            "--redis-tls-client-certificate"}));
    EXPECT_EQ(c.unix_socket, "/var/run/claimguard/mysql.sock");
    ASSERT_EQ(c.env.size(), 2u);
    EXPECT_EQ(c.env[0].name, "CLAIMGUARD_LOG_FORMAT");
    EXPECT_EQ(c.env[0].value, "json");
    EXPECT_EQ(c.env[1].name, "A");
    EXPECT_EQ(c.env[1].value, "b=c");
    EXPECT_EQ(c.schema_check_secret, "chk");
    EXPECT_EQ(c.schema_check_user_key, "username");
    EXPECT_EQ(c.schema_check_password_key, "pw");
    EXPECT_TRUE(c.hold_application && c.scrape_annotations && c.sidecar_label);
    EXPECT_TRUE(c.redis.cluster && c.redis.tls && c.redis.tls_client_certificate);
    EXPECT_FALSE(c.redis.tls_verify);
    EXPECT_EQ(c.redis.user, "cg");
    EXPECT_EQ(c.redis.password_secret, "redis-auth");
    EXPECT_EQ(c.redis.tls_secret, "redis-tls");
    // Off unless given: the binary's defaults leave pods as before issue 22.
    const injection_config d = make_injection_config(parse({"--k8s-version", "1.28"}));
    EXPECT_FALSE(d.hold_application || d.scrape_annotations || d.sidecar_label || d.redis.cluster || d.redis.tls);
    EXPECT_TRUE(d.env.empty());
    EXPECT_THROW((void)make_injection_config(parse({"--k8s-version", "1.28", "--sidecar-env", "NOEQUALS"})),
                 std::invalid_argument);
}

TEST(inject_cli, k8s_version_is_required) { EXPECT_THROW(parse({"--self-signed"}), CLI::RequiredError); }

struct bad_options_case {
    const char* name;
    std::vector<std::string> args;
};

void PrintTo(const bad_options_case& c, std::ostream* os) { *os << c.name; }

const bad_options_case bad_options[] = {
    {"no_certificates", {"--k8s-version", "1.29"}},
    {"cert_without_key", {"--k8s-version", "1.29", "--tls-cert", "/c"}},
    {"self_signed_and_files",
     {"--k8s-version", "1.29", "--self-signed", "--dns-name", "a", "--tls-cert", "/c", "--tls-key", "/k"}},
    {"self_signed_without_names", {"--k8s-version", "1.29", "--self-signed"}},
    {"bad_version", {"--k8s-version", "latest", "--tls-cert", "/c", "--tls-key", "/k"}},
    {"bad_listen", {"--k8s-version", "1.29", "--listen", "8443", "--tls-cert", "/c", "--tls-key", "/k"}},
    {"bad_default_backend",
     {"--k8s-version", "1.29", "--default-backend", "db", "--tls-cert", "/c", "--tls-key", "/k"}},
    {"bad_memory_limit", {"--k8s-version", "1.29", "--memory-limit", "lots", "--tls-cert", "/c", "--tls-key", "/k"}},
};

class inject_cli_refuses : public testing::TestWithParam<bad_options_case> {};

TEST_P(inject_cli_refuses, at_start_up) {
    const inject_options o = parse(GetParam().args);
    EXPECT_THROW((void)make_webhook_options(o), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(options, inject_cli_refuses, testing::ValuesIn(bad_options),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(inject_cli, run_inject_returns_2_on_bad_options) {
    inject_options o;
    o.k8s_version = "1.29";  // but no certificates
    EXPECT_EQ(run_inject(o), 2);
}

TEST(inject_cli, self_signed_writes_the_ca_bundle_for_the_service_names) {
    const auto path = std::filesystem::temp_directory_path() / ("claimguard-ca-" + std::to_string(::getpid()) + ".pem");
    const inject_options o = parse({"--k8s-version", "1.28", "--self-signed", "--namespace", "claimguard-system",
                                    "--service", "hook", "--ca-bundle-out", path.string()});
    const webhook_options w = make_webhook_options(o);
    EXPECT_EQ(w.injection.cluster_version, (k8s_version{1, 28}));
    EXPECT_TRUE(w.tls.cert_file.empty());
    EXPECT_NE(w.tls.cert_chain_pem.find("BEGIN CERTIFICATE"), std::string::npos);
    std::ifstream in(path);
    std::stringstream ca;
    ca << in.rdbuf();
    std::filesystem::remove(path);
    EXPECT_NE(ca.str().find("BEGIN CERTIFICATE"), std::string::npos);
    EXPECT_NE(ca.str(), w.tls.cert_chain_pem) << "the bundle is the CA, not the serving certificate";
    // The serving certificate names the service in the namespace.
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(w.tls.cert_chain_pem.data(), static_cast<int>(w.tls.cert_chain_pem.size())), &BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> leaf(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                     &X509_free);
    ASSERT_TRUE(leaf);
    const std::string name = "hook.claimguard-system.svc";
    EXPECT_EQ(X509_check_host(leaf.get(), name.c_str(), name.size(), 0, nullptr), 1);
}

}  // namespace
}  // namespace claimguard::inject
