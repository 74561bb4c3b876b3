// The listener: worker threads each running one io_context, the accept loop with the
// connection limit, the admin endpoint and signal handling.
#include "server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <functional>
#include <sys/resource.h>
#include <sys/stat.h>
#include <memory>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>
#include <string>
#include <thread>
#include <vector>

#include "proxy/admin/admin_server.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/engine/read_cache.hpp"
#include "proxy/engine/admission_gate.hpp"
#include "proxy/engine/take_ledger.hpp"
#include "proxy/guards/redis_guard.hpp"
#include "proxy/config/settings.hpp"
#include "audit_log.hpp"
#include "statement_digests.hpp"
#include "logging.hpp"
#include "reserve_link.hpp"
#include "rules_reloader.hpp"
#include "schema_watch.hpp"
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
// listen_unix's socket file: read-write for everyone. Who may connect is decided by who can reach
// the file (the shared volume's directory: in a pod, only its containers), as for mysqld's own
// socket; 0660 would need the app to share claimguard's group (fsGroup), which pods often lack.
constexpr auto unix_socket_mode = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                  std::filesystem::perms::group_read | std::filesystem::perms::group_write |
                                  std::filesystem::perms::others_read | std::filesystem::perms::others_write;
using unix_acceptor = asio::local::stream_protocol::acceptor;
// Each client connection holds two descriptors (its socket and its own backend link); the rest (listeners,
// epoll, timers, Redis, the audit log, admin requests) fits in this reserve.
constexpr std::size_t fds_per_connection = 2;
constexpr std::size_t fd_reserve = 64;

// The soft RLIMIT_NOFILE is often 1024 (container runtimes, systemd) under a far higher hard limit, and
// Kubernetes has no per-container setting: raise the soft limit to the hard one, and say when even that
// is short of what max_connections needs (accepts beyond it fail with EMFILE and are retried).
void raise_fd_limit(std::size_t max_connections) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    const rlim_t before = limit.rlim_cur;
    if (limit.rlim_cur != limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = before;
    }
    const auto shown = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); };
    spdlog::info("open files limit {} (was {}, hard limit {})", shown(limit.rlim_cur), shown(before),
                 shown(limit.rlim_max));
    const std::size_t needed = max_connections * fds_per_connection + fd_reserve;
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
        spdlog::warn(
            "max_connections {} needs about {} open files; the limit is {}: connections beyond about {} "
            "will fail to open",
            max_connections, needed, shown(limit.rlim_cur),
            limit.rlim_cur > fd_reserve ? (limit.rlim_cur - fd_reserve) / fds_per_connection : 0);
}

struct server_state {
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    std::unique_ptr<asio::ssl::context> backend_tls;
    admin::health_state health;
    std::atomic<std::uint64_t> next_session_id{1};
    std::atomic<std::size_t> active{0};
    std::atomic<bool> draining{false};
    engine::rules_holder rules;
    engine::take_ledger ledger;  // committed takes awaiting their claim, across the sidecar's connections
    engine::read_cache read_cache;  // counter reads answered by the sidecar (stock rule read_cache)
    engine::admission_gate admission;  // per-key admission queues (stock rule admission:), across the sessions
    engine::reserve_pool reserve;      // reserved stock (stock rule reserve:), across the sessions
    std::unique_ptr<audit_log> audit;
    statement_digests digests;  // the shapes audited (GET /digests)
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

std::shared_ptr<asio::ssl::context> make_redis_tls(const config::proxy_options& o) {
    if (!o.redis_tls) return nullptr;
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    if (!o.redis_tls_ca.empty()) {
        ctx->load_verify_file(o.redis_tls_ca);
    } else {
        ctx->set_default_verify_paths();
    }
    if (!o.redis_tls_cert.empty()) {
        ctx->use_certificate_chain_file(o.redis_tls_cert);
        ctx->use_private_key_file(o.redis_tls_key, asio::ssl::context::pem);
    }
    return ctx;
}

guards::redis_options make_redis_options(const config::proxy_options& o) {
    guards::redis_options r;
    r.nodes.clear();
    for (const auto& e : o.redis) r.nodes.push_back({e.host, e.port});
    r.cluster = o.redis_cluster;
    r.command_timeout = o.redis_timeout;
    r.credentials = {o.redis_user, o.redis_password, o.redis_password_file};
    r.tls = make_redis_tls(o);
    r.tls_server_name = o.redis_tls_server_name;
    r.tls_verify = o.redis_tls_verify;
    return r;
}

// Over the connection limit: the client gets MySQL's own answer, ERR 1040, instead of a greeting.
// How often the take ledger is swept: takes no claim used within take_ledger::take_lifetime are
// then counted and audited even when their key is never touched again.
constexpr std::chrono::seconds ledger_sweep_interval{5};

// Leaks visible in production: per rule, the units taken and not (yet) used by a claim (a gauge,
// present at 0 for every stock rule), and every take no claim used, counted and audited with its key.
awaitable<void> sweep_ledger(server_state& state) {
    auto& r = admin::default_registry();
    auto& unclaimed = r.counter_family("claimguard_unclaimed_takes_total",
                                       "Takes no claim used within 60 s (their units stay taken: a leak unless the "
                                       "app meant to decrement without a claim); each is audited with its key",
                                       {"rule"});
    auto& unclaimed_units =
        r.counter_family("claimguard_unclaimed_units_total", "Units of the takes counted in claimguard_unclaimed_takes_total",
                         {"rule"});
    auto& waiting = r.gauge_family("claimguard_ledger_waiting_units",
                                   "Units taken by committed decrements and not used by a claim yet (taken - claimed - "
                                   "given back, for the takes of the last 60 s)",
                                   {"rule"});
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (;;) {
        const auto snapshot = state.rules.current();
        const auto units = state.ledger.waiting_units();
        if (snapshot)
            for (const auto& stock : snapshot->rules.stocks) {
                auto it = units.find(stock.name);
                waiting.with(stock.name).set(it == units.end() ? 0 : it->second);
                (void)unclaimed.with(stock.name);  // present at 0 for every stock rule, like the gauge
                (void)unclaimed_units.with(stock.name);
            }
        for (const auto& t : state.ledger.sweep()) {
            unclaimed.with(t.rule).inc();
            unclaimed_units.with(t.rule).inc(static_cast<std::uint64_t>(t.units));
            if (!state.audit || !state.audit->enabled()) continue;
            audit_event e;
            e.session = t.session;
            e.rule = t.rule;
            e.action = "unclaimed-take";
            e.host = state.audit->host();
            if (snapshot) e.rules_version = snapshot->rules.version_hash;
            const std::string note = std::to_string(t.units) + " unit(s) taken " + std::to_string(t.age.count()) +
                                     " s ago that no claim used: they stay taken";
            e.note = note;
            const auto* stock = snapshot ? snapshot->rules.find_stock(t.rule) : nullptr;
            for (std::size_t i = 0; i < t.key.size(); ++i)
                e.keys.emplace_back(stock && i < stock->key_columns.size() ? stock->key_columns[i] : "database", t.key[i]);
            state.audit->write(e);
        }
        timer.expires_after(ledger_sweep_interval);
        auto [ec] = co_await timer.async_wait(nothrow);
        if (ec) co_return;
    }
}

awaitable<void> refuse(client_socket socket) {
    auto frame = protocol::make_err_frame(0, er_con_count, "08004", "Too many connections");
    co_await asio::async_write(socket, asio::buffer(frame), nothrow);
    boost::system::error_code ignored;
    socket.shutdown(asio::socket_base::shutdown_both, ignored);
}

// One loop per listener (TCP, unix): the same limit, the same sessions.
template <class Acceptor>
awaitable<void> accept_loop(Acceptor& acceptor, server_state& state, const config::proxy_options& options) {
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
            asio::co_spawn(ctx, refuse(client_socket(std::move(socket))), asio::detached);
            continue;
        }
        ++state.active;
        admin::metrics().client_connections.inc();
        admin::metrics().client_connections_accepted.inc();
        asio::co_spawn(
            ctx,
            [&state, redis, s = client_socket(std::move(socket))]() mutable -> awaitable<void> {
                co_await run_session(std::move(s), state.session_ctx, redis);
                --state.active;
                admin::metrics().client_connections.dec();
            },
            asio::detached);
    }
}

// SIGTERM / /quitquitquit: readiness 503 at once; keep accepting for min_shutdown_delay; then
// stop accepting and let open sessions finish their command or transaction, up to
// max_shutdown_delay; then close what is left and stop.
class shutdown_sequence {
public:
    shutdown_sequence(server_state& state, tcp::acceptor& acceptor, unix_acceptor& unix_listener,
                      const config::proxy_options& options)
        : state_(state), acceptor_(acceptor), unix_(unix_listener), options_(options), timer_(*state.contexts[0]) {}

    void begin(std::string_view why) {
        if (begun_) return;
        begun_ = true;
        spdlog::info("shutting down ({}): readiness is 503; accepting new connections for {} ms more", why,
                     options_.min_shutdown_delay.count());
        state_.health.shutting_down = true;
        deadline_ = clock_type::now() + options_.max_shutdown_delay;
        timer_.expires_after(options_.min_shutdown_delay);
        timer_.async_wait([this](boost::system::error_code ec) {
            if (ec) return;
            close_listeners();
            state_.draining = true;
            poll();
        });
    }

    // A second signal: stop now.
    void now() {
        spdlog::warn("second shutdown request: closing every session now");
        stop_all();
    }

private:
    using clock_type = std::chrono::steady_clock;

    void poll() {
        for (auto& ctx : state_.contexts) asio::post(*ctx, [] { (void)drain_sessions_on_this_thread(false); });
        if (state_.active.load() == 0) {
            spdlog::info("all sessions closed");
            return stop_contexts();
        }
        if (clock_type::now() >= deadline_) {
            spdlog::warn("{} session(s) still open after max_shutdown_delay: closing them", state_.active.load());
            return stop_all();
        }
        timer_.expires_after(poll_interval);
        timer_.async_wait([this](boost::system::error_code ec) {
            if (!ec) poll();
        });
    }

    void stop_all() {
        state_.draining = true;
        close_listeners();
        for (auto& ctx : state_.contexts) asio::post(*ctx, [] { (void)drain_sessions_on_this_thread(true); });
        timer_.expires_after(close_grace);
        timer_.async_wait([this](boost::system::error_code) { stop_contexts(); });
    }

    void close_listeners() {
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        if (unix_.is_open()) {
            unix_.close(ignored);
            std::error_code removed;
            std::filesystem::remove(options_.listen_unix, removed);  // new apps get ENOENT, not a dead socket
        }
    }

    void stop_contexts() {
        for (auto& ctx : state_.contexts) ctx->stop();
    }

    static constexpr std::chrono::milliseconds poll_interval{100};
    static constexpr std::chrono::milliseconds close_grace{200};  // for sessions to write their last bytes

    server_state& state_;
    tcp::acceptor& acceptor_;
    unix_acceptor& unix_;
    const config::proxy_options& options_;
    asio::steady_timer timer_;
    clock_type::time_point deadline_{};
    bool begun_ = false;
};

// Binds listen_unix: a socket file left by a previous run (killed, not shut down) is removed
// first. A socket something still accepts on (another claimguard, a mysqld) and any other kind
// of file there are errors, never deleted.
void listen_on_unix_socket(unix_acceptor& acceptor, const std::string& path) {
    asio::local::stream_protocol::endpoint ep(path);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(path + " exists and is not a socket");
        asio::local::stream_protocol::socket probe(acceptor.get_executor());
        boost::system::error_code ec;
        probe.connect(ep, ec);  // a unix connect never waits on the network: refused at once when stale
        if (!ec) throw std::runtime_error(path + " is in use: a server accepts connections on it");
        std::filesystem::remove(path);
    }
    acceptor.open(ep.protocol());
    acceptor.bind(ep);
    std::filesystem::permissions(path, unix_socket_mode, std::filesystem::perm_options::replace);
    acceptor.listen(asio::socket_base::max_listen_connections);
}

}  // namespace

int run_server(const config::proxy_options& options) {
    setup_logging(options.log_level, options.log_format);
    raise_fd_limit(options.max_connections);
    admin::metrics().max_connections.set(static_cast<std::int64_t>(options.max_connections));  // and the start time
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
    state.session_ctx = {&options,      state.backend_tls.get(), &state.health, &state.next_session_id,
                         nullptr,       nullptr,                 &state.draining};

    std::unique_ptr<rules_reloader> reloader;
    std::unique_ptr<schema_watch> schema;  // outlives nothing it points to: state and options do
    std::unique_ptr<reserve_link> reserve;  // reserve's own connection (schema_check_user's account)
    if (!options.rules_files.empty() || !options.rules_dir.empty()) {
        reloader = std::make_unique<rules_reloader>(main_ctx, state.rules, options.rules_files, options.rules_dir);
        schema = std::make_unique<schema_watch>(options, state.rules, state.health);
        if (schema->enabled())
            reloader->set_schema_hooks(
                [&schema](const rules::rule_set& next, const std::vector<rules::match::code_object>& previous) {
                    return schema->vet(next, previous);
                },
                [&schema] { schema->wake(); });
        if (options.observe_override) (void)reloader->set_observe_override(true, "mode_override: observe");
        if (!reloader->reload("load").first) {
            spdlog::critical("the rules are not valid: not starting (check them with claimguard validate)");
            return 2;
        }
        if (options.watch_rules) reloader->watch();
        state.session_ctx.rules = &state.rules;
        state.session_ctx.ledger = &state.ledger;
        state.session_ctx.read_cache = &state.read_cache;
        state.session_ctx.admission = &state.admission;
        reserve = std::make_unique<reserve_link>(options, state.reserve, state.rules, &state.read_cache);
        if (reserve->enabled()) {
            state.session_ctx.reserve = &state.reserve;
            state.session_ctx.reserve_conn = reserve.get();
        } else if (auto current = state.rules.current()) {
            for (const auto& r : current->rules.stocks)
                if (r.reserve)
                    spdlog::warn(
                        "rule {} has reserve: but no schema_check_user is set: reserve needs the sidecar's "
                        "own account (docs/OPERATIONS.md); its takes go to the row as without reserve",
                        r.name);
        }
        try {
            auto& dropped = admin::default_registry().add_counter(
                "claimguard_audit_dropped_lines_total",
                "Audit lines dropped because the audit log could not be written fast enough");
            state.audit = std::make_unique<audit_log>(options.audit_log, audit_log::default_max_pending_bytes,
                                                      [&dropped] { dropped.inc(); });
        } catch (const std::exception& e) {
            spdlog::critical("{}", e.what());
            return 1;
        }
        state.session_ctx.audit = state.audit.get();
        state.session_ctx.digests = &state.digests;
        state.session_ctx.unlisted_dropped = &admin::default_registry().add_counter(
            "claimguard_unlisted_tables_dropped_total",
            "Statements of tables beyond watch_unlisted_tables, not kept in /digests");
        if (!options.redis.empty()) {
            guards::redis_options ropts;
            try {
                ropts = make_redis_options(options);
                // A wrong password is an operator's mistake to see now, not a silent fail-open forever.
                auto refused = guards::check_redis_credentials(ropts);
                if (!refused.empty()) {
                    spdlog::critical("Redis refused the credentials{} ({}); not starting: check redis_user and the "
                                     "password in {}",
                                     options.redis_user.empty() ? "" : " of user " + options.redis_user, refused,
                                     options.redis_password_file.empty() ? config::redis_password_env
                                                                         : options.redis_password_file);
                    return 1;
                }
            } catch (const std::exception& e) {
                spdlog::critical("Redis guard setup failed: {}", e.what());
                return 1;
            }
            for (auto& ctx : state.contexts)
                state.redis.push_back(std::make_unique<guards::redis_guard>(ctx->get_executor(), ropts));
        }
    }

    tcp::acceptor acceptor(main_ctx);
    unix_acceptor unix_listener(main_ctx);
    shutdown_sequence shutdown(state, acceptor, unix_listener, options);
    std::unique_ptr<admin::admin_server> admin_srv;
    std::unique_ptr<admin::admin_server> control_srv;
    try {
        tcp::endpoint listen_ep(asio::ip::make_address(options.listen.host), options.listen.port);
        acceptor.open(listen_ep.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(listen_ep);
        acceptor.listen(asio::socket_base::max_listen_connections);
        if (!options.listen_unix.empty()) {
            try {
                listen_on_unix_socket(unix_listener, options.listen_unix);
            } catch (const std::exception& e) {
                spdlog::critical("cannot listen on unix:{}: {}", options.listen_unix, e.what());
                return 1;
            }
        }
        if (options.admin_enabled) {
            admin::admin_options admin_opts;
            admin_opts.address = options.admin.host;
            admin_opts.port = options.admin.port;
            admin_opts.backend_host = options.backend.host;
            admin_opts.backend_port = options.backend.port;
            admin_srv = std::make_unique<admin::admin_server>(main_ctx, admin_opts, state.health);
            admin_srv->start();
            if (reloader)
                admin_srv->add_get_handler("/rules", [&] {
                    return std::pair<int, std::string>{200, reloader->describe()};
                });
            // What the rules acted on (or would have, in observe), by statement shape.
            admin_srv->add_get_handler("/digests", [&] { return std::pair<int, std::string>{200, state.digests.json()}; });
            admin_srv->add_get_handler("/digests.txt",
                                       [&] { return std::pair<int, std::string>{200, state.digests.text()}; });
        }
        // The control listener (issue 22): what changes the sidecar, loopback only by default.
        if (options.control_enabled) {
            admin::admin_options control_opts;
            control_opts.address = options.control.host;
            control_opts.port = options.control.port;
            control_opts.builtin_routes = false;
            control_srv = std::make_unique<admin::admin_server>(main_ctx, control_opts, state.health);
            control_srv->start();
            // Handlers run on the server's strand (the main thread): they only post work.
            control_srv->add_post_handler("/quitquitquit", [&] {
                asio::post(main_ctx, [&] { shutdown.begin("/quitquitquit"); });
                return std::pair<int, std::string>{200, "shutting down"};
            });
            if (reloader) {
                control_srv->add_post_handler("/-/reload", [&] {
                    auto [ok, text] = reloader->reload("reload (POST /-/reload)");
                    return std::pair<int, std::string>{ok ? 200 : 400, text};
                });
                // The kill switch, effective from the next command of every connection.
                control_srv->add_post_handler("/-/mode-override/observe", [&] {
                    const bool changed = reloader->set_observe_override(true, "POST /-/mode-override/observe");
                    return std::pair<int, std::string>{
                        200, changed ? "mode override: every rule observes" : "mode override: already observing"};
                });
                control_srv->add_post_handler("/-/mode-override/off", [&] {
                    const bool changed = reloader->set_observe_override(false, "POST /-/mode-override/off");
                    return std::pair<int, std::string>{200, changed ? "mode override lifted: the rules files decide"
                                                                    : "mode override: already off"};
                });
            }
        }
    } catch (const std::exception& e) {
        spdlog::critical("cannot listen on {}:{}: {}", options.listen.host, options.listen.port, e.what());
        return 1;
    }
    auto bound = acceptor.local_endpoint();
    spdlog::info("claimguard listening on {}:{}, database at {}:{}{}, {} threads", bound.address().to_string(),
                 bound.port(), options.backend.host, options.backend.port,
                 options.backend_tls.enabled ? " (TLS)" : "", threads);
    if (unix_listener.is_open()) spdlog::info("claimguard listening on unix:{} too", options.listen_unix);
    if (admin_srv) spdlog::info("admin endpoint on {}:{}", options.admin.host, admin_srv->port());
    if (control_srv) spdlog::info("control endpoint on {}:{}", options.control.host, control_srv->port());
    state.health.started = true;

    if (schema) schema->start();  // first: sessions wait for its first check (health_state::schema_pending)
    if (reserve) reserve->start();
    asio::co_spawn(main_ctx, accept_loop(acceptor, state, options), asio::detached);
    if (unix_listener.is_open()) asio::co_spawn(main_ctx, accept_loop(unix_listener, state, options), asio::detached);
    if (options.orphan_kill) asio::co_spawn(main_ctx, sweep_orphans(state.session_ctx), asio::detached);
    asio::co_spawn(main_ctx, sweep_ledger(state), asio::detached);

    // SIGUSR1: reopen the audit log file (logrotate's postrotate), as nginx and haproxy do.
    asio::signal_set signals(main_ctx, SIGINT, SIGTERM, SIGHUP);
    signals.add(SIGUSR1);
    std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                             int signo) {
        if (ec) return;
        if (signo == SIGHUP) {
            if (reloader) (void)reloader->reload("reload (SIGHUP)");
        } else if (signo == SIGUSR1) {
            if (state.audit) {
                state.audit->reopen();
                spdlog::info("audit log reopened (SIGUSR1)");
            }
        } else if (state.health.shutting_down) {
            shutdown.now();
        } else {
            shutdown.begin(signo == SIGTERM ? "SIGTERM" : "SIGINT");
        }
        signals.async_wait(on_signal);
    };
    signals.async_wait(on_signal);

    std::vector<std::thread> workers;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    for (auto& ctx : state.contexts) guards.push_back(asio::make_work_guard(*ctx));
    for (unsigned i = 1; i < threads; ++i) workers.emplace_back([&state, i] { state.contexts[i]->run(); });
    main_ctx.run();
    for (auto& ctx : state.contexts) ctx->stop();
    for (auto& w : workers) w.join();
    schema.reset();  // stops and joins the check's thread
    if (reserve) reserve->drain();  // the sessions are done: every reserved unit back to its row
    if (admin_srv) admin_srv->stop();
    if (control_srv) control_srv->stop();
    if (!options.listen_unix.empty()) {
        std::error_code removed;
        std::filesystem::remove(options.listen_unix, removed);
    }
    spdlog::info("claimguard stopped");
    return 0;
}

}  // namespace claimguard::session
