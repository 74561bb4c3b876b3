// The session's side of orphaned transactions: noting a backend connection lost inside a transaction,
// and ending such orphans with KILL CONNECTION from the same user's next backend connection, between
// its handshake and the app's first command (the bookkeeping is in orphans.hpp).
#include <spdlog/spdlog.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "audit_log.hpp"
#include "orphans.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace {

// How often orphans past their deadline are counted as expired.
constexpr std::chrono::seconds orphan_sweep_interval{1};

std::string_view audit_action(orphan_result r) {
    switch (r) {
        case orphan_result::killed: return "orphan-killed";
        case orphan_result::gone: return "orphan-gone";
        case orphan_result::failed: return "orphan-kill-failed";
        case orphan_result::expired: return "orphan-expired";
        case orphan_result::dropped: return "orphan-dropped";
    }
    return "orphan";
}

void write_audit(audit_log* audit, const orphan& o, std::string_view action, std::string_view note) {
    if (!audit) return;
    audit_event e;
    e.session = o.session;
    e.client = o.client;
    e.user = o.user;
    e.action = action;
    e.keys.emplace_back("thread_id", std::to_string(o.thread_id));
    e.note = note;
    e.host = audit->host();
    e.backend_thread = o.thread_id;
    audit->write(e);
}

// Counts, logs and audits what became of one orphan.
void report(const orphan& o, orphan_result r, std::string_view how, audit_log* audit) {
    admin::metrics().orphans(to_string(r)).inc();
    admin::metrics().orphans_pending.set(static_cast<std::int64_t>(orphans().size()));
    const auto held = std::chrono::duration<double>(orphan_clock::now() - o.lost_at).count();
    const std::string note = fmt::format("{}; {:.3f}s after the link was lost", how, held);
    if (r == orphan_result::killed || r == orphan_result::gone)
        spdlog::info("orphaned transaction of session {} (user '{}', database thread {}): {}: {}", o.session, o.user,
                     o.thread_id, to_string(r), note);
    else
        spdlog::warn("orphaned transaction of session {} (user '{}', database thread {}): {}: {}", o.session, o.user,
                     o.thread_id, to_string(r), note);
    write_audit(audit, o, audit_action(r), note);
}

void expire_orphans(orphan_clock::time_point now, audit_log* audit) {
    for (const auto& o : orphans().take_expired(now))
        report(o, orphan_result::expired,
               "no connection of its user came within orphan_kill_deadline: the database keeps it until its own "
               "timeouts (idle_transaction_timeout, wait_timeout)",
               audit);
}

// What the identity check decided for one orphan: KILL it, or report it as `result` with `note`.
struct identity_answer {
    bool kill = false;
    orphan_result result = orphan_result::gone;
    std::string note;
};

std::string identity_note(identity_verdict v, const thread_identity& t) {
    switch (v) {
        case identity_verdict::orphan: return "identified";
        case identity_verdict::restarted:
            return fmt::format("the database started {}s ago, after that connection: it ended with the restart",
                               t.uptime_s);
        case identity_verdict::no_such_thread: return "the database has no such thread any more: it ended";
        case identity_verdict::other_user:
            return fmt::format("the thread id is user '{}''s now: the orphan ended", t.user.value_or(""));
        case identity_verdict::in_doubt:
            return fmt::format(
                "the thread's current state began after the orphan's last bytes and the database started {}s "
                "ago, about when the orphan connected: in doubt, not killed",
                t.uptime_s);
    }
    return "unknown";
}

// Asks the server about the orphan's thread id (identity_statement), or, where that query fails
// (MySQL's PROCESSLIST has no TIME_MS), only its Uptime, as before the exact check. nullopt when the
// connection broke.
awaitable<std::optional<identity_answer>> identify_on_server(backend_link& backend, bool deprecate_eof,
                                                             const orphan& o) {
    const auto asked_at = orphan_clock::now();
    const auto reply = co_await backend.own_query(identity_statement(o.thread_id));
    if (!reply) co_return std::nullopt;
    const auto answered_at = orphan_clock::now();
    if (const auto identity = identity_from_reply(*reply, deprecate_eof)) {
        const auto verdict = identify(o, *identity, asked_at, answered_at);
        spdlog::debug("orphan thread {}: uptime {}s, user '{}', state {} ms, last bytes {:.3f}s ago: {}", o.thread_id,
                      identity->uptime_s, identity->user.value_or("-"), identity->state_ms,
                      std::chrono::duration<double>(answered_at - o.last_heard_at).count(),
                      identity_note(verdict, *identity));
        co_return identity_answer{verdict == identity_verdict::orphan, orphan_result::gone,
                                  identity_note(verdict, *identity)};
    }
    const auto uptime_reply = co_await backend.own_query(uptime_statement);
    if (!uptime_reply) co_return std::nullopt;
    const auto uptime = uptime_from_reply(*uptime_reply, deprecate_eof);
    if (!uptime)
        co_return identity_answer{false, orphan_result::failed,
                                  "the database did not tell its uptime, so it may be another one: not killed"};
    if (!same_server_run(o, *uptime, orphan_clock::now()))
        co_return identity_answer{
            false, orphan_result::gone,
            fmt::format("the database started {}s ago, after that connection: it ended with the restart", *uptime)};
    co_return identity_answer{true, orphan_result::killed, "same server run (Uptime)"};
}

}  // namespace

awaitable<void> sweep_orphans(const session_context& ctx) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (;;) {
        timer.expires_after(orphan_sweep_interval);
        auto [ec] = co_await timer.async_wait(nothrow);
        if (ec) co_return;
        expire_orphans(orphan_clock::now(), ctx.audit);
    }
}

void session::note_orphan() {
    // A session that ended because its client left, idle in a transaction, may have lost the backend
    // link earlier without noticing (nothing was read from it): the kernel knows.
    if (!backend_.lost() && (status_ & proto::status::in_trans) && backend_.stream().link_lost()) backend_.mark_lost();
    if (!backend_.lost() || !may_hold_transaction(status_) || backend_.thread_id() == 0) return;
    if (user_changed_) {  // COM_CHANGE_USER: the connection may belong to another user now
        spdlog::warn(
            "session {} from {}: database thread {} lost inside a transaction after a change of user: not "
            "tracked; the database keeps it until its own timeouts",
            id_, client_.peer(), backend_.thread_id());
        return;
    }
    if (!opt_.orphan_kill) {
        spdlog::warn(
            "session {} from {}: database thread {} (user '{}') lost inside a transaction; orphan_kill is "
            "off, so the database keeps it and its row locks until its own timeouts",
            id_, client_.peer(), backend_.thread_id(), user_);
        return;
    }
    const auto now = orphan_clock::now();
    orphan o{user_,
             backend_.thread_id(),
             connection_state_.lexer().server_version,
             id_,
             client_.peer(),
             backend_.ready_at(),
             backend_.stream().last_read_at(),
             now,
             now + opt_.orphan_kill_deadline};
    if (!orphans().add(o)) {
        report(o, orphan_result::dropped,
               fmt::format("more than {} orphans are waiting (max_pending_orphans)", max_pending_orphans), ctx_.audit);
        return;
    }
    admin::metrics().orphans_pending.set(static_cast<std::int64_t>(orphans().size()));
    spdlog::warn(
        "session {} from {}: database thread {} (user '{}') lost inside a transaction: the database may "
        "hold its row locks; it gets KILL CONNECTION from the next connection of that user (within {}s)",
        id_, client_.peer(), backend_.thread_id(), user_, opt_.orphan_kill_deadline.count());
    write_audit(ctx_.audit, o, "orphaned", "backend link lost while the server's status said in transaction");
}

awaitable<bool> session::end_orphans() {
    backend_.ready();  // an orphan of this session ran on a server started before this
    auto& registry = orphans();
    if (!opt_.orphan_kill || registry.empty()) co_return true;
    const auto now = orphan_clock::now();
    expire_orphans(now, ctx_.audit);
    auto taken = registry.take_for(user_, connection_state_.lexer().server_version, backend_.thread_id(), now);
    for (const auto& o : taken.gone)
        report(o, orphan_result::gone,
               fmt::format("session {} reached another or a restarted database (thread {}): it ended with it", id_,
                           backend_.thread_id()),
               ctx_.audit);
    if (taken.kill.empty()) co_return true;
    deadline_.set(deadline_kind::connect, opt_.connect_timeout);
    bool failed = false;
    // A restarted server (or another one behind the same address) gives the same thread ids to other
    // connections: each orphan is first identified on this server (orphans.hpp, identify), and only
    // the orphan itself gets the KILL.
    std::size_t i = 0;
    for (; i < taken.kill.size(); ++i) {
        const auto& o = taken.kill[i];
        const auto identity = co_await identify_on_server(backend_, (caps_ & proto::cap::deprecate_eof) != 0, o);
        if (!identity) break;  // this connection broke
        if (!identity->kill) {
            report(o, identity->result, identity->note, ctx_.audit);
            continue;
        }
        const auto reply = co_await backend_.own_query(kill_statement(o.thread_id));
        if (!reply) break;
        const proto::reply_view view(*reply, caps_, mariadb_caps_);
        const bool ok = view.kind() == proto::reply_kind::ok;
        std::uint16_t code = 0;
        if (!ok && !reply->empty())
            if (auto e = proto::parse_err(view.first())) code = e->code;
        const auto result = kill_outcome(ok, code);
        report(o, result,
               result == orphan_result::killed ? fmt::format("KILL CONNECTION from session {}", id_)
               : result == orphan_result::gone ? std::string("it had already ended (1094)")
                                               : fmt::format("KILL CONNECTION refused with error {}", code),
               ctx_.audit);
    }
    if (i < taken.kill.size()) {  // this connection broke too: the next one tries again
        failed = true;
        for (std::size_t j = i; j < taken.kill.size(); ++j) registry.put_back(taken.kill[j]);
        admin::metrics().orphans_pending.set(static_cast<std::int64_t>(registry.size()));
    }
    deadline_.clear();
    if (!failed) co_return true;
    // The backend connection failed under the KILL: the app has its OK already, so its first
    // command gets the answer any command gets when the database goes away.
    auto [ec, packet] = co_await read_command();
    if (!ec) co_await backend_.failed(asio::error::broken_pipe, static_cast<std::uint8_t>(packet.last_seq + 1));
    co_return false;
}

}  // namespace claimguard::session
