// One client connection and its own backend connection: handshake relay and command loop.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "proxy/config/proxy_options.hpp"

namespace boost::asio::ssl {
class context;
}

namespace claimguard::admin {
struct health_state;
class counter;
}  // namespace claimguard::admin
namespace claimguard::engine {
class rules_holder;
class take_ledger;
class read_cache;
class admission_gate;
class reserve_pool;
}
namespace claimguard::guards {
class redis_guard;
}

namespace claimguard::session {

class audit_log;
class statement_digests;
class reserve_link;

// Shared, read-only for sessions (except the counters, which are atomic).
struct session_context {
    const config::proxy_options* options = nullptr;
    boost::asio::ssl::context* backend_tls = nullptr;  // null: plain TCP to the backend
    admin::health_state* health = nullptr;
    std::atomic<std::uint64_t>* next_session_id = nullptr;
    engine::rules_holder* rules = nullptr;  // null: no rules, a plain relay
    audit_log* audit = nullptr;
    const std::atomic<bool>* draining = nullptr;  // shutting down: sessions close when idle outside a transaction
    engine::take_ledger* ledger = nullptr;  // set with rules: committed takes shared by the sidecar's sessions
    engine::read_cache* read_cache = nullptr;  // set with rules: counter reads answered by the sidecar (read_cache)
    engine::admission_gate* admission = nullptr;  // set with rules: per-key admission queues of the sidecar
    statement_digests* digests = nullptr;  // set with rules: the shapes audited, for GET /digests
    // Statements of tables beyond watch_unlisted_tables (claimguard_unlisted_tables_dropped_total).
    admin::counter* unlisted_dropped = nullptr;
    engine::reserve_pool* reserve = nullptr;  // set with rules and schema_check_user: reserved stock (reserve:)
    reserve_link* reserve_conn = nullptr;     // ... and its connection, for refills
};

// A client connection: TCP (listen) or a unix socket (listen_unix), one session code for both.
using client_socket = boost::asio::generic::stream_protocol::socket;

// How logs and the audit name a client: "10.0.0.7:51234", or "unix:<socket path>" (a unix
// client has no address of its own). Sets `is_unix`.
std::string client_peer(client_socket& socket, bool& is_unix);

// Serves one client until either side closes, then closes both connections.
// `redis` is the Redis guard of the I/O thread the session runs on (null: no Redis).
boost::asio::awaitable<void> run_session(client_socket client, const session_context& ctx, guards::redis_guard* redis);

// Counts (and audits) orphaned backend transactions past orphan_kill_deadline, once a second.
boost::asio::awaitable<void> sweep_orphans(const session_context& ctx);

// Shutdown, on the calling thread's sessions (post it to each I/O thread): closes the ones
// idle outside a transaction (all of them when `everyone`). Returns how many remain open.
std::size_t drain_sessions_on_this_thread(bool everyone);

}  // namespace claimguard::session
