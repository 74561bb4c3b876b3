// The claim engine's decisions: pure, from (matched facts, rules, bound values, session memory)
// to what the statement becomes. The only place that knows the invariants (no over-issue, no
// duplicates, no leak); claim_operation carries a decision out, `claimguard explain` prints it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memory.hpp"
#include "rules/match/facts.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/statement.hpp"

namespace claimguard::engine {

// A statement value made comparable: canonical text (integers in decimal, strings as bytes).
struct resolved_value {
    std::string canonical;
    std::optional<std::int64_t> integer;
};

// Resolves a value the statement wrote: literals from their decoded token, placeholders
// from the bound parameters of COM_STMT_EXECUTE. Empty: unknown (an expression, NULL,
// a parameter not bound).
using value_resolver = std::function<std::optional<resolved_value>(const rules::match::value_ref&)>;

// Literal values only (text protocol, or a prepared statement before it is executed).
[[nodiscard]] std::optional<resolved_value> resolve_literal(const rules::match::value_ref& v);
// A bound DOUBLE/FLOAT as the server compares it with an integer column: 1.0 is 1; 1.5 is no
// integer and keeps its decimal text.
[[nodiscard]] resolved_value resolve_double(double v);

enum class verdict {
    forward,           // nothing to change
    remember_read,     // forward; remember the counter the reply returns for `key` (a cross-check)
    take,              // send the conditional decrement of `units` instead of the statement
    track_decrement,   // forward an already guarded decrement or compare-and-set; learn from its rows
    restock,           // forward a write that raises the counter (or absorb the app's own give-back)
    exhausted,         // answer with the stock rule's exhausted answer; nothing reaches the database
    claim,             // the claim protocol: Redis, then the insert, duplicates answered and given back
    rollback_instead,  // COMMIT of a transaction holding a claim without stock: ROLLBACK, answer exhausted
    refuse,            // not modelled, policy refuse: an ERR naming the rule; nothing reaches the database
    cancel,            // a DELETE of claim rows: forwarded, its units given back (on_cancel: return_stock) or kept
};

[[nodiscard]] std::string_view verdict_name(verdict v);

// One row of a claim INSERT of several rows (`decision::rows`): each row is a claim of its own,
// paid for by its own take. The row's place in the statement is its index in `decision::rows`
// (and in the claim_insert fact's rows).
struct claim_row_decision {
    key_tuple key;                                        // the stock key, canonical, then its database
    std::vector<rules::match::key_literal> key_literals;  // the stock key as literals (a give-back after a rollback)
    key_tuple idempotency;                                // the business key values, canonical
    bool after_refusal = false;                           // as decision::after_refusal, for this row's key
    std::string redis_key;                                // the Redis guard's key of this row (none: no guard)
};

// What a statement does to the open transaction's deferred takes (defer_decrement) first.
enum class deferred_step : std::uint8_t {
    none,
    flush,   // it reads or writes a table with deferred takes: send those first (a refusal poisons the transaction)
    commit,  // it commits (COMMIT, or an implicit commit): send them all; a refusal: ROLLBACK + exhausted
};

struct decision {
    verdict what = verdict::forward;
    bool observe = false;  // the rule is in observe mode: count and log, change nothing on the wire
    const rules::stock_rule* stock = nullptr;
    const rules::claim_rule* claim = nullptr;
    key_tuple key;                        // the stock key, canonical; then its database, when known
    std::string schema;                   // the database of the stock row (empty: the session's, not known)
    std::int64_t units = 0;               // take/track: units taken; restock: units added
    std::optional<std::uint32_t> amount_placeholder;  // take by a bound "?" (prepared, relative)
    const rules::match::fact* fact = nullptr;         // the fact decided on (views the match result)
    key_tuple idempotency;                // claim: the business key values, canonical
    std::string redis_key;                // claim with a Redis guard: the expanded key template
    std::string_view note;                // why, for logs ("absolute write: conditional take", ...)
    // Not modelled: the statement may change a protected table in a shape the engine does not
    // follow. `what` is refuse or forward per the rule's policy; always audited and counted.
    bool unmodeled = false;
    std::string_view reason;              // unmodeled: the metric label
    // refuse: a write the engine understands but whose meaning is ambiguous (a restock or a stale
    // decrement; an amount a fresh read contradicts): refused whatever the unmodeled policy says.
    bool ambiguous = false;
    // take: the write says more than the key (AND version = ?): zero rows may be the app's own
    // conflict rather than sold out, which the operation checks before answering.
    bool may_conflict = false;
    // take of an absolute write after a read on this connection: the units the app meant
    // (read - written) differ from the rule's units. Counted and audited (amount_evidence decides).
    std::optional<std::int64_t> app_meant;
    // take of an absolute write with no fresh read behind it: it takes only if it lowers the counter
    // (the rewrite adds "AND counter > written"); a write at or above the counter is a restock or a
    // stale write the sidecar cannot tell apart, refused loudly (never a take, never "sold out").
    bool only_if_lower = false;
    // claim after this connection's refused decrement of the key: only with a take waiting in the
    // sidecar's ledger (never a claim ahead of its decrement), else the exhausted answer.
    bool after_refusal = false;
    // read: FOR UPDATE / LOCK IN SHARE MODE; in a transaction the row lock is held to its end.
    bool locking_read = false;
    // take, track: the transaction holds the key's row lock already (a locking read in it). Such a
    // decrement never waits in the admission queue: a holder of the key's slot may be waiting for
    // that lock, a cycle neither InnoDB nor the queue would see.
    bool holds_row_lock = false;
    // rollback_instead: the transaction's claim had no decrement at all (none refused: sold out
    // is not the reason, and not the answer).
    bool no_decrement = false;
    // cancel: each deleted claim row gives `units` back to the stock row `key` (on_cancel: return_stock);
    // false: the units stay taken (keep_stock).
    bool returns_stock = false;
    // cancel, return_stock, a WHERE that does not pin the stock key (WHERE id = ?): the operation first
    // reads the rows it is about to delete (their stock keys and idempotency values) with the row lock,
    // in the DELETE's transaction, and gives each key back its rows' units.
    bool read_claim_rows = false;
    // claim of a rule with decremented_by_trigger: the claim table's trigger decrements the stock,
    // so the INSERT is itself the take. It is never blocked for want of a take of the sidecar's; the
    // operation reads the counter before (locking the row) and after it and keeps the claim only
    // when the trigger took the rule's units without going below the floor.
    bool by_trigger = false;
    // claim by INSERT ... SELECT from its stock row (claim_insert::from_select): no decrement of the app
    // comes before it, so the operation takes `units` itself (a take of the transaction or the ledger
    // first, if one waits for a claim), then sends the row as INSERT ... VALUES. Without stock the app
    // gets what the server would answer when the SELECT's counter bound selects nothing: OK, 0 rows
    // (the rule's exhausted answer when the SELECT has no such bound).
    bool own_take = false;
    // restock: the app's recompute of the counter from the count of its claims (SET c = N - (SELECT
    // COUNT(*) ...)) right after its claim by INSERT ... SELECT took the unit: answered OK, 1 row, not sent.
    bool absorb_recompute = false;
    // take: the key as literals, for a take deferred to COMMIT (defer_decrement).
    std::vector<rules::match::key_literal> key_literals;
    // claim of several rows (INSERT ... VALUES (...), (...)): one entry per row, in order; `key`,
    // `idempotency` and `key_literals` are the first row's (for logs; `redis_key` stays empty: each row has
    // its own). Empty for a one-row claim.
    std::vector<claim_row_decision> rows;
    // Deferred takes of the open transaction this statement sends before its own action.
    deferred_step deferred = deferred_step::none;
    // forward: a write of a stock table by a trusted user (trusted_users; decide_trusted). Sent
    // unchanged, audited (trusted-write) and counted; after its OK the read cache forgets `key`
    // (every key of `stock` when `key` is empty: the WHERE pins none) and the admission gate hears
    // the key is available again: a restock is seen at once, not after read_cache's TTL.
    bool trusted_write = false;
    std::vector<std::string> flush_rules;  // flush: the stock rules whose deferred takes go
};

// Most claim rows a cancellation that reads them first (decision::read_claim_rows) deletes: beyond,
// it gets the claim rule's unmodeled policy (cancel_rows_over_limit), nothing deleted.
inline constexpr std::size_t max_cancel_rows = 1000;

// One claim row read before a cancellation deleted it: the stock key it used (canonical, then its
// database, as decide() keys a stock row), the key as literals for the give-back, and its Redis key.
struct read_claim_row {
    key_tuple key;
    std::vector<rules::match::key_literal> key_literals;
    std::string redis_key;  // empty: the rule has no Redis guard
};
// `values`: the stock key columns (stock key_columns order, through consumes) then the idempotency
// columns, as the read returned them (cancel_claim_read's select list). Empty when one is NULL.
[[nodiscard]] std::optional<read_claim_row> claim_row_of(const decision& d,
                                                         std::span<const std::optional<std::string>> values);

// Decides what to do with a statement. Does not change memory except to clear a refused flag
// that an exhausted answer used up.
[[nodiscard]] decision decide(const rules::match::match_result& facts, const rules::rule_set& rules,
                              const value_resolver& values, session_memory& memory);

// A statement of a trusted user (trusted_users) that names a protected table: a trusted_write
// decision when it is an UPDATE, INSERT, REPLACE, DELETE or LOAD DATA writing a stock table, with
// the key its WHERE pins (a counter write or change of the full key with known values) or none;
// else a plain forward. Never changes what is sent.
[[nodiscard]] decision decide_trusted(const rules::sql::parsed_statement& st, const rules::match::match_result& facts,
                                      const rules::match::rule_index& index, const value_resolver& values,
                                      const session_memory& memory);

// Which deferred takes of the open transaction go before this statement: all of them before
// anything that may commit (COMMIT, BEGIN, SET autocommit = 1, DDL and other implicit commits),
// those of a rule before a statement that names its table or changes the database, all of them
// before ROW_COUNT() (the app's own write). Nothing when the session holds none.
void plan_deferred(decision& d, const rules::match::match_result& facts, std::string_view sql,
                   const session_memory& memory);

// Whether a statement may end the open transaction without being COMMIT itself (DDL, LOCK
// TABLES, CALL, ...): anything but the statements that never commit implicitly.
[[nodiscard]] bool may_commit_implicitly(std::string_view sql);

}  // namespace claimguard::engine
