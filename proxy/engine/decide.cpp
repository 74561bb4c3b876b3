// The claim engine's decisions and memory updates.
#include "decide.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "key_collation.hpp"
#include "rules/match/matcher.hpp"
#include "rules/model/key_template.hpp"
#include "rules/sql/text.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::engine {

namespace match = rules::match;

namespace {

template <class... F>
struct overloaded : F... {
    using F::operator()...;
};

// Canonical values of a key; empty when one of them is unknown.
std::optional<key_tuple> resolve_key(const match::small_vector<match::value_ref, 2>& key, const value_resolver& values) {
    key_tuple out;
    for (const auto& v : key) {
        auto r = values(v);
        if (!r) return std::nullopt;
        out.push_back(std::move(r->canonical));
    }
    return out;
}

// The key as literals for SQL sent after the statement is gone (a deferred take).
std::vector<match::key_literal> key_literals_of(const match::small_vector<match::value_ref, 2>& key,
                                                const value_resolver& values) {
    std::vector<match::key_literal> out;
    for (const auto& v : key) {
        auto r = values(v);
        if (!r) return {};
        // A quoted '007' names a string row when the column is a string: keep its bytes; a
        // quoted '7' is the number 7 written as text.
        const bool quoted = v.type == match::value_ref::kind::literal && v.decoded.kind == rules::sql::literal_kind::string;
        match::key_literal k;
        k.integer = r->integer.has_value() && (!quoted || v.decoded.bytes == std::to_string(*r->integer));
        k.value = k.integer ? std::to_string(*r->integer) : quoted ? v.decoded.bytes : r->canonical;
        out.push_back(std::move(k));
    }
    return out;
}

// The database the stock row of a statement lives in: the table's qualifier as written, else the
// rule's schema, else the session's current database. Appended to the key (the ledger, the memory,
// the read cache and admission then tell tenants apart), and used by the give-back and the probe.
void scope_key(decision& d, std::string_view written_schema, const rules::table_name& rule_table,
               const session_memory& memory) {
    if (!written_schema.empty()) d.schema = rules::sql::unquote_identifier(written_schema);
    else if (!rule_table.schema.empty()) d.schema = rule_table.schema;
    else d.schema = memory.database;
    if (!d.schema.empty()) d.key.push_back(d.schema);
}

rules::mode mode_of(const rules::rule_set& rules, const rules::stock_rule* s, const rules::claim_rule* c) {
    if (c) return rules.effective_mode(*c);
    if (s) return rules.effective_mode(*s);
    return rules.observe_override ? rules::mode::observe : rules.default_mode;
}

// A write the rule cannot follow: the rule's policy decides, in every mode a line and a metric.
decision unmodeled_decision(const rules::stock_rule* stock, const rules::claim_rule* claim, std::string_view note,
                            std::string_view reason) {
    decision d;
    d.stock = stock;
    d.claim = claim;
    d.unmodeled = true;
    d.note = note;
    d.reason = reason;
    const auto policy = claim ? claim->unmodeled : stock ? stock->unmodeled : rules::unmodeled_policy::forward;
    d.what = policy == rules::unmodeled_policy::refuse ? verdict::refuse : verdict::forward;
    return d;
}

// A write the engine understands and refuses whatever the rule's unmodeled policy says: what it
// means is ambiguous (a restock or a stale decrement; an amount a fresh read contradicts).
decision ambiguous_decision(const rules::stock_rule* stock, std::string_view note, std::string_view reason) {
    decision d = unmodeled_decision(stock, nullptr, note, reason);
    d.what = verdict::refuse;
    d.ambiguous = true;
    return d;
}

// SET c = N - (SELECT COUNT(*) FROM claims WHERE ...) WHERE key: absorbed when it follows this connection's
// claim by INSERT ... SELECT of the same key (whose take already moved the counter), refused otherwise.
decision decide_recompute(const match::counter_write& w, const value_resolver& values, session_memory& memory) {
    constexpr std::string_view advice =
        "the counter recomputed from a subquery (not right after a claim by INSERT ... SELECT of this connection "
        "that took the unit): claimguard cannot tell how many units it takes; write it as a relative change "
        "(UPDATE stock SET c = c - n WHERE key = ? AND c >= n)";
    auto key = resolve_key(w.key, values);
    auto counted = resolve_key(w.counted_key, values);
    if (!key || !counted) return unmodeled_decision(w.rule, nullptr, advice, "counter_from_subquery");
    canonicalize_key(*key, *w.rule);
    canonicalize_key(*counted, *w.rule);
    if (*key != *counted) return unmodeled_decision(w.rule, nullptr, advice, "counter_from_subquery");
    decision d;
    d.stock = w.rule;
    d.key = std::move(*key);
    scope_key(d, w.table.schema, w.rule->table, memory);
    if (!memory.recompute_owed(w.rule->name, d.key))
        return unmodeled_decision(w.rule, nullptr, advice, "counter_from_subquery");
    d.what = verdict::restock;
    d.absorb_recompute = true;
    d.note =
        "the counter recomputed from its claims right after this connection's claim by INSERT ... SELECT: "
        "its take already moved the counter (absorbed)";
    return d;
}

decision decide_write(const match::counter_write& w, const value_resolver& values, session_memory& memory) {
    if (w.recomputed) return decide_recompute(w, values, memory);
    if (!w.full_key)
        return unmodeled_decision(w.rule, nullptr, "a write of the counter without an equality on every key column",
                                  "no_full_key");
    auto key = resolve_key(w.key, values);
    if (!key) return unmodeled_decision(w.rule, nullptr, "a write of the counter whose key is not a known value", "unknown_key");
    canonicalize_key(*key, *w.rule);  // as the key column's collation compares it
    decision d;
    d.stock = w.rule;
    d.key = std::move(*key);
    scope_key(d, w.table.schema, w.rule->table, memory);
    auto value = values(w.value);
    if (w.expected) {
        // WHERE counter = E: a compare-and-set, correct on its own when it lowers the counter
        // to the floor or above. Forwarded; its rows tell whether it took E - V units.
        auto expected = values(*w.expected);
        if (expected && expected->integer && value && value->integer) {
            if (*value->integer >= *expected->integer) {
                d.what = verdict::restock;
                d.units = *value->integer - *expected->integer;
                d.note = "compare-and-set that does not lower the counter";
                return d;
            }
            if (*value->integer >= w.rule->floor) {
                d.what = verdict::track_decrement;
                d.units = *expected->integer - *value->integer;
                d.note = "compare-and-set (WHERE counter = expected)";
                return d;
            }
        }
        // Below the floor, or values not known: a take like any other absolute write.
    }
    if (memory.recompute_owed(w.rule->name, d.key)) {
        // The app's own write of the counter after its claim by INSERT ... SELECT (SELECT remain; INSERT ...
        // SELECT; SET remain = <read - 1>): the claim took the unit itself.
        d.what = verdict::restock;
        d.absorb_recompute = true;
        d.note =
            "the app's write of the counter right after this connection's claim by INSERT ... SELECT: its take "
            "already moved the counter (absorbed)";
        return d;
    }
    d.what = verdict::take;
    d.units = w.rule->units;
    d.may_conflict = w.extra_conditions;
    d.note = "absolute write of the counter: a conditional take of the rule's units";
    const auto read = memory.fresh_read(w.rule->name, d.key);
    if (read && value && value->integer) {
        // The app read R on this connection just before (or in this transaction) and writes V: it
        // means R - V units, whatever the counter is now.
        const std::int64_t meant = *read - *value->integer;
        if (meant <= 0)
            return ambiguous_decision(w.rule,
                                      "an absolute write at or above the counter this connection read: a restock or "
                                      "a stale write, not a take (restock as a trusted user, or SET c = c + n)",
                                      "absolute_not_lower");
        if (meant != d.units) {
            switch (w.rule->amount_evidence) {
            case rules::stock_rule::evidence::refuse:
                return ambiguous_decision(w.rule,
                                          "an absolute write that means other units than the rule's (read - written; "
                                          "amount_evidence: refuse)",
                                          "amount_mismatch");
            case rules::stock_rule::evidence::units: d.app_meant = meant; break;
            case rules::stock_rule::evidence::read:
                d.units = meant;
                d.note = "absolute write of the counter: a conditional take of what the app meant (read - written)";
                break;
            }
        }
    } else if (value && value->integer && w.value.is_bindable()) {
        d.only_if_lower = true;
    }
    // Sent later as literals: a deferred take, or a take a leader's batch sends (group_update).
    if ((w.rule->defer_decrement || w.rule->group_update || w.rule->reserve) && !d.only_if_lower)
        d.key_literals = key_literals_of(w.key, values);
    return d;
}

// Whether one of the counter's bounds in the WHERE clause, with the values known now (a bound "?"
// of COM_STMT_EXECUTE: MyBatis' `remain - ? >= 0`), lets through only counters of at least
// floor + units: then the app's own guard keeps the promise. A part that is not a known integer
// proves nothing.
bool bounds_suffice(const match::counter_change& c, const value_resolver& values, std::int64_t units) {
    if (c.rule->floor > std::numeric_limits<std::int64_t>::max() - units) return false;
    const auto integer_of = [&](const match::value_ref& v) -> std::optional<std::int64_t> {
        auto r = values(v);
        return r ? r->integer : std::nullopt;
    };
    for (const auto& b : c.bounds)
        if (const auto lowest = b.lowest(integer_of); lowest && *lowest >= c.rule->floor + units) return true;
    return false;
}

decision decide_change(const match::counter_change& c, const value_resolver& values, const session_memory& memory) {
    if (!c.full_key)
        return unmodeled_decision(c.rule, nullptr, "a change of the counter without an equality on every key column",
                                  "no_full_key");
    auto key = resolve_key(c.key, values);
    if (!key) return unmodeled_decision(c.rule, nullptr, "a change of the counter whose key is not a known value", "unknown_key");
    canonicalize_key(*key, *c.rule);
    decision d;
    d.stock = c.rule;
    d.key = std::move(*key);
    scope_key(d, c.table.schema, c.rule->table, memory);
    std::optional<std::int64_t> delta = c.delta;
    if (!delta) {
        auto amount = values(c.amount);
        if (!amount || !amount->integer)
            return unmodeled_decision(c.rule, nullptr, "a change of the counter by an amount that is not a known integer",
                                      "unknown_amount");
        delta = c.sign == '-' ? -*amount->integer : *amount->integer;
        if (c.amount.type == match::value_ref::kind::placeholder) d.amount_placeholder = c.amount.placeholder_index;
    }
    if (*delta == 0) {
        d.note = "a change by zero";
        return d;
    }
    if (*delta > 0) {
        d.what = verdict::restock;
        d.units = *delta;
        d.note = "relative increment: a restock, or the app giving back a unit";
        return d;
    }
    d.units = -*delta;
    if (d.units == c.rule->units && memory.recompute_owed(c.rule->name, d.key)) {
        // The app's own decrement of the unit its claim by INSERT ... SELECT already took (the claim took it
        // itself): a second take would sell one unit twice.
        d.what = verdict::restock;
        d.absorb_recompute = true;
        d.note =
            "the app's decrement right after this connection's claim by INSERT ... SELECT: its take already "
            "moved the counter (absorbed)";
        return d;
    }
    if (c.guard == match::guard_state::sufficient) {
        d.what = verdict::track_decrement;
        d.note = "already guarded decrement";
        return d;
    }
    if (c.guard == match::guard_state::unknown && bounds_suffice(c, values, d.units)) {
        d.what = verdict::track_decrement;
        d.note = "already guarded decrement (judged on the bound values)";
        return d;
    }
    d.what = verdict::take;
    d.note = "unguarded decrement: guard added";
    d.may_conflict = c.extra_conditions;  // AND version = ?: zero rows with stock left is a conflict
    if (c.rule->defer_decrement || c.rule->group_update || c.rule->reserve)
        d.key_literals = key_literals_of(c.key, values);
    return d;
}

// The Redis first filter's key of the claim whose idempotency values are `idempotency`, in the
// database `schema` (appended when the claim rule names no schema: one database per tenant).
std::string redis_key_of(const rules::claim_rule& rule, const key_tuple& idempotency, const std::string& schema) {
    auto parsed = rules::parse_key_template(rule.redis->key_template);
    std::string key = rules::expand_key_template(parsed.parts, [&](const std::string& column) -> std::string {
        for (std::size_t i = 0; i < rule.idempotency_columns.size() && i < idempotency.size(); ++i)
            if (rules::sql::identifier_equals(rule.idempotency_columns[i], column)) return idempotency[i];
        return {};
    });
    if (rule.table.schema.empty() && !schema.empty()) key += ":" + schema;
    return key;
}

// A DELETE of claim rows: a cancellation. keep_stock: forwarded, its units stay taken. return_stock:
// the deleted rows' units go back to the stock row the WHERE pins, in the DELETE's transaction.
decision decide_cancel(const match::claim_delete& del, const value_resolver& values, session_memory& memory) {
    if (!del.stock)
        return unmodeled_decision(nullptr, del.rule, "the claim rule's stock rule is unknown", "no_stock_rule");
    decision d;
    d.what = verdict::cancel;
    d.claim = del.rule;
    d.stock = del.stock;
    d.returns_stock = del.rule->on_cancel == rules::cancel_policy::return_stock;
    // The stock row's database, as for a claim insert: the stock rule's schema, else the claim table's.
    const std::string_view claim_schema =
        del.table.schema.empty() ? std::string_view(del.rule->table.schema) : del.table.schema;
    const std::string_view written = del.stock->table.schema.empty() ? claim_schema : std::string_view{};
    if (del.stock_key_pinned) {
        if (auto key = resolve_key(del.stock_key, values)) {
            canonicalize_key(*key, *del.stock);
            d.key = std::move(*key);
            d.key_literals = key_literals_of(del.stock_key, values);
        }
    }
    scope_key(d, written, del.stock->table, memory);
    if (del.by_idempotency) {
        if (auto idempotency = resolve_key(del.idempotency, values)) {
            d.idempotency = std::move(*idempotency);
            // The deleted claim's Redis key goes once the DELETE removed it: the user may claim again.
            if (del.rule->redis) d.redis_key = redis_key_of(*del.rule, d.idempotency, d.schema);
        }
    }
    if (!d.returns_stock) {
        d.units = 0;
        d.note = "cancellation: claim rows deleted, their units stay taken (on_cancel: keep_stock)";
        return d;
    }
    if (!del.stock_key_pinned) {
        // DELETE ... WHERE id = ? (an ORM's delete of a loaded row): the rows it deletes are read first,
        // locked, in its transaction, and each gives its units back to the stock row it names. Not with
        // ORDER BY / LIMIT (the rows read need not be the rows deleted), nor when the claim rows do not
        // hold the whole stock key.
        if (del.ordered_or_limited || !del.stock_key_held)
            return unmodeled_decision(
                nullptr, del.rule,
                del.ordered_or_limited
                    ? "a cancellation (on_cancel: return_stock) whose WHERE does not pin the stock key, with "
                      "ORDER BY or LIMIT: the rows it deletes cannot be read first"
                    : "a cancellation (on_cancel: return_stock) whose WHERE does not pin the stock key, and "
                      "the claim table does not hold the whole stock key: the stock row its units go back to "
                      "is not known",
                "cancel_without_stock_key");
        d.read_claim_rows = true;
        d.redis_key.clear();                  // each row read names its own
        d.reason = "cancel_rows_over_limit";  // the label if the read finds more than max_cancel_rows rows
        d.units = del.stock->units;
        d.note =
            "cancellation: the claim rows are read (locked) first, each gives the stock rule's units back to "
            "its stock row (on_cancel: return_stock)";
        return d;
    }
    if (d.key_literals.empty())
        return unmodeled_decision(nullptr, del.rule, "a cancellation whose stock key is not a known value",
                                  "unknown_key");
    d.units = del.stock->units;  // per deleted claim row
    d.note = "cancellation: each deleted claim row gives the stock rule's units back (on_cancel: return_stock)";
    return d;
}

// The Redis guard's key of a claim insert (empty: the rule has no guard).
std::string redis_key_of(const match::claim_insert& ins, const key_tuple& idempotency, const std::string& schema) {
    return ins.rule->redis ? redis_key_of(*ins.rule, idempotency, schema) : std::string{};
}

// A claim INSERT of several rows: one claim per row (d.rows), each with its stock key in the database
// the first row's was scoped to. False when a row's values are not known, or when an INSERT IGNORE's
// rows name different stock keys: its affected rows would not tell which keys' units go back.
bool decide_claim_rows(decision& d, const match::claim_insert& ins, const value_resolver& values,
                       session_memory& memory) {
    const std::size_t database_parts = d.key.size() - ins.rows.front().stock_key.size();  // 0 or 1: the schema
    for (const auto& row : ins.rows) {
        auto key = resolve_key(row.stock_key, values);
        auto idempotency = resolve_key(row.idempotency, values);
        if (!key || !idempotency) return false;
        canonicalize_key(*key, *ins.stock);
        if (database_parts > 0) key->push_back(d.schema);
        claim_row_decision r;
        r.key = std::move(*key);
        r.key_literals = key_literals_of(row.stock_key, values);
        r.idempotency = std::move(*idempotency);
        if (stock_entry* entry = memory.find(ins.stock->name, r.key); entry && entry->refused) r.after_refusal = true;
        if (ins.ignore && !d.rows.empty() && r.key != d.rows.front().key) return false;
        r.redis_key = redis_key_of(ins, r.idempotency, d.schema);
        d.after_refusal = d.after_refusal || r.after_refusal;
        d.rows.push_back(std::move(r));
    }
    d.note = ins.ignore ? "claim by INSERT IGNORE of several rows: one claim per row"
                        : "claim insert of several rows: one claim per row";
    return true;
}

decision decide_claim(const match::claim_insert& ins, const value_resolver& values, session_memory& memory) {
    if (!ins.stock) return unmodeled_decision(nullptr, ins.rule, "the claim rule's stock rule is unknown", "no_stock_rule");
    if (!ins.columns_known)
        return unmodeled_decision(nullptr, ins.rule, "a claim insert without a column list (table columns not known yet)",
                                  "no_column_list");
    if (ins.rows.size() > 1 && (ins.replace || ins.on_duplicate_update))
        return unmodeled_decision(nullptr, ins.rule,
                                  "a claim by REPLACE or INSERT ... ON DUPLICATE KEY UPDATE of several rows (one row "
                                  "per statement is modelled; a plain or IGNORE insert of several rows is)",
                                  "multi_row_insert");
    if (ins.rows.empty())
        return unmodeled_decision(nullptr, ins.rule, "a claim insert without rows", "multi_row_insert");
    const auto& row = ins.rows.front();
    auto key = resolve_key(row.stock_key, values);
    auto idempotency = resolve_key(row.idempotency, values);
    if (!key || !idempotency)
        return unmodeled_decision(nullptr, ins.rule, "a claim insert whose key values are not known", "unknown_key");
    canonicalize_key(*key, *ins.stock);  // the stock row's key, as the stock column compares it
    decision d;
    d.claim = ins.rule;
    d.stock = ins.stock;
    d.key = std::move(*key);
    // The stock row of a claim is in the claim table's database (one database per tenant).
    // A stock rule with its own schema names it; else the claim table's database as written (or the
    // claim rule's), else the session's.
    d.key_literals = key_literals_of(row.stock_key, values);  // a give-back sent after a rollback
    const std::string_view claim_schema = ins.table.schema.empty() ? std::string_view(ins.rule->table.schema) : ins.table.schema;
    scope_key(d, ins.stock->table.schema.empty() ? claim_schema : std::string_view{}, ins.stock->table, memory);
    d.idempotency = std::move(*idempotency);
    if (stock_entry* entry = memory.find(ins.stock->name, d.key); entry && entry->refused) {
        // This connection's last decrement of the key found the floor. The claim goes in only with a
        // take of the sidecar's that waits for a claim (a pool lends this connection to another user
        // whose decrement succeeded elsewhere); without one, the exhausted answer.
        d.after_refusal = true;
    }
    d.what = verdict::claim;
    d.note = d.after_refusal ? "claim after this connection's decrement was refused: only with a waiting take"
             : ins.replace    ? "claim by REPLACE"
             : ins.on_duplicate_update ? "claim by INSERT ... ON DUPLICATE KEY UPDATE"
             : ins.ignore              ? "claim by INSERT IGNORE"
                                       : "claim insert";
    if (ins.from_select) {
        // The matcher read one row at most, for the stock key its WHERE pins. A trigger's claim is not
        // this shape: its INSERT is the take.
        if (ins.rule->decremented_by_trigger || ins.rows.size() != 1)
            return unmodeled_decision(nullptr, ins.rule,
                                      "INSERT ... SELECT into a claim table whose trigger decrements the stock "
                                      "(decremented_by_trigger): write INSERT ... VALUES (...)",
                                      "insert_select");
        if (d.key_literals.size() != ins.stock->key_columns.size())
            return unmodeled_decision(nullptr, ins.rule, "a claim insert whose key values are not known",
                                      "unknown_key");
        d.own_take = true;
        d.units = ins.stock->units;
        d.after_refusal = false;  // its own take decides, not this connection's last decrement
        d.note = ins.ignore ? "claim by INSERT IGNORE ... SELECT from the stock row: its own take, then the row"
                            : "claim by INSERT ... SELECT from the stock row: its own take, then the row";
    }
    if (ins.rule->decremented_by_trigger) {
        // The trigger takes the unit when the row goes in. Only a one-row plain INSERT is read: its
        // affected rows are the rows the trigger fired for, and its failure undoes the trigger's change.
        // IGNORE (a skipped row after a BEFORE trigger), REPLACE, ON DUPLICATE KEY UPDATE and several rows
        // get the rule's unmodeled policy, as any write of a table whose trigger writes the stock.
        if (ins.rows.size() > 1 || ins.ignore || ins.replace || ins.on_duplicate_update)
            return unmodeled_decision(nullptr, ins.rule,
                                      "a claim whose stock the claim table's trigger decrements "
                                      "(decremented_by_trigger) in a shape other than a one-row plain INSERT",
                                      "trigger");
        d.by_trigger = true;
        d.after_refusal = false;  // the trigger's own take decides, not this connection's last decrement
        d.units = ins.stock->units;
        d.note =
            "claim insert decremented by the claim table's trigger: the insert is the take, checked by "
            "the counter read before (locked) and after it";
    }
    if (ins.rows.size() > 1) {
        if (!decide_claim_rows(d, ins, values, memory))
            return unmodeled_decision(nullptr, ins.rule,
                                      ins.ignore ? "an INSERT IGNORE of several claim rows for different stock keys "
                                                   "(which rows the server skipped is not known) or whose key "
                                                   "values are not known"
                                                 : "a claim insert of several rows whose key values are not known",
                                      ins.ignore ? "multi_row_ignore" : "unknown_key");
        return d;
    }
    d.redis_key = redis_key_of(ins, d.idempotency, d.schema);
    return d;
}

}  // namespace

std::optional<resolved_value> resolve_literal(const match::value_ref& v) {
    if (v.type != match::value_ref::kind::literal) return std::nullopt;
    const auto& lit = v.decoded;
    if (lit.kind == rules::sql::literal_kind::null) return std::nullopt;
    resolved_value out;
    out.integer = lit.integer;
    out.canonical = lit.integer ? std::to_string(*lit.integer) : lit.bytes;
    if (!lit.integer && lit.kind == rules::sql::literal_kind::string) {
        // '7' and 7 name the same key (MySQL compares a string to a number as a number).
        if (auto n = rules::sql::canonical_number(lit.bytes)) {
            out.canonical = *n;
            try {
                std::size_t used = 0;
                auto i = std::stoll(*n, &used);
                if (used == n->size()) out.integer = i;
            } catch (...) {
            }
        }
    }
    return out;
}

std::optional<read_claim_row> claim_row_of(const decision& d, std::span<const std::optional<std::string>> values) {
    if (d.stock == nullptr || d.claim == nullptr) return std::nullopt;
    const std::size_t key_size = d.stock->key_columns.size();
    if (values.size() != key_size + d.claim->idempotency_columns.size()) return std::nullopt;
    read_claim_row out;
    key_tuple idempotency;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!values[i]) return std::nullopt;  // NULL names no stock row (and no claim)
        // A value as the row holds it, read as a string literal would be: '7' is the number 7.
        match::value_ref v;
        v.type = match::value_ref::kind::literal;
        v.decoded.kind = rules::sql::literal_kind::string;
        v.decoded.bytes = *values[i];
        auto r = resolve_literal(v);
        if (!r) return std::nullopt;
        if (i < key_size) {
            match::key_literal k;
            k.integer = r->integer.has_value() && *values[i] == std::to_string(*r->integer);
            k.value = k.integer ? std::to_string(*r->integer) : *values[i];
            out.key_literals.push_back(std::move(k));
            out.key.push_back(std::move(r->canonical));
        } else {
            idempotency.push_back(std::move(r->canonical));
        }
    }
    canonicalize_key(out.key, *d.stock);
    if (!d.schema.empty()) out.key.push_back(d.schema);
    if (d.claim->redis) out.redis_key = redis_key_of(*d.claim, idempotency, d.schema);
    return out;
}

resolved_value resolve_double(double v) {
    resolved_value out;
    if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.0e15) {
        out.integer = static_cast<std::int64_t>(v);
        out.canonical = std::to_string(*out.integer);
        return out;
    }
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out.canonical = ec == std::errc{} ? std::string(buf, end) : std::string("nan");
    if (auto n = rules::sql::canonical_number(out.canonical)) out.canonical = *n;
    return out;
}

namespace {

// The statement's first word is one that writes a table (what a trusted user's restock is): an
// unmodeled fact of a SELECT with a join names the stock table too, but writes nothing.
bool writes_by_first_word(const rules::sql::parsed_statement& st) {
    if (st.tokens.empty()) return false;
    const auto first = st.text(0);
    for (std::string_view w : {"UPDATE", "INSERT", "REPLACE", "DELETE", "LOAD"})
        if (rules::sql::iequals(first, w)) return true;
    return false;
}

}  // namespace

decision decide_trusted(const rules::sql::parsed_statement& st, const match::match_result& facts,
                        const match::rule_index& index, const value_resolver& values, const session_memory& memory) {
    decision d;
    if (!writes_by_first_word(st)) return d;
    d.note = "a trusted user's write of a stock table: forwarded unchanged";
    const auto pin = [&](const rules::stock_rule* rule, const match::small_vector<match::value_ref, 2>& key,
                         bool full_key, std::string_view schema) {
        d.stock = rule;
        if (!full_key) return;
        if (auto k = resolve_key(key, values)) {
            canonicalize_key(*k, *rule);
            d.key = std::move(*k);
            scope_key(d, schema, rule->table, memory);
        }
    };
    for (const auto& f : facts.facts) {
        if (const auto* w = std::get_if<match::counter_write>(&f)) {
            pin(w->rule, w->key, w->full_key, w->table.schema);
        } else if (const auto* c = std::get_if<match::counter_change>(&f)) {
            pin(c->rule, c->key, c->full_key, c->table.schema);
        } else if (const auto* u = std::get_if<match::unmodeled>(&f); u && u->stock && !u->claim) {
            d.stock = u->stock;  // a DELETE, REPLACE, LOAD DATA: no key the engine reads
        }
        if (d.stock) break;
    }
    if (!d.stock) {
        // Another column set, a row inserted: no fact, but the stock table is written all the same.
        match::match_context ctx;
        if (!memory.database.empty()) ctx.current_database = memory.database;
        d.stock = match::stock_written(st, index, ctx);
    }
    d.trusted_write = d.stock != nullptr;
    return d;
}

std::string_view verdict_name(verdict v) {
    switch (v) {
    case verdict::forward: return "forward";
    case verdict::remember_read: return "remember_read";
    case verdict::take: return "take";
    case verdict::track_decrement: return "track_decrement";
    case verdict::restock: return "restock";
    case verdict::exhausted: return "exhausted";
    case verdict::claim: return "claim";
    case verdict::rollback_instead: return "rollback_instead";
    case verdict::refuse: return "refuse";
    case verdict::cancel: return "cancel";
    }
    return "unknown";
}

decision decide(const match::match_result& facts, const rules::rule_set& rules, const value_resolver& values,
                session_memory& memory) {
    for (const auto& f : facts.facts) {
        decision d = std::visit(
            overloaded{
                [&](const match::counter_read& r) {
                    decision d;
                    d.stock = r.rule;
                    if (auto key = resolve_key(r.key, values)) {
                        canonicalize_key(*key, *r.rule);
                        d.what = verdict::remember_read;
                        d.locking_read = r.lock != rules::sql::lock_clause::none;
                        d.key = std::move(*key);
                        scope_key(d, r.table.schema, r.rule->table, memory);
                        d.note = "read of the counter";
                    }
                    return d;
                },
                [&](const match::counter_write& w) { return decide_write(w, values, memory); },
                [&](const match::counter_change& c) { return decide_change(c, values, memory); },
                [&](const match::claim_insert& c) { return decide_claim(c, values, memory); },
                [&](const match::transaction_boundary& t) {
                    decision d;
                    using ev = match::transaction_event;
                    if (t.event != ev::commit && t.event != ev::xa_prepare && t.event != ev::xa_commit) return d;
                    if (!memory.transaction_poisoned) {
                        memory.for_each([&](const std::string& rule, const key_tuple&, stock_entry& e) {
                            if (e.claims_ahead > 0 && e.strict_ahead && !memory.transaction_poisoned) {
                                memory.transaction_poisoned = true;
                                memory.poisoned_rule = rule;
                                d.no_decrement = true;  // not refused: it never came
                            }
                        });
                    }
                    if (memory.transaction_poisoned) {
                        d.what = verdict::rollback_instead;
                        d.stock = rules.find_stock(memory.poisoned_rule);
                        d.note = "commit of a claim without stock (its decrement was refused or never came)";
                        if (t.event != ev::commit) {
                            // XA: a plain ROLLBACK cannot end it; the PREPARE or COMMIT is refused and
                            // the app's XA ROLLBACK ends it.
                            d.what = verdict::refuse;
                            d.unmodeled = true;
                            d.reason = "xa_claim_without_stock";
                            d.note = "XA PREPARE/COMMIT of a claim without stock (its decrement was refused or never came)";
                        }
                    }
                    return d;
                },
                [&](const match::session_change&) { return decision{}; },
                [&](const match::unmodeled& u) { return unmodeled_decision(u.stock, u.claim, u.reason, u.code); },
                [&](const match::claim_delete& c) { return decide_cancel(c, values, memory); },
            },
            f);
        d.fact = &f;
        d.observe = mode_of(rules, d.stock, d.claim) == rules::mode::observe && d.what != verdict::forward &&
                    d.what != verdict::remember_read;
        if (d.what == verdict::exhausted && !d.observe && d.stock) {
            memory.entry(d.stock->name, d.key).refused = false;  // this refusal is answered now
        }
        if ((d.what == verdict::take || d.what == verdict::track_decrement) && d.stock)
            d.holds_row_lock = memory.holds_row_lock(d.stock->name, d.key);
        if (d.what != verdict::forward || d.unmodeled) return d;
    }
    return {};
}

namespace {

bool is_ident_byte(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
           (static_cast<unsigned char>(c) & 0x80) != 0;
}

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 32);
        if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 32);
        if (x != y) return false;
    }
    return true;
}

// `name` as a whole identifier anywhere in the text (comments and strings included: a false
// "mentions" only flushes early, which is always safe).
bool mentions(std::string_view sql, std::string_view name) {
    if (name.empty() || sql.size() < name.size()) return false;
    for (std::size_t i = 0; i + name.size() <= sql.size(); ++i) {
        if (i > 0 && is_ident_byte(sql[i - 1])) continue;
        if (iequal(sql.substr(i, name.size()), name) && (i + name.size() == sql.size() || !is_ident_byte(sql[i + name.size()])))
            return true;
    }
    return false;
}

// The first word of a statement, after whitespace, comments and opening parentheses.
std::string_view first_word(std::string_view sql) {
    std::size_t i = 0;
    for (;;) {
        while (i < sql.size() && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r' || sql[i] == '('))
            ++i;
        if (sql.substr(i, 2) == "/*" && sql.substr(i, 3) != "/*!") {
            const auto end = sql.find("*/", i + 2);
            if (end == std::string_view::npos) return {};
            i = end + 2;
            continue;
        }
        if (sql.substr(i, 1) == "#" || sql.substr(i, 3) == "-- ") {
            const auto end = sql.find('\n', i);
            if (end == std::string_view::npos) return {};
            i = end + 1;
            continue;
        }
        break;
    }
    std::size_t j = i;
    while (j < sql.size() && is_ident_byte(sql[j])) ++j;
    return sql.substr(i, j - i);
}

}  // namespace

bool may_commit_implicitly(std::string_view sql) {
    // Statements that never end a transaction by themselves (COMMIT, BEGIN and SET autocommit are
    // recognised as transaction boundaries; ROLLBACK drops the deferred takes unsent).
    static constexpr std::string_view never[] = {
        "SELECT", "INSERT",  "UPDATE", "DELETE", "REPLACE",  "WITH",    "SET",  "SHOW",   "DESCRIBE", "DESC",
        "EXPLAIN", "DO",     "VALUES", "TABLE",  "HANDLER",  "HELP",    "USE",  "ROLLBACK", "SAVEPOINT", "RELEASE",
    };
    const auto word = first_word(sql);
    if (word.empty()) return true;
    // Several statements in one query (CLIENT_MULTI_STATEMENTS): a later one may be COMMIT. A ';'
    // inside a string literal only sends the takes early.
    if (const auto semicolon = sql.find(';'); semicolon != std::string_view::npos &&
                                              sql.find_first_not_of(" \t\r\n;", semicolon) != std::string_view::npos)
        return true;
    // SET autocommit in a spelling the recogniser did not take for one.
    if (iequal(word, "SET") && mentions(sql, "autocommit")) return true;
    for (auto w : never)
        if (iequal(word, w)) return false;
    return true;
}

void plan_deferred(decision& d, const match::match_result& facts, std::string_view sql, const session_memory& memory) {
    if (memory.deferred.empty()) return;
    bool flush_all = false;
    for (const auto& f : facts.facts) {
        if (const auto* t = std::get_if<match::transaction_boundary>(&f)) {
            using ev = match::transaction_event;
            switch (t->event) {
            case ev::rollback:
            case ev::xa_rollback: return;  // dropped unsent when the transaction ends
            case ev::xa_start:
            case ev::xa_prepare:
            case ev::xa_commit: d.deferred = deferred_step::commit; return;
            case ev::autocommit_off: break;
            case ev::savepoint:
            case ev::rollback_to_savepoint:
            case ev::release_savepoint: flush_all = true; break;  // the server's savepoints see them in order
            case ev::begin:
            case ev::commit:
            case ev::autocommit_on:
            case ev::autocommit_unknown: d.deferred = deferred_step::commit; return;
            }
        } else if (const auto* c = std::get_if<match::session_change>(&f);
                   c && c->setting == match::session_setting::database) {
            flush_all = true;  // the deferred takes name tables of the current database
        }
    }
    if (may_commit_implicitly(sql)) {
        d.deferred = deferred_step::commit;
        return;
    }
    if (mentions(sql, "ROW_COUNT")) flush_all = true;  // the app asks about its own write
    for (const auto& t : memory.deferred) {
        if (!flush_all && !mentions(sql, t.table)) continue;
        if (std::find(d.flush_rules.begin(), d.flush_rules.end(), t.rule) == d.flush_rules.end())
            d.flush_rules.push_back(t.rule);
    }
    if (!d.flush_rules.empty()) d.deferred = deferred_step::flush;
}

}  // namespace claimguard::engine
