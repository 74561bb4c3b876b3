// Typed facts the matcher derives from a statement and the rules: what the engine decides on.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

#include "rules/model/rules.hpp"
#include "rules/sql/statement.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::rules::match {

using sql::small_vector;

// A value the statement wrote. Literals keep their original bytes (sign and introducer
// included) so SQL built from them reuses them byte for byte; placeholders keep their
// 0-based position among the statement's "?" (bound later by COM_STMT_EXECUTE).
struct value_ref {
    enum class kind : std::uint8_t {
        literal,
        placeholder,
        null,
        default_,
        expression,  // NOW(), UUID(), a + 1: known only to the server
        absent,      // the column is not written (the table default applies)
    };
    kind type = kind::absent;
    std::string_view text;  // views the statement text
    std::uint32_t placeholder_index = 0;
    sql::literal_value decoded;  // literal

    [[nodiscard]] bool is_bindable() const noexcept { return type == kind::literal || type == kind::placeholder; }
};

// How the statement named the table.
struct table_use {
    std::string_view written;  // "shop.coupon_stock AS s", index hints included
    std::string_view schema;   // as written; empty when unqualified
    std::string_view alias;    // empty without one
};

// SELECT returning the counter of one row, every key column pinned by an equality.
struct counter_read {
    const stock_rule* rule = nullptr;
    table_use table;
    small_vector<value_ref, 2> key;                // rule->key_columns order
    std::optional<std::uint32_t> counter_position;  // 0-based column of the result row; empty after a *
    std::string_view counter_label;                 // the result column's name as written (alias if any)
    sql::lock_clause lock = sql::lock_clause::none;
    // Plain enough to answer from the server's earlier reply (stock rule read_cache): every select
    // item a column or *, no SELECT modifiers (DISTINCT, SQL_CALC_FOUND_ROWS, ...), and a WHERE
    // clause of exactly the key equalities, so the reply differs only in the counter's value.
    bool plain = false;
};

// UPDATE ... SET counter = V: an absolute value (the incident's SET remain = 99), an expression
// (SET remain = 57 - 1), NULL or DEFAULT. The engine applies it as a take of the rule's units.
struct counter_write {
    const stock_rule* rule = nullptr;
    table_use table;
    small_vector<value_ref, 2> key;  // rule->key_columns order; absent where not pinned
    bool full_key = false;           // every key column pinned by one equality
    bool extra_conditions = false;   // the WHERE clause says more than the key
    value_ref value;
    std::optional<value_ref> expected;  // WHERE counter = E: already a compare-and-set
    std::uint32_t assignment = 0;       // index into update_statement::assignments
    std::optional<std::uint32_t> version_assignment;
    // SET counter = N - (SELECT COUNT(*) FROM <claim table> WHERE <the claim columns of the stock key>)
    // WHERE <the stock key> (the statement is not parsed as an UPDATE: no assignment index, no rewrite).
    // The engine absorbs it right after this connection's claim by INSERT ... SELECT took the unit.
    bool recomputed = false;
    const claim_rule* counted = nullptr;     // the claim rule whose rows it counts
    small_vector<value_ref, 2> counted_key;  // the stock key its count pins, in the stock key's order
};

enum class guard_state : std::uint8_t {
    none,          // nothing bounds the counter from below
    sufficient,    // counter >= floor + N holds for every row it changes
    insufficient,  // a bound, but too low for this floor and amount
    unknown,       // the bound or the amount is a placeholder
};

// A lower bound the WHERE clause puts on the counter: counter >= base + terms (> when strict),
// the terms added or subtracted as the app wrote them (`c - ? >= 0` is base 0, term + ?). Kept as
// written so that a bound with a placeholder is judged once the values are bound.
struct counter_bound {
    value_ref base;
    small_vector<value_ref, 2> terms;
    std::uint8_t subtract = 0;  // bit i: terms[i] is subtracted
    bool strict = false;

    // The smallest counter value the bound lets through, given each part's integer value
    // (`integer_of(value_ref) -> std::optional<std::int64_t>`); empty when a part is not a known
    // integer or the sum overflows: then the bound proves nothing.
    template <class IntegerOf>
    [[nodiscard]] std::optional<std::int64_t> lowest(const IntegerOf& integer_of) const {
        std::optional<std::int64_t> sum = integer_of(base);
        if (!sum) return std::nullopt;
        for (std::size_t i = 0; i < terms.size(); ++i) {
            const std::optional<std::int64_t> t = integer_of(terms[i]);
            if (!t) return std::nullopt;
            const bool minus = ((subtract >> i) & 1) != 0;
            if (minus ? __builtin_sub_overflow(*sum, *t, &*sum) : __builtin_add_overflow(*sum, *t, &*sum))
                return std::nullopt;
        }
        if (strict && __builtin_add_overflow(*sum, 1, &*sum)) return std::nullopt;
        return sum;
    }
};

// UPDATE ... SET counter = counter - N (or + N).
struct counter_change {
    const stock_rule* rule = nullptr;
    table_use table;
    small_vector<value_ref, 2> key;
    bool full_key = false;
    char sign = '-';                    // as written
    value_ref amount;                   // N
    std::optional<std::int64_t> delta;  // signed change when N is an integer literal (remain - 2: -2)
    guard_state guard = guard_state::none;
    // The WHERE clause says more than the key and the counter's own bounds (AND version = ?):
    // zero rows may be the app's own conflict rather than sold out.
    bool extra_conditions = false;
    std::optional<value_ref> guard_bound;  // the strongest "counter >= B" / "counter > B" of the WHERE clause
    bool guard_strict = false;             // ">" rather than ">="
    // Every lower bound on the counter (`>=`, `>`, `=`, in any arithmetic form), for the engine to
    // judge `guard` again once placeholders are bound (unknown at match time).
    small_vector<counter_bound, 1> bounds;
    std::uint32_t assignment = 0;
    std::optional<std::uint32_t> version_assignment;

    [[nodiscard]] bool is_decrement() const noexcept { return delta ? *delta < 0 : sign == '-'; }
};

struct claim_row {
    small_vector<value_ref, 2> idempotency;   // rule->idempotency_columns order
    std::optional<value_ref> idempotency_key;  // rule->idempotency_key_column, when declared
    small_vector<value_ref, 2> stock_key;      // the consumed stock rule's key_columns order
};

// INSERT/REPLACE into a claim table.
struct claim_insert {
    const claim_rule* rule = nullptr;
    const stock_rule* stock = nullptr;  // the stock rule it consumes (null if the name is unknown)
    table_use table;
    bool replace = false;
    bool ignore = false;
    bool on_duplicate_update = false;
    bool columns_known = true;  // false for INSERT INTO t VALUES (...) without a column list
    small_vector<claim_row, 1> rows;
    // INSERT [IGNORE] INTO claims (...) SELECT ... FROM stock WHERE <the stock key> [AND <counter bounds>]:
    // one row at most, for the stock key the WHERE pins (the claim's own stock key). No decrement of the
    // app comes before it, so the claim takes its unit itself, then goes in as INSERT ... VALUES.
    bool from_select = false;
    bool select_guarded = false;     // its WHERE bounds the counter: without stock, the server's 0-row OK
    std::uint32_t select_token = 0;  // the SELECT keyword: VALUES (...) replaces what follows
    small_vector<sql::token_span, 4> select_values;  // each column's value as written (an item, or the key's value)
};

// DELETE of rows of a claim table: a cancellation (a refund). What its WHERE pins: the idempotency
// columns (the claim itself), and the claim columns that hold the consumed stock rule's key (the
// stock row its units go back to). The claim rule's on_cancel says whether they go back.
struct claim_delete {
    const claim_rule* rule = nullptr;
    const stock_rule* stock = nullptr;  // the stock rule it consumes (null if the name is unknown)
    table_use table;
    small_vector<value_ref, 2> idempotency;  // rule->idempotency_columns order; absent where not pinned
    bool by_idempotency = false;             // every idempotency column pinned by one equality
    small_vector<value_ref, 2> stock_key;    // the stock rule's key_columns order; absent where not pinned
    bool stock_key_pinned = false;           // every stock key column pinned (through consumes' mapping)
    // The WHERE says more than the idempotency and stock key columns (AND id = 42, ORDER BY, LIMIT).
    bool extra_conditions = false;
    // ORDER BY or LIMIT: which rows it deletes depends on more than the WHERE.
    bool ordered_or_limited = false;
    // Every stock key column has a claim column holding it (consumes.columns): the claim rows, once
    // read, name their stock row.
    bool stock_key_held = false;
};

enum class transaction_event : std::uint8_t {
    begin,
    commit,
    rollback,
    savepoint,
    rollback_to_savepoint,
    release_savepoint,
    autocommit_on,
    autocommit_off,
    autocommit_unknown,  // SET autocommit = <expression or placeholder>
    xa_start,            // XA START / XA BEGIN
    xa_prepare,          // XA PREPARE: the transaction is no longer the session's, its end is still to come
    xa_commit,           // XA COMMIT (ONE PHASE or after PREPARE)
    xa_rollback,         // XA ROLLBACK
};

struct transaction_boundary {
    transaction_event event = transaction_event::begin;
    bool chain = false;    // AND CHAIN: a new transaction starts at once
    bool release = false;  // RELEASE: the server closes the connection
    bool read_only = false;
    std::string_view savepoint;  // SAVEPOINT / ROLLBACK TO / RELEASE: the name as written
};

enum class session_setting : std::uint8_t {
    sql_mode,        // changes ANSI_QUOTES / NO_BACKSLASH_ESCAPES
    client_charset,  // SET NAMES, SET CHARACTER SET, character_set_client
    database,        // USE db
};

struct session_change {
    session_setting setting = session_setting::sql_mode;
    value_ref value;                             // as written
    std::optional<sql::sql_mode_flags> sql_mode;  // a literal sql_mode, decoded
    std::optional<sql::charset> charset;          // a known character set name
    std::string_view database;                    // USE: the name as written
};

// A statement that may change a protected table in a shape the engine does not model: it gets
// the rule's `unmodeled` policy (refuse or forward), an audit line and a metric.
struct unmodeled {
    const stock_rule* stock = nullptr;
    const claim_rule* claim = nullptr;
    std::string_view reason;  // a sentence for logs and the refusal
    std::string_view code;    // a short label for the metric (several_statements, unsupported_syntax, ...)
    // PREPARE name FROM '...': the SQL-level statement's name (views the statement), so that a
    // forwarded PREPARE makes each later EXECUTE name get the same policy.
    std::string_view prepared_name = {};
};

using fact = std::variant<counter_read, counter_write, counter_change, claim_insert, transaction_boundary,
                          session_change, unmodeled, claim_delete>;

struct match_result {
    small_vector<fact, 2> facts;
};

}  // namespace claimguard::rules::match
