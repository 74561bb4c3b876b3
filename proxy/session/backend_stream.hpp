// The connection to the database: plain TCP, or TLS after the SSLRequest.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>

namespace claimguard::session {

class backend_stream {
public:
    using result_type = std::tuple<boost::system::error_code, std::size_t>;

    explicit backend_stream(const boost::asio::any_io_executor& ex) : socket_(ex) {}
    ~backend_stream() { uncount(); }
    backend_stream(const backend_stream&) = delete;
    backend_stream& operator=(const backend_stream&) = delete;

    boost::asio::ip::tcp::socket& socket() { return socket_; }
    [[nodiscard]] bool is_tls() const { return tls_ != nullptr; }

    // TLS client handshake on the connected socket (after the SSLRequest was sent).
    boost::asio::awaitable<boost::system::error_code> start_tls(boost::asio::ssl::context& ctx,
                                                                const std::string& server_name,
                                                                bool verify);
    boost::asio::awaitable<result_type> read_some(boost::asio::mutable_buffer buffer);
    // When read_some last returned bytes: the server was alive, and this connection existed on it, just
    // before (orphans.hpp identifies an orphan on the server by it).
    [[nodiscard]] std::chrono::steady_clock::time_point last_read_at() const { return last_read_at_; }
    // Plain TCP: one direct non-blocking send first (a command fits the socket buffer), so the
    // coroutine goes on without a trip through the scheduler; what is left goes asynchronously.
    boost::asio::awaitable<result_type> write(boost::asio::const_buffer buffer);

    // Once connected (counted in claimguard_backend_connections until close() or destruction): the socket in user
    // non-blocking mode (direct sends never block), registered again with the reactor so that its epoll set no longer
    // holds EPOLLOUT, which the connect added: with it, every ACK of the database and every re-arm of a read woke the
    // I/O thread.
    void after_connect(boost::system::error_code& ec);

    // SO_KEEPALIVE with these times (idle 0: the kernel's defaults). Errors are ignored: keepalive
    // only shortens how long a dead link goes unnoticed.
    void set_keepalive(std::chrono::seconds idle, std::chrono::seconds interval, unsigned count);
    // True when the kernel already knows the link is broken (an RST, a keepalive timeout); never
    // blocks, never consumes data. A clean close by the server is not "broken".
    [[nodiscard]] bool link_lost();

    void cancel() {
        boost::system::error_code ignored;
        socket_.cancel(ignored);
    }
    void close() {
        uncount();
        boost::system::error_code ignored;
        socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

private:
    void uncount() noexcept;

    boost::asio::ip::tcp::socket socket_;
    bool counted_ = false;  // in claimguard_backend_connections
    std::chrono::steady_clock::time_point last_read_at_{};
    std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
};

}  // namespace claimguard::session
