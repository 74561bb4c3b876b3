// reserve's own connection: refills and give-backs of reserved stock, on the link's thread.
#include "reserve_link.hpp"

#include "schema_watch.hpp"

#include <spdlog/spdlog.h>

#include <charconv>

#include "proxy/admin/metrics.hpp"

namespace claimguard::session {
namespace {

// Error numbers 2000-2999 are the client library's own (CR_*: the connection lost, a timeout), so
// the statement's outcome is unknown; the others are the server's answer to it.
bool server_answered(unsigned code) { return code > 0 && (code < 2000 || code >= 3000); }

struct reserve_metrics {
    admin::gauge& held = admin::default_registry()
                             .gauge_family("claimguard_reserve_units_held",
                                           "Units of reserve rules this sidecar holds: taken from the stock rows "
                                           "and not consumed (in its pool, or handed to open transactions)",
                                           {})
                             .with();
    admin::counter& refills =
        admin::default_registry()
            .counter_family("claimguard_reserve_refills_total",
                            "Refills of reserved stock that took units from a stock row (reserve)", {})
            .with();
    admin::counter& given_back =
        admin::default_registry()
            .counter_family("claimguard_reserve_given_back_units_total",
                            "Reserved units given back to the stock rows (idle, reload, shutdown)", {})
            .with();
    admin::counter& failures =
        admin::default_registry()
            .counter_family("claimguard_reserve_failures_total",
                            "Refills and give-backs of reserved stock that failed (a give-back whose outcome is "
                            "unknown leaks its units; it is never sent twice)",
                            {})
            .with();
    static reserve_metrics& get() {
        static reserve_metrics m;
        return m;
    }
};

// The connection went away under a statement (CR_SERVER_GONE_ERROR, CR_SERVER_LOST, ...): whether
// it ran is unknown.
bool link_lost(const schema::db_error& e) { return e.code >= 2000 && e.code < 3000; }

}  // namespace

reserve_link::reserve_link(const config::proxy_options& options, engine::reserve_pool& pool,
                           engine::rules_holder& holder, engine::read_cache* cache)
    : pool_(pool), holder_(holder), cache_(cache) {
    enabled_ = !options.schema_check_user.empty();
    connection_ = schema_account_connection(options);
    connection_.connect_timeout = reserve_connect_timeout;
    connection_.read_timeout = reserve_read_timeout;
    connection_.write_timeout = reserve_read_timeout;
    (void)reserve_metrics::get();
}

reserve_link::~reserve_link() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void reserve_link::start() {
    if (!enabled_ || thread_.joinable()) return;
    thread_ = std::thread([this] { run(); });
}

void reserve_link::refill(engine::reserve_refill job, std::function<void()> done) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            queue_.push_back({std::move(job), std::move(done)});
            wake_.notify_all();
            return;
        }
    }
    // Shutting down: no refill; the take goes to the row.
    pool_.end_refill(job.target.rule.name, job.key, 0, true, engine::reserve_pool::clock::now());
    done();
}

void reserve_link::drain() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (!enabled_) return;
    const auto back = pool_.take_all();
    for (const auto& g : back) send_give_back(g);
    update_gauge();
    if (!back.empty()) spdlog::info("reserve: {} key(s) of reserved units given back at shutdown", back.size());
}

void reserve_link::run() {
    for (;;) {
        std::optional<refill_request> next;
        // Nothing held (no unit pooled or handed to a transaction): nothing can go idle or be dropped by a
        // reload, and units only come from a refill this thread sends, so it sleeps until a refill is asked
        // or the sidecar stops instead of ticking (the thread runs wherever schema_check_user is set).
        const auto held = pool_.stats();
        const bool holds_nothing = held.pooled + held.handed == 0;
        {
            std::unique_lock lock(mutex_);
            const auto ready = [this] { return stopping_ || !queue_.empty(); };
            if (holds_nothing)
                wake_.wait(lock, ready);
            else
                wake_.wait_for(lock, reserve_tick, ready);
            if (!queue_.empty()) {
                next = std::move(queue_.front());
                queue_.pop_front();
            } else if (stopping_) {
                return;
            }
        }
        if (next) {
            send_refill(next->job);
            next->done();
        }
        give_back_due();
        update_gauge();
    }
}

bool reserve_link::connected() {
    if (conn_) return true;
    auto c = schema::inspector::connect(connection_);
    if (!c) {
        if (!down_logged_)
            spdlog::warn(
                "reserve: cannot reach the database as {} ({}); takes of reserve rules go to the rows "
                "until it can",
                connection_.user, c.error().message);
        down_logged_ = true;
        return false;
    }
    if (down_logged_) spdlog::info("reserve: connected to the database as {}", connection_.user);
    down_logged_ = false;
    conn_.emplace(std::move(*c));
    // A refill waits for the row's lock behind app transactions: briefly (the take goes to the row then).
    if (auto r = conn_->run("SET SESSION innodb_lock_wait_timeout = 1"); !r)
        spdlog::warn("reserve: {}", r.error().message);
    return true;
}

void reserve_link::note(const schema::db_error& e, const std::string& doing) {
    reserve_metrics::get().failures.inc();
    spdlog::warn("reserve: {}: {}", doing, e.message);
    if (link_lost(e)) conn_.reset();  // a new connection next time
}

void reserve_link::send_refill(const engine::reserve_refill& job) {
    const auto& rule = job.target.rule;
    const auto now = [] { return engine::reserve_pool::clock::now(); };
    const auto fail = [&] { pool_.end_refill(rule.name, job.key, 0, true, now()); };
    if (!connected()) return fail();
    const auto read = rules::match::reserve_read(rule, job.target.key, job.target.database);
    if (!read) return fail();
    // A statement failed before COMMIT: nothing of the refill commits (rolled back, or the link is gone).
    const auto abandon = [&](const schema::db_error& e) {
        note(e, "refill of rule " + rule.name);
        if (conn_) (void)conn_->run("ROLLBACK");
        fail();
    };
    if (auto r = conn_->run("START TRANSACTION"); !r) return abandon(r.error());
    auto counter = conn_->run(read->sql);
    if (!counter) return abandon(counter.error());
    std::int64_t value = 0;
    if (const auto& v = counter->first_value) (void)std::from_chars(v->data(), v->data() + v->size(), value);
    // No row, or the floor reached: nothing to take (the row's own take would change no row either).
    const std::int64_t left = counter->first_value ? value - rule.floor : 0;
    const std::int64_t n = engine::reserve_pool::refill_size(job.room, job.units, left);
    if (n <= 0) {
        (void)conn_->run("ROLLBACK");
        pool_.end_refill(rule.name, job.key, 0, false, now());
        return;
    }
    const auto take = rules::match::deferred_decrement(rule, job.target.key, n, job.target.database);
    if (!take) return abandon({0, "", "the take could not be built"});
    auto took = conn_->run(take->sql);
    if (!took) return abandon(took.error());
    if (took->affected_rows != 1) {  // never with the row locked; a refill that took nothing
        (void)conn_->run("ROLLBACK");
        pool_.end_refill(rule.name, job.key, 0, false, now());
        return;
    }
    if (auto c = conn_->run("COMMIT"); !c) {
        // The COMMIT's outcome is unknown when the link went: the units count as taken from the row but
        // not in the pool (a leak of at most one block, never an over-issue).
        note(c.error(), "COMMIT of a refill of rule " + rule.name + " (" + std::to_string(n) + " units)");
        return fail();
    }
    reserve_metrics::get().refills.inc();
    pool_.end_refill(rule.name, job.key, n, false, now());
    const auto s = pool_.stats();
    spdlog::debug("reserve: rule {}: took {} unit(s) of the row ({} left above the floor); this sidecar holds {} "
                  "in its pool and {} handed to open transactions ({} served, {} returned)",
                  rule.name, n, left, s.pooled, s.handed, s.served, s.returned);
}

void reserve_link::send_give_back(const engine::reserve_give_back& g) {
    if (g.units <= 0) return;
    const auto& rule = g.target.rule;
    const auto sql = rules::match::literal_give_back(rule, g.target.key, g.units, g.target.database);
    if (!sql || !connected()) {
        reserve_metrics::get().failures.inc();
        spdlog::error(
            "reserve: {} unit(s) of rule {} could not go back to the row (the connection is down): "
            "leaked; see the reconcile query in docs/RULES.md",
            g.units, rule.name);
        return;
    }
    auto r = conn_->run(sql->sql);  // autocommit; never retried when its outcome is unknown: twice would over-issue
    if (!r) {
        // The server's own error (a lock wait timeout): the autocommit UPDATE did nothing, the units are
        // the pool's again. A client error (the connection lost mid-statement): nobody knows, leaked.
        const bool applied_nothing = server_answered(r.error().code);
        if (applied_nothing) pool_.give_back_refused(g, engine::reserve_pool::clock::now());
        note(r.error(), "give-back of " + std::to_string(g.units) + " unit(s) of rule " + rule.name +
                            (applied_nothing ? " (kept, tried again later)" : " (leaked)"));
        return;
    }
    reserve_metrics::get().given_back.inc(static_cast<std::uint64_t>(g.units));
    // The row has stock again: this sidecar's next read of the key asks it.
    if (cache_ != nullptr && rule.read_cache) cache_->invalidate(rule.name, g.key);
    spdlog::debug("reserve: rule {}: gave {} unit(s) back to the row", rule.name, g.units);
}

void reserve_link::give_back_due() {
    auto back = pool_.take_idle(engine::reserve_pool::clock::now());
    // A reload that dropped a rule or changed it: its units go back now.
    if (auto current = holder_.current(); current != seen_) {
        seen_ = current;
        auto changed = pool_.take_unless([&](const rules::stock_rule& r) {
            const auto* now = current ? current->rules.find_stock(r.name) : nullptr;
            return now != nullptr && engine::reserve_unchanged(r, *now);
        });
        back.insert(back.end(), std::make_move_iterator(changed.begin()), std::make_move_iterator(changed.end()));
    }
    for (const auto& g : back) send_give_back(g);
}

void reserve_link::update_gauge() {
    const auto s = pool_.stats();
    reserve_metrics::get().held.set(s.pooled + s.handed);
}

}  // namespace claimguard::session
