// The lingering close after a client protocol error (issue 23). claimguard answers a bad packet (too
// large, out of order, malformed) with an ERR and ends the session; closing at once while the rest of
// the client's packet is still arriving makes the kernel answer those bytes with an RST, which can
// destroy the ERR before the client reads it (and fails the client's send with a broken pipe). So the
// session sends its ERR, shuts down its sending side (a FIN after the ERR), reads and drops what the
// client still sends, and closes only when the client closes too, or at a bound: linger_timeout,
// linger_max_bytes, and at most max_lingering_closes sessions at once (beyond, it closes at once).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace claimguard::session {

// How long a session lingers at most: the client gets this long to finish sending and read its ERR.
inline constexpr std::chrono::seconds linger_timeout{2};
// How much a session reads and drops at most while it lingers: above the largest frame a client can be
// in the middle of (16 MiB), so a client that sends one whole oversized packet is always drained.
inline constexpr std::size_t linger_max_bytes = 64 * 1024 * 1024;
// Sessions lingering at once, process-wide: each holds its socket and a read buffer (linger_read_bytes)
// for at most linger_timeout, so misbehaving clients cannot pin more than this.
inline constexpr std::size_t max_lingering_closes = 256;
inline constexpr std::size_t linger_read_bytes = 16 * 1024;

// How a lingering close ended (the `end` label of claimguard_client_lingers_total).
enum class linger_end {
    eof,      // the client closed too: it had all it sent read and its ERR delivered
    timeout,  // linger_timeout passed: a client that never stops sending
    bytes,    // linger_max_bytes were dropped: the same, faster
    error,    // the client's socket failed (a reset)
    drain,    // claimguard is shutting down
    full,     // max_lingering_closes sessions were lingering: closed at once
};
[[nodiscard]] constexpr std::string_view to_string(linger_end e) {
    switch (e) {
        case linger_end::eof: return "eof";
        case linger_end::timeout: return "timeout";
        case linger_end::bytes: return "bytes";
        case linger_end::error: return "error";
        case linger_end::drain: return "drain";
        case linger_end::full: return "full";
    }
    return "unknown";
}

// Why a read of the lingering client stopped: it failed (`eof`: a clean close; `cancelled`: by the
// session's deadline, which is linger_timeout, or by shutdown, `draining`), or `dropped` bytes reached
// linger_max_bytes. nullopt-like `more`: none of these, read on.
struct linger_read {
    bool failed = false;
    bool eof = false;
    bool cancelled = false;
    bool draining = false;
    std::size_t dropped = 0;
};
enum class linger_step { more, stop };
[[nodiscard]] constexpr linger_step next_linger_step(const linger_read& r, linger_end& end) {
    if (r.failed) {
        end = r.eof          ? linger_end::eof
              : !r.cancelled ? linger_end::error
              : r.draining   ? linger_end::drain
                             : linger_end::timeout;
        return linger_step::stop;
    }
    if (r.dropped >= linger_max_bytes) {
        end = linger_end::bytes;
        return linger_step::stop;
    }
    return linger_step::more;
}

// The process-wide bound on sessions lingering at once (any I/O thread takes and gives back).
class linger_slots {
public:
    explicit linger_slots(std::size_t capacity) : capacity_(capacity) {}
    // False when `capacity` sessions linger already: the caller closes at once.
    bool try_take() {
        auto now = in_use_.load(std::memory_order_relaxed);
        do {
            if (now >= capacity_) return false;
        } while (!in_use_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
        return true;
    }
    void give_back() { in_use_.fetch_sub(1, std::memory_order_relaxed); }
    [[nodiscard]] std::size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

private:
    const std::size_t capacity_;
    std::atomic<std::size_t> in_use_{0};
};

// The slots the proxy uses (max_lingering_closes).
inline linger_slots& lingering_closes() {
    static linger_slots slots(max_lingering_closes);
    return slots;
}

}  // namespace claimguard::session
