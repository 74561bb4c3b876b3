// HTTPS server of the injection webhook on Boost.Beast and Asio SSL: one coroutine per
// connection, everything on one strand, certificates re-read when cert-manager renews them.
#include "proxy/inject/webhook_server.hpp"

#include "proxy/admin/metrics.hpp"
#include "proxy/inject/patch.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>

namespace claimguard::inject {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::string_view text_plain = "text/plain; charset=utf-8";
constexpr std::string_view application_json = "application/json";
// Two paths because the webhook cannot see namespace labels: the webhook entry whose
// namespaceSelector matches claimguard.io/inject=enabled calls the second. (A service path
// may not carry a query: each segment must be a DNS-1123 subdomain.)
constexpr std::string_view path_mutate = "/mutate";
constexpr std::string_view path_mutate_namespace = "/mutate/namespace";
constexpr std::string_view path_healthz = "/healthz";
constexpr std::string_view path_metrics = "/metrics";
constexpr unsigned http_version_11 = 11;
constexpr std::chrono::milliseconds accept_retry_delay{100};  // after EMFILE and the like
constexpr std::chrono::milliseconds tls_shutdown_timeout{1000};
constexpr int listen_backlog = 128;
// Certificate files larger than this are not certificates.
constexpr std::size_t max_pem_file_bytes = 1024 * 1024;

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;
using stream_type = beast::ssl_stream<beast::tcp_stream>;

response make_response(unsigned version, bool keep_alive, http::status status, std::string body,
                       std::string_view content_type = text_plain) {
    response res;
    res.version(version);
    res.result(status);
    res.set(http::field::content_type, content_type);
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
}

std::optional<http::status> status_for_read_error(const boost::system::error_code& ec) {
    if (ec == http::error::header_limit) return http::status::request_header_fields_too_large;
    if (ec == http::error::body_limit) return http::status::payload_too_large;
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) return std::nullopt;
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) return http::status::bad_request;
    return std::nullopt;  // I/O error, TLS error or timeout
}

std::string read_small_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("cannot open {}", path));
    std::ostringstream out;
    out << in.rdbuf();
    std::string text = std::move(out).str();
    if (text.size() > max_pem_file_bytes)
        throw std::runtime_error(fmt::format("{} is larger than {} bytes", path, max_pem_file_bytes));
    return text;
}

std::shared_ptr<ssl::context> make_context(const std::string& chain_pem, const std::string& key_pem) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    boost::system::error_code ec;
    if (ctx->use_certificate_chain(asio::buffer(chain_pem), ec))
        throw std::runtime_error(fmt::format("webhook certificate: {}", ec.message()));
    if (ctx->use_private_key(asio::buffer(key_pem), ssl::context::pem, ec))
        throw std::runtime_error(fmt::format("webhook private key: {}", ec.message()));
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
        throw std::runtime_error("webhook private key does not match the certificate");
    return ctx;
}

}  // namespace

// The injector's /metrics (Prometheus text, over the same HTTPS listener), one registry per server.
struct inject_metrics {
    admin::registry registry;
    admin::family<admin::counter>& requests =
        registry.counter_family("claimguard_inject_requests_total",
                                "AdmissionReview requests received, by path (/mutate, /mutate/namespace).", {"path"});
    admin::family<admin::counter>& patches = registry.counter_family(
        "claimguard_inject_patches_total", "Pods given the sidecar, by kind of sidecar (native, plain).", {"sidecar"});
    admin::counter& not_injected = registry.add_counter(
        "claimguard_inject_not_injected_total",
        "Pods that asked for the sidecar and were admitted without it, with a warning (bad annotation, port "
        "conflict, no backend...).");
    admin::counter& skipped =
        registry.add_counter("claimguard_inject_skipped_total",
                             "Pods admitted unchanged without asking (not opted in, excluded, already "
                             "injected).");
    admin::family<admin::counter>& failures = registry.counter_family(
        "claimguard_inject_failures_total",
        "Requests answered with an HTTP error instead of a review, by kind (bad_request, media_type).", {"kind"});
    admin::counter& tls_reloads =
        registry.add_counter("claimguard_inject_tls_reloads_total", "Serving certificates re-read after a renewal.");

    inject_metrics() {
        for (const auto path : {path_mutate, path_mutate_namespace}) (void)requests.with(path);
        for (const auto kind : {"native", "plain"}) (void)patches.with(kind);
        for (const auto kind : {"bad_request", "media_type"}) (void)failures.with(kind);
        admin::add_process_collector(registry);
    }
};

struct webhook_server::impl : std::enable_shared_from_this<impl> {
    impl(asio::io_context& io, webhook_options options)
        : strand_(asio::make_strand(io)), options_(std::move(options)), acceptor_(strand_) {}

    void listen();
    void shutdown();
    void maybe_reload_tls();

    asio::awaitable<void> accept_loop(std::shared_ptr<impl> keep_alive);
    asio::awaitable<void> serve(std::shared_ptr<impl> keep_alive, tcp::socket socket);
    response handle(const request& req);
    response mutate(const request& req, opt_in source);

    asio::strand<asio::io_context::executor_type> strand_;
    const webhook_options options_;
    tcp::acceptor acceptor_;
    std::atomic<std::uint16_t> port_{0};

    mutable std::mutex counters_mutex_;
    webhook_counters counters_;
    inject_metrics metrics_;

    // Everything below is touched on the strand only.
    bool stopped_ = false;
    std::size_t active_ = 0;
    std::map<stream_type*, bool> streams_;  // stream -> busy answering a request
    std::shared_ptr<ssl::context> tls_;
    std::string loaded_cert_;  // the file contents tls_ was built from
    std::string loaded_key_;
    std::chrono::steady_clock::time_point tls_checked_{};
};

void webhook_server::impl::listen() {
    if (!options_.tls.cert_file.empty()) {
        loaded_cert_ = read_small_file(options_.tls.cert_file);
        loaded_key_ = read_small_file(options_.tls.key_file);
        tls_ = make_context(loaded_cert_, loaded_key_);
        tls_checked_ = std::chrono::steady_clock::now();
    } else {
        tls_ = make_context(options_.tls.cert_chain_pem, options_.tls.key_pem);
    }

    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options_.address, ec);
    if (ec) throw std::system_error(ec, fmt::format("webhook address \"{}\"", options_.address));
    const tcp::endpoint endpoint(address, options_.port);
    const auto fail = [&](std::string_view what) {
        throw std::system_error(ec, fmt::format("webhook server {} {}:{}", what, options_.address, options_.port));
    };
    if (acceptor_.open(endpoint.protocol(), ec)) fail("open");
    if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec)) fail("set SO_REUSEADDR on");
    if (acceptor_.bind(endpoint, ec)) fail("bind");
    if (acceptor_.listen(listen_backlog, ec)) fail("listen on");
    port_.store(acceptor_.local_endpoint().port());
}

void webhook_server::impl::shutdown() {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (const auto& [stream, busy] : streams_)
        if (!busy) beast::get_lowest_layer(*stream).close();
}

// cert-manager renews a Secret in place; the kubelet swaps the mounted files. Comparing the
// contents (not mtimes) is cheap at this interval and immune to timestamp granularity.
void webhook_server::impl::maybe_reload_tls() {
    if (options_.tls.cert_file.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - tls_checked_ < options_.tls_reload_interval) return;
    tls_checked_ = now;
    try {
        std::string cert = read_small_file(options_.tls.cert_file);
        std::string key = read_small_file(options_.tls.key_file);
        if (cert == loaded_cert_ && key == loaded_key_) return;
        tls_ = make_context(cert, key);
        loaded_cert_ = std::move(cert);
        loaded_key_ = std::move(key);
        const std::lock_guard lock(counters_mutex_);
        ++counters_.tls_reloads;
        metrics_.tls_reloads.inc();
        spdlog::info("inject: reloaded the webhook certificate from {}", options_.tls.cert_file);
    } catch (const std::exception& e) {
        // Half-written files during a swap, or a bad renewal: keep serving the old certificate.
        spdlog::warn("inject: keeping the current certificate: {}", e.what());
    }
}

asio::awaitable<void> webhook_server::impl::accept_loop(std::shared_ptr<impl> keep_alive) {
    for (;;) {
        auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
        if (stopped_) co_return;
        if (ec) {
            asio::steady_timer pause(strand_, accept_retry_delay);
            co_await pause.async_wait(use_tuple);
            continue;
        }
        if (active_ >= options_.max_connections) {
            socket.close(ec);
            continue;
        }
        ++active_;  // counted here so the limit holds before the coroutine first runs
        asio::co_spawn(strand_, serve(keep_alive, std::move(socket)), asio::detached);
    }
}

asio::awaitable<void> webhook_server::impl::serve(std::shared_ptr<impl>, tcp::socket socket) {
    maybe_reload_tls();
    const std::shared_ptr<ssl::context> tls = tls_;  // this connection keeps the context it started with
    stream_type stream(std::move(socket), *tls);
    streams_.emplace(&stream, false);
    struct registration {
        impl& server;
        stream_type* stream;
        ~registration() {
            server.streams_.erase(stream);
            --server.active_;
        }
    } const registered{*this, &stream};

    beast::get_lowest_layer(stream).expires_after(options_.request_timeout);
    auto [hs_ec] = co_await stream.async_handshake(ssl::stream_base::server, use_tuple);
    if (hs_ec || stopped_) {
        if (hs_ec) spdlog::debug("inject: TLS handshake failed: {}", hs_ec.message());
        co_return;
    }

    beast::flat_buffer buffer;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(options_.header_limit));
        parser.body_limit(options_.body_limit);
        beast::get_lowest_layer(stream).expires_after(options_.request_timeout);
        auto [ec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
        if (stopped_ && ec) co_return;
        response res;
        if (ec) {
            const auto status = status_for_read_error(ec);
            if (!status) break;
            {
                const std::lock_guard lock(counters_mutex_);
                ++counters_.bad_requests;
            }
            res = make_response(http_version_11, false, *status, std::string(obsolete_reason(*status)));
        } else {
            streams_[&stream] = true;
            res = handle(parser.get());
        }
        if (stopped_) res.keep_alive(false);
        beast::get_lowest_layer(stream).expires_after(options_.request_timeout);
        auto [write_ec, written] = co_await http::async_write(stream, res, use_tuple);
        streams_[&stream] = false;
        if (write_ec) co_return;
        if (!res.keep_alive()) break;
    }
    beast::get_lowest_layer(stream).expires_after(tls_shutdown_timeout);
    co_await stream.async_shutdown(use_tuple);
}

response webhook_server::impl::handle(const request& req) {
    const std::string_view target = req.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();

    if (path == path_healthz) {
        if (req.method() != http::verb::get && req.method() != http::verb::head) {
            response res = make_response(version, keep_alive, http::status::method_not_allowed, "method not allowed");
            res.set(http::field::allow, "GET, HEAD");
            return res;
        }
        response res = make_response(version, keep_alive, http::status::ok, "ok");
        if (req.method() == http::verb::head) res.body().clear();  // Content-Length stays that of the GET answer
        return res;
    }
    if (path == path_metrics) {
        if (req.method() != http::verb::get) {
            response res = make_response(version, keep_alive, http::status::method_not_allowed, "method not allowed");
            res.set(http::field::allow, "GET");
            return res;
        }
        return make_response(version, keep_alive, http::status::ok, metrics_.registry.render(),
                             admin::prometheus_content_type);
    }
    if (path == path_mutate || path == path_mutate_namespace) {
        if (req.method() != http::verb::post) {
            response res = make_response(version, keep_alive, http::status::method_not_allowed, "method not allowed");
            res.set(http::field::allow, "POST");
            return res;
        }
        metrics_.requests.with(path).inc();
        return mutate(req, path == path_mutate ? opt_in::pod_annotation : opt_in::namespace_label);
    }
    return make_response(version, keep_alive, http::status::not_found, "not found");
}

// The API server adds "?timeout=10s" to the path; the query is ignored.
response webhook_server::impl::mutate(const request& req, opt_in source) {
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    const auto bad_request = [&](http::status status, std::string why) {
        {
            const std::lock_guard lock(counters_mutex_);
            ++counters_.bad_requests;
        }
        metrics_.failures.with(status == http::status::unsupported_media_type ? "media_type" : "bad_request").inc();
        spdlog::warn("inject: {} ({})", why, static_cast<unsigned>(status));
        return make_response(version, keep_alive, status, std::move(why));
    };

    const std::string_view content_type = req[http::field::content_type];
    if (content_type.substr(0, application_json.size()) != application_json)
        return bad_request(http::status::unsupported_media_type, "an AdmissionReview must be application/json");

    auto outcome = review(req.body(), options_.injection, source);
    if (!outcome) return bad_request(http::status::bad_request, outcome.error().message());

    const injection_plan& plan = outcome->plan;
    {
        const std::lock_guard lock(counters_mutex_);
        ++counters_.reviews;
        if (plan.inject)
            ++counters_.injected;
        else if (!plan.warnings.empty())
            ++counters_.refused;
    }
    if (plan.inject)
        metrics_.patches.with(plan.native ? "native" : "plain").inc();
    else if (!plan.warnings.empty())
        metrics_.not_injected.inc();
    else
        metrics_.skipped.inc();
    if (plan.inject)
        spdlog::info("inject: {}: {}", outcome->pod, plan.reason);
    else if (!plan.warnings.empty())
        spdlog::warn("inject: {}: not injected: {}", outcome->pod, plan.reason);
    else
        spdlog::debug("inject: {}: skipped: {}", outcome->pod, plan.reason);
    return make_response(version, keep_alive, http::status::ok, std::move(outcome->response), application_json);
}

webhook_server::webhook_server(asio::io_context& io, webhook_options options)
    : impl_(std::make_shared<impl>(io, std::move(options))) {}

webhook_server::~webhook_server() { stop(); }

void webhook_server::start() {
    impl_->listen();
    asio::co_spawn(impl_->strand_, impl_->accept_loop(impl_), asio::detached);
}

void webhook_server::stop() {
    asio::dispatch(impl_->strand_, [self = impl_] { self->shutdown(); });
}

std::uint16_t webhook_server::port() const { return impl_->port_.load(); }

webhook_counters webhook_server::counters() const {
    const std::lock_guard lock(impl_->counters_mutex_);
    return impl_->counters_;
}

}  // namespace claimguard::inject
