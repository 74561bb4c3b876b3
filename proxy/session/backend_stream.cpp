// TLS and plain reads/writes toward the database.
#include "backend_stream.hpp"

#include "proxy/admin/metrics.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace claimguard::session {

namespace asio = boost::asio;
namespace {
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
}

asio::awaitable<boost::system::error_code> backend_stream::start_tls(asio::ssl::context& ctx,
                                                                     const std::string& server_name,
                                                                     bool verify) {
    tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(socket_, ctx);
    // SNI carries host names only (RFC 6066 section 3): never an IP address literal.
    boost::system::error_code not_an_address;
    (void)asio::ip::make_address(server_name, not_an_address);
    if (!server_name.empty() && not_an_address) SSL_set_tlsext_host_name(tls_->native_handle(), server_name.c_str());
    if (verify) {
        tls_->set_verify_mode(asio::ssl::verify_peer);
        tls_->set_verify_callback(asio::ssl::host_name_verification(server_name));
    } else {
        tls_->set_verify_mode(asio::ssl::verify_none);
    }
    auto [ec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, nothrow);
    co_return ec;
}

void backend_stream::set_keepalive(std::chrono::seconds idle, std::chrono::seconds interval, unsigned count) {
    boost::system::error_code ignored;
    socket_.set_option(asio::socket_base::keep_alive(true), ignored);
    if (idle.count() <= 0 || !socket_.is_open()) return;
    const int fd = socket_.native_handle();
    const int values[] = {static_cast<int>(idle.count()), static_cast<int>(interval.count()), static_cast<int>(count)};
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &values[0], sizeof(int));
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &values[1], sizeof(int));
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &values[2], sizeof(int));
}

bool backend_stream::link_lost() {
    if (!socket_.is_open()) return false;
    char byte = 0;
    const auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

asio::awaitable<backend_stream::result_type> backend_stream::read_some(asio::mutable_buffer buffer) {
    result_type result;
    if (tls_)
        result = co_await tls_->async_read_some(buffer, nothrow);
    else
        result = co_await socket_.async_read_some(buffer, nothrow);
    if (std::get<1>(result) > 0) last_read_at_ = std::chrono::steady_clock::now();
    co_return result;
}

asio::awaitable<backend_stream::result_type> backend_stream::write(asio::const_buffer buffer) {
    if (tls_) co_return co_await asio::async_write(*tls_, buffer, nothrow);
    boost::system::error_code ec;
    const std::size_t sent = socket_.non_blocking() ? socket_.write_some(buffer, ec) : 0;
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) co_return result_type{ec, sent};
    if (sent == buffer.size()) co_return result_type{ec, sent};
    auto [aec, n] = co_await asio::async_write(socket_, buffer + sent, nothrow);
    co_return result_type{aec, sent + n};
}

void backend_stream::uncount() noexcept {
    if (!counted_) return;
    counted_ = false;
    admin::metrics().backend_connections.dec();
}

void backend_stream::after_connect(boost::system::error_code& ec) {
    if (!counted_) {
        counted_ = true;
        admin::metrics().backend_connections.inc();
    }
    const auto protocol = socket_.local_endpoint(ec).protocol();
    if (ec) return;
    const auto fd = socket_.release(ec);
    if (ec) return;
    socket_.assign(protocol, fd, ec);
    if (ec) {
        ::close(fd);
        return;
    }
    socket_.non_blocking(true, ec);
}

}  // namespace claimguard::session
