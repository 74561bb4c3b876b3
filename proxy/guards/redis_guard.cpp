// hiredis driven from Asio: an event adapter on a posix::stream_descriptor, commands
// awaited with a timer so that no call waits longer than the configured timeout.
#include "redis_guard.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <random>
#include <spdlog/spdlog.h>

#include "proxy/admin/metrics.hpp"

namespace claimguard::guards {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::seconds warn_interval{10};  // at most one "Redis unavailable" log line per thread per interval

// Deletes the lock only when it still carries this claim's token (never another claim's lock).
constexpr std::string_view release_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

constexpr std::array<double, 12> redis_buckets{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5};

struct redis_metrics {
    admin::family<admin::histogram>& duration;
    admin::family<admin::counter>& errors;
    admin::counter& fail_open;

    static redis_metrics& get() {
        auto& r = admin::default_registry();
        static redis_metrics m{
            r.histogram_family("claimguard_redis_command_duration_seconds",
                               "Latency of Redis guard commands that got a reply", {"command"}, redis_buckets),
            r.counter_family("claimguard_redis_errors_total",
                             "Redis guard failures by kind (connect, timeout, reply, disconnected)", {"kind"}),
            r.add_counter("claimguard_redis_fail_open_total",
                          "Claims decided by the database guard alone because Redis was unavailable")};
        return m;
    }
};

// The outcome of one command, shared between the awaiting coroutine and the hiredis callback.
struct call_state {
    explicit call_state(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    bool done = false;  // reply arrived, or the caller gave up waiting
    bool have_reply = false;
    int type = 0;
    long long integer = 0;
    std::string str;
};

}  // namespace

struct redis_guard::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor executor, redis_options options) : ex(std::move(executor)), opt(std::move(options)) {}

    asio::any_io_executor ex;
    redis_options opt;
    redisAsyncContext* ac = nullptr;
    std::unique_ptr<asio::posix::stream_descriptor> fd;
    std::uint64_t generation = 0;  // bumps with every connection; stale handlers check it
    bool want_read = false, want_write = false, reading = false, writing = false;
    bool connected = false;
    bool stopped = false;
    clock_type::time_point last_attempt{};
    clock_type::time_point last_warning{};
    unsigned consecutive_timeouts = 0;

    void warn(std::string_view what) {
        auto now = clock_type::now();
        if (now - last_warning < warn_interval) return;
        last_warning = now;
        spdlog::warn("redis guard at {}:{} unavailable ({}): claims rely on the database's unique index alone",
                     opt.host, opt.port, what);
    }

    // ---- the hiredis event adapter ----
    static impl* self(void* p) { return static_cast<impl*>(p); }
    static void add_read(void* p) { self(p)->want_read = true, self(p)->arm_read(); }
    static void del_read(void* p) { self(p)->want_read = false; }
    static void add_write(void* p) { self(p)->want_write = true, self(p)->arm_write(); }
    static void del_write(void* p) { self(p)->want_write = false; }
    static void cleanup(void* p) {
        auto* s = self(p);
        s->want_read = s->want_write = false;
        if (s->fd) {
            boost::system::error_code ignored;
            s->fd->cancel(ignored);
            (void)s->fd->release();  // hiredis owns and closes the descriptor
            s->fd.reset();
        }
        ++s->generation;
        s->reading = s->writing = false;
    }

    void arm_read() {
        if (reading || !fd) return;
        reading = true;
        fd->async_wait(asio::posix::descriptor_base::wait_read,
                       [s = shared_from_this(), gen = generation](boost::system::error_code ec) {
                           if (gen != s->generation) return;
                           s->reading = false;
                           if (ec || !s->ac || !s->want_read) return;
                           redisAsyncHandleRead(s->ac);
                           if (gen == s->generation && s->ac && s->want_read) s->arm_read();
                       });
    }

    void arm_write() {
        if (writing || !fd) return;
        writing = true;
        fd->async_wait(asio::posix::descriptor_base::wait_write,
                       [s = shared_from_this(), gen = generation](boost::system::error_code ec) {
                           if (gen != s->generation) return;
                           s->writing = false;
                           if (ec || !s->ac || !s->want_write) return;
                           redisAsyncHandleWrite(s->ac);
                           if (gen == s->generation && s->ac && s->want_write) s->arm_write();
                       });
    }

    static void on_connect(const redisAsyncContext* c, int status) {
        auto* s = static_cast<impl*>(c->data);
        if (status != REDIS_OK) {
            redis_metrics::get().errors.with("connect").inc();
            s->warn(c->errstr ? c->errstr : "connect failed");
            s->ac = nullptr;  // hiredis frees the context after this callback
            s->connected = false;
            return;
        }
        s->connected = true;
        s->consecutive_timeouts = 0;
        spdlog::info("redis guard connected to {}:{}", s->opt.host, s->opt.port);
    }

    static void on_disconnect(const redisAsyncContext* c, int status) {
        auto* s = static_cast<impl*>(c->data);
        s->ac = nullptr;
        s->connected = false;
        if (status != REDIS_OK && !s->stopped) {
            redis_metrics::get().errors.with("disconnected").inc();
            s->warn(c->errstr ? c->errstr : "disconnected");
        }
    }

    void connect_to(const std::string& ip) {
        ac = redisAsyncConnect(ip.c_str(), opt.port);
        if (!ac) return;
        if (ac->err) {
            redis_metrics::get().errors.with("connect").inc();
            warn(ac->errstr);
            redisAsyncFree(ac);
            ac = nullptr;
            return;
        }
        ac->data = this;
        fd = std::make_unique<asio::posix::stream_descriptor>(ex, ac->c.fd);
        ++generation;
        ac->ev.data = this;
        ac->ev.addRead = &impl::add_read;
        ac->ev.delRead = &impl::del_read;
        ac->ev.addWrite = &impl::add_write;
        ac->ev.delWrite = &impl::del_write;
        ac->ev.cleanup = &impl::cleanup;
        redisAsyncSetConnectCallback(ac, &impl::on_connect);
        redisAsyncSetDisconnectCallback(ac, &impl::on_disconnect);
        add_write(this);  // a non-blocking connect completes when the socket turns writable
    }

    // True when commands can be sent now. Otherwise starts (at most once per
    // reconnect interval) a new connection attempt and answers false at once:
    // a claim never waits for Redis to come back.
    bool ready() {
        if (stopped) return false;
        if (ac) return connected;
        auto now = clock_type::now();
        if (last_attempt != clock_type::time_point{} && now - last_attempt < opt.reconnect_interval) return false;
        last_attempt = now;
        boost::system::error_code ec;
        auto address = asio::ip::make_address(opt.host, ec);
        if (!ec) {
            connect_to(address.to_string());
        } else {
            asio::co_spawn(ex, [s = shared_from_this()]() -> asio::awaitable<void> {
                asio::ip::tcp::resolver resolver(s->ex);
                auto [rec, results] = co_await resolver.async_resolve(s->opt.host, std::to_string(s->opt.port), nothrow);
                if (rec || results.empty()) {
                    redis_metrics::get().errors.with("connect").inc();
                    s->warn("cannot resolve " + s->opt.host);
                    co_return;
                }
                if (!s->ac && !s->stopped) s->connect_to(results.begin()->endpoint().address().to_string());
            }, asio::detached);
        }
        return false;
    }

    static void on_reply(redisAsyncContext*, void* reply, void* privdata) {
        auto* holder = static_cast<std::shared_ptr<call_state>*>(privdata);
        auto st = std::move(*holder);
        delete holder;
        if (st->done) return;  // the caller gave up waiting
        st->done = true;
        if (auto* r = static_cast<redisReply*>(reply)) {
            st->have_reply = true;
            st->type = r->type;
            st->integer = r->integer;
            if (r->str) st->str.assign(r->str, r->len);
        }
        st->timer.cancel();
    }

    // Sends one command and waits for its reply, at most opt.command_timeout.
    asio::awaitable<std::shared_ptr<call_state>> call(std::string_view name, std::vector<std::string_view> args) {
        auto& m = redis_metrics::get();
        if (!ready()) {
            m.fail_open.inc();
            warn("not connected");
            co_return nullptr;
        }
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        for (auto a : args) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        auto st = std::make_shared<call_state>(ex);
        auto* holder = new std::shared_ptr<call_state>(st);
        if (redisAsyncCommandArgv(ac, &impl::on_reply, holder, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
            REDIS_OK) {
            delete holder;
            m.fail_open.inc();
            m.errors.with("reply").inc();
            co_return nullptr;
        }
        auto started = clock_type::now();
        st->timer.expires_after(opt.command_timeout);
        co_await st->timer.async_wait(nothrow);
        if (!st->done) {
            st->done = true;  // a late reply is dropped
            m.errors.with("timeout").inc();
            m.fail_open.inc();
            warn("command timed out");
            if (++consecutive_timeouts >= opt.max_consecutive_timeouts && ac) {
                redisAsyncDisconnect(ac);  // pending callbacks get null replies; reconnect later
            }
            co_return nullptr;
        }
        consecutive_timeouts = 0;
        if (!st->have_reply || st->type == REDIS_REPLY_ERROR) {
            m.errors.with(st->have_reply ? "reply" : "disconnected").inc();
            m.fail_open.inc();
            if (st->have_reply) warn(st->str);
            co_return nullptr;
        }
        m.duration.with(name).observe(clock_type::now() - started);
        co_return st;
    }

    void stop() {
        stopped = true;
        if (ac) {
            auto* c = ac;
            ac = nullptr;
            redisAsyncFree(c);  // runs pending callbacks with null replies, then cleanup
        }
    }
};

redis_guard::redis_guard(asio::any_io_executor executor, redis_options options)
    : impl_(std::make_shared<impl>(std::move(executor), std::move(options))) {
    (void)impl_->ready();  // connect in the background right away
}

redis_guard::~redis_guard() { impl_->stop(); }

bool redis_guard::connected() const { return impl_->connected && impl_->ac; }

asio::awaitable<acquire_result> redis_guard::acquire(std::string_view key, std::string_view token,
                                                     std::chrono::milliseconds ttl) {
    auto ttl_text = std::to_string(ttl.count());
    std::vector<std::string_view> args{"SET", key, token, "NX", "PX", ttl_text};
    auto st = co_await impl_->call("acquire", std::move(args));
    if (!st) co_return acquire_result::unavailable;
    if (st->type == REDIS_REPLY_STATUS && st->str == "OK") co_return acquire_result::acquired;
    if (st->type == REDIS_REPLY_NIL) co_return acquire_result::held;
    co_return acquire_result::unavailable;
}

asio::awaitable<bool> redis_guard::release(std::string_view key, std::string_view token) {
    std::vector<std::string_view> args{"EVAL", release_script, "1", key, token};
    auto st = co_await impl_->call("release", std::move(args));
    co_return st && st->type == REDIS_REPLY_INTEGER && st->integer == 1;
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
