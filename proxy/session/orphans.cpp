// The orphan registry and the decisions around KILL CONNECTION (no I/O).
#include "orphans.hpp"

#include <charconv>

#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/reply_view.hpp"

namespace claimguard::session {


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
    return (server_status & protocol::status::in_trans) != 0 || (server_status & protocol::status::autocommit) == 0;
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

std::optional<std::uint64_t> uptime_from_reply(const std::vector<protocol::byte_buffer>& payloads, bool deprecate_eof) {
    constexpr std::size_t columns = 2;  // Variable_name, Value
    constexpr std::size_t value_column = 1;
    const protocol::reply_view reply(payloads, deprecate_eof ? protocol::cap::deprecate_eof : 0, 0);
    if (reply.kind() != protocol::reply_kind::result_set || reply.column_count() != columns || reply.row_count() == 0)
        return std::nullopt;
    auto row = reply.text_values(0);
    if (!row || !(*row)[value_column]) return std::nullopt;
    const std::string_view text = *(*row)[value_column];
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

bool same_server_run(const orphan& o, std::uint64_t uptime_s, orphan_clock::time_point now) {
    // The server computes Uptime from whole wall-clock seconds, so it started in (now - uptime - 1 s,
    // now - uptime + 1 s): before the orphan connected only when even the latest possible start is.
    constexpr std::chrono::seconds uptime_resolution{1};
    return now - std::chrono::seconds(uptime_s) + uptime_resolution < o.connected_at;
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
