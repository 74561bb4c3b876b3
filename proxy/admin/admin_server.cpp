// Admin HTTP server on Boost.Beast: one coroutine per connection, everything on one strand.
#include "proxy/admin/admin_server.hpp"

#include "proxy/admin/metrics.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <vector>

namespace claimguard::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

constexpr std::string_view text_plain = "text/plain; charset=utf-8";
constexpr unsigned http_version_11 = 11;
// After an error response the client may still be sending: we stop sending, then drain what it
// sent for a bounded time, because closing with unread bytes makes the kernel send an RST that
// can destroy our response before the client has read it.
constexpr std::chrono::milliseconds linger_timeout{1000};
constexpr std::size_t linger_drain_limit = 64 * 1024;
constexpr std::size_t linger_chunk_size = 4096;
constexpr std::chrono::milliseconds accept_retry_delay{100};  // after EMFILE and the like, no busy loop
constexpr int listen_backlog = 64;
// A waiting /readiness gives the shared dial this much beyond its own timeout before giving up.
constexpr std::chrono::milliseconds probe_wait_margin{250};
constexpr unsigned min_status = 100;
constexpr unsigned max_status = 599;

// MySQL packet header: 3-byte little-endian payload length, 1-byte sequence id. The server
// speaks first: a v10 greeting, or an ERR packet (0xFF) such as "Too many connections".
constexpr std::size_t mysql_header_size = 4;
constexpr std::uint8_t mysql_protocol_v10 = 0x0a;
constexpr std::uint8_t mysql_err_packet = 0xff;

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

struct verdict {
    bool ok = false;
    std::string reason;  // one line, the /readiness body
};

enum class route { none, startup, liveness, readiness, metrics };

route route_of(std::string_view path) {
    if (path == "/startup")
        return route::startup;
    if (path == "/liveness")
        return route::liveness;
    if (path == "/readiness")
        return route::readiness;
    if (path == "/metrics")
        return route::metrics;
    return route::none;
}

response make_response(unsigned version, bool keep_alive, unsigned status, std::string body,
                       std::string_view content_type = text_plain) {
    response res;
    res.version(version);
    res.result(status);
    res.set(http::field::content_type, content_type);
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
}

// The status to answer a request that could not be read with; nullopt: just close.
std::optional<unsigned> status_for_read_error(const boost::system::error_code& ec) {
    if (ec == http::error::header_limit)
        return 431;
    if (ec == http::error::body_limit)
        return 413;
    if (ec == http::error::end_of_stream || ec == http::error::partial_message)
        return std::nullopt;
    if (ec.category() == http::make_error_code(http::error::bad_target).category())
        return 400;
    return std::nullopt;  // I/O error or timeout
}

}  // namespace

struct admin_server::impl : std::enable_shared_from_this<impl> {
    impl(asio::io_context& io, admin_options options, health_state& health)
        : strand_(asio::make_strand(io)), options_(std::move(options)), health_(health), acceptor_(strand_) {}

    void listen();
    void shutdown();

    asio::awaitable<void> accept_loop(std::shared_ptr<impl> keep_alive);
    asio::awaitable<void> serve(std::shared_ptr<impl> keep_alive, tcp::socket socket);
    asio::awaitable<response> handle(const request& req);
    asio::awaitable<void> write_and_linger(beast::tcp_stream& stream, response res);
    asio::awaitable<verdict> readiness();
    asio::awaitable<verdict> backend_reachable();
    asio::awaitable<void> run_probe(std::shared_ptr<impl> keep_alive);
    asio::awaitable<verdict> dial_backend();

    asio::strand<asio::io_context::executor_type> strand_;
    const admin_options options_;
    health_state& health_;
    tcp::acceptor acceptor_;
    std::atomic<std::uint16_t> port_{0};

    std::mutex handlers_mutex_;
    std::map<std::string, post_handler, std::less<>> post_handlers_;
    std::map<std::string, post_handler, std::less<>> get_handlers_;

    // Everything below is touched on the strand only.
    bool stopped_ = false;
    std::size_t active_ = 0;
    std::set<beast::tcp_stream*> streams_;
    bool probe_in_flight_ = false;
    std::uint64_t probe_generation_ = 0;  // completed dials
    std::int64_t probe_done_ms_ = 0;
    verdict probe_cache_;
    std::vector<asio::steady_timer*> probe_waiters_;
    beast::tcp_stream* probe_stream_ = nullptr;
    tcp::resolver* probe_resolver_ = nullptr;
};

void admin_server::impl::listen() {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options_.address, ec);
    if (ec)
        throw std::system_error(ec, fmt::format("admin address \"{}\"", options_.address));
    const tcp::endpoint endpoint(address, options_.port);
    const auto fail = [&](std::string_view what) {
        throw std::system_error(ec, fmt::format("admin server {} {}:{}", what, options_.address, options_.port));
    };
    if (acceptor_.open(endpoint.protocol(), ec))
        fail("open");
    if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec))
        fail("set SO_REUSEADDR on");
    if (acceptor_.bind(endpoint, ec))
        fail("bind");
    if (acceptor_.listen(listen_backlog, ec))
        fail("listen on");
    port_.store(acceptor_.local_endpoint().port());
}

void admin_server::impl::shutdown() {
    if (stopped_)
        return;
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (beast::tcp_stream* s : streams_)
        s->close();
    if (probe_stream_ != nullptr)
        probe_stream_->close();
    if (probe_resolver_ != nullptr)
        probe_resolver_->cancel();
    for (asio::steady_timer* t : probe_waiters_)
        t->cancel();
}

asio::awaitable<void> admin_server::impl::accept_loop(std::shared_ptr<impl> keep_alive) {
    for (;;) {
        auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
        if (stopped_)
            co_return;
        if (ec) {
            asio::steady_timer pause(strand_, accept_retry_delay);
            co_await pause.async_wait(use_tuple);
            continue;
        }
        if (active_ >= options_.max_connections) {
            socket.close(ec);
            continue;
        }
        // Counted here, not in serve(), so the limit holds before the coroutine first runs.
        ++active_;
        asio::co_spawn(strand_, serve(keep_alive, std::move(socket)), asio::detached);
    }
}

asio::awaitable<void> admin_server::impl::serve(std::shared_ptr<impl>, tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    streams_.insert(&stream);
    struct registration {
        impl& server;
        beast::tcp_stream* stream;
        ~registration() {
            server.streams_.erase(stream);
            --server.active_;
        }
    } const registered{*this, &stream};

    beast::flat_buffer buffer;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(options_.header_limit));
        parser.body_limit(options_.body_limit);
        stream.expires_after(options_.request_timeout);
        auto [ec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
        if (stopped_)
            co_return;
        if (ec) {
            if (const auto status = status_for_read_error(ec)) {
                const std::string reason(http::obsolete_reason(http::int_to_status(*status)));
                co_await write_and_linger(stream, make_response(http_version_11, false, *status, reason));
            } else {
                stream.socket().shutdown(tcp::socket::shutdown_send, ec);
            }
            co_return;
        }
        const request& req = parser.get();
        response res = co_await handle(req);
        if (stopped_)
            co_return;
        stream.expires_after(options_.request_timeout);
        auto [write_ec, written] = co_await http::async_write(stream, res, use_tuple);
        if (write_ec || stopped_)
            co_return;
        if (!res.keep_alive()) {
            stream.socket().shutdown(tcp::socket::shutdown_send, write_ec);
            co_return;
        }
    }
}

asio::awaitable<void> admin_server::impl::write_and_linger(beast::tcp_stream& stream, response res) {
    stream.expires_after(options_.request_timeout);
    auto [ec, written] = co_await http::async_write(stream, res, use_tuple);
    if (ec || stopped_)
        co_return;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.expires_after(linger_timeout);
    std::array<char, linger_chunk_size> sink;
    for (std::size_t drained = 0; drained < linger_drain_limit;) {
        auto [read_ec, n] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
        if (read_ec || stopped_)
            break;
        drained += n;
    }
}

asio::awaitable<response> admin_server::impl::handle(const request& req) {
    const std::string_view target = req.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const http::verb method = req.method();
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();

    if (const route r = options_.builtin_routes ? route_of(path) : route::none; r != route::none) {
        if (method != http::verb::get && method != http::verb::head) {
            response res = make_response(version, keep_alive, 405, "method not allowed");
            res.set(http::field::allow, "GET, HEAD");
            co_return res;
        }
        response res;
        switch (r) {
        case route::startup:
            res = health_.started.load() ? make_response(version, keep_alive, 200, "ok")
                                         : make_response(version, keep_alive, 503, "starting up");
            break;
        case route::liveness:
            res = make_response(version, keep_alive, 200, "ok");
            break;
        case route::readiness: {
            verdict v = co_await readiness();
            res = make_response(version, keep_alive, v.ok ? 200 : 503, std::move(v.reason));
            break;
        }
        case route::none:
            co_return make_response(version, keep_alive, 404, "not found");
        case route::metrics: {
            const registry& metrics = options_.metrics != nullptr ? *options_.metrics : default_registry();
            res = make_response(version, keep_alive, 200, metrics.render(), prometheus_content_type);
            break;
        }
        }
        if (method == http::verb::head)
            res.body().clear();  // Content-Length stays that of the GET answer
        co_return res;
    }

    post_handler handler;
    bool is_get = false;
    {
        const std::lock_guard lock(handlers_mutex_);
        if (const auto it = post_handlers_.find(path); it != post_handlers_.end()) {
            handler = it->second;
        } else if (const auto g = get_handlers_.find(path); g != get_handlers_.end()) {
            handler = g->second;
            is_get = true;
        }
    }
    if (!handler)
        co_return make_response(version, keep_alive, 404, "not found");
    const bool method_ok = is_get ? (method == http::verb::get || method == http::verb::head) : method == http::verb::post;
    if (!method_ok) {
        response res = make_response(version, keep_alive, 405, "method not allowed");
        res.set(http::field::allow, is_get ? "GET, HEAD" : "POST");
        co_return res;
    }
    std::pair<int, std::string> answer;
    try {
        answer = handler();
    } catch (const std::exception& e) {
        answer = {500, e.what()};
    }
    const bool valid = answer.first >= static_cast<int>(min_status) && answer.first <= static_cast<int>(max_status);
    co_return make_response(version, keep_alive, valid ? static_cast<unsigned>(answer.first) : 500,
                            std::move(answer.second));
}

asio::awaitable<verdict> admin_server::impl::readiness() {
    if (!health_.started.load())
        co_return verdict{false, "starting up"};
    if (health_.shutting_down.load())
        co_return verdict{false, "shutting down"};
    if (health_.schema_blocked.load()) {
        const auto reason = health_.schema_reason.load();
        co_return verdict{false, reason ? *reason
                                        : std::string("claim rules lack their unique index (schema_check: refuse); "
                                                      "see claimguard check")};
    }
    const std::int64_t last_ok = health_.last_backend_ok_ms.load(std::memory_order_relaxed);
    if (last_ok != 0 && steady_now_ms() - last_ok <= options_.backend_ok_window.count())
        co_return verdict{true, "ok"};
    if (options_.backend_host.empty())
        co_return verdict{true, "ok"};
    co_return co_await backend_reachable();
}

// Why not dial on every probe: MySQL counts a connection closed during the handshake as a
// connect error of the client host (except loopback), and blocks the host once there are
// max_connect_errors of them. A dial is therefore the fallback when no session proved the
// backend recently, its verdict is cached for probe_cache_ttl, and concurrent probes share it.
asio::awaitable<verdict> admin_server::impl::backend_reachable() {
    if (probe_generation_ != 0 && steady_now_ms() - probe_done_ms_ < options_.probe_cache_ttl.count())
        co_return probe_cache_;
    const std::uint64_t generation = probe_generation_;
    if (!probe_in_flight_) {
        probe_in_flight_ = true;
        asio::co_spawn(strand_, run_probe(shared_from_this()), asio::detached);
    }
    if (probe_generation_ == generation) {
        // The dial itself is bounded, except name resolution (getaddrinfo cannot be cancelled):
        // this timer bounds the answer; a late dial still fills the cache.
        asio::steady_timer waiter(strand_, options_.backend_probe_timeout + probe_wait_margin);
        probe_waiters_.push_back(&waiter);
        co_await waiter.async_wait(use_tuple);
        std::erase(probe_waiters_, &waiter);
    }
    if (probe_generation_ != generation)
        co_return probe_cache_;
    co_return verdict{false, "backend probe timed out"};
}

asio::awaitable<void> admin_server::impl::run_probe(std::shared_ptr<impl>) {
    verdict v = co_await dial_backend();
    probe_cache_ = std::move(v);
    probe_done_ms_ = steady_now_ms();
    ++probe_generation_;
    probe_in_flight_ = false;
    for (asio::steady_timer* t : probe_waiters_)
        t->cancel();  // completions are posted: the waiters erase themselves later
    probe_waiters_.clear();
}

asio::awaitable<verdict> admin_server::impl::dial_backend() {
    const std::string where = fmt::format("{}:{}", options_.backend_host, options_.backend_port);
    tcp::resolver resolver(strand_);
    probe_resolver_ = &resolver;
    auto [resolve_ec, endpoints] = co_await resolver.async_resolve(
        options_.backend_host, std::to_string(options_.backend_port), tcp::resolver::numeric_service, use_tuple);
    probe_resolver_ = nullptr;
    if (stopped_)
        co_return verdict{false, "admin server stopping"};
    if (resolve_ec)
        co_return verdict{false, fmt::format("cannot resolve backend {}: {}", where, resolve_ec.message())};

    beast::tcp_stream stream(strand_);
    probe_stream_ = &stream;
    struct unregister {
        impl& server;
        ~unregister() { server.probe_stream_ = nullptr; }
    } const registered{*this};

    const auto deadline = std::chrono::steady_clock::now() + options_.backend_probe_timeout;
    stream.expires_at(deadline);
    auto [connect_ec, endpoint] = co_await stream.async_connect(endpoints, use_tuple);
    if (connect_ec)
        co_return verdict{false, fmt::format("backend {} unreachable: {}", where, connect_ec.message())};
    std::array<std::uint8_t, mysql_header_size + 1> head{};
    stream.expires_at(deadline);
    auto [read_ec, n] = co_await asio::async_read(stream, asio::buffer(head), use_tuple);
    stream.socket().shutdown(tcp::socket::shutdown_both, connect_ec);
    stream.close();
    if (read_ec)
        co_return verdict{false, fmt::format("backend {} sent no greeting: {}", where, read_ec.message())};

    const std::uint32_t length = head[0] | (head[1] << 8) | (head[2] << 16);
    if (length == 0 || head[3] != 0)
        co_return verdict{false, fmt::format("backend {} sent a malformed greeting", where)};
    if (head[mysql_header_size] == mysql_err_packet)
        co_return verdict{false, fmt::format("backend {} refused the connection with an error packet", where)};
    if (head[mysql_header_size] != mysql_protocol_v10)
        co_return verdict{false, fmt::format("backend {} does not speak MySQL protocol 10", where)};
    co_return verdict{true, "ok"};
}

admin_server::admin_server(asio::io_context& io, admin_options options, health_state& health)
    : impl_(std::make_shared<impl>(io, std::move(options), health)) {}

admin_server::~admin_server() {
    stop();
}

void admin_server::start() {
    impl_->listen();
    asio::co_spawn(impl_->strand_, impl_->accept_loop(impl_), asio::detached);
}

void admin_server::stop() {
    asio::dispatch(impl_->strand_, [self = impl_] { self->shutdown(); });
}

std::uint16_t admin_server::port() const {
    return impl_->port_.load();
}

void admin_server::add_post_handler(std::string path, post_handler handler) {
    const std::lock_guard lock(impl_->handlers_mutex_);
    impl_->post_handlers_.insert_or_assign(std::move(path), std::move(handler));
}

void admin_server::add_get_handler(std::string path, post_handler handler) {
    const std::lock_guard lock(impl_->handlers_mutex_);
    impl_->get_handlers_.insert_or_assign(std::move(path), std::move(handler));
}

}  // namespace claimguard::admin
