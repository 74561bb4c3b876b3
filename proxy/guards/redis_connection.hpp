// One connection from one I/O thread to one Redis node, over plain TCP or TLS: connect,
// AUTH, then pipelined commands whose replies are matched in order. Every wait is bounded.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cluster_map.hpp"
#include "resp.hpp"

namespace claimguard::guards {

// Who the guard is to Redis. The password comes from the environment or a file, never a flag.
struct redis_credentials {
    std::string user;           // ACL user; empty: AUTH password (requirepass / the default user)
    std::string password;       // empty and no file: no AUTH
    std::string password_file;  // read at every connect, so a rotated secret is picked up
};

struct connection_options {
    node_address node;
    std::chrono::milliseconds connect_timeout{1000};     // TCP + TLS handshake + AUTH
    std::chrono::milliseconds reconnect_interval{1000};  // between connection attempts to this node
    unsigned max_consecutive_timeouts = 3;               // then drop the connection and reconnect
    redis_credentials credentials;
    std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP
    std::string tls_server_name;                     // SNI and certificate name; empty: the node's host
    bool tls_verify = true;
};

// Why a call has no reply.
enum class call_failure : std::uint8_t { none, not_connected, timeout, disconnected };

struct call_outcome {
    call_failure failure = call_failure::none;
    resp_value reply;  // the last command's reply when failure == none
};

// Reads the secret: the password, or the file's first line. Empty when there is none.
// Throws std::runtime_error when the file cannot be read.
std::string resolve_password(const redis_credentials& credentials);

class redis_connection : public std::enable_shared_from_this<redis_connection> {
public:
    enum class state : std::uint8_t { idle, connecting, ready, failed };

    redis_connection(boost::asio::any_io_executor executor, connection_options options);
    ~redis_connection();
    redis_connection(const redis_connection&) = delete;
    redis_connection& operator=(const redis_connection&) = delete;

    // True when commands can be sent now. Otherwise starts a connection attempt (at most one
    // per reconnect interval) and answers false at once: a claim never waits for a connect.
    bool ready();
    // Sends `payload` (`replies` commands, already in RESP) and waits until `deadline` for the
    // last reply; earlier replies (ASKING's +OK) are dropped.
    boost::asio::awaitable<call_outcome> call(std::string payload, unsigned replies,
                                              std::chrono::steady_clock::time_point deadline);
    // Ends the connection; pending calls fail with `disconnected`.
    void close();

    [[nodiscard]] state current_state() const;
    [[nodiscard]] const node_address& node() const;
    // The last AUTH refusal ("WRONGPASS ..."), empty when the last attempt was not refused.
    [[nodiscard]] const std::string& auth_error() const;
    [[nodiscard]] const std::string& last_error() const;

    // Called (on the connection's executor) after each connection attempt: ok, and the error.
    void on_attempt(std::function<void(bool ok, const std::string& error, bool auth_refused)> callback);

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace claimguard::guards
