// One client statement the engine decided about, carried out as an I/O-free operation: a counter
// read the read cache answers (or whose reply it keeps), the per-key admission turns it waits for,
// the claim operation (claim_operation.hpp) that does the decision, and what becomes of a claim's
// Redis key. One resume(input) returns the next action; the session performs it (sends, Redis
// calls, the admission wait, the read cache's wait and reply rebuild) and feeds back what happened.
// The same operation runs under the proxy and under the engine's unit tests with scripted inputs.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admission_gate.hpp"
#include "claim_operation.hpp"
#include "decide.hpp"
#include "group_take.hpp"
#include "memory.hpp"
#include "proxy/protocol/reply_summary.hpp"
#include "read_cache.hpp"
#include "rules/model/rules.hpp"
#include "take_ledger.hpp"
#include "transaction_tracker.hpp"

namespace claimguard::engine {

// The admission slots a session holds: until the reply in autocommit, to the end of the
// transaction otherwise (the session gives them back: release_all).
class admission_slots {
public:
    struct slot {
        std::string rule;
        key_tuple key;
        admission_gate::ticket id = 0;
    };
    [[nodiscard]] bool holds(const std::string& rule, const key_tuple& key) const;
    [[nodiscard]] bool empty() const { return held_.empty(); }
    [[nodiscard]] std::size_t size() const { return held_.size(); }
    void add(slot s) { held_.push_back(std::move(s)); }
    // Every slot back to the gate.
    void release_all(admission_gate& gate);

private:
    std::vector<slot> held_;
};

// What the session learned since the last action.
struct statement_input {
    enum class kind : std::uint8_t {
        start,       // the first resume
        reply,       // the database's reply to send_statement / send_sql, summarised
        redis,       // the answer to redis_acquire, with the token the session sent
        redis_done,  // a redis_release / redis_commit was carried out (or started in the background)
        turn,        // what the admission gate said about a wait_turn: admitted (with its ticket),
                     // bypass, sold_out, timed_out, queue_full
        closing,     // the client went away or the session closes while it waited (ticket abandoned)
        io_lost,     // the database connection failed under a send: no reply comes
        refreshed,   // wait_refresh: the poll interval passed (another read's refresh may be done)
        rebuilt,     // serve_cached: the kept reply was rebuilt with the value (`rebuilt_ok`) or not
        gathered,    // wait_group: max_wait passed (followers may have queued meanwhile)
    };
    kind type = kind::start;
    reply_summary reply;
    redis_reply redis = redis_reply::unavailable;
    std::string token;
    admission turn = admission::bypass;
    admission_gate::ticket ticket = 0;
    group_result group;  // turn grouped_*: what the leader's batch decided
    // reply to a read the cache may keep (keep_template): the server's reply as a template, if it is one
    std::shared_ptr<const protocol::counter_reply> kept_read;
    bool rebuilt_ok = false;

    static statement_input start() { return {}; }
    static statement_input of_read(const reply_summary& r, std::shared_ptr<const protocol::counter_reply> kept) {
        auto in = of_reply(r);
        in.kept_read = std::move(kept);
        return in;
    }
    static statement_input refresh_done() {
        statement_input in;
        in.type = kind::refreshed;
        return in;
    }
    static statement_input of_rebuilt(bool ok) {
        statement_input in;
        in.type = kind::rebuilt;
        in.rebuilt_ok = ok;
        return in;
    }
    static statement_input of_reply(const reply_summary& r) {
        statement_input in;
        in.type = kind::reply;
        in.reply = r;
        return in;
    }
    // The server's reply as the protocol summarised it (protocol::summarize_reply).
    static statement_input of_server(const protocol::reply_summary& r) {
        statement_input in;
        in.type = kind::reply;
        in.reply.ok = r.ok;
        in.reply.err = r.err;
        in.reply.err_code = r.err_code;
        in.reply.affected_rows = r.affected_rows;
        in.reply.status = r.status;
        in.reply.counter = r.counter;
        in.reply.rows = r.rows;
        in.reply.values = r.values;
        return in;
    }
    static statement_input of_redis(redis_reply r, std::string token) {
        statement_input in;
        in.type = kind::redis;
        in.redis = r;
        in.token = std::move(token);
        return in;
    }
    static statement_input redis_carried_out() {
        statement_input in;
        in.type = kind::redis_done;
        return in;
    }
    static statement_input of_turn(admission what, admission_gate::ticket id = 0, group_result group = {}) {
        statement_input in;
        in.type = kind::turn;
        in.turn = what;
        in.ticket = id;
        in.group = group;
        return in;
    }
    static statement_input gather_done() {
        statement_input in;
        in.type = kind::gathered;
        return in;
    }
    static statement_input closing() {
        statement_input in;
        in.type = kind::closing;
        return in;
    }
    static statement_input lost() {
        statement_input in;
        in.type = kind::io_lost;
        return in;
    }
};

// A turn in the admission gate for a key's decrement (wait_turn).
struct turn_request {
    std::string rule;
    key_tuple key;
    const rules::admission_limits* limits = nullptr;
    std::int64_t units = 0;
    bool holds_row_lock = false;  // the transaction read the row FOR UPDATE: never waits
    // group_update: a leader may send this take in its batch (enter_groupable, with the session)
    bool groupable = false;
    std::uint64_t session = 0;
};

// The next thing the session does: its kind and two flags. What it sends, answers or waits for
// the operation keeps, valid until the next resume: claim_action() (send_*, redis_acquire,
// answer), turn() (wait_turn), cached_reply() and cached_value() (serve_cached), take_keys()
// (redis_release, redis_commit). Small, so that a step builds and moves no strings.
struct statement_action {
    enum class kind : std::uint8_t {
        relay,           // final: relay the client's statement as usual
        send_statement,  // send the client's statement (claim_action: keep_reply, read_counter); reply: resume
        send_sql,        // send claim_action().sql with the client's bound values; reply: resume
        redis_acquire,   // SET key <a new token> NX PX claim_action().ttl; the answer and the token: resume
        redis_release,   // compare-and-delete take_keys(): awaited when `wait`, else in the background
        redis_commit,    // mark take_keys() committed (in the background)
        wait_turn,       // wait for turn() in the admission gate: enter the gate, resume(turn)
        answer,          // final: write claim_action().answer (.status, .ok_rows) to the client
        reply_kept,      // final: write the kept reply of the database to the client
        fail,            // final: the command failed (the connection is gone or the client left)
        wait_refresh,    // wait read_cache::refresh_poll_interval, then resume(refresh_done)
        serve_cached,    // rebuild cached_reply() with cached_value() (the session's status flags): resume(rebuilt)
        reply_rebuilt,   // final: write the rebuilt reply to the client
        wait_group,      // a leader waits group_wait() for followers to queue, then resume(gather_done)
    };
    kind type = kind::relay;
    bool wait = false;  // redis_release: before the client's answer
    // send_statement of a counter read of a rule with read_cache: resume(of_read) with its template
    bool keep_template = false;

    [[nodiscard]] bool final() const {
        return type == kind::relay || type == kind::answer || type == kind::reply_kept || type == kind::fail ||
               type == kind::reply_rebuilt;
    }

    static statement_action relay() { return {}; }
    static statement_action fail() { return of(kind::fail); }
    static statement_action reply_kept() { return of(kind::reply_kept); }
    static statement_action reply_rebuilt() { return of(kind::reply_rebuilt); }
    static statement_action wait_refresh() { return of(kind::wait_refresh); }
    static statement_action serve_cached() { return of(kind::serve_cached); }
    static statement_action answer() { return of(kind::answer); }
    static statement_action send_statement(bool keep_template = false) {
        auto s = of(kind::send_statement);
        s.keep_template = keep_template;
        return s;
    }
    static statement_action send_sql() { return of(kind::send_sql); }
    static statement_action redis_acquire() { return of(kind::redis_acquire); }
    static statement_action release(bool wait) {
        auto s = of(kind::redis_release);
        s.wait = wait;
        return s;
    }
    static statement_action commit() { return of(kind::redis_commit); }
    static statement_action wait_for_turn() { return of(kind::wait_turn); }
    static statement_action wait_group() { return of(kind::wait_group); }

private:
    static statement_action of(kind k) {
        statement_action s;
        s.type = k;
        return s;
    }
};

// What the admission gate did for the statement, for the session's metrics and audit log.
struct admission_note {
    enum class kind : std::uint8_t {
        lock_held,   // let through at once: the transaction holds a lock a slot holder may wait for
        sold_out,    // answered sold out by the queue, without the database
        timed_out,   // answered ERR 1205 after queue_timeout
        queue_full,  // answered ERR 1205 at once: max_queue statements wait
        grouped,     // group_update: decided in a batch of `batch` takes (the leader's or another's)
    };
    kind what = kind::lock_held;
    std::string rule;
    std::string message;              // timed_out, queue_full: the ERR's message
    std::uint32_t batch = 0;          // grouped: takes in the batch
    std::uint32_t leader_thread = 0;  // grouped: the backend connection that sent it
};

// A batch this statement led (group_update), for the session's metrics.
struct group_note {
    std::string rule;
    std::uint32_t takes = 0;       // the batch's takes, the leader's included
    std::uint32_t taken = 0;       // of them, taken
    std::uint32_t statements = 0;  // UPDATEs it took to decide them (1 unless split)
};

// What the read cache did for a counter read, for the session's metrics and log.
struct read_note {
    enum class kind : std::uint8_t {
        bypass,   // not cacheable (`why`): the server answers as usual
        hit,      // answered from the cache
        miss,     // nothing kept: the server's reply is kept
        refresh,  // kept but stale, invalidated, or not rebuilt: the server's reply is kept
        stored,   // the server's reply is the key's value and template now (the cache's size changed)
    };
    kind what = kind::bypass;
    std::string why;
};

// What one step of the operation reported, for the session's metrics, audit log and log lines.
struct statement_report {
    std::vector<event> events;                              // the claim operation's, in order
    std::vector<std::pair<event, deferred_take>> deferred;  // its deferred takes', each with its take
    std::vector<admission_note> admission;                  // what the admission gate did
    std::vector<read_note> reads;                           // what the read cache did
    std::vector<group_note> groups;                         // the batch this statement led

    [[nodiscard]] bool empty() const {
        return events.empty() && deferred.empty() && admission.empty() && reads.empty() && groups.empty();
    }
    void clear() {
        events.clear();
        deferred.clear();
        admission.clear();
        reads.clear();
        groups.clear();
    }
};

// A counter read of a rule with read_cache: what only the session knows of it.
struct cached_read {
    read_situation situation;
    std::string shape;  // the reply's form: protocol, charset, database, the statement with its keys as ?
};

// Where the statement runs: the session's state the engine may not know itself.
struct statement_context {
    operation_context op;                    // session id, status flags before, Redis configured
    admission_gate* gate = nullptr;          // the sidecar's admission gate (none: no admission)
    const rules::rule_set* rules = nullptr;  // the snapshot's rules (deferred takes' admission)
    read_cache* cache = nullptr;             // the sidecar's read cache (none: reads go to the server)
    const cached_read* read = nullptr;       // a read the cache may answer (with `cache`)
    std::uint32_t backend_thread = 0;        // the backend connection's thread id (a batch's audit)
};

class statement_operation {
public:
    statement_operation(const decision& d, const rules::sql::parsed_statement& st, session_memory& memory,
                        take_ledger& ledger, transaction_tracker& transaction, admission_slots& slots,
                        const statement_context& ctx);
    // A leader that stops before its batch is decided (the session closes): its members still get
    // an answer (failed: nobody knows whether the UPDATE committed), never a wait without end.
    ~statement_operation();
    statement_operation(const statement_operation&) = delete;
    statement_operation& operator=(const statement_operation&) = delete;

    // As claim_operation::set_database.
    void set_database(std::string_view database) {
        claim_.set_database(database);
        database_ = database;
    }

    // The next action. The read cache follows what the claim operation reports on the way (a
    // take, a refusal, a restock: read_cache_follows).
    [[nodiscard]] statement_action resume(const statement_input& in);

    // What the last resume reported (cleared by the next one).
    [[nodiscard]] const statement_report& report() const { return report_; }

    // What the last action refers to (valid until the next resume).
    [[nodiscard]] const action& claim_action() const { return claim_action_; }  // send_*, redis_acquire, answer
    [[nodiscard]] const turn_request& turn() const { return *waiting_; }        // wait_turn
    [[nodiscard]] std::chrono::milliseconds group_wait() const {                // wait_group
        return d_.stock->group_update->max_wait;
    }
    [[nodiscard]] const std::shared_ptr<const protocol::counter_reply>& cached_reply() const {  // serve_cached
        return found_.reply;
    }
    [[nodiscard]] std::int64_t cached_value() const { return found_.value; }  // serve_cached
    // redis_release, redis_commit: the keys, handed over to the session.
    [[nodiscard]] std::vector<redis_hold> take_keys() { return std::exchange(keys_, {}); }

    // Whether the decision's decrement waits its turn in the admission gate.
    [[nodiscard]] bool admission_applies() const;

private:
    enum class phase : std::uint8_t {
        idle,
        cache_wait,
        cache_serve,
        cache_read,
        main_turn,
        deferred_turns,
        gathering,  // group_update: the leader waits for followers (wait_group)
        grouping,   // group_update: the batch's UPDATEs are on their way
        running,
        settling,
        done,
    };
    // What settling a claim's Redis key takes before the final action: a release or commit (its
    // keys) at most twice, then the final action.
    struct settle_step {
        statement_action act;
        std::vector<redis_hold> keys;
    };
    static constexpr std::size_t max_settle_steps = 3;

    statement_action step(const statement_input& in);
    // A counter read the read cache may answer: its first action; empty: not one, or bypassed.
    std::optional<statement_action> start_cached_read();
    statement_action look_up();
    statement_action read_from_server(read_note::kind why);
    statement_action after_cached_read(const statement_input& in);
    void end_refresh();
    // One turn: resolved at once (the transaction's own slot, a lock held) or a wait_turn action.
    std::optional<statement_action> ask_turn(const turn_request& t);
    statement_action after_main_turn();
    statement_action next_deferred_turn();
    statement_action not_admitted(admission what);
    // group_update: the leader's batch, and a member's answer.
    [[nodiscard]] bool groups_takes() const;
    statement_action gather();
    statement_action send_group_next();
    statement_action group_decided();
    // Every take of the batch decided: the members answered through the gate; the leader's result first.
    std::vector<group_result> decide_members();
    void settle_members(const std::vector<group_result>& results);
    statement_action grouped_answer(const group_result& r, bool leader);
    // claim_action_, with the events the claim operation reported; a final one settles the Redis key first.
    statement_action follow(bool note_gate = true);
    // The read cache follows an event of this statement's key (status: the server's after the reply).
    void read_cache_follows(event e);
    void settle(statement_action a, std::vector<redis_hold> keys = {});
    statement_action next_queued();
    statement_action finish(statement_action a);

    const decision& d_;
    session_memory& memory_;
    take_ledger& ledger_;
    transaction_tracker& transaction_;
    admission_slots& slots_;
    statement_context ctx_;
    claim_operation claim_;
    phase phase_ = phase::idle;
    statement_action::kind asked_ = statement_action::kind::relay;  // the last action returned
    std::optional<turn_request> waiting_;                           // the turn a wait_turn asked for
    std::vector<turn_request> deferred_turns_;
    std::size_t next_turn_ = 0;
    action claim_action_;  // the claim operation's last action (or the operation's own send or answer)
    std::array<settle_step, max_settle_steps> settling_{};  // the Redis steps, then the final action
    std::size_t settle_count_ = 0, settle_next_ = 0;
    std::vector<redis_hold> keys_;  // the redis_release / redis_commit returned last
    std::vector<redis_hold> row_keys_;  // a claim of several rows: the rows' Redis keys acquired
    std::string token_;
    std::uint16_t status_ = 0;  // the server's status flags after the last reply (before: ctx.op.status)
    statement_report report_;
    // the read cache
    read_cache::lookup found_;
    read_cache::clock::time_point asked_at_{};
    bool in_transaction_before_ = false;
    // group_update: the leader's ticket, its members (after it in the batch) and the batch
    admission_gate::ticket leader_ticket_ = 0;
    std::vector<admission_gate::member> members_;
    std::optional<group_take> group_;
    bool members_settled_ = true;
    std::string database_;  // the session's current database (a batch's table without a schema)
};

}  // namespace claimguard::engine
