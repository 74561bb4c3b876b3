// Admin HTTP server: /startup /liveness /readiness /metrics and registered POST endpoints.
#pragma once

// No Beast or Asio here (compile time): the server lives behind a pimpl in admin_server.cpp.
#include "proxy/admin/health.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace boost::asio {
class io_context;
}

namespace claimguard::admin {

class registry;

inline constexpr std::string_view default_admin_address = "127.0.0.1";  // loopback unless configured
inline constexpr std::uint16_t default_admin_port = 9090;
inline constexpr std::uint16_t default_backend_port = 3306;
// Admin clients are probes and one scraper: a small cap keeps a misbehaving one from eating fds.
inline constexpr std::size_t default_max_admin_connections = 16;
inline constexpr std::chrono::milliseconds default_admin_request_timeout{5000};  // read or write one request
inline constexpr std::size_t default_admin_header_limit = 8 * 1024;
inline constexpr std::size_t default_admin_body_limit = 4 * 1024;  // POST endpoints take no real body
inline constexpr std::chrono::milliseconds default_backend_probe_timeout{1000};
// A session that completed a backend handshake this recently proves the backend reachable.
inline constexpr std::chrono::milliseconds default_backend_ok_window{10000};
// How long one dial's verdict answers /readiness, so a probe storm costs one dial.
inline constexpr std::chrono::milliseconds default_probe_cache_ttl{2000};

struct admin_options {
    std::string address{default_admin_address};  // an IP literal
    std::uint16_t port = default_admin_port;     // 0: an ephemeral port, see admin_server::port()
    std::string backend_host;                    // empty: /readiness does not check the backend
    std::uint16_t backend_port = default_backend_port;
    std::chrono::milliseconds backend_probe_timeout = default_backend_probe_timeout;
    std::chrono::milliseconds backend_ok_window = default_backend_ok_window;
    std::chrono::milliseconds probe_cache_ttl = default_probe_cache_ttl;
    std::size_t max_connections = default_max_admin_connections;
    std::chrono::milliseconds request_timeout = default_admin_request_timeout;
    std::size_t header_limit = default_admin_header_limit;
    std::size_t body_limit = default_admin_body_limit;
    const registry* metrics = nullptr;  // rendered on /metrics; nullptr: default_registry()
    // false: no probes and no /metrics, only the registered handlers (the control listener).
    bool builtin_routes = true;
};

// Runs on a strand of the given io_context. The io_context must outlive the server, and
// `health` must outlive the io_context's run (the coroutines read it until they end).
class admin_server {
public:
    // Returns {HTTP status, one-line body}; an exception becomes 500 with its what(). Runs on the
    // server's strand: keep it short, and do not call stop() from it (the answer would be lost):
    // start a shutdown asynchronously instead.
    using post_handler = std::function<std::pair<int, std::string>()>;

    admin_server(boost::asio::io_context& io, admin_options options, health_state& health);
    ~admin_server();  // calls stop()
    admin_server(const admin_server&) = delete;
    admin_server& operator=(const admin_server&) = delete;

    // Binds and listens, then accepts on the io_context. Throws std::system_error if the
    // address is invalid or cannot be bound (a start-up error).
    void start();
    // Closes the listener and every admin connection; pending probes are abandoned. Thread-safe.
    void stop();
    // The bound port (the ephemeral one when options.port was 0); 0 before start().
    [[nodiscard]] std::uint16_t port() const;
    // POST `path` calls `handler`. Thread-safe; may be called after start().
    void add_post_handler(std::string path, post_handler handler);
    // GET (and HEAD) `path` calls `handler`, e.g. /rules. Same contract as POST handlers.
    void add_get_handler(std::string path, post_handler handler);

private:
    struct impl;
    std::shared_ptr<impl> impl_;  // shared with the running coroutines
};

}  // namespace claimguard::admin
