// Tests of the admin HTTP server over real loopback sockets: health endpoints, /metrics, limits.
#include "proxy/admin/admin_server.hpp"

#include "proxy/admin/metrics.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace claimguard::admin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Bounds every client wait so a broken server fails the test instead of hanging it.
constexpr std::chrono::seconds client_timeout{10};
const auto loopback = asio::ip::make_address_v4("127.0.0.1");

// ---------------------------------------------------------------- helpers

std::string mysql_packet(std::uint8_t sequence, const std::string& payload) {
    std::string p;
    p += static_cast<char>(payload.size() & 0xff);
    p += static_cast<char>((payload.size() >> 8) & 0xff);
    p += static_cast<char>((payload.size() >> 16) & 0xff);
    p += static_cast<char>(sequence);
    return p + payload;
}

// A protocol-10 greeting (version string and filler; the probe reads only the first byte).
const std::string v10_greeting = mysql_packet(0, std::string("\x0a") + "8.0.36-fake" + '\0' + std::string(40, 'x'));
// What MySQL sends instead of a greeting when it is full: ERR 1040.
const std::string err_greeting = mysql_packet(0, std::string("\xff\x10\x04", 3) + "Too many connections");

// A fake MySQL server on its own thread: counts connections, writes `greeting` (after the gate
// opens, if gated; never, if empty) and keeps the connection open until destroyed.
class fake_backend {
public:
    explicit fake_backend(std::string greeting, bool gated = false)
        : greeting_(std::move(greeting)), acceptor_(io_, tcp::endpoint(loopback, 0)), gate_(io_) {
        gate_.expires_at(gated ? asio::steady_timer::time_point::max() : asio::steady_timer::time_point::min());
        asio::co_spawn(io_, accept_loop(), asio::detached);
        thread_ = std::thread([this] { io_.run(); });
    }
    ~fake_backend() {
        asio::post(io_, [this] {
            acceptor_.close();
            gate_.cancel();
            for (auto& s : held_)
                s->close();
        });
        thread_.join();
    }
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    int accepted() const { return accepted_.load(); }
    void open_gate() {
        asio::post(io_, [this] { gate_.expires_at(asio::steady_timer::time_point::min()); });
    }

private:
    asio::awaitable<void> accept_loop() {
        for (;;) {
            auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return;
            ++accepted_;
            held_.push_back(std::make_shared<tcp::socket>(std::move(socket)));
            asio::co_spawn(io_, greet(held_.back()), asio::detached);
        }
    }
    asio::awaitable<void> greet(std::shared_ptr<tcp::socket> s) {
        // A gate timer set in the past completes at once; open_gate() moves it there.
        while (gate_.expiry() > std::chrono::steady_clock::now()) {
            co_await gate_.async_wait(asio::as_tuple(asio::use_awaitable));
            if (!acceptor_.is_open())
                co_return;
        }
        if (!greeting_.empty())
            co_await asio::async_write(*s, asio::buffer(greeting_), asio::as_tuple(asio::use_awaitable));
    }

    std::string greeting_;
    asio::io_context io_;
    tcp::acceptor acceptor_;
    asio::steady_timer gate_;
    std::vector<std::shared_ptr<tcp::socket>> held_;
    std::atomic<int> accepted_{0};
    std::thread thread_;
};

// A port nothing listens on: bound, read, released.
std::uint16_t closed_port() {
    asio::io_context io;
    tcp::acceptor a(io, tcp::endpoint(loopback, 0));
    return a.local_endpoint().port();
}

// The admin server on an ephemeral loopback port, its io_context on a thread.
struct server_under_test {
    explicit server_under_test(admin_options o = {}) : server(io, with_test_defaults(std::move(o)), health) {
        server.start();
        thread = std::thread([this] { io.run(); });
    }
    ~server_under_test() {
        server.stop();
        thread.join();
    }
    admin_options with_test_defaults(admin_options o) {
        o.address = "127.0.0.1";
        o.port = 0;
        o.metrics = &metrics;
        return o;
    }

    asio::io_context io;
    health_state health;
    registry metrics;
    admin_server server;
    std::thread thread;
};

struct reply {
    unsigned status = 0;
    std::string body;
    std::string content_type;
    std::string content_length;
    std::string allow;
};

// A client connection with bounded waits.
class client {
public:
    explicit client(std::uint16_t port) : socket_(io_) { socket_.connect(tcp::endpoint(loopback, port)); }

    void send(std::string_view bytes) { asio::write(socket_, asio::buffer(bytes)); }

    reply exchange(http::verb method, std::string target, std::string body = {}) {
        http::request<http::string_body> req{method, target, 11};
        req.set(http::field::host, "127.0.0.1");
        req.body() = std::move(body);
        req.prepare_payload();
        http::write(socket_, req);
        http::response_parser<http::string_body> parser;
        parser.body_limit(boost::none);
        parser.skip(method == http::verb::head);
        boost::system::error_code ec;
        bool done = false;
        http::async_read(socket_, buffer_, parser, [&](boost::system::error_code e, std::size_t) {
            ec = e;
            done = true;
        });
        wait(done);
        EXPECT_FALSE(ec) << ec.message();
        const auto& res = parser.get();
        return reply{res.result_int(), res.body(), std::string(res[http::field::content_type]),
                     std::string(res[http::field::content_length]), std::string(res[http::field::allow])};
    }

    // Everything the server sends until it closes the connection.
    std::string read_until_close() {
        std::string out;
        bool done = false;
        asio::async_read(socket_, asio::dynamic_buffer(out), [&](boost::system::error_code, std::size_t) {
            done = true;
        });
        wait(done);
        return out;
    }

private:
    void wait(bool& done) {
        io_.restart();
        io_.run_for(client_timeout);
        if (!done) {
            ADD_FAILURE() << "no answer within " << client_timeout.count() << " s";
            socket_.close();
            io_.restart();
            io_.run();
        }
    }

    asio::io_context io_;
    tcp::socket socket_;
    beast::flat_buffer buffer_;
};

template <class Edit>
admin_options options(Edit edit) {
    admin_options o;
    edit(o);
    return o;
}

reply get(std::uint16_t port, std::string target) {
    return client(port).exchange(http::verb::get, std::move(target));
}

// ---------------------------------------------------------------- lifecycle

TEST(admin_server, defaults_bind_loopback_on_9090) {
    const admin_options o;
    EXPECT_EQ(o.address, "127.0.0.1");
    EXPECT_EQ(o.port, 9090);
}

TEST(admin_server, port_is_known_after_start) {
    asio::io_context io;
    health_state health;
    admin_server server(io, options([](admin_options& o) { o.port = 0; }), health);
    EXPECT_EQ(server.port(), 0);
    server.start();
    EXPECT_NE(server.port(), 0);
}

TEST(admin_server, start_throws_when_the_port_is_taken) {
    asio::io_context io;
    tcp::acceptor taken(io, tcp::endpoint(loopback, 0));
    health_state health;
    admin_server server(io, options([&](admin_options& o) { o.port = taken.local_endpoint().port(); }), health);
    EXPECT_THROW(server.start(), std::system_error);
}

TEST(admin_server, start_throws_on_an_address_that_is_not_an_ip) {
    asio::io_context io;
    health_state health;
    admin_server server(io, options([](admin_options& o) {
                                o.address = "admin.example";
                                o.port = 0;
                            }), health);
    EXPECT_THROW(server.start(), std::system_error);
}

TEST(admin_server, stop_closes_the_listener_and_ends_the_io_context) {
    auto s = std::make_unique<server_under_test>();
    const std::uint16_t port = s->server.port();
    EXPECT_EQ(get(port, "/liveness").status, 200u);
    client idle(port);  // an open connection must not keep the server alive
    s->server.stop();
    s->thread.join();   // returns only if every coroutine ended
    s->thread = std::thread([] {});
    asio::io_context io;
    tcp::socket socket(io);
    boost::system::error_code ec;
    socket.connect(tcp::endpoint(loopback, port), ec);
    EXPECT_EQ(ec, asio::error::connection_refused);
}

// ---------------------------------------------------------------- routes

TEST(admin_server, startup_turns_ok_once_started) {
    server_under_test s;
    const reply before = get(s.server.port(), "/startup");
    EXPECT_EQ(before.status, 503u);
    EXPECT_EQ(before.body, "starting up");
    s.health.started = true;
    const reply after = get(s.server.port(), "/startup");
    EXPECT_EQ(after.status, 200u);
    EXPECT_EQ(after.body, "ok");
}

TEST(admin_server, liveness_is_ok_even_while_shutting_down) {
    server_under_test s;
    s.health.shutting_down = true;
    const reply r = get(s.server.port(), "/liveness");
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "ok");
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
}

TEST(admin_server, metrics_renders_the_registry_with_the_prometheus_content_type) {
    server_under_test s;
    s.metrics.add_counter("test_scrapes_total", "Scrapes.").inc(7);
    s.metrics.counter_family("test_rule_hits_total", "Hits.", {"rule"}).with("coupon \"a\"").inc();
    const reply r = get(s.server.port(), "/metrics");
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r.body, s.metrics.render());
    EXPECT_EQ(r.body,
              "# HELP test_scrapes_total Scrapes.\n# TYPE test_scrapes_total counter\ntest_scrapes_total 7\n"
              "# HELP test_rule_hits_total Hits.\n# TYPE test_rule_hits_total counter\n"
              "test_rule_hits_total{rule=\"coupon \\\"a\\\"\"} 1\n");
}

TEST(admin_server, head_answers_headers_without_body) {
    server_under_test s;
    s.metrics.add_counter("test_total", "T.").inc();
    const reply head = client(s.server.port()).exchange(http::verb::head, "/metrics");
    EXPECT_EQ(head.status, 200u);
    EXPECT_EQ(head.body, "");
    EXPECT_EQ(head.content_length, std::to_string(s.metrics.render().size()));
}

TEST(admin_server, keep_alive_serves_several_requests_on_one_connection) {
    server_under_test s;
    s.health.started = true;
    client c(s.server.port());
    EXPECT_EQ(c.exchange(http::verb::get, "/liveness").status, 200u);
    EXPECT_EQ(c.exchange(http::verb::get, "/startup").status, 200u);
    EXPECT_EQ(c.exchange(http::verb::get, "/nope").status, 404u);
    EXPECT_EQ(c.exchange(http::verb::get, "/metrics").status, 200u);
}

struct route_case {
    const char* name;
    http::verb method;
    const char* target;
    unsigned status;
    const char* body;   // nullptr: not checked
    const char* allow;  // expected Allow header ("" when none)
};

class admin_routes : public testing::TestWithParam<route_case> {};

TEST_P(admin_routes, answer) {
    server_under_test s;
    std::atomic<int> reloads{0};
    s.server.add_post_handler("/-/reload", [&reloads] {
        ++reloads;
        return std::pair<int, std::string>{200, "reloaded"};
    });
    s.server.add_post_handler("/-/broken", []() -> std::pair<int, std::string> {
        throw std::runtime_error("rules file unreadable");
    });
    s.server.add_post_handler("/-/bad-status", [] { return std::pair<int, std::string>{42, "odd"}; });
    const route_case& c = GetParam();
    const reply r = client(s.server.port()).exchange(c.method, c.target);
    EXPECT_EQ(r.status, c.status);
    if (c.body != nullptr) {
        EXPECT_EQ(r.body, c.body);
    }
    EXPECT_EQ(r.allow, c.allow);
    EXPECT_EQ(reloads, std::string_view(c.name) == "post_handler_runs" ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(
    cases, admin_routes,
    testing::Values(
        route_case{"unknown_path", http::verb::get, "/", 404, "not found", ""},
        route_case{"unknown_path_other_method", http::verb::delete_, "/nope", 404, "not found", ""},
        route_case{"prefix_is_not_a_match", http::verb::get, "/metricsx", 404, "not found", ""},
        route_case{"query_string_ignored", http::verb::get, "/liveness?verbose=1", 200, "ok", ""},
        route_case{"post_to_get_endpoint", http::verb::post, "/metrics", 405, "method not allowed", "GET, HEAD"},
        route_case{"put_to_get_endpoint", http::verb::put, "/readiness", 405, "method not allowed", "GET, HEAD"},
        route_case{"get_to_post_endpoint", http::verb::get, "/-/reload", 405, "method not allowed", "POST"},
        route_case{"post_handler_runs", http::verb::post, "/-/reload", 200, "reloaded", ""},
        route_case{"post_handler_throws", http::verb::post, "/-/broken", 500, "rules file unreadable", ""},
        route_case{"post_handler_bad_status", http::verb::post, "/-/bad-status", 500, "odd", ""}),
    [](const testing::TestParamInfo<route_case>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- limits

struct raw_case {
    const char* name;
    std::string request;
    const char* status_line;
};

class admin_rejects : public testing::TestWithParam<raw_case> {};

TEST_P(admin_rejects, with_status_and_close) {
    server_under_test s;
    client c(s.server.port());
    c.send(GetParam().request);
    const std::string answer = c.read_until_close();
    EXPECT_TRUE(answer.starts_with(GetParam().status_line)) << answer;
}

INSTANTIATE_TEST_SUITE_P(
    cases, admin_rejects,
    testing::Values(
        raw_case{"header_over_limit",
                 "GET /liveness HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(2 * default_admin_header_limit, 'a') +
                     "\r\n\r\n",
                 "HTTP/1.1 431 "},
        raw_case{"body_over_limit",
                 "POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(default_admin_body_limit + 1) + "\r\n\r\n" +
                     std::string(default_admin_body_limit + 1, 'b'),
                 "HTTP/1.1 413 "},
        raw_case{"announced_body_over_limit",
                 "POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n", "HTTP/1.1 413 "},
        raw_case{"garbage_request_line", "HELLO\x01 WORLD\r\n\r\n", "HTTP/1.1 400 "},
        raw_case{"connection_close_honoured", "GET /liveness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 "HTTP/1.1 200 "}),
    [](const testing::TestParamInfo<raw_case>& info) { return std::string(info.param.name); });

TEST(admin_server, incomplete_request_is_closed_after_the_request_timeout) {
    server_under_test s(options([](admin_options& o) { o.request_timeout = std::chrono::milliseconds(200); }));
    client c(s.server.port());
    c.send("GET /liveness HTTP/1.1\r\nHost:");  // and then nothing, like a slowloris
    EXPECT_EQ(c.read_until_close(), "");
}

TEST(admin_server, connections_over_the_limit_are_closed_at_once) {
    server_under_test s(options([](admin_options& o) {
        o.max_connections = 2;
        o.request_timeout = std::chrono::seconds(60);
    }));
    const std::uint16_t port = s.server.port();
    auto first = std::make_unique<client>(port);
    client second(port);
    client third(port);  // accepted by the kernel, closed by the server
    EXPECT_EQ(third.read_until_close(), "");
    EXPECT_EQ(second.exchange(http::verb::get, "/liveness").status, 200u);

    first.reset();  // frees a slot once the server sees the close
    bool served = false;
    for (int attempt = 0; attempt < 100 && !served; ++attempt) {
        client next(port);
        next.send("GET /liveness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        served = next.read_until_close().starts_with("HTTP/1.1 200 ");
        if (!served)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(served);
}

// ---------------------------------------------------------------- readiness

enum class backend_kind { not_configured, greets, error_packet, closed_port, silent };

struct readiness_case {
    const char* name;
    bool started;
    bool shutting_down;
    int session_ok_age_ms;  // -1: no session ever reached the backend
    backend_kind backend;
    unsigned status;
    const char* body_contains;
    int dials;  // connections the fake backend saw; -1: no fake backend
};

class admin_readiness : public testing::TestWithParam<readiness_case> {};

TEST_P(admin_readiness, answer) {
    const readiness_case& c = GetParam();
    std::unique_ptr<fake_backend> backend;
    admin_options o;
    o.backend_host = "127.0.0.1";
    o.backend_probe_timeout = std::chrono::milliseconds(300);
    switch (c.backend) {
    case backend_kind::not_configured: o.backend_host.clear(); break;
    case backend_kind::greets: backend = std::make_unique<fake_backend>(v10_greeting); break;
    case backend_kind::error_packet: backend = std::make_unique<fake_backend>(err_greeting); break;
    case backend_kind::silent: backend = std::make_unique<fake_backend>(""); break;
    case backend_kind::closed_port: o.backend_port = closed_port(); break;
    }
    if (backend)
        o.backend_port = backend->port();

    server_under_test s(o);
    s.health.started = c.started;
    s.health.shutting_down = c.shutting_down;
    if (c.session_ok_age_ms >= 0)
        s.health.last_backend_ok_ms = steady_now_ms() - c.session_ok_age_ms;

    const reply r = get(s.server.port(), "/readiness");
    EXPECT_EQ(r.status, c.status);
    EXPECT_NE(r.body.find(c.body_contains), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find('\n'), std::string::npos) << "one line: " << r.body;
    if (c.status == 200) {
        EXPECT_EQ(r.body, "ok");
    }
    if (backend) {
        EXPECT_EQ(backend->accepted(), c.dials);
    }
}

INSTANTIATE_TEST_SUITE_P(
    cases, admin_readiness,
    testing::Values(
        readiness_case{"not_started", false, false, -1, backend_kind::greets, 503, "starting up", 0},
        readiness_case{"shutting_down", true, true, 0, backend_kind::greets, 503, "shutting down", 0},
        readiness_case{"backend_greets", true, false, -1, backend_kind::greets, 200, "ok", 1},
        readiness_case{"recent_session_needs_no_dial", true, false, 0, backend_kind::greets, 200, "ok", 0},
        readiness_case{"recent_session_wins_over_dial", true, false, 0, backend_kind::closed_port, 200, "ok", -1},
        readiness_case{"stale_session_dials", true, false, 60000, backend_kind::greets, 200, "ok", 1},
        readiness_case{"backend_port_closed", true, false, -1, backend_kind::closed_port, 503, "unreachable", -1},
        readiness_case{"backend_full_error_packet", true, false, -1, backend_kind::error_packet, 503, "error packet",
                       1},
        readiness_case{"backend_silent", true, false, -1, backend_kind::silent, 503, "no greeting", 1},
        readiness_case{"no_backend_configured", true, false, -1, backend_kind::not_configured, 200, "ok", -1}),
    [](const testing::TestParamInfo<readiness_case>& info) { return std::string(info.param.name); });

struct cache_case {
    const char* name;
    std::chrono::milliseconds ttl;
    int dials_after_two_probes;
};

class admin_readiness_cache : public testing::TestWithParam<cache_case> {};

TEST_P(admin_readiness_cache, dials_once_per_ttl) {
    fake_backend backend(v10_greeting);
    server_under_test s(options([&](admin_options& o) {
        o.backend_host = "127.0.0.1";
        o.backend_port = backend.port();
        o.probe_cache_ttl = GetParam().ttl;
    }));
    s.health.started = true;
    EXPECT_EQ(get(s.server.port(), "/readiness").status, 200u);
    EXPECT_EQ(get(s.server.port(), "/readiness").status, 200u);
    EXPECT_EQ(backend.accepted(), GetParam().dials_after_two_probes);
}

INSTANTIATE_TEST_SUITE_P(cases, admin_readiness_cache,
                         testing::Values(cache_case{"cached", std::chrono::minutes(1), 1},
                                         cache_case{"not_cached", std::chrono::milliseconds(0), 2}),
                         [](const testing::TestParamInfo<cache_case>& info) { return std::string(info.param.name); });

TEST(admin_server, concurrent_readiness_probes_share_one_dial) {
    constexpr int probes = 4;
    fake_backend backend(v10_greeting, /*gated=*/true);
    server_under_test s(options([&](admin_options& o) {
        o.backend_host = "127.0.0.1";
        o.backend_port = backend.port();
        o.backend_probe_timeout = std::chrono::seconds(5);
        o.probe_cache_ttl = std::chrono::minutes(1);
    }));
    s.health.started = true;
    std::vector<std::unique_ptr<client>> clients;
    for (int i = 0; i < probes; ++i) {
        clients.push_back(std::make_unique<client>(s.server.port()));
        clients.back()->send("GET /readiness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    }
    // The greeting is held back: whichever probes reach the server meanwhile must join the dial.
    for (int i = 0; i < 200 && backend.accepted() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    backend.open_gate();
    for (auto& c : clients) {
        const std::string answer = c->read_until_close();
        EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 ")) << answer;
    }
    EXPECT_EQ(backend.accepted(), 1);
}

}  // namespace
}  // namespace claimguard::admin
