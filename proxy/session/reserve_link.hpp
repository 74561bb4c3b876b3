// reserve: the sidecar's own database connection for reserved stock (stock rule `reserve:`). On a
// thread of its own (libmariadb blocks) it sends the refills the pool plans (START TRANSACTION,
// SELECT ... FOR UPDATE, the conditional take of a block, COMMIT) and the give-backs of units the
// pool no longer needs (idle, a reload that drops or changes the rule, shutdown). It runs as the
// DBA-provisioned account of the schema check (schema_check_user), never the app's; its password is
// never logged. Sessions wait for a refill on their own executor: `done` wakes them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "proxy/config/proxy_options.hpp"
#include "proxy/engine/read_cache.hpp"
#include "proxy/engine/reserve_pool.hpp"
#include "proxy/engine/rules_snapshot.hpp"
#include "proxy/schema/inspect.hpp"

namespace claimguard::session {

// How often the link looks for idle units and rules a reload changed.
inline constexpr std::chrono::milliseconds reserve_tick{50};
inline constexpr std::chrono::seconds reserve_connect_timeout{3};
inline constexpr std::chrono::seconds reserve_read_timeout{5};

class reserve_link {
public:
    // `cache`: the sidecar's read cache, told of each give-back (a sold-out key's copy must not hide
    // the units that came back for read_cache_sold_out); null when nothing needs telling.
    reserve_link(const config::proxy_options& options, engine::reserve_pool& pool, engine::rules_holder& holder,
                 engine::read_cache* cache = nullptr);
    ~reserve_link();
    reserve_link(const reserve_link&) = delete;
    reserve_link& operator=(const reserve_link&) = delete;

    // A schema_check_user is set: reserve rules are served.
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

    void start();
    // Sends `job` on the link's thread; `done` is called from that thread once the pool has its outcome.
    void refill(engine::reserve_refill job, std::function<void()> done);
    // Shutdown: every unit of the pool back to the row (bounded by the connection's timeouts), then
    // the thread stops. Units still handed to open transactions are not the pool's: their sessions
    // settle them first (the drain waits for transactions to end).
    void drain();

private:
    struct refill_request {
        engine::reserve_refill job;
        std::function<void()> done;
    };
    void run();
    // The connection, made when missing; false: not reachable now (logged once per failure spell).
    bool connected();
    void send_refill(const engine::reserve_refill& job);
    void send_give_back(const engine::reserve_give_back& g);
    void give_back_due();
    void note(const schema::db_error& e, const std::string& doing);
    void update_gauge();

    engine::reserve_pool& pool_;
    engine::rules_holder& holder_;
    engine::read_cache* cache_;
    schema::connection_options connection_;
    bool enabled_ = false;
    std::optional<schema::inspector> conn_;
    bool down_logged_ = false;
    std::shared_ptr<const engine::rules_snapshot> seen_;  // the snapshot the pool's rules were last checked against

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<refill_request> queue_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace claimguard::session
