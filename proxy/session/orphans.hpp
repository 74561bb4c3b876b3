// Orphaned backend transactions: connections whose link the sidecar lost while the server still held
// their transaction (and its row locks) open. Pure bookkeeping, no sockets: the registry of pending
// orphans, and the decisions around the KILL CONNECTION that ends each one (orphan_kill.cpp sends it).
//
// Why a KILL from the same user: when the sidecar->server link breaks on the sidecar's side (an RST
// from a middlebox, a conntrack entry lost), the server never learns; it keeps the transaction open
// until wait_timeout (8 h by default) and every decrement of the hot row waits behind its lock. The
// sidecar has no credentials of its own, but a user may kill its own connections, so the next
// backend connection the app opens for that user carries the KILL, before the app's first command.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/protocol/frame.hpp"

namespace claimguard::session {

// Orphans waiting for a connection of their user at once; beyond, a new one is dropped and counted.
inline constexpr std::size_t max_pending_orphans = 1024;
// KILLs one new backend connection sends before the app's first command (each is one round trip).
inline constexpr std::size_t max_kills_per_connection = 8;
// MariaDB/MySQL: "Unknown thread id" (the connection had already ended) and "You are not owner of thread".
inline constexpr std::uint16_t er_no_such_thread = 1094;
inline constexpr std::uint16_t er_kill_denied = 1095;

// What became of an orphan (the `result` label of claimguard_orphans_total).
enum class orphan_result {
    killed,   // KILL CONNECTION answered OK: the server rolled the transaction back
    gone,     // the server had already ended it (1094), or restarted since (thread ids start again)
    failed,   // the server refused the KILL (e.g. 1095): given up
    expired,  // no connection of its user came within the deadline: given up
    dropped,  // the registry was full: never tried
};
inline constexpr std::size_t orphan_result_count = 5;
[[nodiscard]] std::string_view to_string(orphan_result r);

using orphan_clock = std::chrono::steady_clock;

struct orphan {
    std::string user;                          // the account name the app logged in with
    std::uint32_t thread_id = 0;               // the server's connection id, from its greeting
    std::uint32_t server_version = 0;          // 101119 for 10.11.19: a connection to another server never kills it
    std::uint64_t session = 0;                 // the sidecar session it belonged to (logs, audit)
    std::string client;                        // that session's client address
    orphan_clock::time_point connected_at{};   // its backend handshake: the server it was on ran before this
    orphan_clock::time_point last_heard_at{};  // the last bytes read from its server: it was alive just before
    orphan_clock::time_point lost_at{};
    orphan_clock::time_point deadline{};
};

// True when a connection lost in this server state may leave a transaction open: the status flags
// said "in transaction", or autocommit was off (a statement in flight may have started one).
[[nodiscard]] bool may_hold_transaction(std::uint16_t server_status);

// The statement that ends an orphan: "KILL CONNECTION 42". KILL QUERY would not do: an orphan is
// idle between statements, and only ending the connection makes the server roll its transaction back.
[[nodiscard]] std::string kill_statement(std::uint32_t thread_id);

// The outcome of the KILL's reply: OK -> killed; ERR 1094 -> gone; any other ERR -> failed.
[[nodiscard]] orphan_result kill_outcome(bool ok, std::uint16_t err_code);

// Whether a new backend connection (thread `new_thread_id` on server version `new_server_version`)
// may kill `o`. Thread ids only grow during a server's life, so a new id at or below the orphan's
// means the server restarted (or another server answers): the orphan is gone, never killed there.
enum class kill_plan { kill, gone, not_here };
[[nodiscard]] kill_plan plan_kill(const orphan& o, std::string_view user, std::uint32_t new_server_version,
                                  std::uint32_t new_thread_id);

// The server's uptime query, sent before any KILL: a server that started after the orphan connected is
// another incarnation (a restart) or another server, whose thread ids mean other connections.
inline constexpr std::string_view uptime_statement = "SHOW GLOBAL STATUS LIKE 'Uptime'";

// The Uptime value from that query's reply (every packet's payload, in order); nullopt when the reply is
// an ERR or not the expected one row of (Variable_name, Value).
[[nodiscard]] std::optional<std::uint64_t> uptime_from_reply(const std::vector<protocol::byte_buffer>& payloads,
                                                             bool deprecate_eof);

// True when the server that answered `uptime_s` at `now` certainly ran when the orphan connected (so
// the orphan's thread id names the orphan there). Uptime is whole seconds, +-1: when in doubt, false.
[[nodiscard]] bool same_server_run(const orphan& o, std::uint64_t uptime_s, orphan_clock::time_point now);

// The identity check sent before any KILL, one round trip: the server's Uptime, and the user and the
// time in its current state (TIME_MS: for an idle connection, since its last statement ended; to the
// microsecond) of the connection that now has the orphan's thread id, NULLs when there is none.
[[nodiscard]] std::string identity_statement(std::uint32_t thread_id);

// What the identity check's one row says.
struct thread_identity {
    std::uint64_t uptime_s = 0;
    std::optional<std::string> user;  // nullopt: no connection has the thread id
    double state_ms = 0;              // TIME_MS
};

// The identity row from the check's reply; nullopt when the reply is an ERR (MySQL has no TIME_MS:
// the caller falls back to uptime_statement) or not that one row.
[[nodiscard]] std::optional<thread_identity> identity_from_reply(const std::vector<protocol::byte_buffer>& payloads,
                                                                 bool deprecate_eof);

// How far after the orphan's last bytes its row's current state may seem to have begun and still be
// the orphan's: the server stamps an idle connection after it sent its last reply, and the check's
// own reply takes time to come back. A connection of a later run of the server cannot be that close:
// the server that sent those bytes had to stop, and the new one start and accept it (seconds).
inline constexpr std::chrono::milliseconds orphan_identity_slack{250};

// What the identity check proves about the connection with the orphan's thread id.
enum class identity_verdict {
    orphan,          // the orphan: KILL it
    restarted,       // the server started after the orphan connected: the orphan ended with the old one
    no_such_thread,  // nobody has the thread id: the orphan ended
    other_user,      // another user's connection: the orphan ended (its id went to another after a restart)
    in_doubt,        // not proven either way: not killed (counted gone, as the orphan most likely ended)
};
// The server read its clocks between `asked_at` (the check was sent) and `answered_at` (its reply came).
[[nodiscard]] identity_verdict identify(const orphan& o, const thread_identity& t, orphan_clock::time_point asked_at,
                                        orphan_clock::time_point answered_at);

// The process-wide registry of pending orphans (every I/O thread adds and takes; one mutex).
class orphan_registry {
public:
    explicit orphan_registry(std::size_t capacity = max_pending_orphans) : capacity_(capacity) {}

    // Adds an orphan; false when the registry is full (the caller counts it as dropped). The same
    // thread id twice is kept once.
    bool add(orphan o);

    // Removes and returns what a new connection of `user` should handle, at most `max`: the orphans
    // it may kill (plan kill) and those it proves gone (plan gone), in the order they were lost.
    struct taken {
        std::vector<orphan> kill;
        std::vector<orphan> gone;
    };
    [[nodiscard]] taken take_for(std::string_view user, std::uint32_t server_version, std::uint32_t thread_id,
                                 orphan_clock::time_point now, std::size_t max = max_kills_per_connection);

    // Puts back an orphan whose KILL could not be sent (the new connection broke first).
    void put_back(orphan o);

    // Removes and returns the orphans past their deadline.
    [[nodiscard]] std::vector<orphan> take_expired(orphan_clock::time_point now);

    // Lock-free: sessions check it after every handshake.
    [[nodiscard]] bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }
    [[nodiscard]] std::size_t size() const { return size_.load(std::memory_order_relaxed); }

private:
    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::deque<orphan> pending_;  // oldest first
    std::atomic<std::size_t> size_{0};
};

// The registry the proxy uses.
orphan_registry& orphans();

}  // namespace claimguard::session
