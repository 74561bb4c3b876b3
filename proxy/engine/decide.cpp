// The claim engine's decisions and memory updates.
#include "decide.hpp"

#include <type_traits>

#include "rules/model/key_template.hpp"
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

rules::mode mode_of(const rules::rule_set& rules, const rules::stock_rule* s, const rules::claim_rule* c) {
    if (c) return rules.effective_mode(*c);
    if (s) return rules.effective_mode(*s);
    return rules.default_mode;
}

decision decide_write(const match::counter_write& w, const value_resolver& values, session_memory& memory) {
    decision d;
    d.stock = w.rule;
    if (!w.full_key) {
        d.untracked = true;
        d.note = "write without an equality on every key column";
        return d;
    }
    if (w.expected) {
        d.note = "already a compare-and-set (WHERE counter = expected)";
        return d;
    }
    auto key = resolve_key(w.key, values);
    auto value = values(w.value);
    if (!key || !value || !value->integer) {
        d.untracked = true;
        d.note = "key or new value not a known number";
        return d;
    }
    d.key = std::move(*key);
    const stock_entry* entry = memory.find(w.rule->name, d.key);
    if (!entry || !entry->last_read) {
        d.untracked = true;
        d.note = "absolute write with no prior read in this session";
        return d;
    }
    if (*value->integer >= *entry->last_read) {
        d.what = verdict::restock;
        d.units = *value->integer;
        d.note = "write that does not lower the counter";
        return d;
    }
    d.what = verdict::decrement;
    d.units = *entry->last_read - *value->integer;
    d.note = "absolute write after a read: conditional decrement";
    return d;
}

decision decide_change(const match::counter_change& c, const value_resolver& values) {
    decision d;
    d.stock = c.rule;
    if (!c.full_key) {
        d.untracked = true;
        d.note = "relative change without an equality on every key column";
        return d;
    }
    auto key = resolve_key(c.key, values);
    if (!key) {
        d.untracked = true;
        d.note = "key not known";
        return d;
    }
    d.key = std::move(*key);
    std::optional<std::int64_t> delta = c.delta;
    if (!delta) {
        auto amount = values(c.amount);
        if (!amount || !amount->integer) {
            d.untracked = true;
            d.note = "change amount not a known number";
            return d;
        }
        delta = c.sign == '-' ? -*amount->integer : *amount->integer;
        if (c.amount.type == match::value_ref::kind::placeholder) d.amount_placeholder = c.amount.placeholder_index;
    }
    if (*delta >= 0) {
        d.what = verdict::forward;  // an increment: nothing can go below the floor
        d.note = "increment";
        return d;
    }
    d.units = -*delta;
    if (c.guard == match::guard_state::sufficient) {
        d.what = verdict::track_decrement;
        d.note = "already guarded decrement";
        return d;
    }
    d.what = verdict::decrement;
    d.note = "unguarded decrement: guard added";
    return d;
}

decision decide_claim(const match::claim_insert& ins, const value_resolver& values, session_memory& memory) {
    decision d;
    d.claim = ins.rule;
    d.stock = ins.stock;
    if (!ins.stock || !ins.columns_known || ins.rows.size() != 1) {
        d.untracked = true;
        d.note = !ins.columns_known ? "claim insert without a column list"
                 : ins.rows.size() != 1 ? "multi-row claim insert" : "claim rule's stock rule unknown";
        return d;
    }
    const auto& row = ins.rows.front();
    auto key = resolve_key(row.stock_key, values);
    auto idempotency = resolve_key(row.idempotency, values);
    if (!key || !idempotency) {
        d.untracked = true;
        d.note = "claim key values not known";
        return d;
    }
    d.key = std::move(*key);
    d.idempotency = std::move(*idempotency);
    stock_entry* entry = nullptr;
    if (memory.find(ins.stock->name, d.key)) entry = &memory.entry(ins.stock->name, d.key);
    if (entry && entry->refused) {
        d.what = verdict::exhausted;
        d.note = "claim after this session's decrement was refused";
        return d;
    }
    if (ins.rule->strict == rules::strictness::require_decrement && (!entry || entry->units_taken <= 0)) {
        d.what = verdict::exhausted;
        d.note = "claim without a successful decrement (strict rule)";
        return d;
    }
    d.what = verdict::claim;
    d.note = "claim insert";
    if (ins.rule->redis) {
        auto parsed = rules::parse_key_template(ins.rule->redis->key_template);
        d.redis_key = rules::expand_key_template(parsed.parts, [&](const std::string& column) -> std::string {
            for (std::size_t i = 0; i < ins.rule->idempotency_columns.size(); ++i)
                if (rules::sql::identifier_equals(ins.rule->idempotency_columns[i], column)) return d.idempotency[i];
            return {};
        });
    }
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

std::string_view verdict_name(verdict v) {
    switch (v) {
    case verdict::forward: return "forward";
    case verdict::remember_read: return "remember_read";
    case verdict::decrement: return "decrement";
    case verdict::track_decrement: return "track_decrement";
    case verdict::restock: return "restock";
    case verdict::exhausted: return "exhausted";
    case verdict::claim: return "claim";
    case verdict::rollback_instead: return "rollback_instead";
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
                        d.what = verdict::remember_read;
                        d.key = std::move(*key);
                        d.note = "read of the counter";
                    }
                    return d;
                },
                [&](const match::counter_write& w) { return decide_write(w, values, memory); },
                [&](const match::counter_change& c) { return decide_change(c, values); },
                [&](const match::claim_insert& c) { return decide_claim(c, values, memory); },
                [&](const match::transaction_boundary& t) {
                    decision d;
                    if (t.event == match::transaction_event::commit && memory.transaction_poisoned) {
                        d.what = verdict::rollback_instead;
                        d.note = "commit of a claim whose decrement was refused";
                    }
                    return d;
                },
                [&](const match::session_change&) { return decision{}; },
                [&](const match::unmodeled& u) {
                    decision d;
                    d.stock = u.stock;
                    d.claim = u.claim;
                    d.untracked = true;
                    d.note = u.reason;
                    return d;
                },
            },
            f);
        d.fact = &f;
        d.observe = mode_of(rules, d.stock, d.claim) == rules::mode::observe &&
                    d.what != verdict::forward && d.what != verdict::remember_read;
        if (d.what == verdict::exhausted && !d.observe && d.stock) {
            memory.entry(d.stock->name, d.key).refused = false;  // this refusal is answered now
        }
        if (d.what != verdict::forward || d.untracked) return d;
    }
    return {};
}

void after_read(session_memory& memory, const decision& d, std::int64_t counter) {
    auto& e = memory.entry(d.stock->name, d.key);
    e.last_read = counter;
    e.refused = false;  // a new attempt starts with a read
}

void after_decrement(session_memory& memory, const decision& d, bool succeeded, bool in_transaction) {
    auto& e = memory.entry(d.stock->name, d.key);
    if (!succeeded) {
        e.refused = true;
        e.claim_awaits_decrement = false;  // that autocommit claim stays unbacked (counted when it went in)
        if (in_transaction && e.claims_ahead > 0) {
            memory.transaction_poisoned = true;
            memory.poisoned_rule = d.stock->name;
        }
        return;
    }
    e.refused = false;
    if (e.last_read) *e.last_read -= d.units;  // the app's own view: it wrote last_read - units
    std::int64_t units = d.units;
    // A claim inserted earlier in this transaction is now backed by this unit.
    std::int64_t backed = std::min(units, e.claims_ahead);
    e.claims_ahead -= backed;
    // An autocommit claim inserted before this decrement: the unit is that claim's, not one
    // left over for the session's next claim (which would then look backed).
    if (e.claim_awaits_decrement && units > backed) {
        e.claim_awaits_decrement = false;
        ++backed;
    }
    e.units_taken += units - backed;
}

void after_restock(session_memory& memory, const decision& d, bool succeeded) {
    if (!succeeded) return;
    auto& e = memory.entry(d.stock->name, d.key);
    e.last_read = d.units;
    e.refused = false;
}

bool claim_backed(const session_memory& memory, const decision& d) {
    const auto* e = d.stock ? memory.find(d.stock->name, d.key) : nullptr;
    return e && e->units_taken > 0;
}

std::int64_t after_claim(session_memory& memory, const decision& d, claim_outcome outcome, bool in_transaction) {
    auto& e = memory.entry(d.stock->name, d.key);
    if (e.units_taken > 0) {
        --e.units_taken;  // this claim consumed the unit, or the unit goes back
        return outcome == claim_outcome::inserted ? 0 : 1;
    }
    // No unit held: the app inserts before it decrements.
    if (outcome == claim_outcome::inserted) {
        if (in_transaction)
            ++e.claims_ahead;
        else
            e.claim_awaits_decrement = true;  // committed already; the next decrement is its unit
    }
    return 0;
}

void after_transaction_end(session_memory& memory) { memory.reset(); }

}  // namespace claimguard::engine
