// Integration tests of the webhook's HTTPS server: real TLS on a loopback port with a
// self-signed certificate, real AdmissionReviews, limits, certificate reload and shutdown.
#include "proxy/inject/webhook_server.hpp"

#include "proxy/inject/base64.hpp"
#include "proxy/inject/self_signed.hpp"

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

namespace claimguard::inject {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

// Bounds every client exchange so a broken server fails the test instead of hanging it.
constexpr std::chrono::seconds client_timeout{10};
const std::string service_name = "claimguard-inject.claimguard-system.svc";
const auto loopback = asio::ip::make_address_v4("127.0.0.1");
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::string read_fixture(const std::string& file) {
    std::ifstream in(std::string(CLAIMGUARD_INJECT_FIXTURES) + "/" + file, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

injection_config test_injection() {
    injection_config c;
    c.image = "registry.example/claimguard:0.1.0";
    c.excluded_namespaces = {"kube-system", "claimguard-system"};
    return c;
}

// A webhook server on its own io_context thread, on an ephemeral loopback port.
class running_server {
public:
    explicit running_server(webhook_options options) {
        options.address = "127.0.0.1";
        options.port = 0;
        server_.emplace(io_, std::move(options));
        server_->start();
        thread_ = std::thread([this] { io_.run(); });
    }
    ~running_server() {
        server_->stop();
        thread_.join();
    }
    std::uint16_t port() const { return server_->port(); }
    webhook_counters counters() const { return server_->counters(); }
    void stop() { server_->stop(); }

private:
    asio::io_context io_;
    std::optional<webhook_server> server_;
    std::thread thread_;
};

webhook_options options_with(const tls_material& m) {
    webhook_options o;
    o.tls.cert_chain_pem = m.cert_chain_pem;
    o.tls.key_pem = m.key_pem;
    o.injection = test_injection();
    return o;
}

struct http_request_spec {
    http::verb method = http::verb::post;
    std::string target = "/mutate";
    std::string body;
    std::string content_type = "application/json";
};

struct exchange_result {
    boost::system::error_code ec;  // the first failing step's error (handshake, write, read)
    std::string failed_step;
    std::vector<http::response<http::string_body>> responses;
};

// One TLS connection that verifies the server against `ca_pem` for `verify_name` and sends the
// requests in order on it (keep-alive).
exchange_result https_exchange(std::uint16_t port, const std::string& ca_pem,
                               const std::vector<http_request_spec>& requests,
                               const std::string& verify_name = service_name) {
    asio::io_context io;
    ssl::context ctx(ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(ca_pem));
    ctx.set_verify_mode(ssl::verify_peer);
    exchange_result result;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
            SSL_set_tlsext_host_name(stream.native_handle(), verify_name.c_str());
            stream.set_verify_callback(ssl::host_name_verification(verify_name));
            auto [cec] =
                co_await beast::get_lowest_layer(stream).async_connect(tcp::endpoint(loopback, port), use_tuple);
            if (cec) {
                result.ec = cec, result.failed_step = "connect";
                co_return;
            }
            auto [hec] = co_await stream.async_handshake(ssl::stream_base::client, use_tuple);
            if (hec) {
                result.ec = hec, result.failed_step = "handshake";
                co_return;
            }
            beast::flat_buffer buffer;
            for (const auto& spec : requests) {
                http::request<http::string_body> req{spec.method, spec.target, 11};
                req.set(http::field::host, verify_name);
                if (!spec.content_type.empty()) req.set(http::field::content_type, spec.content_type);
                req.body() = spec.body;
                req.prepare_payload();
                auto [wec, written] = co_await http::async_write(stream, req, use_tuple);
                if (wec) {
                    result.ec = wec, result.failed_step = "write";
                    co_return;
                }
                http::response_parser<http::string_body> parser;
                parser.body_limit(16 * 1024 * 1024);
                auto [rec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
                if (rec) {
                    result.ec = rec, result.failed_step = "read";
                    co_return;
                }
                result.responses.push_back(parser.release());
            }
        },
        asio::detached);
    io.run_for(client_timeout);
    if (!io.stopped()) result.failed_step = "timeout";
    return result;
}

exchange_result https_one(std::uint16_t port, const std::string& ca_pem, http_request_spec spec) {
    return https_exchange(port, ca_pem, {std::move(spec)});
}

json decoded_patch(const http::response<http::string_body>& res) {
    const json answer = json::parse(res.body());
    auto bytes = base64_decode(answer["response"]["patch"].get<std::string>());
    EXPECT_TRUE(bytes);
    return bytes ? json::parse(*bytes) : json();
}

class webhook_tls : public testing::Test {
protected:
    static void SetUpTestSuite() { material_ = new tls_material(generate_self_signed({service_name, "localhost"})); }
    static void TearDownTestSuite() { delete material_; }
    static const tls_material& material() { return *material_; }
    static tls_material* material_;
};
tls_material* webhook_tls::material_ = nullptr;

TEST_F(webhook_tls, healthz_answers_ok_over_tls) {
    running_server server(options_with(material()));
    auto r = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(r.responses.size(), 1u) << r.failed_step << ": " << r.ec.message();
    EXPECT_EQ(r.responses[0].result_int(), 200u);
    EXPECT_EQ(r.responses[0].body(), "ok");
}

TEST_F(webhook_tls, mutate_answers_a_real_review_with_the_expected_patch) {
    webhook_options o = options_with(material());
    o.injection.cluster_version = {1, 29};
    running_server server(o);
    // The API server adds the webhook's timeout as a query.
    auto r = https_one(server.port(), material().ca_pem,
                       {http::verb::post, "/mutate?timeout=10s", read_fixture("opt_in_native.review.json")});
    ASSERT_EQ(r.responses.size(), 1u) << r.failed_step << ": " << r.ec.message();
    const auto& res = r.responses[0];
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_EQ(res[http::field::content_type], "application/json");
    const json expected = json::parse(read_fixture("opt_in_native.expected.json"));
    EXPECT_EQ(decoded_patch(res), expected["patch"]);
    EXPECT_EQ(json::parse(res.body())["response"]["uid"], "a1f0c3d2-0001-4c1e-9a61-6d1f2c3b4a01");
    const webhook_counters c = server.counters();
    EXPECT_EQ(c.reviews, 1u);
    EXPECT_EQ(c.injected, 1u);
}

TEST_F(webhook_tls, namespace_entry_injects_unannotated_pods) {
    webhook_options o = options_with(material());
    o.injection.default_backend = "mysql.db.svc:3306";
    o.injection.default_rules_configmap = "claimguard-rules";
    running_server server(o);
    const std::string body = read_fixture("namespace_label_defaults.review.json");
    auto r = https_exchange(
        server.port(), material().ca_pem,
        {{http::verb::post, "/mutate/namespace?timeout=10s", body}, {http::verb::post, "/mutate", body}});
    ASSERT_EQ(r.responses.size(), 2u) << r.failed_step << ": " << r.ec.message();
    EXPECT_EQ(decoded_patch(r.responses[0]),
              json::parse(read_fixture("namespace_label_defaults.expected.json"))["patch"]);
    // The same pod through the annotation-only entry is not opted in.
    EXPECT_FALSE(json::parse(r.responses[1].body())["response"].contains("patch"));
}

// Issue 22: the injector's /metrics counts requests by path, patches, skips and failures.
TEST_F(webhook_tls, metrics_count_requests_patches_and_failures) {
    webhook_options o = options_with(material());
    o.injection.cluster_version = {1, 29};
    running_server server(o);
    const std::string body = read_fixture("opt_in_native.review.json");
    auto r = https_exchange(server.port(), material().ca_pem,
                            {{http::verb::post, "/mutate/namespace?timeout=10s", body},
                             {http::verb::post, "/mutate", read_fixture("not_opted_in.review.json")},
                             {http::verb::post, "/mutate", "{", "application/json"},
                             {http::verb::post, "/mutate", body, "text/plain"},
                             {http::verb::get, "/metrics", "", ""}});
    ASSERT_EQ(r.responses.size(), 5u) << r.failed_step << ": " << r.ec.message();
    const auto& res = r.responses[4];
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
    const std::string text = "\n" + res.body();
    for (const char* line : {"claimguard_inject_requests_total{path=\"/mutate\"} 3",
                             "claimguard_inject_requests_total{path=\"/mutate/namespace\"} 1",
                             "claimguard_inject_patches_total{sidecar=\"native\"} 1",
                             "claimguard_inject_patches_total{sidecar=\"plain\"} 0",
                             "claimguard_inject_failures_total{kind=\"bad_request\"} 1",
                             "claimguard_inject_failures_total{kind=\"media_type\"} 1",
                             "claimguard_inject_tls_reloads_total 0", "# TYPE process_open_fds gauge"})
        EXPECT_NE(text.find(std::string("\n") + line + "\n"), std::string::npos) << line << text;
    EXPECT_NE(text.find("\nclaimguard_inject_skipped_total 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nclaimguard_inject_not_injected_total 0\n"), std::string::npos) << text;
}

struct status_case {
    const char* name;
    http_request_spec request;
    unsigned status;
};

void PrintTo(const status_case& c, std::ostream* os) { *os << c.name; }

const status_case status_cases[] = {
    {"not_json", {http::verb::post, "/mutate", "{not json", "application/json"}, 400},
    {"not_a_review", {http::verb::post, "/mutate", R"({"kind":"AdmissionReview"})", "application/json"}, 400},
    {"wrong_content_type", {http::verb::post, "/mutate", "{}", "text/plain"}, 415},
    {"no_content_type", {http::verb::post, "/mutate", "{}", ""}, 415},
    {"get_mutate", {http::verb::get, "/mutate", "", ""}, 405},
    {"post_healthz", {http::verb::post, "/healthz", "", ""}, 405},
    {"unknown_path", {http::verb::get, "/validate", "", ""}, 404},
    {"get_mutate_namespace", {http::verb::get, "/mutate/namespace", "", ""}, 405},
    {"unknown_mutate_subpath", {http::verb::post, "/mutate/other", "{}", "application/json"}, 404},
    {"body_over_limit", {http::verb::post, "/mutate", std::string(4097, ' '), "application/json"}, 413},
};

class webhook_status : public webhook_tls, public testing::WithParamInterface<status_case> {};

TEST_P(webhook_status, answers_with_the_http_status) {
    webhook_options o = options_with(material());
    o.body_limit = 4096;
    running_server server(o);
    auto r = https_one(server.port(), material().ca_pem, GetParam().request);
    ASSERT_EQ(r.responses.size(), 1u) << r.failed_step << ": " << r.ec.message();
    EXPECT_EQ(r.responses[0].result_int(), GetParam().status) << r.responses[0].body();
    // The server still answers afterwards.
    auto again = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(again.responses.size(), 1u);
    EXPECT_EQ(again.responses[0].result_int(), 200u);
}

INSTANTIATE_TEST_SUITE_P(statuses, webhook_status, testing::ValuesIn(status_cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(webhook_tls, client_with_another_ca_fails_the_handshake) {
    running_server server(options_with(material()));
    const tls_material other = generate_self_signed({service_name});
    auto r = https_one(server.port(), other.ca_pem, {http::verb::get, "/healthz", "", ""});
    EXPECT_TRUE(r.responses.empty());
    EXPECT_EQ(r.failed_step, "handshake");
}

TEST_F(webhook_tls, client_expecting_another_name_fails_the_handshake) {
    running_server server(options_with(material()));
    auto r = https_exchange(server.port(), material().ca_pem, {{http::verb::get, "/healthz", "", ""}},
                            "claimguard-inject.other-namespace.svc");
    EXPECT_TRUE(r.responses.empty());
    EXPECT_EQ(r.failed_step, "handshake");
}

TEST_F(webhook_tls, plain_http_on_the_tls_port_is_dropped_and_the_server_goes_on) {
    running_server server(options_with(material()));
    {
        asio::io_context io;
        tcp::socket s(io);
        s.connect(tcp::endpoint(loopback, server.port()));
        const std::string plain = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        asio::write(s, asio::buffer(plain));
        std::array<char, 256> buf{};
        boost::system::error_code ec;
        std::size_t total = 0;
        for (;;) {  // the server answers with a TLS alert at most, then closes
            total += s.read_some(asio::buffer(buf), ec);
            if (ec) break;
            ASSERT_LT(total, 4096u);
        }
        EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
    }
    auto r = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(r.responses.size(), 1u) << r.failed_step;
}

TEST_F(webhook_tls, connections_beyond_the_limit_are_closed) {
    webhook_options o = options_with(material());
    o.max_connections = 1;
    running_server server(o);
    // Hold one TLS connection open on its own thread, then try a second.
    asio::io_context io;
    ssl::context ctx(ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(material().ca_pem));
    ctx.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> held(io, ctx);
    beast::get_lowest_layer(held).connect(tcp::endpoint(loopback, server.port()));
    held.handshake(ssl::stream_base::client);
    auto refused = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
    EXPECT_TRUE(refused.responses.empty());
    beast::get_lowest_layer(held).close();
    // Once the held one is gone, a new connection is served (the server notices the close
    // when its read fails; retry for the bounded client timeout).
    std::optional<exchange_result> ok;
    for (int attempt = 0; attempt < 100; ++attempt) {
        ok = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
        if (!ok->responses.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(ok->responses.size(), 1u);
}

TEST_F(webhook_tls, stop_closes_idle_keep_alive_connections) {
    running_server server(options_with(material()));
    asio::io_context io;
    ssl::context ctx(ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(material().ca_pem));
    beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
    beast::get_lowest_layer(stream).connect(tcp::endpoint(loopback, server.port()));
    stream.handshake(ssl::stream_base::client);
    http::request<http::string_body> req{http::verb::get, "/healthz", 11};
    req.set(http::field::host, service_name);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    EXPECT_EQ(res.result_int(), 200u);
    server.stop();
    boost::system::error_code ec;
    http::response<http::string_body> none;
    http::read(stream, buffer, none, ec);  // returns when the server closes the connection
    EXPECT_TRUE(ec) << "the idle connection must be closed by stop()";
}

// ----------------------------------------------------------- certificate files and reload

class temp_dir {
public:
    temp_dir() {
        path_ = std::filesystem::temp_directory_path() /
                ("claimguard-inject-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
        std::filesystem::create_directories(path_);
    }
    ~temp_dir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

void write_file(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    std::filesystem::rename(tmp, path);  // atomic, like the kubelet's ..data swap
}

TEST_F(webhook_tls, certificate_files_are_reloaded_when_they_change) {
    temp_dir dir;
    const tls_material first = material();
    const tls_material second = generate_self_signed({service_name});
    write_file(dir.file("tls.crt"), first.cert_chain_pem);
    write_file(dir.file("tls.key"), first.key_pem);
    webhook_options o;
    o.tls.cert_file = dir.file("tls.crt");
    o.tls.key_file = dir.file("tls.key");
    o.tls_reload_interval = std::chrono::milliseconds(0);  // check on every connection
    o.injection = test_injection();
    running_server server(o);

    auto before = https_one(server.port(), first.ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(before.responses.size(), 1u) << before.failed_step;
    EXPECT_EQ(server.counters().tls_reloads, 0u);

    write_file(dir.file("tls.key"), second.key_pem);
    write_file(dir.file("tls.crt"), second.cert_chain_pem);
    auto renewed = https_one(server.port(), second.ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(renewed.responses.size(), 1u) << renewed.failed_step << ": " << renewed.ec.message();
    auto stale = https_one(server.port(), first.ca_pem, {http::verb::get, "/healthz", "", ""});
    EXPECT_EQ(stale.failed_step, "handshake");
    EXPECT_EQ(server.counters().tls_reloads, 1u);
}

TEST_F(webhook_tls, a_broken_renewal_keeps_the_current_certificate) {
    temp_dir dir;
    write_file(dir.file("tls.crt"), material().cert_chain_pem);
    write_file(dir.file("tls.key"), material().key_pem);
    webhook_options o;
    o.tls.cert_file = dir.file("tls.crt");
    o.tls.key_file = dir.file("tls.key");
    o.tls_reload_interval = std::chrono::milliseconds(0);
    o.injection = test_injection();
    running_server server(o);

    // A key that does not match the certificate (a half-done swap).
    write_file(dir.file("tls.key"), generate_self_signed({service_name}).key_pem);
    auto r = https_one(server.port(), material().ca_pem, {http::verb::get, "/healthz", "", ""});
    ASSERT_EQ(r.responses.size(), 1u) << r.failed_step << ": " << r.ec.message();
    EXPECT_EQ(server.counters().tls_reloads, 0u);
}

TEST(webhook_server, start_refuses_unusable_certificates_and_addresses) {
    asio::io_context io;
    webhook_options missing;
    missing.tls.cert_file = "/nonexistent/tls.crt";
    missing.tls.key_file = "/nonexistent/tls.key";
    EXPECT_THROW(webhook_server(io, missing).start(), std::runtime_error);

    webhook_options garbage;
    garbage.tls.cert_chain_pem = "not a certificate";
    garbage.tls.key_pem = "not a key";
    EXPECT_THROW(webhook_server(io, garbage).start(), std::runtime_error);

    const tls_material a = generate_self_signed({"a"});
    const tls_material b = generate_self_signed({"b"});
    webhook_options mismatched;
    mismatched.tls.cert_chain_pem = a.cert_chain_pem;
    mismatched.tls.key_pem = b.key_pem;
    EXPECT_THROW(webhook_server(io, mismatched).start(), std::runtime_error);

    webhook_options bad_address;
    bad_address.address = "not-an-ip";
    bad_address.port = 0;
    bad_address.tls.cert_chain_pem = a.cert_chain_pem;
    bad_address.tls.key_pem = a.key_pem;
    EXPECT_THROW(webhook_server(io, bad_address).start(), std::system_error);
}

}  // namespace
}  // namespace claimguard::inject
