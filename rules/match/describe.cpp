// The dry run behind `claimguard explain`: facts, the decision they lead to, the rewritten SQL.
#include "rules/match/describe.hpp"

#include <limits>

#include "rules/match/rewriter.hpp"
#include "rules/model/key_template.hpp"
#include "rules/sql/parser.hpp"
#include "rules/sql/text.hpp"

namespace claimguard::rules::match {
namespace {

[[nodiscard]] std::string describe_key(const std::vector<std::string>& columns, const small_vector<value_ref, 2>& key) {
    std::string s;
    for (std::size_t i = 0; i < columns.size() && i < key.size(); ++i) {
        if (i != 0) s += ", ";
        s += columns[i] + " = " + describe_value(key[i]);
    }
    return s;
}

[[nodiscard]] std::string describe_table(const table_use& t) {
    std::string s = "table " + std::string(t.written);
    return s;
}

[[nodiscard]] std::string describe_answer(const answer& a) {
    if (a.type == answer::kind::ok) return "OK (0 rows affected)";
    return "ERROR " + std::to_string(a.code) + " (" + a.sql_state + "): " + a.message;
}

[[nodiscard]] std::string_view guard_name(guard_state g) {
    switch (g) {
        case guard_state::none: return "no guard";
        case guard_state::sufficient: return "guarded";
        case guard_state::insufficient: return "guard too weak for the floor";
        case guard_state::unknown: return "guard depends on a bound value";
    }
    return "?";
}

[[nodiscard]] std::string_view event_name(transaction_event e) {
    switch (e) {
        case transaction_event::begin: return "begin";
        case transaction_event::commit: return "commit";
        case transaction_event::rollback: return "rollback";
        case transaction_event::savepoint: return "savepoint";
        case transaction_event::rollback_to_savepoint: return "rollback to savepoint";
        case transaction_event::release_savepoint: return "release savepoint";
        case transaction_event::autocommit_on: return "autocommit on";
        case transaction_event::autocommit_off: return "autocommit off";
        case transaction_event::autocommit_unknown: return "autocommit changed (value known only to the server)";
    }
    return "?";
}

// The Redis key of one claim row, placeholders shown as {?N}.
[[nodiscard]] std::string redis_key(const claim_rule& rule, const claim_row& row) {
    const auto parsed = parse_key_template(rule.redis->key_template);
    if (!parsed.error.empty()) return "(key template: " + parsed.error + ")";
    auto value_of = [&](const std::string& column) -> std::string {
        const value_ref* v = nullptr;
        for (std::size_t i = 0; i < rule.idempotency_columns.size() && i < row.idempotency.size(); ++i)
            if (sql::iequals(rule.idempotency_columns[i], column)) v = &row.idempotency[i];
        if (rule.idempotency_key_column && row.idempotency_key && sql::iequals(*rule.idempotency_key_column, column))
            v = &*row.idempotency_key;
        if (v == nullptr) return "{" + column + "}";
        if (v->type == value_ref::kind::literal) return v->decoded.bytes;
        if (v->type == value_ref::kind::placeholder) return "{?" + std::to_string(v->placeholder_index) + "}";
        return "{" + column + "}";
    };
    return expand_key_template(parsed.parts, value_of);
}

void print_rewrite(std::ostream& out, const result<rewritten_sql>& r) {
    if (!r) {
        out << "sql: (not built: " << r.error().message() << ")\n";
        return;
    }
    out << "sql: " << r->sql << "\n";
    if (!r->parameters.empty()) {
        out << "parameters:";
        for (auto p : r->parameters) out << " ?" << p;
        out << "\n";
    }
}

class explainer {
public:
    explainer(const rule_index& rules, const sql::parsed_statement& st, const explain_options& options,
              std::ostream& out)
        : rules_(rules), st_(st), options_(options), out_(out) {}

    void decide(const fact& f) { std::visit([this](const auto& x) { on(x); }, f); }

private:
    void mode_line(mode m, std::string_view would) {
        if (m == mode::observe)
            out_ << "mode: observe (claimguard logs that it would " << would << "; the statement is forwarded unchanged)\n";
        else
            out_ << "mode: enforce\n";
    }

    void on(const counter_read& r) {
        out_ << "decision: forward; remember " << r.rule->counter_column << " for "
             << describe_key(r.rule->key_columns, r.key) << " from the result row";
        if (r.counter_position) out_ << " (column " << *r.counter_position + 1 << ", " << r.counter_label << ")";
        out_ << "\n";
    }

    void on(const counter_write& w) {
        const stock_rule& rule = *w.rule;
        if (w.expected) {
            out_ << "decision: forward (the WHERE clause already requires " << rule.counter_column << " = "
                 << describe_value(*w.expected) << ")\n";
            return;
        }
        if (!w.full_key) {
            out_ << "decision: forward; warning: the WHERE clause does not pin every key column ("
                 << describe_key(rule.key_columns, w.key) << "), so this write cannot be tied to a read\n";
            return;
        }
        if (w.value.type == value_ref::kind::placeholder) {
            out_ << "decision: rewrite when executed: units = the value read - the bound value of ?"
                 << w.value.placeholder_index << "\n";
            mode_line(rules_.rules().effective_mode(rule), "rewrite");
            return;
        }
        if (!w.value.decoded.integer) {
            out_ << "decision: forward; warning: " << rule.counter_column << " is set to " << w.value.text
                 << ", not an integer\n";
            return;
        }
        if (!options_.read_value) {
            out_ << "decision: forward (no read of this key recorded; pass --read VALUE to see the rewrite)\n";
            return;
        }
        const std::int64_t read = *options_.read_value;
        const std::int64_t written = *w.value.decoded.integer;
        if (written >= read) {
            out_ << "decision: forward (writes " << written << " after reading " << read << ": takes no stock)\n";
            return;
        }
        if (written < 0 && read > std::numeric_limits<std::int64_t>::max() + written) {
            out_ << "decision: forward; warning: " << read << " - " << written << " does not fit in 64 bits\n";
            return;
        }
        const std::int64_t units = read - written;
        out_ << "decision: rewrite (read " << read << ", writes " << written << ": takes " << units
             << (units == 1 ? " unit" : " units") << " with a conditional decrement)\n";
        print_rewrite(out_, rewrite_write(st_, w, units));
        out_ << "when 0 rows change: answer exhausted: " << describe_answer(rule.exhausted) << "\n";
        mode_line(rules_.rules().effective_mode(rule), "rewrite");
    }

    void on(const counter_change& c) {
        const stock_rule& rule = *c.rule;
        if (!c.is_decrement()) {
            out_ << "decision: forward (returns stock)\n";
            return;
        }
        if (c.guard == guard_state::sufficient) {
            out_ << "decision: forward (already guarded by " << rule.counter_column
                 << (c.guard_strict ? " > " : " >= ") << describe_value(*c.guard_bound) << ")\n";
            return;
        }
        if (c.amount.type == value_ref::kind::placeholder && rule.floor != 0) {
            out_ << "decision: rewrite when executed (the guard " << rule.counter_column << " >= " << rule.floor
                 << " + amount needs the bound value of ?" << c.amount.placeholder_index << ")\n";
            out_ << "when 0 rows change: answer exhausted: " << describe_answer(rule.exhausted) << "\n";
            mode_line(rules_.rules().effective_mode(rule), "rewrite");
            return;
        }
        if (c.amount.type != value_ref::kind::placeholder && !c.delta) {
            out_ << "decision: forward; warning: the amount " << c.amount.text << " is not an integer\n";
            return;
        }
        out_ << "decision: rewrite (add the guard " << rule.counter_column << " >= floor + amount; "
             << guard_name(c.guard) << " now)\n";
        print_rewrite(out_, rewrite_change(st_, c));
        out_ << "when 0 rows change: answer exhausted: " << describe_answer(rule.exhausted) << "\n";
        mode_line(rules_.rules().effective_mode(rule), "rewrite");
    }

    void on(const claim_insert& c) {
        const claim_rule& rule = *c.rule;
        out_ << "decision: claim check";
        if (c.replace) out_ << "; warning: REPLACE overwrites a duplicate instead of failing on it";
        if (c.ignore) out_ << "; warning: INSERT IGNORE turns a duplicate into a warning (0 rows)";
        if (c.on_duplicate_update) out_ << "; warning: ON DUPLICATE KEY UPDATE turns a duplicate into an update";
        if (!c.columns_known) out_ << "; warning: no column list, so the idempotency values are unknown";
        out_ << "\n";
        for (std::size_t i = 0; i < c.rows.size(); ++i) {
            const claim_row& row = c.rows[i];
            out_ << "row " << i + 1 << ": " << describe_key(rule.idempotency_columns, row.idempotency) << "\n";
            if (rule.redis) out_ << "  redis: SET " << redis_key(rule, row) << " <token> NX PX " << rule.redis->ttl.count() << "\n";
            if (c.stock != nullptr) {
                out_ << "  consumes: stock rule " << c.stock->name << " for "
                     << describe_key(c.stock->key_columns, row.stock_key)
                     << "; answered exhausted if this session's decrement for it was refused\n";
                out_ << "  on duplicate: answer " << describe_answer(rule.duplicate) << ", then return the unit:\n  ";
                print_rewrite(out_, compensation(*c.stock, row.stock_key));
            }
        }
        mode_line(rules_.rules().effective_mode(rule), "check the claim");
    }

    void on(const transaction_boundary& b) { out_ << "decision: forward (transaction " << event_name(b.event) << ")\n"; }

    void on(const session_change&) { out_ << "decision: forward (the session's reading of later statements changes)\n"; }

    void on(const unmodeled& u) {
        out_ << "decision: forward unchanged; warning: touches a protected table, but claimguard cannot reason about this"
                " statement (" << u.reason << "); no rule protects it\n";
    }

    const rule_index& rules_;
    const sql::parsed_statement& st_;
    const explain_options& options_;
    std::ostream& out_;
};

[[nodiscard]] std::string_view statement_kind_name(sql::statement_kind k) {
    switch (k) {
        case sql::statement_kind::not_ours: return "not ours";
        case sql::statement_kind::select: return "SELECT";
        case sql::statement_kind::update: return "UPDATE";
        case sql::statement_kind::insert: return "INSERT";
        case sql::statement_kind::transaction: return "transaction control";
        case sql::statement_kind::use: return "USE";
        case sql::statement_kind::set: return "SET";
    }
    return "?";
}

}  // namespace

std::string describe_value(const value_ref& v) {
    switch (v.type) {
        case value_ref::kind::literal: return std::string(v.text);
        case value_ref::kind::placeholder: return "?" + std::to_string(v.placeholder_index);
        case value_ref::kind::null: return "NULL";
        case value_ref::kind::default_: return "DEFAULT";
        case value_ref::kind::expression: return "<expression " + std::string(v.text) + ">";
        case value_ref::kind::absent: return "(not written)";
    }
    return "?";
}

std::string describe_fact(const fact& f) {
    struct visitor {
        std::string operator()(const counter_read& r) const {
            return "counter read: stock rule " + r.rule->name + ", " + describe_table(r.table) + ", " +
                   describe_key(r.rule->key_columns, r.key) + ", returns " + r.rule->counter_column +
                   (r.lock == sql::lock_clause::none ? "" : " (locking read)");
        }
        std::string operator()(const counter_write& w) const {
            return "counter write: stock rule " + w.rule->name + ", " + describe_table(w.table) + ", " +
                   describe_key(w.rule->key_columns, w.key) + ", sets " + w.rule->counter_column + " = " +
                   describe_value(w.value);
        }
        std::string operator()(const counter_change& c) const {
            return "counter change: stock rule " + c.rule->name + ", " + describe_table(c.table) + ", " +
                   describe_key(c.rule->key_columns, c.key) + ", " + c.rule->counter_column + " " + c.sign + " " +
                   describe_value(c.amount) + ", " + std::string(guard_name(c.guard));
        }
        std::string operator()(const claim_insert& c) const {
            return std::string(c.replace ? "claim replace" : "claim insert") + ": claim rule " + c.rule->name + ", " +
                   describe_table(c.table) + ", " + std::to_string(c.rows.size()) + (c.rows.size() == 1 ? " row" : " rows");
        }
        std::string operator()(const transaction_boundary& b) const {
            return "transaction: " + std::string(event_name(b.event)) + (b.chain ? " and chain" : "") +
                   (b.release ? " and release" : "") + (b.read_only ? " (read only)" : "");
        }
        std::string operator()(const session_change& c) const {
            switch (c.setting) {
                case session_setting::sql_mode:
                    if (!c.sql_mode) return "session: sql_mode = " + describe_value(c.value) + " (flags unknown)";
                    return "session: sql_mode = " + describe_value(c.value) + " (ANSI_QUOTES " +
                           (c.sql_mode->ansi_quotes ? "on" : "off") + ", NO_BACKSLASH_ESCAPES " +
                           (c.sql_mode->no_backslash_escapes ? "on" : "off") + ")";
                case session_setting::client_charset:
                    return "session: client character set " + std::string(c.value.text) + " (" +
                           (c.charset ? std::string(sql::charset_label(*c.charset)) : std::string("unknown")) + ")";
                case session_setting::database:
                    return "session: current database " + std::string(c.database);
            }
            return "session";
        }
        std::string operator()(const unmodeled& u) const {
            const std::string rule = u.stock != nullptr ? "stock rule " + u.stock->name
                                                         : "claim rule " + (u.claim != nullptr ? u.claim->name : std::string("?"));
            return "unmodeled: " + rule + ": " + std::string(u.reason);
        }
    };
    return std::visit(visitor{}, f);
}

void explain(const rule_index& rules, std::string_view sql, const explain_options& options, std::ostream& out) {
    const sql::prefilter_verdict verdict = rules.filter().classify(sql);
    switch (verdict) {
        case sql::prefilter_verdict::irrelevant: out << "pre-filter: irrelevant (no rule can apply)\n"; break;
        case sql::prefilter_verdict::session: out << "pre-filter: session statement (parsed)\n"; break;
        case sql::prefilter_verdict::candidate: out << "pre-filter: candidate (names a protected table)\n"; break;
    }
    const sql::parsed_statement st = sql::parse(sql, options.lexer);
    if (st.ours()) {
        out << "statement: " << statement_kind_name(st.kind) << "\n";
    } else {
        out << "statement: not recognised: " << sql::not_ours_reason_text(st.reason);
        if (st.error) out << " (" << st.error.message() << ")";
        else if (st.reason != sql::not_ours_reason::empty) out << " (at byte " << st.stop_offset << ")";
        out << "\n";
    }
    const match_result m = match(st, rules, options.context);
    for (const auto& f : m.facts) out << "fact: " << describe_fact(f) << "\n";
    if (m.facts.empty()) {
        out << "decision: forward unchanged (no rule applies)\n";
        return;
    }
    explainer e(rules, st, options, out);
    // Claims, writes and changes decide; reads, boundaries and session changes only inform.
    const fact* decisive = &m.facts.front();
    for (const auto& f : m.facts)
        if (std::holds_alternative<counter_write>(f) || std::holds_alternative<counter_change>(f) ||
            std::holds_alternative<claim_insert>(f)) {
            decisive = &f;
            break;
        }
    e.decide(*decisive);
}

}  // namespace claimguard::rules::match
