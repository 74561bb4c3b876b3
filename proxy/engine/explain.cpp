// The explain dry run: decide(), then claim_operation driven by scripted replies.
#include "explain.hpp"
#include "read_cache.hpp"

#include "claim_operation.hpp"
#include "decide.hpp"

namespace claimguard::engine {

namespace match = rules::match;

namespace {

// Placeholders are unknown in a dry run: each is taken as bound to 1.
std::optional<resolved_value> dry_run_value(const match::value_ref& v) {
    if (v.type == match::value_ref::kind::placeholder) return resolved_value{"1", 1};
    return resolve_literal(v);
}

std::string describe_action(const action& a, std::string_view what_client_sent, const decision& d) {
    switch (a.type) {
    case action::kind::relay: return "forward the statement unchanged";
    case action::kind::send_statement: return "send the statement as written: " + std::string(what_client_sent);
    case action::kind::send_sql: return "send: " + match::describe_sql(a.sql);
    case action::kind::redis_acquire:
        return "redis: SET " + d.redis_key + " <token> NX PX " + std::to_string(a.ttl.count()) +
               " (already held: answer as a duplicate; Redis down: the database decides)";
    case action::kind::reply_client: return "answer with the server's reply";
    case action::kind::answer:
        if (a.answer.type == rules::answer::kind::ok)
            return "answer OK (" + std::to_string(a.ok_rows) + (a.ok_rows == 1 ? " row" : " rows") + " affected)";
        return "answer " + match::describe_answer(a.answer);
    }
    return "?";
}

reply_summary ok_rows(std::uint64_t n) { return reply_summary::ok_rows(n); }

// One outcome: runs a fresh operation, feeding `replies` (and Redis "acquired") in order, and
// prints every action it takes under `label`. False when the operation wanted a reply the script
// does not have (explain's own bug: it says so rather than inventing one).
bool run_outcome(std::ostream& out, std::string_view label, const decision& d, const rules::sql::parsed_statement& st,
                 std::vector<reply_summary> replies, std::int64_t seeded_take, std::string_view sql) {
    session_memory memory;
    take_ledger ledger;
    if (seeded_take > 0 && d.stock) ledger.add_take(d.stock->name, d.key, seeded_take, 1);
    claim_operation op(d, st, memory, ledger, operation_context{1, reply_summary::autocommit_status, true});
    out << label << ":\n";
    action a = op.start();
    std::size_t next = 0;
    constexpr int max_steps = 16;
    for (int step = 0; step < max_steps; ++step) {
        out << "  " << describe_action(a, sql, d) << "\n";
        if (a.final()) return true;
        if (a.type == action::kind::redis_acquire) {
            a = op.on_redis(redis_reply::acquired);
            continue;
        }
        if (next == replies.size()) {
            out << "  error: claimguard explain has no scripted reply for this step (a bug in explain; please report it)\n";
            return false;
        }
        a = op.on_reply(replies[next++]);
    }
    out << "  error: the operation did not end within " << max_steps << " steps (a bug in explain; please report it)\n";
    return false;
}


// defer_decrement: the same take inside a transaction, and what its COMMIT then does.
void explain_deferred(std::ostream& out, const decision& d, const rules::sql::parsed_statement& st,
                      std::string_view sql) {
    constexpr std::uint16_t in_transaction = 0x0003;  // SERVER_STATUS_IN_TRANS | SERVER_STATUS_AUTOCOMMIT
    session_memory memory;
    take_ledger ledger;
    claim_operation op(d, st, memory, ledger, operation_context{1, in_transaction, true});
    const action a = op.start();
    out << "in a transaction (defer_decrement):\n  " << describe_action(a, sql, d) << "\n";
    if (memory.deferred.empty()) {
        out << "  (not deferred: sent in place as above)\n";
        return;
    }
    out << "  kept, sent just before COMMIT (or before the transaction's next statement on "
        << memory.deferred.front().table << "): " << memory.deferred.front().sql << "\n"
        << "  at COMMIT, 1 row: the COMMIT goes through; 0 rows: ROLLBACK, then answer "
        << match::describe_answer(d.stock->exhausted) << "\n"
        << "  at ROLLBACK: dropped, never sent\n";
}

}  // namespace

bool explain(const match::rule_index& rules, std::string_view sql, const match::explain_options& options,
             std::ostream& out) {
    const auto described = match::describe_statement(rules, sql, options, out);
    const auto& st = described.statement;
    if (st.placeholder_count > 0) out << "note: each ? is taken as bound to 1 for this dry run\n";
    session_memory memory;
    decision d = decide(described.facts, rules.rules(), dry_run_value, memory);
    if (options.read_value && d.stock && !d.key.empty() && st.placeholder_count == 0) {
        // What the app read before, on this connection: a cross-check of absolute writes only.
        memory.note_read(memory.entry(d.stock->name, d.key), *options.read_value, false);
        memory.next_command();  // the write comes right after the read
        d = decide(described.facts, rules.rules(), dry_run_value, memory);
    }
    out << "decision: " << verdict_name(d.what);
    if (!d.note.empty()) out << " (" << d.note << ")";
    if (d.what == verdict::take || d.what == verdict::track_decrement || d.what == verdict::restock)
        out << "; " << d.units << (d.units == 1 ? " unit" : " units");
    out << "\n";
    if (d.unmodeled)
        out << "unmodeled: " << d.reason << "; policy " << (d.what == verdict::refuse ? "refuse" : "forward") << "\n";
    if (d.app_meant)
        out << "cross-check: after reading " << *options.read_value << " the write means " << *d.app_meant
            << " units; the rule takes " << d.units << " (counted in claimguard_take_differs_total)\n";
    if (d.observe) {
        out << "mode: observe (claimguard logs that it would " << verdict_name(d.what)
            << "; the statement is forwarded unchanged)\n";
        return true;
    }
    if (d.stock || d.claim) out << "mode: enforce\n";
    if (d.what == verdict::remember_read && d.stock && d.stock->read_cache) {
        read_situation situation;
        situation.observe = rules.rules().effective_mode(*d.stock) == rules::mode::observe;
        const auto why = read_cache_bypass(std::get<match::counter_read>(*d.fact), d.key, memory, situation);
        if (why.empty())
            out << "read cache: answered by this sidecar while its copy is at most " << d.stock->read_cache->count()
                << "ms old (in autocommit, or a transaction that has not changed this key)\n";
        else
            out << "read cache: sent to the server: " << why << "\n";
    }
    bool ok = true;
    switch (d.what) {
    case verdict::take:
    case verdict::track_decrement:
        if (d.what == verdict::take && d.stock && d.stock->defer_decrement) out << "in autocommit:\n";
        ok = ok & run_outcome(out, "when 1 row changes", d, st, {ok_rows(1)}, 0, sql);
        ok = ok & run_outcome(out, "when 0 rows change", d, st,
                    {ok_rows(0), reply_summary::counter_row(d.stock ? d.stock->floor : 0)}, 0, sql);
        if (d.what == verdict::take && d.stock && d.stock->defer_decrement) explain_deferred(out, d, st, sql);
        break;
    case verdict::claim: {
        const auto& ins = std::get<match::claim_insert>(*d.fact);
        ok = ok & run_outcome(out, "when a take of this sidecar backs it and the row goes in", d, st, {ok_rows(1)}, 1, sql);
        ok = ok & run_outcome(out, "when the database says duplicate", d, st,
                    {reply_summary::error(1062), ok_rows(1), ok_rows(1)}, 1, sql);
        if (ins.ignore)
            ok = ok & run_outcome(out, "when INSERT IGNORE inserts nothing", d, st, {ok_rows(0), ok_rows(1)}, 1, sql);
        ok = ok & run_outcome(out, "with no take of this sidecar behind it (autocommit)", d, st, {ok_rows(1)}, 0, sql);
        break;
    }
    default:
        ok = ok & run_outcome(out, "then", d, st, {ok_rows(1)}, 0, sql);
        break;
    }
    return ok;
}

}  // namespace claimguard::engine
