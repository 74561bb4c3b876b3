// redis_connection: a connect coroutine (resolve, TCP, TLS handshake, AUTH), a reader that
// feeds resp_decoder and completes pending calls in order, and a writer that drains a buffer.
#include "redis_connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <array>
#include <deque>
#include <fstream>
#include <openssl/ssl.h>
#include <stdexcept>
#include <vector>

namespace claimguard::guards {

namespace asio = boost::asio;
using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t read_chunk_bytes = 16 * 1024;
constexpr std::size_t max_password_bytes = 4096;

// One command (or ASKING + command) awaiting its replies.
struct pending_call {
    explicit pending_call(const asio::any_io_executor& ex, unsigned n) : timer(ex), replies_left(n) {}
    asio::steady_timer timer;
    unsigned replies_left;
    bool done = false;  // completed, failed, or the caller gave up (a late reply is dropped)
    call_outcome outcome;
};

// The socket (and TLS stream) of one connection attempt. Coroutines hold it while an operation
// is in flight, so dropping a connection never frees a stream under a pending read.
struct transport {
    explicit transport(const asio::any_io_executor& ex) : socket(ex) {}
    tcp::socket socket;
    std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
};

}  // namespace

std::string resolve_password(const redis_credentials& credentials) {
    if (credentials.password_file.empty()) return credentials.password;
    std::ifstream in(credentials.password_file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read the Redis password file " + credentials.password_file);
    std::string line;
    std::getline(in, line);
    if (line.size() > max_password_bytes) throw std::runtime_error("the Redis password file's first line is too long");
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n' || line.back() == ' ')) line.pop_back();
    return line;
}

struct redis_connection::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor executor, connection_options options)
        : ex(std::move(executor)), opt(std::move(options)), io(std::make_shared<transport>(ex)) {}

    asio::any_io_executor ex;
    connection_options opt;
    std::shared_ptr<transport> io;
    std::unique_ptr<resp_decoder> decoder = std::make_unique<resp_decoder>();
    bool connect_timed_out = false;
    state st = state::idle;
    std::uint64_t generation = 0;  // bumps with every attempt; coroutines of an older one stop
    clock_type::time_point last_attempt{};
    std::deque<std::shared_ptr<pending_call>> pending;
    std::string out;  // bytes waiting for the writer
    bool writing = false;
    unsigned consecutive_timeouts = 0;
    std::string auth_error, last_error;
    std::function<void(bool, const std::string&, bool)> attempt_callback;

    template <typename Buffers>
    static asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> write(std::shared_ptr<transport> t,
                                                                                    const Buffers& b) {
        if (t->tls) co_return co_await asio::async_write(*t->tls, b, nothrow);
        co_return co_await asio::async_write(t->socket, b, nothrow);
    }
    template <typename Buffers>
    static asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> read_some(std::shared_ptr<transport> t,
                                                                                        const Buffers& b) {
        if (t->tls) co_return co_await t->tls->async_read_some(b, nothrow);
        co_return co_await t->socket.async_read_some(b, nothrow);
    }

    void fail_pending(call_failure why) {
        auto calls = std::move(pending);
        pending.clear();
        for (auto& c : calls) {
            if (c->done) continue;
            c->done = true;
            c->outcome.failure = why;
            c->timer.cancel();
        }
    }

    void drop(const std::string& why) {
        ++generation;
        if (st != state::idle) st = state::failed;
        if (!why.empty()) last_error = why;
        boost::system::error_code ignored;
        io->socket.close(ignored);
        io = std::make_shared<transport>(ex);  // the old one lives on in coroutines until they finish
        out.clear();
        writing = false;
        fail_pending(call_failure::disconnected);
    }

    void finish_attempt(bool ok, const std::string& error, bool refused) {
        if (attempt_callback) attempt_callback(ok, error, refused);
    }

    // Reads until one whole reply is decoded (connect phase only: AUTH).
    asio::awaitable<std::optional<resp_value>> read_one(std::shared_ptr<transport> t) {
        std::array<char, read_chunk_bytes> buf;
        for (;;) {
            resp_value v;
            auto s = decoder->next(v);
            if (s == resp_decoder::status::value) co_return v;
            if (s == resp_decoder::status::broken) co_return std::nullopt;
            auto [ec, n] = co_await read_some(t, asio::buffer(buf));
            if (ec || !decoder->feed({buf.data(), n})) co_return std::nullopt;
        }
    }

    asio::awaitable<void> connect(std::uint64_t gen) {
        auto self = shared_from_this();
        // The watchdog: closing the socket ends whatever step the attempt is in.
        auto watchdog = std::make_shared<asio::steady_timer>(ex, opt.connect_timeout);
        auto t = io;
        watchdog->async_wait([self, gen, t](boost::system::error_code ec) {
            if (ec || gen != self->generation || self->st != state::connecting) return;
            self->connect_timed_out = true;
            boost::system::error_code ignored;
            t->socket.close(ignored);
        });
        auto fail = [&](std::string why, bool refused = false) {
            watchdog->cancel();
            if (gen != generation) return;
            if (connect_timed_out) why = "connect timed out (" + why + ")";
            drop(why);
            finish_attempt(false, why, refused);
        };

        std::string password;
        try {
            password = resolve_password(opt.credentials);
        } catch (const std::exception& e) {
            co_return fail(e.what());
        }
        tcp::resolver resolver(ex);
        auto [rec, endpoints] = co_await resolver.async_resolve(opt.node.host, std::to_string(opt.node.port), nothrow);
        if (gen != generation) co_return;
        if (rec) co_return fail("cannot resolve " + opt.node.host + ": " + rec.message());
        if (connect_timed_out) co_return fail("resolving " + opt.node.host);
        auto [cec, ep] = co_await asio::async_connect(t->socket, endpoints, nothrow);
        if (gen != generation) co_return;
        if (cec) co_return fail("connect: " + cec.message());
        boost::system::error_code nec;
        t->socket.set_option(tcp::no_delay(true), nec);
        if (opt.tls) {
            t->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(t->socket, *opt.tls);
            auto& tls = t->tls;
            const auto& name = opt.tls_server_name.empty() ? opt.node.host : opt.tls_server_name;
            SSL_set_tlsext_host_name(tls->native_handle(), name.c_str());
            if (opt.tls_verify) {
                tls->set_verify_mode(asio::ssl::verify_peer);
                tls->set_verify_callback(asio::ssl::host_name_verification(name));
            } else {
                tls->set_verify_mode(asio::ssl::verify_none);
            }
            auto [hec] = co_await tls->async_handshake(asio::ssl::stream_base::client, nothrow);
            if (gen != generation) co_return;
            if (hec) co_return fail("TLS handshake: " + hec.message());
        }
        if (!password.empty()) {
            std::vector<std::string_view> args{"AUTH"};
            if (!opt.credentials.user.empty()) args.push_back(opt.credentials.user);
            args.push_back(password);
            auto cmd = format_command(args);
            auto [wec, wn] = co_await write(t, asio::buffer(cmd));
            (void)wn;
            if (gen != generation) co_return;
            if (wec) co_return fail("AUTH: " + wec.message());
            auto reply = co_await read_one(t);
            if (gen != generation) co_return;
            if (!reply) co_return fail("AUTH: no reply");
            if (!reply->is_status("OK")) {
                // The server's words only ("WRONGPASS invalid username-password pair ..."): never the secret.
                auth_error = reply->is_error() ? reply->str : "unexpected reply to AUTH";
                co_return fail(auth_error, true);
            }
        }
        watchdog->cancel();
        auth_error.clear();
        last_error.clear();
        st = state::ready;
        consecutive_timeouts = 0;
        finish_attempt(true, {}, false);
        asio::co_spawn(ex, reader(gen, t), asio::detached);
        if (!out.empty()) asio::co_spawn(ex, writer(gen), asio::detached);
    }

    asio::awaitable<void> reader(std::uint64_t gen, std::shared_ptr<transport> t) {
        auto self = shared_from_this();
        std::vector<char> buf(read_chunk_bytes);
        for (;;) {
            auto [ec, n] = co_await read_some(t, asio::buffer(buf));
            if (gen != generation) co_return;
            if (ec) co_return drop(ec == asio::error::eof ? "closed by the server" : ec.message());
            if (!decoder->feed({buf.data(), n})) co_return drop(std::string("bad reply: ") + std::string(decoder->error()));
            for (;;) {
                resp_value v;
                auto s = decoder->next(v);
                if (s == resp_decoder::status::need_more) break;
                if (s == resp_decoder::status::broken)
                    co_return drop(std::string("bad reply: ") + std::string(decoder->error()));
                if (pending.empty()) co_return drop("a reply nobody asked for");
                auto& c = pending.front();
                if (--c->replies_left > 0) continue;
                auto call = std::move(c);
                pending.pop_front();
                if (call->done) continue;  // its caller gave up waiting
                call->done = true;
                call->outcome.reply = std::move(v);
                call->timer.cancel();
            }
        }
    }

    asio::awaitable<void> writer(std::uint64_t gen) {
        auto self = shared_from_this();
        if (writing) co_return;
        writing = true;
        auto t = io;
        while (!out.empty() && gen == generation) {
            std::string sending = std::move(out);
            out.clear();
            auto [ec, n] = co_await write(t, asio::buffer(sending));
            (void)n;
            if (gen != generation) co_return;
            if (ec) co_return drop("write: " + ec.message());
        }
        writing = false;
    }

    // Plain TCP with nothing queued before it: the call goes out with one direct non-blocking send,
    // without spawning the writer (a coroutine and a trip through the scheduler per call). True
    // when all of `out` went; otherwise (TLS, a full socket buffer, an error) the writer sends the
    // rest and reports any error asynchronously, as before.
    bool send_now() {
        if (writing || io->tls || out.empty() || st != state::ready) return false;
        boost::system::error_code ec;
        if (!io->socket.non_blocking()) io->socket.non_blocking(true, ec);
        if (ec) return false;
        const std::size_t n = io->socket.write_some(asio::buffer(out), ec);
        if (ec) return false;
        out.erase(0, n);
        return out.empty();
    }

    bool ready() {
        if (st == state::ready) return true;
        if (st == state::connecting) return false;
        auto now = clock_type::now();
        if (last_attempt != clock_type::time_point{} && now - last_attempt < opt.reconnect_interval) return false;
        last_attempt = now;
        drop({});
        st = state::connecting;
        decoder = std::make_unique<resp_decoder>();  // a fresh stream: no half reply of the old one
        connect_timed_out = false;
        asio::co_spawn(ex, connect(generation), asio::detached);
        return false;
    }
};

redis_connection::redis_connection(asio::any_io_executor executor, connection_options options)
    : impl_(std::make_shared<impl>(std::move(executor), std::move(options))) {}

redis_connection::~redis_connection() { close(); }

bool redis_connection::ready() { return impl_->ready(); }

void redis_connection::close() {
    impl_->drop({});
    impl_->st = state::idle;
}

redis_connection::state redis_connection::current_state() const { return impl_->st; }
const node_address& redis_connection::node() const { return impl_->opt.node; }
const std::string& redis_connection::auth_error() const { return impl_->auth_error; }
const std::string& redis_connection::last_error() const { return impl_->last_error; }

void redis_connection::on_attempt(std::function<void(bool, const std::string&, bool)> callback) {
    impl_->attempt_callback = std::move(callback);
}

asio::awaitable<call_outcome> redis_connection::call(std::string payload, unsigned replies,
                                                     clock_type::time_point deadline) {
    auto s = impl_;  // keeps the state alive across the wait
    if (!s->ready()) co_return call_outcome{call_failure::not_connected, {}};
    auto c = std::make_shared<pending_call>(s->ex, replies);
    s->pending.push_back(c);
    s->out += payload;
    if (!s->writing && !s->send_now()) asio::co_spawn(s->ex, s->writer(s->generation), asio::detached);
    c->timer.expires_at(deadline);
    co_await c->timer.async_wait(nothrow);
    if (!c->done) {
        c->done = true;  // stays queued so that later replies still match their calls
        c->outcome.failure = call_failure::timeout;
        if (++s->consecutive_timeouts >= s->opt.max_consecutive_timeouts) s->drop("timed out repeatedly");
        co_return std::move(c->outcome);
    }
    if (c->outcome.failure == call_failure::none) s->consecutive_timeouts = 0;
    co_return std::move(c->outcome);
}

}  // namespace claimguard::guards
