// The proxy's schema check (schema_check: warn | refuse): at start-up, after each reload, and again
// while it fails, on its own thread (libmariadb blocks). It keeps readiness on the latest result and
// gives the rules snapshot the database code (routines, views, triggers) that reaches its tables.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/admin/health.hpp"
#include "proxy/config/proxy_options.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/schema/inspect.hpp"
#include "rules_reloader.hpp"

namespace claimguard::session {

// Retries of a check that could not reach or read the database, or that failed: the first after
// this, doubling up to the limit.
inline constexpr std::chrono::seconds schema_retry_first{1};
inline constexpr std::chrono::seconds schema_retry_max{30};
// A passing check is repeated this often (a dropped index, a new procedure are seen without a reload).
inline constexpr std::chrono::seconds schema_recheck_interval{300};
// Until the first check reached the database, new sessions wait for it (health_state::schema_pending),
// and it is retried this often; after schema_first_check_wait they stop waiting (logged): sessions
// then go on without the database code and compare string keys byte for byte until a check runs.
inline constexpr std::chrono::milliseconds schema_pending_retry{250};
inline constexpr std::chrono::seconds schema_first_check_wait{10};
// The proxy's checks read metadata only (no duplicate scan), and a reload waits for one on the
// reloading thread: both are bounded tighter than the CLI's.
inline constexpr std::chrono::seconds schema_watch_connect_timeout{3};
inline constexpr std::chrono::seconds schema_watch_read_timeout{10};

// The connection of the DBA-provisioned account (schema_check_user) to the backend, shared by the schema
// check and reserve's link: host, credentials, database and TLS as the sessions' (libmysqlclient verifies
// only the host it dials: with another backend_tls_server_name it is encrypted, unverified).
// Timeouts are the caller's.
[[nodiscard]] schema::connection_options schema_account_connection(const config::proxy_options& options);

class schema_watch {
public:
    schema_watch(const config::proxy_options& options, engine::rules_holder& holder, admin::health_state& health);
    ~schema_watch();
    schema_watch(const schema_watch&) = delete;
    schema_watch& operator=(const schema_watch&) = delete;

    // schema_check is not off and a schema_check_user is set.
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

    // Starts the thread: the first check now (readiness stays 503 in refuse mode until one passes).
    void start();

    // Asks the database about rules a reload is about to apply (blocking, bounded). In refuse mode a
    // table or column the database lacks rejects them; the snapshot gets the database code found
    // (or `previous` when the database could not be asked).
    [[nodiscard]] rules_vetting vet(const rules::rule_set& next,
                                    const std::vector<rules::match::code_object>& previous);

    // A reload was applied: check again now.
    void wake();

private:
    void run();
    // One check of the current snapshot; true when it passed (reached, read, nothing missing).
    bool check_once();
    // Readiness: 503 with `reason` (refuse mode), or ready.
    void block(std::string reason);
    void unblock();
    // Gives the current snapshot the database code and key comparisons found, unless a reload
    // replaced it meanwhile.
    void publish(const std::shared_ptr<const engine::rules_snapshot>& checked,
                 std::vector<rules::match::code_object> code, const std::vector<schema::key_collation_check>& keys);

    const config::proxy_options& options_;
    engine::rules_holder& holder_;
    admin::health_state& health_;
    schema::connection_options connection_;
    bool enabled_ = false;
    bool refuse_ = false;
    bool timeouts_logged_ = false;
    bool passing_ = false;     // the last check passed (logged once, not after every reload)
    std::chrono::steady_clock::time_point started_at_{};  // start(): the bound of schema_pending
    std::string last_logged_;  // the problems last logged: a failing check repeats them only when they change

    std::mutex mutex_;
    std::condition_variable wake_;
    bool woken_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace claimguard::session
