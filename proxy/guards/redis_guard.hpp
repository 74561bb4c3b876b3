// The Redis first filter for claims: SET key token NX PX ttl, and a compare-and-delete
// release. An optimisation only: any failure answers "unavailable" and the caller
// falls back to the database's unique index (fail open).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace claimguard::guards {

struct redis_options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 6379;
    std::chrono::milliseconds command_timeout{50};        // per command; then fail open
    std::chrono::milliseconds reconnect_interval{1000};   // between connection attempts
    unsigned max_consecutive_timeouts = 3;                // then drop the connection and reconnect
};

enum class acquire_result {
    acquired,     // the key was free and is now ours for ttl
    held,         // another request holds the key: a duplicate claim in flight or done
    unavailable,  // Redis down, slow or erroring: the database guard decides alone
};

// One connection per I/O thread; every call must come from that thread's executor.
class redis_guard {
public:
    redis_guard(boost::asio::any_io_executor executor, redis_options options);
    ~redis_guard();
    redis_guard(const redis_guard&) = delete;
    redis_guard& operator=(const redis_guard&) = delete;

    boost::asio::awaitable<acquire_result> acquire(std::string_view key, std::string_view token,
                                                   std::chrono::milliseconds ttl);
    // Deletes the key only if it still holds `token`. False when not released
    // (someone else's token, expired, or Redis unavailable).
    boost::asio::awaitable<bool> release(std::string_view key, std::string_view token);

    [[nodiscard]] bool connected() const;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

// A random token (hex) that identifies one claim attempt's lock.
std::string random_token();

}  // namespace claimguard::guards
