// The control client on Beast: IPv4, IPv6 ([::1]:9091) and host names, one deadline for it all.
#include "proxy/control_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <exception>

#include "proxy/config/proxy_options.hpp"

namespace claimguard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

int control_post(std::string_view command, const std::string& address, std::string_view path,
                 std::chrono::milliseconds timeout, std::ostream& out, std::ostream& err, std::string_view said) {
    config::endpoint ep;
    try {
        ep = config::parse_endpoint(address);
    } catch (const std::exception& e) {
        err << "claimguard " << command << ": " << e.what() << "\n";
        return 2;
    }
    asio::io_context io;
    http::response<http::string_body> answer;
    std::exception_ptr failure;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            asio::ip::tcp::resolver resolver(io);
            beast::tcp_stream stream(io);
            stream.expires_after(timeout);
            auto endpoints = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), asio::use_awaitable);
            co_await stream.async_connect(endpoints, asio::use_awaitable);
            http::request<http::empty_body> request(http::verb::post, std::string(path), 11);
            const bool v6 = ep.host.find(':') != std::string::npos;
            request.set(http::field::host, (v6 ? "[" + ep.host + "]" : ep.host) + ":" + std::to_string(ep.port));
            request.set(http::field::connection, "close");
            request.prepare_payload();
            co_await http::async_write(stream, request, asio::use_awaitable);
            beast::flat_buffer buffer;
            co_await http::async_read(stream, buffer, answer, asio::use_awaitable);
            beast::error_code ignored;
            stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        },
        [&](std::exception_ptr e) { failure = e; });
    io.run();
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const boost::system::system_error& e) {
            err << "claimguard " << command << ": cannot reach the control endpoint at " << address << ": "
                << (e.code() == asio::error::operation_aborted ? std::string("timed out") : e.code().message()) << "\n";
        } catch (const std::exception& e) {
            err << "claimguard " << command << ": cannot reach the control endpoint at " << address << ": " << e.what() << "\n";
        }
        return 1;
    }
    if (answer.result() == http::status::ok) {
        out << (said.empty() ? std::string_view(answer.body()) : said) << "\n";
        return 0;
    }
    err << "claimguard " << command << ": " << address << " answered " << answer.result_int() << " " << answer.reason() << ": "
        << answer.body() << "\n";
    return 1;
}

}  // namespace claimguard
