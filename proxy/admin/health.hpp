// Health flags written by the listener and the sessions, read by the admin server's probes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace claimguard::admin {

// Milliseconds on the steady clock (the time base of health_state::last_backend_ok_ms).
inline std::int64_t steady_now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct health_state {
    std::atomic<bool> started{false};                 // set once the proxy listener is bound: /startup turns 200
    std::atomic<bool> shutting_down{false};           // set on SIGTERM: /readiness turns 503
    std::atomic<std::int64_t> last_backend_ok_ms{0};  // steady_now_ms() of the last backend handshake; 0 = never
    std::atomic<bool> schema_blocked{false};          // the latest schema check failed and schema_check is refuse
    std::atomic<std::shared_ptr<const std::string>> schema_reason;  // why, for /readiness (set before the flag)
    // From start-up until the first schema check reached the database (or gave up waiting for it):
    // new sessions wait before they open their backend connection, so that none is decided without
    // the database code and key collations the check finds (session.cpp wait_for_first_schema_check).
    std::atomic<bool> schema_pending{false};

    // Sessions call this after a backend connection completed its handshake.
    void mark_backend_ok() noexcept { last_backend_ok_ms.store(steady_now_ms(), std::memory_order_relaxed); }
};

}  // namespace claimguard::admin
