// TLS and plain reads/writes toward the database.
#include "backend_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

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

asio::awaitable<backend_stream::result_type> backend_stream::read_some(asio::mutable_buffer buffer) {
    if (tls_) co_return co_await tls_->async_read_some(buffer, nothrow);
    co_return co_await socket_.async_read_some(buffer, nothrow);
}

asio::awaitable<backend_stream::result_type> backend_stream::write(asio::const_buffer buffer) {
    if (tls_) co_return co_await asio::async_write(*tls_, buffer, nothrow);
    co_return co_await asio::async_write(socket_, buffer, nothrow);
}

}  // namespace claimguard::session
