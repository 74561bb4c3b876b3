// The injection webhook's HTTPS server: POST /mutate and /mutate/namespace (AdmissionReview),
// GET /healthz.
#pragma once

// No Beast, Asio or OpenSSL here: the server lives behind a pimpl in webhook_server.cpp.
#include "proxy/inject/injection_config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace claimguard::inject {

inline constexpr std::uint16_t default_webhook_port = 8443;
// The API server allows a webhook 10 s by default (timeoutSeconds); a request is read, decided
// and answered well within that or dropped.
inline constexpr std::chrono::milliseconds default_webhook_request_timeout{10000};
// A Pod in an AdmissionReview is a few KiB to a few hundred KiB (managedFields); the API server
// itself caps request bodies at 3 MiB. 1 MiB refuses nothing real and bounds memory.
inline constexpr std::size_t default_webhook_body_limit = 1024 * 1024;
inline constexpr std::size_t default_webhook_header_limit = 16 * 1024;
// The API servers keep a few keep-alive connections each; this caps a misbehaving client.
inline constexpr std::size_t default_webhook_max_connections = 256;
// How often the certificate files are re-read (cert-manager renews them in place).
inline constexpr std::chrono::milliseconds default_tls_reload_interval{30000};

struct tls_source {
    std::string cert_file;  // PEM chain; with key_file, re-read when their contents change
    std::string key_file;
    std::string cert_chain_pem;  // in memory (self-signed); used when cert_file is empty
    std::string key_pem;
};

struct webhook_options {
    std::string address = "0.0.0.0";            // an IP literal
    std::uint16_t port = default_webhook_port;  // 0: an ephemeral port, see webhook_server::port()
    tls_source tls;
    injection_config injection;
    std::size_t max_connections = default_webhook_max_connections;
    std::chrono::milliseconds request_timeout = default_webhook_request_timeout;
    std::size_t header_limit = default_webhook_header_limit;
    std::size_t body_limit = default_webhook_body_limit;
    std::chrono::milliseconds tls_reload_interval = default_tls_reload_interval;  // 0: every connection
};

struct webhook_counters {
    std::uint64_t reviews = 0;   // answered AdmissionReviews
    std::uint64_t injected = 0;  // of which carried a patch
    std::uint64_t refused = 0;   // of which carried a "not injected" warning
    std::uint64_t bad_requests = 0;
    std::uint64_t tls_reloads = 0;
};

// Runs on a strand of the given io_context, which must outlive the server.
class webhook_server {
public:
    webhook_server(boost::asio::io_context& io, webhook_options options);
    ~webhook_server();  // calls stop()
    webhook_server(const webhook_server&) = delete;
    webhook_server& operator=(const webhook_server&) = delete;

    // Loads the certificate, binds and listens, then accepts on the io_context. Throws
    // std::system_error or std::runtime_error when the address or certificate is unusable.
    void start();
    // Closes the listener and idle connections; a request being answered is finished first.
    // Thread-safe.
    void stop();
    // The bound port (the ephemeral one when options.port was 0); 0 before start().
    [[nodiscard]] std::uint16_t port() const;
    // A snapshot; thread-safe.
    [[nodiscard]] webhook_counters counters() const;

private:
    struct impl;
    std::shared_ptr<impl> impl_;  // shared with the running coroutines
};

}  // namespace claimguard::inject
