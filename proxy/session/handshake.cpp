// The connection phase of a session: the database connection, the greeting and the client's
// handshake response relayed (the capabilities both sides agree on), TLS toward the database, and
// the authentication exchange up to the first command. The command phase is in session.cpp.
#include "session_impl.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "proxy/admin/health.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/packets.hpp"
#include "rules/sql/charset.hpp"

namespace claimguard::session {

namespace {

// "10.11.19-MariaDB" (or MariaDB's "5.5.5-10.11.19-MariaDB") -> 101119, as versioned comments count.
std::uint32_t server_version_number(std::string_view v) {
    if (v.starts_with("5.5.5-")) v.remove_prefix(6);
    std::uint32_t parts[3] = {0, 0, 0};
    for (int i = 0; i < 3 && !v.empty(); ++i) {
        std::size_t n = 0;
        while (n < v.size() && v[n] >= '0' && v[n] <= '9') parts[i] = parts[i] * 10 + (v[n++] - '0');
        v.remove_prefix(n);
        if (v.empty() || v[0] != '.') break;
        v.remove_prefix(1);
    }
    return parts[0] * 10000 + parts[1] * 100 + parts[2];
}

// Rewrites the sequence ids of every frame in `raw`, starting at `first`.
void renumber_frames(std::span<std::uint8_t> raw, std::uint8_t first) {
    std::size_t pos = 0;
    while (raw.size() - pos >= proto::frame_header_size) {
        auto h = proto::parse_frame_header(raw.data() + pos);
        raw[pos + 3] = first++;
        pos += proto::frame_header_size + h.size;
    }
}

}  // namespace

awaitable<void> session::wait_for_first_schema_check() {
    if (!ctx_.health || !ctx_.health->schema_pending.load()) co_return;
    // Polled: the flag is cleared once per process, by the schema watch's thread, within
    // schema_first_check_wait of start-up; a client that hangs up meanwhile is seen by the greeting's write.
    constexpr std::chrono::milliseconds poll{20};
    asio::steady_timer timer(client_.socket().get_executor());
    spdlog::debug("session {}: waits for the first schema check", id_);
    while (ctx_.health->schema_pending.load() && !closed_) {
        timer.expires_after(poll);
        co_await timer.async_wait(nothrow);
    }
}

awaitable<bool> session::connect_backend() {
    deadline_.set(deadline_kind::connect, opt_.connect_timeout);
    error_code ec;
    auto address = asio::ip::make_address(opt_.backend.host, ec);
    if (!ec) {
        std::tie(ec) = co_await backend_.stream().socket().async_connect({address, opt_.backend.port}, nothrow);
    } else {
        tcp::resolver resolver(client_.socket().get_executor());
        auto [rec, endpoints] =
            co_await resolver.async_resolve(opt_.backend.host, std::to_string(opt_.backend.port), nothrow);
        ec = rec;
        if (!ec)
            std::tie(ec, std::ignore) = co_await asio::async_connect(backend_.stream().socket(), endpoints, nothrow);
    }
    if (ec) {
        bool timeout = deadline_.timed_out() == deadline_kind::connect;
        admin::metrics().backend_errors(timeout ? "timeout" : "connect").inc();
        spdlog::warn("session {} from {}: cannot connect to the database at {}:{}: {}", id_, client_.peer(),
                     opt_.backend.host, opt_.backend.port, timeout ? "timed out" : ec.message());
        std::string reason = timeout ? std::string("timed out") : ec.message();
        const std::string message = "claimguard: cannot connect to the database at " + opt_.backend.host + ":" +
                                    std::to_string(opt_.backend.port) + ": " + reason;
        co_await client_.answer_error(0, er::backend_gone, er::backend_gone_state, message);
        co_return false;
    }
    error_code ignored;
    backend_.stream().after_connect(ignored);  // without it the session still works, with more wake-ups
    backend_.stream().socket().set_option(tcp::no_delay(true), ignored);
    backend_.stream().set_keepalive(opt_.backend_keepalive_idle, opt_.backend_keepalive_interval,
                                    opt_.backend_keepalive_count);
    if (!client_.is_unix()) {
        client_.socket().set_option(tcp::no_delay(true), ignored);
        client_.socket().set_option(asio::socket_base::keep_alive(true), ignored);
    }
    co_return true;
}

awaitable<bool> session::relay_handshake() {
    // 1. The server's greeting, with the capabilities we cannot honour masked.
    auto [ec, greeting_packet] = co_await backend_.read_packet();
    if (ec) {
        co_await backend_.failed(deadline_.timed_out() == deadline_kind::connect ? asio::error::timed_out : ec, 0);
        co_return false;
    }
    auto payload = greeting_packet.first_payload;
    if (!payload.empty() && payload[0] == proto::err_header) {  // e.g. too many connections
        co_await client_.write(backend_.in().readable().first(greeting_packet.raw_size));
        co_return false;
    }
    auto greeting = proto::parse_server_greeting(payload);
    if (!greeting) {
        co_await backend_.failed(greeting.error(), 0);
        co_return false;
    }
    server_caps_ = greeting->capabilities;
    backend_.greeted(greeting->connection_id);
    status_ = greeting->status;
    connection_state_.server_greeted(proto::is_mariadb(server_caps_), server_version_number(greeting->server_version));
    greeting->capabilities &= ~(proto::cap::never_offered | proto::cap::ssl);
    if (proto::is_mariadb(server_caps_)) greeting->mariadb_capabilities &= ~proto::mariadb_cap::never_offered;
    const std::uint32_t greeting_mariadb_caps = greeting->mariadb_capabilities;
    proto::byte_buffer masked, out;
    proto::serialize(*greeting, masked);
    std::uint8_t seq = greeting_packet.first_seq;
    proto::write_packet(out, seq, masked);
    backend_.in().consume(greeting_packet.raw_size);
    if (!co_await client_.write(out)) co_return false;
    deadline_.clear();

    // 2. The client's handshake response: read for the user name and capabilities, never the password.
    auto [cec, response_packet] = co_await client_.read_packet(false);
    if (cec) {
        co_await client_.read_failed(cec, static_cast<std::uint8_t>(seq));
        co_return false;
    }
    if (response_packet.first_seq != seq) {
        co_await client_.read_failed(proto::errc::bad_sequence, static_cast<std::uint8_t>(seq + 1));
        co_return false;
    }
    auto response = proto::parse_handshake_response(response_packet.first_payload);
    if (!response || response_packet.frames != 1) {
        admin::metrics().client_errors("protocol").inc();
        co_await client_.answer_error(response_packet.last_seq + 1, er::handshake, "08S01", "Bad handshake");
        co_return false;
    }
    if (response->is_ssl_request) {
        admin::metrics().client_errors("protocol").inc();
        co_await client_.answer_error(response_packet.last_seq + 1, er::handshake, "08S01",
                                      "claimguard: TLS between the app and the sidecar is not enabled");
        co_return false;
    }
    user_ = response->username;
    // Compressed, both links are (the proxy offers compression only when the database does): the
    // database's Compression status is what the client would see directly.
    const bool compressed = response->capabilities & server_caps_ & proto::cap::compress;
    caps_ = response->capabilities & server_caps_;
    mariadb_caps_ = response->mariadb_capabilities & greeting_mariadb_caps;
    connection_state_.logged_in(std::string(response->database), rules::sql::charset_from_collation(response->charset));

    // 3. Forward it, after an SSLRequest and TLS handshake when the backend link is TLS.
    std::uint8_t shift = 0;
    deadline_.set(deadline_kind::connect, opt_.connect_timeout);
    if (ctx_.backend_tls) {
        if (!co_await start_backend_tls(*response, response_packet)) co_return false;
        shift = 1;
    } else if (!co_await backend_.write(client_.in().readable().first(response_packet.raw_size))) {
        co_return false;
    }
    std::uint8_t client_seq = static_cast<std::uint8_t>(response_packet.last_seq + 1);
    client_.in().consume(response_packet.raw_size);

    // 4. Authentication rounds until OK or ERR; the proxy only relays them.
    proto::auth_exchange auth;
    for (;;) {
        auto [bec, server_packet] = co_await backend_.read_packet();
        if (bec) {
            co_await backend_.failed(deadline_.timed_out() == deadline_kind::connect ? asio::error::timed_out : bec,
                                     client_seq);
            co_return false;
        }
        auto step = auth.on_server_packet(server_packet.first_payload);
        proto::byte_buffer raw(backend_.in().readable().begin(),
                               backend_.in().readable().begin() + static_cast<std::ptrdiff_t>(server_packet.raw_size));
        renumber_frames(raw, client_seq);
        client_seq = static_cast<std::uint8_t>(client_seq + server_packet.frames);
        if (step && *step == proto::next_step::done && auth.succeeded()) {
            if (auto ok = proto::parse_ok(server_packet.first_payload, caps_)) status_ = ok->status;
        }
        backend_.in().consume(server_packet.raw_size);
        if (!step) {
            co_await backend_.failed(step.error(), client_seq);
            co_return false;
        }
        if (!co_await client_.write(raw)) co_return false;
        if (*step == proto::next_step::done) {
            if (!auth.succeeded()) co_return false;  // the server's own ERR (e.g. 1045) was relayed
            if (ctx_.health) ctx_.health->mark_backend_ok();
            if (compressed) {  // from the first command on, as the server does
                client_.start_compression();
                backend_.start_compression();
            }
            deadline_.clear();
            spdlog::debug("session {} from {}: user '{}' authenticated", id_, client_.peer(), user_);
            co_return true;
        }
        if (*step == proto::next_step::read_server) continue;
        auto [rec, client_packet] = co_await client_.read_packet(false);
        if (rec || client_packet.first_seq != client_seq) {
            co_await client_.read_failed(rec ? rec : error_code(proto::errc::bad_sequence), client_seq);
            co_return false;
        }
        proto::byte_buffer answer(
            client_.in().readable().begin(),
            client_.in().readable().begin() + static_cast<std::ptrdiff_t>(client_packet.raw_size));
        renumber_frames(answer, static_cast<std::uint8_t>(client_seq + shift));
        client_seq = static_cast<std::uint8_t>(client_packet.last_seq + 1);
        client_.in().consume(client_packet.raw_size);
        if (!co_await backend_.write(answer)) co_return false;
        deadline_.set(deadline_kind::connect, opt_.connect_timeout);
    }
}

awaitable<bool> session::start_backend_tls(const proto::handshake_response& response,
                                           const proto::packet_span& response_packet) {
    if (!(server_caps_ & proto::cap::ssl)) {
        admin::metrics().backend_errors("tls").inc();
        co_await client_.answer_error(response_packet.last_seq + 1, er::backend_gone, er::backend_gone_state,
                                      "claimguard: backend TLS is required but the database does not offer TLS");
        co_return false;
    }
    proto::handshake_response ssl_request = response;
    ssl_request.is_ssl_request = true;
    ssl_request.capabilities |= proto::cap::ssl;
    proto::byte_buffer payload, out;
    proto::serialize(ssl_request, payload);
    std::uint8_t seq = response_packet.first_seq;
    proto::write_packet(out, seq, payload);
    if (!co_await backend_.write(out)) co_return false;
    const auto& tls = opt_.backend_tls;
    const std::string& server_name = tls.server_name.empty() ? opt_.backend.host : tls.server_name;
    auto ec = co_await backend_.stream().start_tls(*ctx_.backend_tls, server_name, tls.verify);
    if (ec) {
        admin::metrics().backend_errors("tls").inc();
        spdlog::warn("session {} from {}: TLS handshake with the database failed: {}", id_, client_.peer(),
                     ec.message());
        const std::string message = "claimguard: TLS handshake with the database failed: " + ec.message();
        co_await client_.answer_error(response_packet.last_seq + 1, er::backend_gone, er::backend_gone_state, message);
        co_return false;
    }
    proto::byte_buffer patched(response_packet.first_payload.begin(), response_packet.first_payload.end());
    proto::patch_capabilities(patched, response.capabilities | proto::cap::ssl);
    out.clear();
    proto::write_packet(out, seq, patched);
    co_return co_await backend_.write(out);
}

}  // namespace claimguard::session
