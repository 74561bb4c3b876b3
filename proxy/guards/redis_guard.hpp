// The Redis first filter for claims: an acquire that says whether the key's holder committed, a
// commit mark, and a compare-and-delete release (Lua scripts), against one Redis or a Redis Cluster. An optimisation
// only: any failure answers "unavailable" and the caller falls back to the database's unique index (fail open).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster_map.hpp"
#include "redis_connection.hpp"

namespace claimguard::guards {

struct redis_options {
    std::vector<node_address> nodes{{"127.0.0.1", 6379}};  // one Redis, or a cluster's seed nodes
    bool cluster = false;
    std::chrono::milliseconds command_timeout{50};          // the whole Redis step of a claim; then fail open
    std::chrono::milliseconds connect_timeout{1000};        // TCP + TLS + AUTH, in the background
    std::chrono::milliseconds reconnect_interval{1000};     // between connection attempts to one node
    std::chrono::milliseconds slot_refresh_interval{1000};  // at most one CLUSTER SLOTS per interval
    unsigned max_consecutive_timeouts = 3;                  // then drop the connection and reconnect
    redis_credentials credentials;
    std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP
    std::string tls_server_name;
    bool tls_verify = true;
};

enum class acquire_result {
    acquired,     // the key was free and is now ours for ttl
    held,         // a committed claim holds the key: a duplicate
    pending,      // a claim whose transaction has not committed holds it: the database's unique index decides
    unavailable,  // Redis down, slow or erroring: the database guard decides alone
};

// Connections per node, opened lazily, one set per I/O thread; every call must come from that
// thread's executor.
class redis_guard {
public:
    redis_guard(boost::asio::any_io_executor executor, redis_options options);
    ~redis_guard();
    redis_guard(const redis_guard&) = delete;
    redis_guard& operator=(const redis_guard&) = delete;

    boost::asio::awaitable<acquire_result> acquire(std::string_view key, std::string_view token,
                                                   std::chrono::milliseconds ttl);
    // The claim that acquired the key committed: a later claim of the key is a duplicate (until then
    // it is sent to the database, whose unique index waits for this claim's transaction).
    boost::asio::awaitable<bool> commit(std::string_view key, std::string_view token, std::chrono::milliseconds ttl);
    // Deletes the key only if it still holds `token`. False when not released
    // (someone else's token, expired, or Redis unavailable). An empty token: the key of a claim the
    // app cancelled (DELETE), deleted when a committed claim holds it, whoever's.
    boost::asio::awaitable<bool> release(std::string_view key, std::string_view token);
    // commit() and release() whose answer nobody waits for: spawned on this guard's executor.
    void commit_in_background(std::string key, std::string token, std::chrono::milliseconds ttl);
    void release_in_background(std::string key, std::string token);

    [[nodiscard]] bool connected() const;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

// The start-up check: connects to the first node that answers and authenticates. Empty when
// fine or when no node answered (Redis down is not a reason to refuse to start); the server's
// refusal ("WRONGPASS ...") when the credentials are wrong, which is.
std::string check_redis_credentials(const redis_options& options);

// A random token (hex) that identifies one claim attempt's lock.
std::string random_token();

}  // namespace claimguard::guards
