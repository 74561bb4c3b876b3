// The rules model: what a DBA declares in the YAML rules file (stock and claim rules).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace claimguard::rules {

enum class mode { enforce, observe };

// What happens to a statement that touches a rule's table in a shape the engine does not model
// (several statements in one query, a write without the whole key, an UPDATE with a join, ...).
enum class unmodeled_policy {
    refuse,   // answered with an ERR naming the rule; never reaches the database
    forward,  // sent as written
};

// Where a value came from in the rules file, for messages a DBA can act on.
struct source_pos {
    std::string file;
    int line = 0;    // 1-based
    int column = 0;  // 1-based
    friend bool operator==(const source_pos&, const source_pos&) = default;
};

struct table_name {
    std::string schema;  // empty: any schema (the session's current database)
    std::string name;
};

// A column a rule names, and where the rules file names it: the schema check reports a column
// the database lacks at this position.
struct column_ref {
    std::string field;  // the rule field that names it: "counter_column", "key_columns", "consumes.columns", ...
    std::string name;
    source_pos pos;
};

// What the app receives when a rule refuses a statement.
struct answer {
    enum class kind { error, ok };
    kind type = kind::error;
    std::uint16_t code = 0;   // MySQL error code (kind::error)
    std::string sql_state;    // 5 characters (kind::error)
    std::string message;      // (kind::error)
};

// Per-key admission (stock rule `admission:`): at most max_in_flight decrements of one key in
// flight per sidecar; the rest wait first come, first served, for at most queue_timeout.
struct admission_limits {
    std::uint32_t max_in_flight = 1;
    std::chrono::milliseconds queue_timeout{0};
    std::uint32_t max_queue = 0;
};

// Coalesced takes (stock rule `group_update:`, needs `admission:`): the autocommit takes of one key
// queued in this sidecar go to the database together as one conditional UPDATE of their summed units.
struct group_update_limits {
    std::uint32_t max_batch = 32;           // takes in one UPDATE at most (the leader's included)
    std::chrono::milliseconds max_wait{1};  // how long a leader waits for followers when few queue
};

// Reserved stock (stock rule `reserve:`): the sidecar takes `block` units of a key at once on a
// connection of its own, outside any app transaction, and hands them one take at a time to app
// transactions (whose take then holds no row lock); unused units go back to the row after `idle`.
struct reserve_limits {
    std::int64_t block = 0;                // units per refill (fewer near sell-out)
    std::chrono::milliseconds idle{5000};  // unused units go back after this long without a take
};

// How the database compares the values of one key column, by its collation (the schema check reads
// it; docs/RULES.md "String keys and collations"). Decides which spellings of a key are one row.
enum class key_comparison : std::uint8_t {
    unknown,    // not read (no schema_check_user) or a collation not recognised: as `bytes`
    bytes,      // byte for byte: binary strings, NO PAD _bin collations, numbers, the stock and claim columns differ
    bytes_pad,  // case-sensitive, trailing spaces ignored (PAD SPACE): *_bin, *_cs, tailored _ci not folded
    ci_pad,     // ASCII letters without regard to case, trailing spaces ignored (utf8mb4_general_ci, *_unicode_ci)
    ci_nopad,   // ASCII letters without regard to case, trailing spaces significant (utf8mb4_0900_ai_ci, *_nopad_ci)
};

// A stock counter: `counter` in `table`, one row per key, never below `floor`.
struct stock_rule {
    std::string name;
    table_name table;
    std::vector<std::string> key_columns;      // e.g. {"campaign_id"}
    std::string counter_column;                // e.g. "remain"
    std::int64_t floor = 0;
    // Units one claim takes. An absolute write of the counter (SET remain = 99) by the app is
    // applied as a conditional take of this many units, whatever value it wrote.
    std::int64_t units = 1;
    // An absolute write right after this connection read the counter (read R, write V) says the
    // app meant R - V units. When that is not `units`: refuse the write (the default: the sidecar
    // cannot tell an order of several units from a stale read), take `units` anyway, or take R - V.
    enum class evidence : std::uint8_t { refuse, units, read };
    evidence amount_evidence = evidence::refuse;
    std::optional<std::string> version_column;  // bumped by 1 on each rewrite
    // In a transaction, a take is answered OK at once and sent just before COMMIT (or before the
    // transaction's next statement on this table), so the row lock is not held across the app's work.
    bool defer_decrement = false;
    answer exhausted;                           // the "sold out" answer
    unmodeled_policy unmodeled = unmodeled_policy::refuse;
    std::optional<mode> rule_mode;              // empty: the file's default mode
    // read_cache: counter reads answered from the sidecar's copy of the server's last reply for
    // at most this long after the server was last asked (empty: every read goes to the server).
    std::optional<std::chrono::milliseconds> read_cache;
    // With read_cache: how long the other reads of a key wait for the one read refreshing it before
    // they ask the server themselves (empty: the read cache's default, 250ms).
    std::optional<std::chrono::milliseconds> max_refresh_wait;
    // With read_cache: the longest a key at or below the floor is answered from the sidecar's copy:
    // its refreshes back off from read_cache up to this (empty: once per read_cache, as any key).
    std::optional<std::chrono::milliseconds> read_cache_sold_out;
    std::optional<admission_limits> admission;  // empty: no admission gate (every decrement goes)
    std::optional<group_update_limits> group_update;  // empty: every take is its own UPDATE
    std::optional<reserve_limits> reserve;            // empty: takes in transactions go to the row
    source_pos pos;
    source_pos table_pos;                   // the table: value
    std::vector<column_ref> columns_named;  // key, counter and version columns as written
    // Not read from the rules file: per key column, how the database compares it, as the schema
    // check found it (the rules snapshot fills it in). Empty: every key byte for byte.
    std::vector<key_comparison> key_compare;
};

struct redis_guard {
    std::string key_template;  // e.g. "lock:coupon:{user_id}:{campaign_id}"
    std::chrono::milliseconds ttl{3000};
};

enum class strictness {
    after_refused,      // refuse claim inserts that follow this session's refused decrement
    require_decrement,  // also refuse claim inserts that follow no successful decrement
};

// What a DELETE of claim rows (a cancellation, a refund) does to the units the claims used.
enum class cancel_policy {
    // The units stay taken (the default): the DELETE is forwarded as written, and the app's own
    // restock that may follow (remain = remain + 1) is a restock like any other. A sidecar that
    // gave units back that the app did not mean to return would issue more than the stock.
    keep_stock,
    // Each deleted claim row gives the stock rule's units back to its stock row, in the DELETE's
    // transaction; the app's own restock of the same key and units right after is that give-back
    // and is answered OK without reaching the database (never applied twice).
    return_stock,
};

// A claim table: one row per idempotency tuple, each row consumes one stock unit.
struct claim_rule {
    std::string name;
    table_name table;
    std::vector<std::string> idempotency_columns;         // e.g. {"user_id", "campaign_id"}
    std::optional<std::string> idempotency_key_column;    // e.g. "request_id"
    std::string stock_rule;                               // name of the stock rule consumed
    // claim column -> stock key column, one entry per stock key column.
    std::vector<std::pair<std::string, std::string>> stock_key_mapping;
    std::optional<redis_guard> redis;
    answer duplicate;  // the "already claimed" answer
    strictness strict = strictness::require_decrement;
    cancel_policy on_cancel = cancel_policy::keep_stock;
    // A trigger on the claim table decrements the consumed stock when a claim row goes in: the
    // claim INSERT is itself the take, checked by reading the counter around it (never blocked for
    // want of a take of the sidecar's).
    bool decremented_by_trigger = false;
    unmodeled_policy unmodeled = unmodeled_policy::refuse;
    std::optional<mode> rule_mode;
    source_pos pos;
    source_pos table_pos;                   // the table: value
    source_pos consumes_pos;                // the consumed stock rule's name
    std::vector<column_ref> columns_named;  // idempotency columns and consumes.columns keys as written
};

struct rule_set {
    mode default_mode = mode::enforce;
    std::vector<stock_rule> stocks;
    std::vector<claim_rule> claims;
    // Database users whose statements no rule touches (restocks, DBA work): forwarded unchanged.
    std::vector<std::string> trusted_users;
    std::string version_hash;  // hex digest of the source files' content, shown by /rules and lint
    // The kill switch (serve --mode-override observe, its environment variable, POST /-/mode-override):
    // every rule observes, whatever the files say. Set by the proxy, never read from a file.
    bool observe_override = false;

    [[nodiscard]] const stock_rule* find_stock(std::string_view name) const;
    [[nodiscard]] mode effective_mode(const stock_rule& r) const {
        return observe_override ? mode::observe : r.rule_mode.value_or(default_mode);
    }
    [[nodiscard]] mode effective_mode(const claim_rule& r) const {
        return observe_override ? mode::observe : r.rule_mode.value_or(default_mode);
    }
    [[nodiscard]] bool is_trusted(std::string_view user) const;
};

struct diagnostic {
    source_pos pos;
    std::string message;  // one sentence a DBA understands
};

struct load_result {
    std::optional<rule_set> rules;  // set only when `errors` is empty
    std::vector<diagnostic> errors;
    std::vector<diagnostic> warnings;  // the rules work, but probably not as meant (e.g. a hot Redis slot)
};

// One rules source: a file name (for messages) and its text.
struct rules_source {
    std::string file;
    std::string text;
};

// "file:line:column: error: message", the form `claimguard lint` prints and editors parse.
[[nodiscard]] std::string format_diagnostic(const diagnostic& d);
// "file:line:column: warning: message".
[[nodiscard]] std::string format_warning(const diagnostic& d);

// Parses and validates every source as one rule set. Pure: the caller reads files.
// Never throws, whatever the input.
[[nodiscard]] load_result load_rules(const std::vector<rules_source>& sources);

}  // namespace claimguard::rules
