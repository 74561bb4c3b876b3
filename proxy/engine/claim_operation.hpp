// One decision carried out, as an I/O-free state machine in the style of Boost.MySQL's sansio
// operations: start() and each on_*() return the next action (send this SQL, send the client's
// statement, ask Redis, answer the client); the session performs it and feeds back a summary of
// the reply. Every memory and ledger update, every metric and audit event comes from here, so
// the claim flows are unit-tested with scripted replies and the session only does I/O.
#pragma once

#include "proxy/protocol/capabilities.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decide.hpp"
#include "memory.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/statement.hpp"
#include "take_ledger.hpp"

namespace claimguard::engine {

class reserve_pool;

// What the session learned from one reply of the database.
struct reply_summary {
    bool ok = false;   // a plain OK packet
    bool err = false;  // an ERR packet
    std::uint16_t err_code = 0;
    std::uint64_t affected_rows = 0;
    std::uint16_t status = 0;             // the server's status flags after the reply
    std::optional<std::int64_t> counter;  // asked for (read_counter): the counter of the one row returned
    std::optional<std::uint64_t> rows;    // a result set (INSERT ... RETURNING): how many rows it holds
    // asked for (read_rows): each row's values as text (nullopt: NULL); empty when they could not be read
    std::optional<std::vector<std::vector<std::optional<std::string>>>> values;

    // Scripted replies (explain's dry run, tests). `status` defaults to autocommit.
    static reply_summary ok_rows(std::uint64_t n, std::uint16_t status = autocommit_status) {
        reply_summary r;
        r.ok = true;
        r.affected_rows = n;
        r.status = status;
        return r;
    }
    static reply_summary error(std::uint16_t code, std::uint16_t status = autocommit_status) {
        reply_summary r;
        r.err = true;
        r.err_code = code;
        r.status = status;
        return r;
    }
    static reply_summary counter_row(std::int64_t counter, std::uint16_t status = autocommit_status) {
        reply_summary r;
        r.counter = counter;
        r.status = status;
        return r;
    }
    // A result set of these rows (read_rows).
    static reply_summary result_rows(std::vector<std::vector<std::optional<std::string>>> values,
                                     std::uint16_t status = autocommit_status) {
        reply_summary r;
        r.rows = values.size();
        r.values = std::move(values);
        r.status = status;
        return r;
    }
    static constexpr std::uint16_t autocommit_status = protocol::status::autocommit;
};

// What the Redis first filter said: acquired (the key is this claim's), held (by a committed claim:
// a duplicate), pending (held by a claim not committed yet: the database decides), unavailable.
enum class redis_reply { acquired, held, pending, unavailable };

// What happened, for the session's metrics and audit log: each event's audit word and metric are
// in one table, catalogue.hpp (keep it in step when adding one).
enum class event : std::uint8_t {
    took,                  // a write became a conditional take that took stock
    tracked,               // a guarded decrement or compare-and-set of the app took stock
    exhausted,             // a take found the floor: the exhausted answer
    conflict,              // zero rows, stock left: the app's own condition (version) did not hold
    not_lower,             // zero rows, stock left: an absolute write at or above the counter (refused)
    app_meant_other,       // an absolute write meant other units than the rule's (read - written)
    restocked,             // an increment reached the database
    absorbed,              // the app's own give-back of units the sidecar already gave back
    blocked,               // a claim answered exhausted without reaching the database
    claim_inserted,        // a claim row went in
    claim_ahead,           // ... in a transaction, before its decrement
    claim_unbacked,        // ... in autocommit with no take behind it (strictness: after_refused)
    duplicate_redis,       // the Redis first filter said "already claimed"
    duplicate_db,          // the database's unique index said it (ERR 1062, or IGNORE's 0 rows)
    compensated,           // units given back to the stock row
    compensation_failed,   // a give-back changed no row
    rolled_back,           // the app's COMMIT became a ROLLBACK
    unmodeled_refused,     // not modelled, refused by policy
    unmodeled_forwarded,   // not modelled, forwarded by policy
    would,                 // observe mode: what enforce would have done (the decision's verdict)
    would_block,           // observe mode: enforce would answer this claim exhausted (no take behind it)
    // defer_decrement (the take's rule and key in deferred_events(), except `deferred`):
    deferred,              // a take in a transaction answered OK at once, sent later
    deferred_flushed,      // ... sent before a statement of the transaction on its table; it took
    deferred_committed,    // ... sent just before COMMIT; it took
    deferred_refused,      // ... sent and found the floor (sold out at COMMIT, or the transaction poisoned)
    deferred_failed,       // ... sent and answered with an error (the app gets it)
    deferred_dropped,      // ... never sent: the transaction rolled back, or its claim gave the unit back
    // A DELETE of claim rows (a cancellation) that deleted rows:
    cancelled_kept,        // ... forwarded, the claims' units stay taken (on_cancel: keep_stock)
    cancelled_returned,    // ... and their units went back to the stock row in its transaction (return_stock)
    // A claim INSERT whose stock the claim table's trigger decrements (decremented_by_trigger):
    claimed_by_trigger,    // ... the trigger took the rule's units: the claim stands
    trigger_exhausted,     // ... the trigger took nothing, or went below the floor: undone, the exhausted answer
    trigger_mismatch,      // ... the trigger changed the counter by another amount: undone, refused
    // reserve (the take's rule and key in deferred_events()): a take in a transaction served from
    // the sidecar's reserved block, never sent; its unit ...
    reserve_served,        // ... handed to the transaction, answered OK at once
    reserve_committed,     // ... consumed: the transaction committed (or its COMMIT's outcome is unknown)
    reserve_returned,      // ... back to the sidecar's block: rolled back, or its claim gave it back
    // The app's recompute of the counter from its claims after its claim by INSERT ... SELECT took the unit.
    absorbed_recompute,
};

struct action {
    enum class kind : std::uint8_t {
        relay,           // final: the session relays the client's statement as usual
        send_statement,  // send the client's statement as written; the reply comes back to on_reply
        send_sql,        // send `sql` (the client's bound values by sql.parameters); reply to on_reply
        redis_acquire,   // SET redis_key <token> NX PX ttl; the answer comes back to on_redis
        reply_client,    // final: write the kept reply of the database to the client
        answer,          // final: write `answer` to the client (an ERR, or an OK of ok_rows rows)
    };
    kind type = kind::relay;
    rules::match::rewritten_sql sql;
    bool keep_reply = false;    // send_*: this reply is the one reply_client writes
    bool read_counter = false;  // send_*: fill reply_summary::counter from the one row returned
    bool read_rows = false;     // send_sql: fill reply_summary::values (at most max_cancel_rows + 1 rows)
    rules::answer answer;
    std::uint64_t ok_rows = 0;
    std::uint16_t status = 0;   // answer: the status flags to report
    std::chrono::milliseconds ttl{0};
    std::string redis_key;  // redis_acquire for one row of a claim of several rows (empty: decision::redis_key)
    // reply_client: write the kept OK with `status` as its status flags (the statement ran inside a
    // transaction of the sidecar's own, committed since: the app sees autocommit, not "in transaction").
    bool kept_status = false;

    [[nodiscard]] bool final() const {
        return type == kind::relay || type == kind::reply_client || type == kind::answer;
    }
};

// Where the operation runs: the session's state it may not know itself.
struct operation_context {
    std::uint64_t session = 0;
    std::uint16_t status = protocol::status::autocommit;  // the server's status flags before the statement
    bool redis_available = false;     // a Redis guard is configured for this sidecar
    reserve_pool* reserve = nullptr;  // the sidecar's reserved stock (none: reserve is not served)
};

class claim_operation {
public:
    // A take this operation keeps for COMMIT instead of sending now (defer_decrement).
    [[nodiscard]] bool deferrable() const;
    // A take a leader may send for this statement in its batch (group_update): an autocommit take
    // whose UPDATE assigns only the counter (and the version column) and names only the key.
    [[nodiscard]] bool groupable() const;
    // A take this operation may serve from the sidecar's reserved block (reserve): a take of a
    // reserve rule that assigns only the counter and names only the key, in a transaction or in
    // autocommit (then consumed at once, as its own committed transaction).
    [[nodiscard]] bool reservable() const;
    claim_operation(const decision& d, const rules::sql::parsed_statement& st, session_memory& memory,
                    take_ledger& ledger, const operation_context& ctx);

    // The session's current database (empty: not known): a take deferred to COMMIT names its
    // table with it, so a later USE or COM_INIT_DB does not move it to another database.
    void set_database(std::string_view database) { database_ = database; }

    [[nodiscard]] action start();
    [[nodiscard]] action on_reply(const reply_summary& r);
    [[nodiscard]] action on_redis(redis_reply r);
    // Instead of start(): the admission queue knows the key is sold out (a take just found the
    // floor). A take gets the exhausted answer, the app's own guarded decrement the 0-rows OK the
    // server would give; nothing reaches the database. The memory notes the refusal as usual.
    [[nodiscard]] action answer_sold_out();
    // group_update: a batch took this statement's units (committed): recorded as this connection's
    // take, answered with the OK its own UPDATE would have got (1 row).
    [[nodiscard]] action answer_grouped_take();

    // Events since the last call (the session counts and audits them in order).
    [[nodiscard]] std::vector<event> take_events();
    // Events of deferred takes since the last call, each with its take (rule, key).
    [[nodiscard]] std::vector<std::pair<event, deferred_take>> take_deferred_events();
    // The statement was a COMMIT that became a ROLLBACK (a deferred take refused).
    [[nodiscard]] bool rolled_back() const { return rolled_back_; }
    // After the final action: the Redis key acquired for this claim and what becomes of it.
    [[nodiscard]] bool redis_locked() const { return redis_locked_; }
    [[nodiscard]] bool redis_release_now() const { return redis_locked_ && !inserted_; }
    [[nodiscard]] bool redis_keep_for_transaction() const { return redis_locked_ && inserted_ && in_transaction_; }
    // The claim committed in autocommit: its key is marked committed.
    [[nodiscard]] bool redis_commit_now() const { return redis_locked_ && inserted_ && !in_transaction_; }
    // After the final action of a cancellation: the DELETE removed rows (and, in autocommit, its
    // transaction committed), so the deleted claim's Redis key goes, whoever's claim set it.
    [[nodiscard]] bool cancel_release() const { return cancelled_rows_ > 0 && !d_.redis_key.empty(); }
    // ... the Redis keys of the rows a cancellation read before deleting them (decision::read_claim_rows).
    [[nodiscard]] const std::vector<std::string>& cancel_release_keys() const {
        static const std::vector<std::string> none;
        return cancelled_rows_ > 0 ? cancel_redis_keys_ : none;
    }
    // The stock keys a cancellation that read its claim rows first gave units back to.
    [[nodiscard]] std::vector<key_tuple> cancelled_stock_keys() const {
        std::vector<key_tuple> out;
        for (const auto& k : cancelled_keys_)
            if (k.gave_back) out.push_back(k.key);
        return out;
    }
    // A claim of several rows, after the final action: every row went in (the rows' Redis keys are then
    // committed, or held to the end of the transaction); else the keys go.
    [[nodiscard]] bool rows_inserted() const { return rows_all_in_; }
    [[nodiscard]] bool rows_in_transaction() const { return rows_in_transaction_; }

private:
    enum class state : std::uint8_t {
        idle, read_sent, take_sent, probe_sent, track_sent, restock_sent, rollback_sent, redis_wait,
        claim_sent, original_sent, give_back_sent, deferred_sent, status_asked,
        cancel_begin_sent, cancel_delete_sent, cancel_give_back_sent, cancel_commit_sent, cancel_rollback_sent, done,
        // a cancellation that reads the claim rows first (decision::read_claim_rows, cancellations.cpp)
        cancel_read_sent, cancel_read_delete_sent, cancel_key_give_back_sent,
        // a claim decremented by the claim table's trigger (trigger_claims.cpp)
        trigger_open_sent, trigger_before_sent, trigger_insert_sent, trigger_after_sent, trigger_close_sent,
        trigger_undo_sent,
        // a claim of several rows (claim_rows.cpp)
        rows_redis_wait, rows_sent, rows_status_asked, rows_give_back_sent,
        // a claim by INSERT ... SELECT from its stock row taking its own unit (decision::own_take)
        own_take_sent,
    };
    // A take reserved for a claim: its units (0: none) and where it came from.
    struct reservation {
        std::int64_t units = 0;
        bool from_ledger = false;  // borrowed from the sidecar's ledger (else the transaction's own take)
    };

    action start_main();
    action send_next_deferred();
    action after_deferred(const reply_summary& r);
    action defer_take();
    action serve_reserved();
    bool cancel_deferred();

    action finish(action a);
    action exhausted_answer(std::uint16_t status);
    action after_take(const reply_summary& r, bool rewritten);
    // claim_inserts.cpp
    action send_claim();
    action after_claim(const reply_summary& r);
    action after_status_asked(const reply_summary& r);
    action after_give_back(const reply_summary& r);
    action give_back_then(action final_action);
    action continue_with(action next);
    action refusal(std::string_view why);
    void reserve_take();
    action redis_then_claim();
    // Asks Redis for the claim's key (`redis_key`: a row's, or empty for the statement's own) and waits
    // in `next` for its answer.
    action redis_acquire(state next, std::string redis_key = {});
    action start_own_take();
    action send_own_take();
    action after_own_take(const reply_summary& r);
    // cancellations.cpp
    action start_cancel();
    action after_cancel(const reply_summary& r);
    action cancel_answer(std::uint16_t status);
    action cancel_undo();
    action cancel_failure(std::uint16_t status);
    action cancel_read();
    action after_cancel_read(const reply_summary& r);
    action after_cancel_read_delete(const reply_summary& r);
    action next_key_give_back(std::uint16_t status);
    action after_key_give_back(const reply_summary& r);
    action cancel_end(std::uint16_t status);
    void credit_cancelled();
    action cancel_fails(std::string why, std::uint16_t status);
    action cancel_server_error(const reply_summary& r);
    action one_row_ok(std::uint16_t status);
    reservation reserve_for(const key_tuple& key);
    bool cancel_deferred_of(const key_tuple& key, std::int64_t units, bool from_ledger);
    // trigger_claims.cpp: a claim INSERT whose stock the claim table's trigger decrements
    action start_trigger_claim();
    action after_trigger(const reply_summary& r);
    action trigger_read(bool lock);
    action trigger_undo(action final_action);
    action trigger_refusal(std::string why, std::uint16_t status);
    // claim_rows.cpp: a claim INSERT of several rows, one claim per row (decision::rows)
    action start_rows();
    action ask_row_redis();
    action on_row_redis(redis_reply r);
    action send_rows();
    // The give-backs of the rows' takes that did not go in, one per stock key (a deferred take unsent instead).
    void plan_row_give_backs(const std::vector<bool>& went_in);
    void observe_rows();
    action after_rows(const reply_summary& r);
    action after_rows_status(const reply_summary& r);
    action next_row_give_back();
    action after_row_give_back(const reply_summary& r);
    void unreserve(const key_tuple& key, const reservation& r);

    const decision& d_;
    const rules::sql::parsed_statement& st_;
    session_memory& memory_;
    take_ledger& ledger_;
    operation_context ctx_;
    state state_ = state::idle;
    std::vector<event> events_;

    // claim state
    std::int64_t reserved_ = 0;          // units of the take this claim uses (0: none)
    bool reserved_from_ledger_ = false;  // ... borrowed from the ledger (given back on rollback)
    bool redis_locked_ = false;
    bool inserted_ = false;
    bool in_transaction_ = false;
    bool plain_first_ = false;           // REPLACE / ON DUPLICATE KEY UPDATE sent as a plain INSERT first
    std::optional<action> after_give_back_;
    // claim of several rows: each row's reservation; the give-backs still to send, one per stock key
    std::vector<reservation> row_reserved_;
    struct row_give_back {
        std::size_t row = 0;  // a row of the key: its key values name the stock row
        std::vector<reservation> takes;
    };
    std::vector<row_give_back> row_give_backs_;
    std::size_t row_give_back_next_ = 0;
    std::size_t redis_next_ = 0;  // the row whose Redis key is asked for
    bool rows_all_in_ = false;
    bool rows_in_transaction_ = false;

    // cancellation state
    bool cancel_wrapped_ = false;     // in autocommit: the DELETE and its give-back run in our BEGIN ... COMMIT
    std::uint64_t cancelled_rows_ = 0;  // rows the DELETE removed (and, wrapped, committed)
    std::uint64_t deleted_rows_ = 0;    // rows the DELETE removed, before its give-back and COMMIT
    bool gave_back_ = false;            // the give-back changed the stock row
    bool cancel_failed_ = false;        // the give-back could not be built: the DELETE is undone, refused
    // A cancellation that read its claim rows first: the stock keys they name, each with its rows.
    struct cancelled_key {
        key_tuple key;                                        // canonical, then the database (memory, ledger)
        std::vector<rules::match::key_literal> key_literals;  // for the give-back
        std::uint64_t rows = 0;
        bool gave_back = false;
    };
    std::vector<cancelled_key> cancelled_keys_;
    std::size_t cancelled_key_next_ = 0;
    std::vector<std::string> cancel_redis_keys_;  // the read rows' Redis keys
    std::uint64_t read_rows_ = 0;
    std::string cancel_error_;       // cancel_failure's message, when not the give-back's
    bool cancel_deleted_ = false;    // the DELETE was sent and went through
    bool cancel_unmodeled_ = false;  // over max_cancel_rows, forwarded by policy: no give-back

    // claim decremented by a trigger
    bool trigger_wrapped_ = false;                // autocommit: our BEGIN ... COMMIT around it (else a savepoint)
    std::optional<std::int64_t> trigger_before_;  // the counter read (locked) before the INSERT (none: no row)
    std::optional<action> trigger_final_;         // the answer after the undo (ROLLBACK [TO SAVEPOINT])

    // deferred takes sent before this statement
    std::vector<deferred_take> flushing_;
    std::size_t flush_next_ = 0;
    bool committing_ = false;
    bool rolled_back_ = false;
    std::optional<rules::answer> refused_answer_;  // a deferred take refused at COMMIT: its rule's answer
    std::string refused_rule_;
    std::vector<std::pair<event, deferred_take>> deferred_events_;
    std::string_view database_;
};

// The open transaction ended: `committed` takes move to the ledger; on a rollback the takes it
// borrowed go back. Then the session's transaction bookkeeping resets. Returns the deferred
// takes that were never sent (dropped; after a commit they are a bug the session reports).
std::vector<deferred_take> end_transaction(session_memory& memory, take_ledger& ledger, bool committed,
                                           std::uint64_t session);

// reserve: the takes of `takes` served from the reserved block leave it and are settled: consumed when
// their transaction committed (or may have: `committed` true when the outcome is unknown), back to
// the block otherwise. Returns the events to report, each with its take; `takes` keeps the others.
std::vector<std::pair<event, deferred_take>> settle_reserved(reserve_pool& pool, std::vector<deferred_take>& takes,
                                                             bool committed);

}  // namespace claimguard::engine
