// The claim engine: pure decisions from (session memory, matched facts, rules) to an
// action, and the memory updates once the database has answered. The only place that
// knows the invariants (no over-issue, no duplicates, no leak).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "memory.hpp"
#include "rules/match/facts.hpp"
#include "rules/model/rules.hpp"

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

enum class verdict {
    forward,           // nothing to change
    remember_read,     // forward; remember the counter the reply returns for `key`
    decrement,         // send the conditional decrement instead of the statement
    track_decrement,   // forward an already guarded decrement; learn from its affected rows
    restock,           // forward a write that raises the counter; remember the new value
    exhausted,         // answer with the stock rule's exhausted answer; nothing reaches the database
    claim,             // the claim protocol: Redis, then the insert, duplicates answered and compensated
    rollback_instead,  // COMMIT of a transaction holding a claim without stock: ROLLBACK, answer exhausted
};

[[nodiscard]] std::string_view verdict_name(verdict v);

struct decision {
    verdict what = verdict::forward;
    bool observe = false;  // the rule is in observe mode: count and log, change nothing on the wire
    const rules::stock_rule* stock = nullptr;
    const rules::claim_rule* claim = nullptr;
    key_tuple key;                        // the stock key, canonical
    std::int64_t units = 0;               // decrement: units taken; restock: the new value
    std::optional<std::uint32_t> amount_placeholder;  // decrement by a bound "?" (prepared, relative)
    const rules::match::fact* fact = nullptr;         // the fact decided on (views the match result)
    key_tuple idempotency;                // claim: the business key values, canonical
    std::string redis_key;                // claim with a Redis guard: the expanded key template
    std::string_view note;                // why, for logs ("absolute write after a read", ...)
    bool untracked = false;               // a write or claim on a protected table the engine cannot follow
};

// Decides what to do with a statement. Does not change memory except to clear a
// refused flag that an exhausted answer used up.
[[nodiscard]] decision decide(const rules::match::match_result& facts, const rules::rule_set& rules,
                              const value_resolver& values, session_memory& memory);

// ---- after the database answered ------------------------------------------------------------

void after_read(session_memory& memory, const decision& d, std::int64_t counter);
// `new_value` is the app's view of the counter after the write (absolute writes).
void after_decrement(session_memory& memory, const decision& d, bool succeeded, bool in_transaction);
void after_restock(session_memory& memory, const decision& d, bool succeeded);

enum class claim_outcome {
    inserted,   // the claim row is in
    duplicate,  // Redis or the unique index said the key is already claimed
    failed,     // any other error: the insert did not happen
};
// True when this session holds a unit from a successful decrement of the claim's stock key
// (the usual order: decrement, then insert). False: the app inserts the claim first. In a
// transaction the later decrement backs it (or the COMMIT becomes a ROLLBACK); in autocommit
// the row is committed at once, so the proxy can only detect, count and log it.
[[nodiscard]] bool claim_backed(const session_memory& memory, const decision& d);

// The units to give back to the stock row (0 or 1): the unit this claim took when it
// did not become a claim row. Never more than the session took.
[[nodiscard]] std::int64_t after_claim(session_memory& memory, const decision& d, claim_outcome outcome,
                                       bool in_transaction);

// COMMIT, ROLLBACK, an implicit end of transaction, COM_RESET_CONNECTION, COM_CHANGE_USER.
void after_transaction_end(session_memory& memory);

}  // namespace claimguard::engine
