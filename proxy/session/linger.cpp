// The lingering close after a client protocol error (linger.hpp): the ERR was sent; a FIN follows it,
// and the client's remaining bytes are read and dropped until it closes too, or a bound is reached.
#include "linger.hpp"

#include <spdlog/spdlog.h>
#include <vector>

#include "client_link.hpp"
#include "proxy/admin/metrics.hpp"

namespace claimguard::session {

awaitable<void> client_link::linger_close() {
    linger_ = false;
    auto& slots = lingering_closes();
    if (!slots.try_take()) {
        admin::metrics().client_lingers(to_string(linger_end::full)).inc();
        spdlog::warn("session {} from {}: {} sessions are lingering already (max_lingering_closes): closed at once",
                     session_id_, peer_, max_lingering_closes);
        co_return;  // closed at once, as before: the client may lose its ERR to an RST
    }
    admin::metrics().client_lingering.set(static_cast<std::int64_t>(slots.in_use()));
    lingering_ = true;
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);  // the client reads the ERR, then EOF
    deadline_.set(deadline_kind::linger, linger_timeout);
    std::vector<char> buffer(linger_read_bytes);
    linger_read r;
    linger_end end = linger_end::eof;
    while (next_linger_step(r, end) == linger_step::more) {
        auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer.data(), buffer.size()), nothrow);
        r.dropped += n;
        if (ec) {
            r.failed = true;
            r.eof = ec == asio::error::eof;
            r.cancelled = ec == asio::error::operation_aborted;
            r.draining = deadline_.timed_out() == deadline_kind::drain;
        }
    }
    deadline_.clear();
    lingering_ = false;
    slots.give_back();
    admin::metrics().client_lingering.set(static_cast<std::int64_t>(slots.in_use()));
    admin::metrics().client_lingers(to_string(end)).inc();
    // The client's own close is the normal end; the others are worth a line (one per session, like the
    // warning about its bad packet before).
    spdlog::log(end == linger_end::eof ? spdlog::level::debug : spdlog::level::info,
                "session {} from {}: lingering close ended ({}), {} bytes dropped", session_id_, peer_, to_string(end),
                r.dropped);
}

}  // namespace claimguard::session
