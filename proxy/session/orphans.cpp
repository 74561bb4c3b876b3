// The orphan registry and the decisions around KILL CONNECTION (no I/O).
#include "orphans.hpp"

namespace claimguard::session {

namespace {
constexpr std::uint16_t status_in_trans = 0x0001;    // SERVER_STATUS_IN_TRANS
constexpr std::uint16_t status_autocommit = 0x0002;  // SERVER_STATUS_AUTOCOMMIT
}  // namespace

std::string_view to_string(orphan_result r) {
    switch (r) {
        case orphan_result::killed: return "killed";
        case orphan_result::gone: return "gone";
        case orphan_result::failed: return "failed";
        case orphan_result::expired: return "expired";
        case orphan_result::dropped: return "dropped";
    }
    return "unknown";
}

bool may_hold_transaction(std::uint16_t server_status) {
    return (server_status & status_in_trans) != 0 || (server_status & status_autocommit) == 0;
}

std::string kill_statement(std::uint32_t thread_id) { return "KILL CONNECTION " + std::to_string(thread_id); }

orphan_result kill_outcome(bool ok, std::uint16_t err_code) {
    if (ok) return orphan_result::killed;
    return err_code == er_no_such_thread ? orphan_result::gone : orphan_result::failed;
}

kill_plan plan_kill(const orphan& o, std::string_view user, std::uint32_t new_server_version,
                    std::uint32_t new_thread_id) {
    if (o.user != user) return kill_plan::not_here;
    if (new_server_version != o.server_version || new_thread_id <= o.thread_id) return kill_plan::gone;
    return kill_plan::kill;
}

bool orphan_registry::add(orphan o) {
    std::lock_guard lock(mutex_);
    for (const auto& p : pending_)
        if (p.thread_id == o.thread_id && p.server_version == o.server_version) return true;
    if (pending_.size() >= capacity_) return false;
    pending_.push_back(std::move(o));
    size_.store(pending_.size(), std::memory_order_relaxed);
    return true;
}

orphan_registry::taken orphan_registry::take_for(std::string_view user, std::uint32_t server_version,
                                                 std::uint32_t thread_id, orphan_clock::time_point now,
                                                 std::size_t max) {
    taken out;
    std::lock_guard lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end() && out.kill.size() + out.gone.size() < max;) {
        if (it->deadline <= now) {  // left for take_expired, which counts it
            ++it;
            continue;
        }
        const auto plan = plan_kill(*it, user, server_version, thread_id);
        if (plan == kill_plan::not_here) {
            ++it;
            continue;
        }
        (plan == kill_plan::kill ? out.kill : out.gone).push_back(std::move(*it));
        it = pending_.erase(it);
    }
    size_.store(pending_.size(), std::memory_order_relaxed);
    return out;
}

void orphan_registry::put_back(orphan o) {
    std::lock_guard lock(mutex_);
    pending_.push_front(std::move(o));
    size_.store(pending_.size(), std::memory_order_relaxed);
}

std::vector<orphan> orphan_registry::take_expired(orphan_clock::time_point now) {
    std::vector<orphan> out;
    if (empty()) return out;
    std::lock_guard lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->deadline <= now) {
            out.push_back(std::move(*it));
            it = pending_.erase(it);
        } else {
            ++it;
        }
    }
    size_.store(pending_.size(), std::memory_order_relaxed);
    return out;
}

orphan_registry& orphans() {
    static orphan_registry registry;
    return registry;
}

}  // namespace claimguard::session
