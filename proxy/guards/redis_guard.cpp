// The guard's routing: one node, or a cluster's slot map (refreshed from CLUSTER SLOTS at most
// once per interval, on redirects and connection errors), MOVED and ASK followed once, and the
// whole step bounded by the command timeout.
#include "redis_guard.hpp"

#include <spdlog/spdlog.h>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <random>
#include <unordered_map>

#include "proxy/admin/metrics.hpp"

namespace claimguard::guards {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::seconds warn_interval{10};  // at most one "Redis unavailable" log line per thread per interval
constexpr std::chrono::milliseconds refresh_poll{20};  // while a refresh waits for a node to connect
constexpr std::chrono::milliseconds startup_check_slack{200};

// A key's value says whose claim holds it and whether that claim committed: "p:<token>" while its
// transaction may still roll back, "c:<token>" once it committed (a bare token: a sidecar of an
// earlier version, taken as committed).
// Acquire: 1 the key was free and is ours ("p:"), 0 a committed claim holds it, 2 a claim not
// committed yet holds it (the database's unique index decides: it waits for that transaction).
constexpr std::string_view acquire_script =
    "local v = redis.call('get', KEYS[1]) "
    "if not v then redis.call('set', KEYS[1], 'p:' .. ARGV[1], 'px', ARGV[2]) return 1 end "
    "if string.sub(v, 1, 2) == 'p:' then return 2 end "
    "return 0";
// Committed: the key, still this claim's, says so (its TTL starts again).
constexpr std::string_view commit_script =
    "if redis.call('get', KEYS[1]) == 'p:' .. ARGV[1] then "
    "redis.call('set', KEYS[1], 'c:' .. ARGV[1], 'px', ARGV[2]) return 1 end return 0";
// Deletes the lock only when it still carries this claim's token (never another claim's lock). No
// token: a cancelled claim's key, deleted when a committed claim holds it (never a pending one, the
// lock of a claim in flight).
constexpr std::string_view release_script =
    "local v = redis.call('get', KEYS[1]) "
    "if ARGV[1] == '' then "
    "if v and string.sub(v, 1, 2) ~= 'p:' then return redis.call('del', KEYS[1]) end return 0 end "
    "if v == 'p:' .. ARGV[1] or v == 'c:' .. ARGV[1] or v == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";

constexpr std::array<double, 12> redis_buckets{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5};

struct redis_metrics {
    admin::family<admin::histogram>& duration;
    admin::family<admin::counter>& errors;
    admin::counter& fail_open;
    admin::family<admin::counter>& redirects;
    admin::counter& slot_refreshes;

    static redis_metrics& get() {
        auto& r = admin::default_registry();
        static redis_metrics m{
            r.histogram_family("claimguard_redis_command_duration_seconds",
                               "Latency of Redis guard steps that got a reply (redirects included)", {"command"},
                               redis_buckets),
            r.counter_family("claimguard_redis_errors_total",
                             "Redis guard failures by kind (connect, auth, timeout, reply, disconnected)", {"kind"}),
            r.add_counter("claimguard_redis_fail_open_total",
                          "Claims decided by the database guard alone because Redis was unavailable"),
            r.counter_family("claimguard_redis_redirects_total",
                             "Redis Cluster redirects followed (moved: slot map changed; ask: slot migrating)",
                             {"kind"}),
            r.add_counter("claimguard_redis_slot_map_refreshes_total",
                          "Redis Cluster slot maps read (CLUSTER SLOTS)")};
        // Every child present at 0 from start-up, so alerts on rate() and increase() see the first event.
        static const bool children = [] {
            for (const char* c : {"acquire", "commit", "release"}) (void)m.duration.with(c);
            for (const char* k : {"connect", "auth", "timeout", "reply", "disconnected"}) (void)m.errors.with(k);
            for (const char* k : {"moved", "ask"}) (void)m.redirects.with(k);
            return true;
        }();
        (void)children;
        return m;
    }
};

bool is_auth_error(std::string_view e) {
    return e.starts_with("NOAUTH") || e.starts_with("WRONGPASS") || e.starts_with("NOPERM");
}

const char* failure_kind(call_failure f) {
    switch (f) {
        case call_failure::not_connected: return "connect";
        case call_failure::timeout: return "timeout";
        default: return "disconnected";
    }
}

}  // namespace

struct redis_guard::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor executor, redis_options options) : ex(std::move(executor)), opt(std::move(options)) {}

    asio::any_io_executor ex;
    redis_options opt;
    std::unordered_map<std::string, std::shared_ptr<redis_connection>> connections;  // by host:port
    std::optional<slot_map> map;
    bool refreshing = false;
    bool recheck_pending = false;  // a recheck() is waiting
    clock_type::time_point last_refresh{};
    std::size_t next_seed = 0;
    clock_type::time_point last_warning{};
    bool stopped = false;

    void warn(const node_address& node, std::string_view what) {
        auto now = clock_type::now();
        if (now - last_warning < warn_interval) return;
        last_warning = now;
        spdlog::warn("redis guard: {} unavailable ({}): claims rely on the database's unique index alone", node.text(),
                     what);
    }

    std::shared_ptr<redis_connection> connection(const node_address& node) {
        auto key = node.text();
        auto it = connections.find(key);
        if (it != connections.end()) return it->second;
        connection_options co;
        co.node = node;
        co.connect_timeout = opt.connect_timeout;
        co.reconnect_interval = opt.reconnect_interval;
        co.max_consecutive_timeouts = opt.max_consecutive_timeouts;
        co.credentials = opt.credentials;
        co.tls = opt.tls;
        co.tls_server_name = opt.tls_server_name;
        co.tls_verify = opt.tls_verify;
        auto c = std::make_shared<redis_connection>(ex, std::move(co));
        std::weak_ptr<impl> weak = weak_from_this();
        c->on_attempt([weak, node](bool ok, const std::string& error, bool auth_refused) {
            auto s = weak.lock();
            if (!s || s->stopped) return;
            auto& m = redis_metrics::get();
            if (ok) {
                spdlog::info("redis guard connected to {}", node.text());
                return;
            }
            m.errors.with(auth_refused ? "auth" : "connect").inc();
            if (auth_refused) {
                // Loud every time: a revoked or rotated password is an operator's job, not a blip.
                spdlog::error(
                    "redis guard: {} refused the credentials{}: {}; claims rely on the database's unique "
                    "index alone until fixed",
                    node.text(), s->opt.credentials.user.empty() ? "" : " of user " + s->opt.credentials.user, error);
            } else {
                s->warn(node, error);
            }
            if (s->opt.cluster) s->refresh();
        });
        connections.emplace(std::move(key), c);
        return c;
    }

    node_address route(std::string_view key) {
        if (!opt.cluster) return opt.nodes.front();
        if (map) {
            if (const auto* n = map->node_for(key_slot(key))) return *n;
        }
        refresh();
        return opt.nodes[next_seed++ % opt.nodes.size()];
    }

    // Starts reading the slot map unless a read ran within the refresh interval.
    void refresh() {
        if (!opt.cluster || refreshing || stopped) return;
        auto now = clock_type::now();
        if (last_refresh != clock_type::time_point{} && now - last_refresh < opt.slot_refresh_interval) return;
        last_refresh = now;
        refreshing = true;
        asio::co_spawn(ex, read_slot_map(), asio::detached);
    }

    asio::awaitable<void> read_slot_map() {
        auto self = shared_from_this();
        std::vector<node_address> candidates;
        if (map) candidates = map->nodes();
        for (const auto& n : opt.nodes)
            if (std::find(candidates.begin(), candidates.end(), n) == candidates.end()) candidates.push_back(n);
        // The nodes that are connected first; the others are asked to connect and polled.
        std::stable_partition(candidates.begin(), candidates.end(), [&](const node_address& n) {
            return connection(n)->current_state() == redis_connection::state::ready;
        });
        static const std::string cluster_slots_cmd =
            format_command(std::array<std::string_view, 2>{"CLUSTER", "SLOTS"});
        for (const auto& node : candidates) {
            if (stopped) break;
            auto c = connection(node);
            auto deadline = clock_type::now() + opt.connect_timeout;
            while (!c->ready() && c->current_state() == redis_connection::state::connecting &&
                   clock_type::now() < deadline) {
                asio::steady_timer t(ex, refresh_poll);
                co_await t.async_wait(nothrow);
            }
            if (stopped || c->current_state() != redis_connection::state::ready) continue;
            auto out = co_await c->call(cluster_slots_cmd, 1, clock_type::now() + opt.connect_timeout);
            if (out.failure != call_failure::none || out.reply.is_error()) continue;
            auto fresh = slot_map::from_cluster_slots(out.reply, node.host);
            if (!fresh || fresh->covered_slots() == 0) continue;
            map = std::move(fresh);
            redis_metrics::get().slot_refreshes.inc();
            // Every master the map names starts connecting now, not at its first claim.
            for (const auto& n : map->nodes()) (void)connection(n)->ready();
            break;
        }
        refreshing = false;
        if (!recheck_pending && !stopped) {
            recheck_pending = true;
            asio::co_spawn(ex, recheck(), asio::detached);
        }
    }

    // While the map names a master that does not answer (killed, its replica not yet promoted, the
    // password refused), or no node gave a map, reconnect and read the map again once per interval:
    // claims that stopped coming must not be what heals the guard. Ends once every master answers.
    asio::awaitable<void> recheck() {
        auto self = shared_from_this();
        for (;;) {
            asio::steady_timer t(ex, opt.slot_refresh_interval);
            co_await t.async_wait(nothrow);
            if (stopped) break;
            bool healthy = map.has_value();
            if (map) {
                for (const auto& n : map->nodes()) {
                    auto c = connection(n);
                    if (c->current_state() != redis_connection::state::ready) {
                        healthy = false;
                        (void)c->ready();  // a new attempt, at most one per reconnect interval
                    }
                }
            }
            if (healthy) break;
            refresh();
        }
        recheck_pending = false;
    }

    // One guard command: route, send, follow one MOVED or ASK, all before the deadline.
    asio::awaitable<std::optional<resp_value>> run(std::string_view name, std::string_view key,
                                                   std::span<const std::string_view> args) {
        auto& m = redis_metrics::get();
        auto started = clock_type::now();
        auto deadline = started + opt.command_timeout;
        auto payload = format_command(args);
        static const std::string asking_cmd = format_command(std::array<std::string_view, 1>{"ASKING"});
        auto node = route(key);
        bool asking = false;
        for (int attempt = 0; attempt < 2; ++attempt) {
            auto c = connection(node);
            // (Not a conditional expression: GCC 12 miscompiles co_await inside ?:.)
            call_outcome out;
            if (asking) {
                out = co_await c->call(asking_cmd + payload, 2, deadline);
            } else {
                out = co_await c->call(payload, 1, deadline);
            }
            if (out.failure != call_failure::none) {
                m.errors.with(failure_kind(out.failure)).inc();
                if (out.failure == call_failure::timeout) {
                    warn(node, "command timed out");
                } else if (c->auth_error().empty()) {
                    warn(node, c->last_error().empty() ? "connecting" : c->last_error());
                }
                if (opt.cluster && out.failure != call_failure::timeout) refresh();
                break;
            }
            if (!out.reply.is_error()) {
                m.duration.with(name).observe(clock_type::now() - started);
                co_return std::move(out.reply);
            }
            if (opt.cluster && attempt == 0) {
                if (auto r = parse_redirect(out.reply.str, node.host)) {
                    if (r->type == redirect::kind::moved) {
                        m.redirects.with("moved").inc();
                        if (!map) map.emplace();
                        map->assign(r->slot, r->node);
                        refresh();
                        asking = false;
                    } else {
                        m.redirects.with("ask").inc();
                        asking = true;
                    }
                    node = r->node;
                    continue;
                }
            }
            m.errors.with(is_auth_error(out.reply.str) ? "auth" : "reply").inc();
            warn(node, out.reply.str);
            break;
        }
        m.fail_open.inc();
        co_return std::nullopt;
    }

    void stop() {
        stopped = true;
        for (auto& [name, c] : connections) c->close();
        connections.clear();
    }
};

redis_guard::redis_guard(asio::any_io_executor executor, redis_options options)
    : impl_(std::make_shared<impl>(std::move(executor), std::move(options))) {
    if (impl_->opt.nodes.empty()) throw std::invalid_argument("redis guard: no nodes");
    // The metrics exist from start-up (before the admin port opens), not from the first connect's outcome:
    // a scrape while Redis has not answered yet must still find every claimguard_redis_* series.
    (void)redis_metrics::get();
    // Connect in the background right away (a cluster: read the slot map first).
    if (impl_->opt.cluster) {
        impl_->refresh();
    } else {
        (void)impl_->connection(impl_->opt.nodes.front())->ready();
    }
}

redis_guard::~redis_guard() { impl_->stop(); }

bool redis_guard::connected() const {
    for (const auto& [name, c] : impl_->connections)
        if (c->current_state() == redis_connection::state::ready) return true;
    return false;
}

asio::awaitable<acquire_result> redis_guard::acquire(std::string_view key, std::string_view token,
                                                     std::chrono::milliseconds ttl) {
    auto ttl_text = std::to_string(ttl.count());
    std::array<std::string_view, 6> args{"EVAL", acquire_script, "1", key, token, ttl_text};
    auto reply = co_await impl_->run("acquire", key, args);
    if (!reply || reply->type != resp_value::kind::integer) co_return acquire_result::unavailable;
    switch (reply->integer) {
        case 1: co_return acquire_result::acquired;
        case 0: co_return acquire_result::held;
        case 2: co_return acquire_result::pending;
        default: co_return acquire_result::unavailable;
    }
}

asio::awaitable<bool> redis_guard::commit(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
    auto ttl_text = std::to_string(ttl.count());
    std::array<std::string_view, 6> args{"EVAL", commit_script, "1", key, token, ttl_text};
    auto reply = co_await impl_->run("commit", key, args);
    co_return reply && reply->type == resp_value::kind::integer && reply->integer == 1;
}

asio::awaitable<bool> redis_guard::release(std::string_view key, std::string_view token) {
    std::array<std::string_view, 5> args{"EVAL", release_script, "1", key, token};
    auto reply = co_await impl_->run("release", key, args);
    co_return reply && reply->type == resp_value::kind::integer && reply->integer == 1;
}

namespace {
asio::awaitable<void> release_lock(redis_guard* redis, std::string key, std::string token) {
    (void)co_await redis->release(key, token);
}
asio::awaitable<void> commit_lock(redis_guard* redis, std::string key, std::string token,
                                  std::chrono::milliseconds ttl) {
    (void)co_await redis->commit(key, token, ttl);
}
}  // namespace

void redis_guard::commit_in_background(std::string key, std::string token, std::chrono::milliseconds ttl) {
    asio::co_spawn(impl_->ex, commit_lock(this, std::move(key), std::move(token), ttl), asio::detached);
}

void redis_guard::release_in_background(std::string key, std::string token) {
    asio::co_spawn(impl_->ex, release_lock(this, std::move(key), std::move(token)), asio::detached);
}

std::string check_redis_credentials(const redis_options& options) {
    if (resolve_password(options.credentials).empty()) return {};  // throws when the file cannot be read
    asio::io_context ioc(1);
    for (const auto& node : options.nodes) {
        connection_options co;
        co.node = node;
        co.connect_timeout = options.connect_timeout;
        co.credentials = options.credentials;
        co.tls = options.tls;
        co.tls_server_name = options.tls_server_name;
        co.tls_verify = options.tls_verify;
        auto c = std::make_shared<redis_connection>(ioc.get_executor(), std::move(co));
        (void)c->ready();
        ioc.restart();
        ioc.run_for(options.connect_timeout + startup_check_slack);
        auto refused = c->auth_error();
        auto state = c->current_state();
        c->close();
        ioc.restart();
        ioc.poll();
        if (!refused.empty()) return refused;
        if (state == redis_connection::state::ready) return {};
    }
    return {};
}

std::string random_token() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char hex[] = "0123456789abcdef";
    std::string out(32, '0');
    for (int half = 0; half < 2; ++half) {
        auto v = rng();
        for (int i = 0; i < 16; ++i) out[half * 16 + i] = hex[(v >> (4 * i)) & 0xF];
    }
    return out;
}

}  // namespace claimguard::guards
