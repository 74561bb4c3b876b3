// The explain dry run: decide(), then the statement operation run with scripted replies.
#include "explain.hpp"

#include <optional>
#include <string>
#include <vector>

#include "claim_operation.hpp"
#include "decide.hpp"
#include "read_cache.hpp"
#include "scripted_run.hpp"
#include "statement_operation.hpp"

namespace claimguard::engine {

namespace match = rules::match;

namespace {

// A dry run's outcomes are short; a longer one is explain's bug.
constexpr std::size_t max_steps = 16;

// Placeholders are unknown in a dry run: each is taken as bound to 1.
std::optional<resolved_value> dry_run_value(const match::value_ref& v) {
    if (v.type == match::value_ref::kind::placeholder) return resolved_value{"1", 1};
    return resolve_literal(v);
}

reply_summary ok_rows(std::uint64_t n) { return reply_summary::ok_rows(n); }

// What the proxy does for one step, as a DBA reads it. The Redis key's release or commit after a
// claim is not a line of its own: the acquire's line says what becomes of it.
std::optional<std::string> describe_step(const scripted_step& s, std::string_view what_client_sent, const decision& d) {
    using k = statement_action::kind;
    const auto& a = s.claim;
    switch (s.act.type) {
        case k::relay: return "forward the statement unchanged";
        case k::send_statement: return "send the statement as written: " + std::string(what_client_sent);
        case k::send_sql: return "send: " + match::describe_sql(a.sql);
        case k::redis_acquire:
            return "redis: SET " + (a.redis_key.empty() ? d.redis_key : a.redis_key) + " <token> NX PX " +
                   std::to_string(a.ttl.count()) +
                   " (already held: answer as a duplicate; Redis down: the database decides)";
        case k::reply_kept: return "answer with the server's reply";
        case k::answer:
            if (a.answer.type == rules::answer::kind::ok)
                return "answer OK (" + std::to_string(a.ok_rows) + (a.ok_rows == 1 ? " row" : " rows") + " affected)";
            return "answer " + match::describe_answer(a.answer);
        case k::redis_release:
        case k::redis_commit: return std::nullopt;
        case k::fail: return "fail the command (the operation did not ask for the input it got)";
        default: break;  // admission turns and the read cache: no gate or cache in a dry run
    }
    return std::string(action_name(s.act.type)) + " (not part of a dry run)";
}

// Redis answers every acquire "acquired" (its other answers are in the acquire's line); the
// database's replies come from the outcome's script.
std::optional<statement_input> dry_run_perform(const scripted_step& s, input_script& script) {
    if (s.act.type == statement_action::kind::redis_acquire)
        return statement_input::of_redis(redis_reply::acquired, "dry-run");
    return perform_from_script(s, script);
}

// The steps of a run, each on its line; then, if the run stopped short, explain's error line.
bool print_run(std::ostream& out, const scripted_run& run, std::string_view sql, const decision& d) {
    for (const auto& s : run.steps)
        if (auto line = describe_step(s, sql, d)) out << "  " << *line << "\n";
    if (run.finished()) return true;
    out << "  error: claimguard explain stopped short: " << run.failure() << " (a bug in explain; please report it)\n";
    return false;
}

// One outcome: a fresh statement operation (no admission gate, no read cache) run with `replies`
// in order, every action it takes printed under `label`. False when the operation wanted a reply
// the script does not have, or did not end (explain's own bug: it says so rather than inventing one).
bool run_outcome(std::ostream& out, std::string_view label, const decision& d, const rules::sql::parsed_statement& st,
                 std::vector<reply_summary> replies, std::int64_t seeded_take, std::string_view sql) {
    session_memory memory;
    take_ledger ledger;
    transaction_tracker transaction;
    admission_slots slots;
    if (seeded_take > 0 && d.stock && d.rows.empty()) ledger.add_take(d.stock->name, d.key, seeded_take, 1);
    if (seeded_take > 0 && d.stock)  // a claim of several rows: a take for each row
        for (const auto& row : d.rows) ledger.add_take(d.stock->name, row.key, seeded_take, 1);
    const statement_context ctx{{1, reply_summary::autocommit_status, true}};
    statement_operation op(d, st, memory, ledger, transaction, slots, ctx);
    std::vector<statement_input> inputs;
    for (const auto& r : replies) inputs.push_back(statement_input::of_reply(r));
    input_script script(std::move(inputs));
    out << label << ":\n";
    return print_run(out, run_scripted(op, script, dry_run_perform, max_steps), sql, d);
}

// defer_decrement: the same take inside a transaction, and what its COMMIT then does.
bool explain_deferred(std::ostream& out, const decision& d, const rules::sql::parsed_statement& st,
                      std::string_view sql) {
    constexpr std::uint16_t in_transaction = protocol::status::in_trans | protocol::status::autocommit;
    session_memory memory;
    take_ledger ledger;
    transaction_tracker transaction;
    admission_slots slots;
    const statement_context ctx{{1, in_transaction, true}};
    statement_operation op(d, st, memory, ledger, transaction, slots, ctx);
    // Kept for COMMIT, the take is answered at once; sent in place, one row changes.
    input_script script{statement_input::of_reply(reply_summary::ok_rows(1, in_transaction))};
    const auto run = run_scripted(op, script, dry_run_perform, max_steps);
    out << "in a transaction (defer_decrement):\n";
    if (!run.finished()) return print_run(out, run, sql, d);
    if (auto line = describe_step(run.steps.front(), sql, d)) out << "  " << *line << "\n";
    if (memory.deferred.empty()) {
        out << "  (not deferred: sent in place as above)\n";
        return true;
    }
    out << "  kept, sent just before COMMIT (or before the transaction's next statement on "
        << memory.deferred.front().table << "): " << memory.deferred.front().sql << "\n"
        << "  at COMMIT, 1 row: the COMMIT goes through; 0 rows: ROLLBACK, then answer "
        << match::describe_answer(d.stock->exhausted) << "\n"
        << "  at ROLLBACK: dropped, never sent\n";
    return true;
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
    if (d.stock && d.stock->admission && (d.what == verdict::take || d.what == verdict::track_decrement)) {
        const auto& a = *d.stock->admission;
        out << "admission: at most " << a.max_in_flight << " decrement(s) of this key in flight on this sidecar; "
            << "the rest wait in line (at most " << a.max_queue << ", each at most " << a.queue_timeout.count()
            << "ms, then ERR 1205)\n";
    }
    if (d.stock && d.stock->group_update && d.what == verdict::take) {
        const auto& g = *d.stock->group_update;
        out << "group_update: in autocommit, up to " << g.max_batch << " takes of this key queued on this sidecar go "
            << "as one UPDATE of their summed units (split until each is decided); each app answered after it "
            << "committed\n";
    }
    if (d.stock && d.stock->reserve && d.what == verdict::take) {
        const auto& r = *d.stock->reserve;
        out << "reserve: served from this sidecar's reserved units of the key (taken from the row in blocks of up "
            << "to " << r.block << " on the sidecar's own connection): answered OK (1 row) at once, never sent, no "
            << "row lock held; in a transaction the unit is consumed at COMMIT and goes back to the block at "
            << "ROLLBACK, in autocommit it is consumed at once; unused units go back to the row after "
            << r.idle.count() << "ms idle; the row and the block empty: answer "
            << match::describe_answer(d.stock->exhausted) << "\n";
    }
    if (d.what == verdict::remember_read && d.stock && d.stock->read_cache) {
        read_situation situation;
        situation.observe = rules.rules().effective_mode(*d.stock) == rules::mode::observe;
        const auto why = read_cache_bypass(std::get<match::counter_read>(*d.fact), d.key, memory, situation);
        if (why.empty()) {
            out << "read cache: answered by this sidecar while its copy is at most " << d.stock->read_cache->count()
                << "ms old";
            if (d.stock->read_cache_sold_out)
                out << " (" << d.stock->read_cache_sold_out->count() << "ms once the key is sold out)";
            out << " (in autocommit, or a transaction that has not changed this key)\n";
        } else
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
        if (d.what == verdict::take && d.stock && d.stock->defer_decrement) ok = ok & explain_deferred(out, d, st, sql);
        break;
    case verdict::claim: {
        const auto& ins = std::get<match::claim_insert>(*d.fact);
        if (!d.rows.empty()) {
            // Several rows: each row's take; then all rows in, or the statement failing whole (a give-back
            // per stock key), or IGNORE inserting none of them.
            const std::vector<reply_summary> give_backs(d.rows.size(), ok_rows(1));
            auto after = [&](reply_summary first) {
                std::vector<reply_summary> r{first};
                r.insert(r.end(), give_backs.begin(), give_backs.end());
                return r;
            };
            ok = ok & run_outcome(out, "when a take of this sidecar backs each row and the rows go in", d, st,
                                  {ok_rows(d.rows.size())}, 1, sql);
            ok = ok &
                 run_outcome(out, "when the database says duplicate", d, st, after(reply_summary::error(1062)), 1, sql);
            if (ins.ignore)
                ok = ok & run_outcome(out, "when INSERT IGNORE inserts nothing", d, st, after(ok_rows(0)), 1, sql);
            ok = ok & run_outcome(out, "with no take of this sidecar behind them (autocommit)", d, st,
                                  {ok_rows(d.rows.size())}, 0, sql);
            break;
        }
        if (d.by_trigger) {
            // The claim table's trigger takes the unit: BEGIN, the counter before (locked), the INSERT, the
            // counter after, then COMMIT or ROLLBACK.
            constexpr std::uint16_t in_trans = protocol::status::in_trans | protocol::status::autocommit;
            const std::int64_t before = (d.stock ? d.stock->floor : 0) + d.units;
            const auto trans_ok = reply_summary::ok_rows(0, in_trans);
            const auto counter = [&](std::int64_t c) { return reply_summary::counter_row(c, in_trans); };
            ok = ok & run_outcome(out, "when the trigger takes the units", d, st,
                                  {trans_ok, counter(before), reply_summary::ok_rows(1, in_trans),
                                   counter(before - d.units), ok_rows(0)},
                                  0, sql);
            ok = ok & run_outcome(
                          out, "when the row goes in and the trigger takes nothing", d, st,
                          {trans_ok, counter(before), reply_summary::ok_rows(1, in_trans), counter(before), ok_rows(0)},
                          0, sql);
            ok =
                ok & run_outcome(out, "when the trigger refuses the row (its SIGNAL)", d, st,
                                 {trans_ok, counter(before), reply_summary::error(1644, in_trans), ok_rows(0)}, 0, sql);
            break;
        }
        if (d.own_take) {
            // INSERT ... SELECT from the stock row: the claim's own take, then the row as INSERT ... VALUES.
            ok = ok & run_outcome(out, "when its take takes the unit and the row goes in", d, st,
                                  {ok_rows(1), ok_rows(1)}, 0, sql);
            ok = ok & run_outcome(out, "when its take finds the floor", d, st, {ok_rows(0)}, 0, sql);
            ok = ok & run_outcome(out, "when the database says duplicate", d, st,
                                  {ok_rows(1), reply_summary::error(1062), ok_rows(1)}, 0, sql);
            break;
        }
        ok = ok & run_outcome(out, "when a take of this sidecar backs it and the row goes in", d, st, {ok_rows(1)}, 1, sql);
        ok = ok & run_outcome(out, "when the database says duplicate", d, st,
                    {reply_summary::error(1062), ok_rows(1), ok_rows(1)}, 1, sql);
        if (ins.ignore)
            ok = ok & run_outcome(out, "when INSERT IGNORE inserts nothing", d, st, {ok_rows(0), ok_rows(1)}, 1, sql);
        ok = ok & run_outcome(out, "with no take of this sidecar behind it (autocommit)", d, st, {ok_rows(1)}, 0, sql);
        break;
    }
    case verdict::cancel: {
        constexpr std::uint16_t in_trans = protocol::status::in_trans | protocol::status::autocommit;
        if (d.read_claim_rows) {  // BEGIN, the read of the rows (one, every value 1), the DELETE, the give-back, COMMIT
            const std::vector<std::optional<std::string>> row(
                d.stock->key_columns.size() + d.claim->idempotency_columns.size(), std::string("1"));
            ok = ok & run_outcome(out, "when the read finds 1 row and it is deleted", d, st,
                                  {reply_summary::ok_rows(0, in_trans), reply_summary::result_rows({row}, in_trans),
                                   reply_summary::ok_rows(1, in_trans), reply_summary::ok_rows(1, in_trans), ok_rows(0)},
                                  0, sql);
        } else if (d.returns_stock)  // BEGIN, the DELETE, the give-back, COMMIT
            ok = ok & run_outcome(out, "when 1 row is deleted", d, st,
                                  {reply_summary::ok_rows(0, in_trans), reply_summary::ok_rows(1, in_trans),
                                   reply_summary::ok_rows(1, in_trans), ok_rows(0)},
                                  0, sql);
        else
            ok = ok & run_outcome(out, "when 1 row is deleted", d, st, {ok_rows(1)}, 0, sql);
        break;
    }
    default:
        ok = ok & run_outcome(out, "then", d, st, {ok_rows(1)}, 0, sql);
        break;
    }
    return ok;
}

}  // namespace claimguard::engine
