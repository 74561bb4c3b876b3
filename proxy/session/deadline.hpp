// The deadline of what a session waits for on either link (the database's connect and handshake, the
// client's next command, the rest of a packet): one timer per session, re-armed lazily.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace claimguard::session {

using clock_type = std::chrono::steady_clock;

enum class deadline_kind { none, connect, idle, packet, drain, linger };

class client_link;
class backend_link;

class link_deadline {
public:
    explicit link_deadline(const boost::asio::any_io_executor& ex) : timer_(ex) {}

    // From now on, `kind` ends in `after` (none, or no time: no deadline).
    void set(deadline_kind kind, clock_type::duration after);
    void clear() { set(deadline_kind::none, {}); }

    // The deadline that passed (both links' operations were cancelled), or drain when shutdown
    // cancelled them; none again when the session forgives it.
    [[nodiscard]] deadline_kind timed_out() const { return timed_out_; }
    void time_out(deadline_kind kind) { timed_out_ = kind; }

    // The watchdog, until close(): when the deadline passes, cancels what both links wait for.
    boost::asio::awaitable<void> watch(client_link& client, backend_link& backend);
    void close() {
        closed_ = true;
        timer_.cancel();
    }

private:
    boost::asio::steady_timer timer_;
    clock_type::time_point deadline_ = clock_type::time_point::max();
    clock_type::time_point armed_ = clock_type::time_point::max();
    deadline_kind kind_ = deadline_kind::none;
    deadline_kind timed_out_ = deadline_kind::none;
    bool closed_ = false;
};

}  // namespace claimguard::session
