// The listener: worker threads each running one io_context, the accept loop with the
// connection limit, the admin endpoint and signal handling.
#include "server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <spdlog/spdlog.h>
#include <thread>
#include <vector>

#include "proxy/admin/admin_server.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "audit_log.hpp"
#include "proxy/protocol/packets.hpp"
#include "session.hpp"

namespace claimguard::session {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::uint16_t er_con_count = 1040;  // 08004 Too many connections
constexpr std::chrono::milliseconds accept_retry_delay{100};  // after EMFILE and friends

struct server_state {
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    std::unique_ptr<asio::ssl::context> backend_tls;
    admin::health_state health;
    std::atomic<std::uint64_t> next_session_id{1};
    std::atomic<std::size_t> active{0};
    engine::rules_holder rules;
    std::unique_ptr<audit_log> audit;
    std::vector<std::unique_ptr<guards::redis_guard>> redis;  // one per I/O thread
    session_context session_ctx;
};

std::unique_ptr<asio::ssl::context> make_backend_tls(const config::backend_tls_options& tls) {
    if (!tls.enabled) return nullptr;
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    if (!tls.ca_file.empty()) {
        ctx->load_verify_file(tls.ca_file);
    } else {
        ctx->set_default_verify_paths();
    }
    return ctx;
}

// Over the connection limit: the client gets MySQL's own answer, ERR 1040, instead of a greeting.
awaitable<void> refuse(tcp::socket socket) {
    auto frame = protocol::make_err_frame(0, er_con_count, "08004", "Too many connections");
    co_await asio::async_write(socket, asio::buffer(frame), nothrow);
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
}

awaitable<void> accept_loop(tcp::acceptor& acceptor, server_state& state, const config::proxy_options& options) {
    std::size_t next = 0;
    for (;;) {
        std::size_t index = next++ % state.contexts.size();
        auto& ctx = *state.contexts[index];
        guards::redis_guard* redis = state.redis.empty() ? nullptr : state.redis[index].get();
        auto [ec, socket] = co_await acceptor.async_accept(ctx.get_executor(), nothrow);
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        if (ec) {
            spdlog::warn("accept failed: {}", ec.message());
            asio::steady_timer pause(acceptor.get_executor(), accept_retry_delay);
            co_await pause.async_wait(nothrow);
            continue;
        }
        if (state.active.load() >= options.max_connections) {
            admin::metrics().connections_refused("max_connections").inc();
            spdlog::warn("refusing a connection: max connections ({}) reached", options.max_connections);
            asio::co_spawn(ctx, refuse(std::move(socket)), asio::detached);
            continue;
        }
        ++state.active;
        admin::metrics().client_connections.inc();
        admin::metrics().client_connections_total.inc();
        asio::co_spawn(
            ctx,
            [&state, redis, s = std::move(socket)]() mutable -> awaitable<void> {
                co_await run_session(std::move(s), state.session_ctx, redis);
                --state.active;
                admin::metrics().client_connections.dec();
            },
            asio::detached);
    }
}

}  // namespace

int run_server(const config::proxy_options& options) {
    server_state state;
    unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < threads; ++i) state.contexts.push_back(std::make_unique<asio::io_context>(1));
    auto& main_ctx = *state.contexts[0];

    try {
        state.backend_tls = make_backend_tls(options.backend_tls);
    } catch (const std::exception& e) {
        spdlog::critical("backend TLS setup failed: {}", e.what());
        return 1;
    }
    state.session_ctx = {&options, state.backend_tls.get(), &state.health, &state.next_session_id, nullptr, nullptr};

    if (!options.rules_files.empty()) {
        auto loaded = engine::load_rules_files(options.rules_files);
        if (!loaded.rules) {
            for (const auto& e : loaded.errors)
                spdlog::critical("{}:{}:{}: {}", e.pos.file, e.pos.line, e.pos.column, e.message);
            spdlog::critical("the rules files are not valid: not starting");
            return 2;
        }
        auto snapshot = std::make_shared<engine::rules_snapshot>(std::move(*loaded.rules));
        snapshot->files = options.rules_files;
        spdlog::info("rules loaded: {} stock rules, {} claim rules (version {})", snapshot->rules.stocks.size(),
                     snapshot->rules.claims.size(), snapshot->rules.version_hash);
        state.rules.replace(std::move(snapshot));
        state.session_ctx.rules = &state.rules;
        try {
            state.audit = std::make_unique<audit_log>(options.audit_log);
        } catch (const std::exception& e) {
            spdlog::critical("{}", e.what());
            return 1;
        }
        state.session_ctx.audit = state.audit.get();
        if (options.redis) {
            guards::redis_options ropts;
            ropts.host = options.redis->host;
            ropts.port = options.redis->port;
            ropts.command_timeout = options.redis_timeout;
            for (auto& ctx : state.contexts) state.redis.push_back(std::make_unique<guards::redis_guard>(ctx->get_executor(), ropts));
        }
    }

    tcp::acceptor acceptor(main_ctx);
    std::unique_ptr<admin::admin_server> admin_srv;
    try {
        tcp::endpoint listen_ep(asio::ip::make_address(options.listen.host), options.listen.port);
        acceptor.open(listen_ep.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(listen_ep);
        acceptor.listen(asio::socket_base::max_listen_connections);
        if (options.admin_enabled) {
            admin::admin_options admin_opts;
            admin_opts.address = options.admin.host;
            admin_opts.port = options.admin.port;
            admin_opts.backend_host = options.backend.host;
            admin_opts.backend_port = options.backend.port;
            admin_srv = std::make_unique<admin::admin_server>(main_ctx, admin_opts, state.health);
            admin_srv->start();
        }
    } catch (const std::exception& e) {
        spdlog::critical("cannot listen on {}:{}: {}", options.listen.host, options.listen.port, e.what());
        return 1;
    }
    auto bound = acceptor.local_endpoint();
    spdlog::info("claimguard listening on {}:{}, database at {}:{}{}, {} threads", bound.address().to_string(),
                 bound.port(), options.backend.host, options.backend.port,
                 options.backend_tls.enabled ? " (TLS)" : "", threads);
    if (admin_srv) spdlog::info("admin endpoint on {}:{}", options.admin.host, admin_srv->port());
    state.health.started = true;

    asio::co_spawn(main_ctx, accept_loop(acceptor, state, options), asio::detached);

    asio::signal_set signals(main_ctx, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        spdlog::info("signal {} received: shutting down", signo);
        state.health.shutting_down = true;
        boost::system::error_code ignored;
        acceptor.close(ignored);
        if (admin_srv) admin_srv->stop();
        for (auto& ctx : state.contexts) ctx->stop();
    });

    std::vector<std::thread> workers;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    for (auto& ctx : state.contexts) guards.push_back(asio::make_work_guard(*ctx));
    for (unsigned i = 1; i < threads; ++i) workers.emplace_back([&state, i] { state.contexts[i]->run(); });
    main_ctx.run();
    for (auto& ctx : state.contexts) ctx->stop();
    for (auto& w : workers) w.join();
    spdlog::info("claimguard stopped");
    return 0;
}

}  // namespace claimguard::session
