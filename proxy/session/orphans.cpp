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

std::string identity_statement(std::uint32_t thread_id) {
    return "SELECT s.VARIABLE_VALUE, p.USER, p.TIME_MS FROM information_schema.GLOBAL_STATUS s LEFT JOIN "
           "information_schema.PROCESSLIST p ON p.ID = " +
           std::to_string(thread_id) + " WHERE s.VARIABLE_NAME = 'UPTIME'";
}

std::optional<thread_identity> identity_from_reply(const std::vector<protocol::byte_buffer>& payloads,
                                                   bool deprecate_eof) {
    constexpr std::size_t columns = 3;  // Uptime, USER, TIME_MS
    const protocol::reply_view reply(payloads, deprecate_eof ? protocol::cap::deprecate_eof : 0, 0);
    if (reply.kind() != protocol::reply_kind::result_set || reply.column_count() != columns || reply.row_count() != 1)
        return std::nullopt;
    auto row = reply.text_values(0);
    if (!row || row->size() != columns || !(*row)[0]) return std::nullopt;
    thread_identity t;
    const std::string_view uptime = *(*row)[0];
    const auto [up, uec] = std::from_chars(uptime.data(), uptime.data() + uptime.size(), t.uptime_s);
    if (uec != std::errc{} || up != uptime.data() + uptime.size()) return std::nullopt;
    if (!(*row)[1]) return t;  // no connection has the thread id (the LEFT JOIN's NULLs)
    t.user = std::string(*(*row)[1]);
    if (!(*row)[2]) return std::nullopt;
    const std::string_view ms = *(*row)[2];
    const auto [mp, mec] = std::from_chars(ms.data(), ms.data() + ms.size(), t.state_ms);
    if (mec != std::errc{} || mp != ms.data() + ms.size() || t.state_ms < 0) return std::nullopt;
    return t;
}

identity_verdict identify(const orphan& o, const thread_identity& t, orphan_clock::time_point asked_at,
                          orphan_clock::time_point answered_at) {
    // Uptime counts whole seconds, so the server started after (its clock read) - uptime - 1 s, and it
    // read its clock after asked_at: when even that is after the orphan's handshake, it is a later run
    // (or another server), whose thread ids name other connections.
    if (asked_at - std::chrono::seconds(t.uptime_s) - std::chrono::seconds(1) >= o.connected_at)
        return identity_verdict::restarted;
    // Thread ids are unique within a run and a connection keeps its user (an orphan after COM_CHANGE_USER
    // is never tracked): no row, or another user's, means the orphan's connection no longer exists here.
    if (!t.user) return identity_verdict::no_such_thread;
    if (*t.user != o.user) return identity_verdict::other_user;
    // The exact part. The row's current state began at the latest at answered_at - TIME_MS. The orphan's
    // server was alive, with the orphan's connection, when it sent the bytes read at last_heard_at; any
    // connection of a later run began after that run ended. So a row of this id in its current state since
    // about the orphan's last bytes, or earlier, existed while the orphan's run did: it is the orphan (same
    // run, same id). The orphan idle in its transaction is in that state (Sleep since its last reply).
    // This needs no server clock resolution: a server started a moment before the orphan is handled as
    // one started long before (the 1-second Uptime alone left those orphans in doubt, never killed).
    const auto state_began = answered_at - std::chrono::duration_cast<orphan_clock::duration>(
                                               std::chrono::duration<double, std::milli>(t.state_ms));
    if (state_began <= o.last_heard_at + orphan_identity_slack) return identity_verdict::orphan;
    // A row whose state began later (the orphan's last statement still ran when its link was lost, and
    // ended after) is the orphan when the server certainly ran when the orphan connected, as before.
    if (same_server_run(o, t.uptime_s, answered_at)) return identity_verdict::orphan;
    return identity_verdict::in_doubt;
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
