// Test harness for the claim engine: rules from rules/examples/coupon.yaml (and variants),
// real statements through the parser and matcher, and a session's memory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/engine/bulk_claims.hpp"
#include "proxy/engine/claim_operation.hpp"
#include "proxy/engine/decide.hpp"
#include "proxy/engine/key_collation.hpp"
#include "proxy/engine/memory.hpp"
#include "proxy/engine/reserve_pool.hpp"
#include "proxy/engine/scripted_run.hpp"
#include "proxy/engine/statement_operation.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/parser.hpp"

namespace claimguard::engine::test {

namespace match = rules::match;

enum class variant_id {
    coupon,
    observe,
    strict,
    floor5,
    no_version,
    lenient,
    forward_unmodeled,
    two_units,
    defer,
    evidence_read,
    keys_ci,       // the schema check found campaign_id under utf8mb4_general_ci (ci_pad)
    keys_bin,      // ... under utf8mb4_bin (bytes_pad)
    return_stock,  // coupon_order's cancellations give their units back (on_cancel: return_stock)
    by_trigger,    // coupon_order's trigger decrements coupon_stock (decremented_by_trigger: true)
    reserve,       // coupon_stock without its version column, reserve: {block: 10, idle: 1s}
    count_
};

inline const char* variant_name(variant_id v) {
    switch (v) {
    case variant_id::coupon: return "coupon";
    case variant_id::observe: return "observe";
    case variant_id::strict: return "strict";
    case variant_id::floor5: return "floor5";
    case variant_id::no_version: return "no_version";
    case variant_id::lenient: return "lenient";
    case variant_id::forward_unmodeled: return "forward_unmodeled";
    case variant_id::two_units: return "two_units";
    case variant_id::defer: return "defer";
    case variant_id::evidence_read: return "evidence_read";
    case variant_id::keys_ci: return "keys_ci";
    case variant_id::keys_bin: return "keys_bin";
    case variant_id::return_stock: return "return_stock";
    case variant_id::by_trigger: return "by_trigger";
    case variant_id::reserve: return "reserve";
    case variant_id::count_: break;
    }
    return "?";
}

// The rules of one variant; `error` says why it could not be built.
struct rules_env {
    std::string error;
    std::optional<rules::rule_set> rules;
    std::unique_ptr<match::rule_index> index;  // views `rules`
};

inline std::string read_coupon_yaml() {
    std::ifstream in(CLAIMGUARD_COUPON_RULES);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// Replaces the one occurrence of `from`; false when it is not in the text.
inline bool replace_once(std::string& text, std::string_view from, std::string_view to) {
    const auto pos = text.find(from);
    if (pos == std::string::npos || text.find(from, pos + 1) != std::string::npos) return false;
    text.replace(pos, from.size(), to);
    return true;
}

// A rules file's text, loaded and indexed (`error` says why not).
inline std::unique_ptr<rules_env> env_of_text(const std::string& text) {
    auto env = std::make_unique<rules_env>();
    auto loaded = rules::load_rules({{"coupon.yaml", text}});
    if (!loaded.rules) {
        env->error = loaded.errors.empty() ? "no rules" : rules::format_diagnostic(loaded.errors.front());
        return env;
    }
    env->rules = std::move(loaded.rules);
    env->index = std::make_unique<match::rule_index>(*env->rules);
    return env;
}

inline std::unique_ptr<rules_env> build_env(variant_id v) {
    auto env = std::make_unique<rules_env>();
    std::string text = read_coupon_yaml();
    if (text.empty()) {
        env->error = "cannot read " CLAIMGUARD_COUPON_RULES;
        return env;
    }
    bool ok = true;
    switch (v) {
    case variant_id::coupon: break;
    case variant_id::observe: ok = replace_once(text, "default_mode: enforce", "default_mode: observe"); break;
    case variant_id::strict:
        ok = true;  // the example is require_decrement already
        break;
    case variant_id::floor5: ok = replace_once(text, "floor: 0", "floor: 5"); break;
    case variant_id::lenient:
        ok = replace_once(text, "strictness: require_decrement", "strictness: after_refused");
        break;
    case variant_id::forward_unmodeled:
        ok = replace_once(text, "unmodeled: refuse             # writes", "unmodeled: forward             # writes") &&
             replace_once(text, "unmodeled: refuse             # shapes", "unmodeled: forward             # shapes");
        break;
    case variant_id::two_units: ok = replace_once(text, "units: 1 ", "units: 2 "); break;
    case variant_id::defer: ok = replace_once(text, "    units: 1 ", "    defer_decrement: true\n    units: 1 "); break;
    case variant_id::evidence_read: ok = replace_once(text, "    units: 1 ", "    amount_evidence: read\n    units: 1 "); break;
    case variant_id::no_version:
    case variant_id::reserve: {
        const auto pos = text.find("version_column:");
        ok = pos != std::string::npos;
        if (ok) text.erase(text.rfind('\n', pos) + 1, text.find('\n', pos) - text.rfind('\n', pos));
        if (ok && v == variant_id::reserve)
            ok = replace_once(text, "    units: 1 ", "    reserve: {block: 10, idle: 1s}\n    units: 1 ");
        break;
    }
    case variant_id::keys_ci:
    case variant_id::keys_bin: break;  // the rules file is the example's; the schema check adds the rest
    case variant_id::return_stock:
        ok = replace_once(text, "    strictness: require_decrement",
                          "    on_cancel: return_stock\n    strictness: require_decrement");
        break;
    case variant_id::by_trigger:
        ok = replace_once(text, "    strictness: require_decrement",
                          "    decremented_by_trigger: true\n    strictness: require_decrement");
        break;
    case variant_id::count_: ok = false; break;
    }
    if (!ok) {
        env->error = std::string("coupon.yaml changed: cannot make variant ") + variant_name(v);
        return env;
    }
    auto loaded = rules::load_rules({{"coupon.yaml", text}});
    if (!loaded.rules) {
        env->error = loaded.errors.empty() ? "no rules" : rules::format_diagnostic(loaded.errors.front());
        return env;
    }
    env->rules = std::move(loaded.rules);
    if (v == variant_id::keys_ci || v == variant_id::keys_bin) {
        // What the rules snapshot does with the schema check's finding (rules_snapshot, with_key_compare).
        const auto k = v == variant_id::keys_ci ? rules::key_comparison::ci_pad : rules::key_comparison::bytes_pad;
        env->rules = with_key_compare(std::move(*env->rules), {{"coupon_stock", {k}}});
    }
    env->index = std::make_unique<match::rule_index>(*env->rules);
    return env;
}

inline const rules_env& env_for(variant_id v) {
    static std::array<std::unique_ptr<rules_env>, static_cast<std::size_t>(variant_id::count_)> envs;
    auto& slot = envs[static_cast<std::size_t>(v)];
    if (!slot) slot = build_env(v);
    return *slot;
}

// One statement, parsed and matched; not movable, since the facts view its text.
class statement {
public:
    statement(std::string text, const match::rule_index& index)
        : text_(std::move(text)), parsed_(rules::sql::parse(text_, rules::sql::lexer_options{})),
          facts_(match::match(parsed_, index)) {}
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    [[nodiscard]] const match::match_result& facts() const { return facts_; }
    [[nodiscard]] const rules::sql::parsed_statement& parsed() const { return parsed_; }
    [[nodiscard]] const std::string& text() const { return text_; }

private:
    std::string text_;
    rules::sql::parsed_statement parsed_;
    match::match_result facts_;
};

// Literals as decoded; placeholders bound to integers, as COM_STMT_EXECUTE binds them.
inline value_resolver bound_integers(std::vector<std::int64_t> params) {
    return [params = std::move(params)](const match::value_ref& v) -> std::optional<resolved_value> {
        if (v.type == match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            resolved_value r;
            r.integer = params[v.placeholder_index];
            r.canonical = std::to_string(params[v.placeholder_index]);
            return r;
        }
        return resolve_literal(v);
    };
}

// Server status flags: autocommit (SERVER_STATUS_AUTOCOMMIT), and inside a transaction.
inline constexpr std::uint16_t autocommit = 0x0002;
inline constexpr std::uint16_t in_trans = 0x0003;

inline engine::reply_summary ok_rows(std::uint64_t n, std::uint16_t status = autocommit) {
    return engine::reply_summary::ok_rows(n, status);
}
inline engine::reply_summary error_reply(std::uint16_t code, std::uint16_t status = autocommit) {
    return engine::reply_summary::error(code, status);
}
inline engine::reply_summary counter_row(std::int64_t counter, std::uint16_t status = autocommit) {
    return engine::reply_summary::counter_row(counter, status);
}

// What one statement did: the decision, every action the operation took (with the SQL it
// sent), the events it reported, and the final action.
struct trace {
    decision d;
    std::vector<action> actions;
    std::vector<event> events;
    std::vector<std::pair<event, deferred_take>> deferred_events;  // defer_decrement: each with its take
    [[nodiscard]] const action& last() const { return actions.back(); }
    [[nodiscard]] std::vector<event> deferred() const {
        std::vector<event> out;
        for (const auto& [e, take] : deferred_events) out.push_back(e);
        return out;
    }
    [[nodiscard]] bool has(event e) const { return std::find(events.begin(), events.end(), e) != events.end(); }
    [[nodiscard]] std::vector<std::string> sent() const {
        std::vector<std::string> out;
        for (const auto& a : actions)
            if (a.type == action::kind::send_sql) out.push_back(a.sql.sql);
            else if (a.type == action::kind::send_statement) out.push_back("<statement>");
        return out;
    }
};

// Placeholders bound as DOUBLE, as Node's mysql2 binds every JS number.
inline value_resolver bound_doubles(std::vector<double> params) {
    return [params = std::move(params)](const match::value_ref& v) -> std::optional<resolved_value> {
        if (v.type == match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            return resolve_double(params[v.placeholder_index]);
        }
        return resolve_literal(v);
    };
}

// One connection of an app pod: its memory, the sidecar's ledger it shares with the pod's other
// connections, and the statements its decisions view.
class session {
public:
    explicit session(variant_id v, take_ledger* ledger = nullptr, std::uint64_t id = 1)
        : env_(env_for(v)), ledger_(ledger ? ledger : &own_ledger_), id_(id) {}

    [[nodiscard]] bool ready() const { return env_.error.empty(); }
    [[nodiscard]] const std::string& error() const { return env_.error; }

    decision run(std::string sql, const value_resolver& values = resolve_literal) {
        memory.next_command();  // the session counts every client command
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        return decide(statements_.back()->facts(), *env_.rules, values, memory);
    }

    // Runs a statement through decide() and its operation (statement_operation without admission
    // gate or read cache, so the claim operation's flow) with the engine's scripted run; `replies`
    // answer the operation's database sends in order, Redis answers `redis`. `status` is the server
    // status before it. The trace holds the claim operation's actions (not the Redis key's release or
    // commit after it, which are the statement operation's own).
    trace exec(std::string sql, std::vector<reply_summary> replies, std::uint16_t status = autocommit,
               const value_resolver& values = resolve_literal, redis_reply redis = redis_reply::unavailable,
               bool redis_configured = false) {
        memory.next_command();  // the session counts every client command
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        trace t;
        t.d = decide(statements_.back()->facts(), *env_.rules, values, memory);
        plan_deferred(t.d, statements_.back()->facts(), statements_.back()->text(), memory);
        run_operation(t, std::move(replies), status, redis, redis_configured);
        return t;
    }

    // A COM_STMT_BULK_EXECUTE of the prepared `sql` with `rows` rows of integer values (as many as
    // its placeholders each): decided on the facts bulk_claim_facts makes of it (none: the trace's
    // decision is the default forward, nothing run), then run as exec() runs a statement.
    trace exec_bulk(std::string sql, const std::vector<std::vector<std::int64_t>>& rows,
                    std::vector<reply_summary> replies, std::uint16_t status = autocommit,
                    redis_reply redis = redis_reply::unavailable, bool redis_configured = false) {
        memory.next_command();
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        trace t;
        const auto params = static_cast<std::uint16_t>(rows.empty() ? 0 : rows.front().size());
        auto facts = bulk_claim_facts(statements_.back()->facts(), params, rows.size());
        if (!facts) return t;
        bulk_facts_.push_back(std::make_unique<match::match_result>(std::move(*facts)));
        std::vector<std::int64_t> values;
        for (const auto& row : rows) values.insert(values.end(), row.begin(), row.end());
        t.d = decide(*bulk_facts_.back(), *env_.rules, bound_integers(std::move(values)), memory);
        run_operation(t, std::move(replies), status, redis, redis_configured);
        return t;
    }

    // The decision in `t` carried out by its operation, the database's answers from `replies`.
    void run_operation(trace& t, std::vector<reply_summary> replies, std::uint16_t status, redis_reply redis,
                       bool redis_configured) {
        statement_context ctx;
        ctx.op = operation_context{id_, status, redis_configured, reserve};
        statement_operation op(t.d, statements_.back()->parsed(), memory, *ledger_, transaction_, slots_, ctx);
        const auto perform = [redis](const scripted_step& step,
                                     input_script& script) -> std::optional<statement_input> {
            if (step.act.type == statement_action::kind::redis_acquire)
                return statement_input::of_redis(redis, "token");
            return perform_from_script(step, script);
        };
        std::vector<statement_input> inputs;
        for (const auto& r : replies) inputs.push_back(statement_input::of_reply(r));
        input_script script(std::move(inputs));
        const auto run = run_scripted(op, script, perform);
        for (const auto& step : run.steps) {
            const auto k = step.act.type;
            if (k != statement_action::kind::redis_release && k != statement_action::kind::redis_commit)
                t.actions.push_back(step.claim);
            for (auto e : step.report.events) t.events.push_back(e);
            for (const auto& e : step.report.deferred) t.deferred_events.push_back(e);
        }
        EXPECT_TRUE(run.finished()) << "the operation sent more than the script answers: " << run.failure();
        EXPECT_EQ(run.inputs_left, 0u) << "the operation used fewer replies than scripted";
    }

    // SELECT remain ... answered with `counter`.
    // The admission queue answers the statement sold out (op.answer_sold_out() instead of start()).
    trace sold_out(std::string sql, std::uint16_t status = autocommit) {
        memory.next_command();  // the session counts every client command
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        trace t;
        t.d = decide(statements_.back()->facts(), *env_.rules, resolve_literal, memory);
        claim_operation op(t.d, statements_.back()->parsed(), memory, *ledger_, operation_context{id_, status, false});
        t.actions.push_back(op.answer_sold_out());
        for (auto e : op.take_events()) t.events.push_back(e);
        return t;
    }

    void read(std::string_view key_sql, std::int64_t counter) {
        auto t = exec("SELECT remain FROM coupon_stock WHERE campaign_id = " + std::string(key_sql),
                      {counter_row(counter)});
        ASSERT_EQ(t.d.what, verdict::remember_read) << t.d.note;
    }

    // The incident's absolute write, answered (took stock or not).
    trace absolute_decrement(std::string_view key_sql, std::int64_t value, bool succeeded, bool in_transaction) {
        const std::uint16_t st = in_transaction ? in_trans : autocommit;
        return exec("UPDATE coupon_stock SET remain = " + std::to_string(value) + " WHERE campaign_id = " +
                        std::string(key_sql),
                    {ok_rows(succeeded ? 1 : 0, st)}, st);
    }

    std::string claim_sql(std::string_view user_sql, std::string_view key_sql) {
        return "INSERT INTO coupon_order (user_id, campaign_id) VALUES (" + std::string(user_sql) + ", " +
               std::string(key_sql) + ")";
    }
    decision claim(std::string_view user_sql, std::string_view key_sql) { return run(claim_sql(user_sql, key_sql)); }

    std::vector<deferred_take> end(bool committed) {
        (void)transaction_.release_all();  // the transaction's claims' Redis keys: committed or released
        return end_transaction(memory, *ledger_, committed, id_);
    }

    [[nodiscard]] const stock_entry* entry(const key_tuple& key) const { return memory.find("coupon_stock", key); }
    [[nodiscard]] take_ledger& ledger() { return *ledger_; }

    session_memory memory;
    reserve_pool* reserve = nullptr;  // the sidecar's reserved stock (reserve rules): none by default

private:
    const rules_env& env_;
    take_ledger own_ledger_;
    take_ledger* ledger_;
    std::uint64_t id_;
    transaction_tracker transaction_;  // the Redis keys of the transaction's claims
    admission_slots slots_;            // none: no admission gate here
    std::vector<std::unique_ptr<statement>> statements_;
    std::vector<std::unique_ptr<match::match_result>> bulk_facts_;  // exec_bulk: what its decisions view
};

}  // namespace claimguard::engine::test
