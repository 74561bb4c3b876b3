// The dry run behind `claimguard explain`: facts, the decision they lead to, the rewritten SQL.
#include "rules/match/describe.hpp"


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
        case transaction_event::xa_start: return "XA start";
        case transaction_event::xa_prepare: return "XA prepare";
        case transaction_event::xa_commit: return "XA commit";
        case transaction_event::xa_rollback: return "XA rollback";
    }
    return "?";
}

[[nodiscard]] std::string_view statement_kind_name(sql::statement_kind k) {
    switch (k) {
        case sql::statement_kind::not_ours: return "not ours";
        case sql::statement_kind::select: return "SELECT";
        case sql::statement_kind::update: return "UPDATE";
        case sql::statement_kind::insert: return "INSERT";
        case sql::statement_kind::transaction: return "transaction control";
        case sql::statement_kind::use: return "USE";
        case sql::statement_kind::set: return "SET";
        case sql::statement_kind::delete_: return "DELETE";
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
            if (w.recomputed)
                return "counter recomputed: stock rule " + w.rule->name + ", " + describe_table(w.table) + ", " +
                       describe_key(w.rule->key_columns, w.key) + ", sets " + w.rule->counter_column +
                       " = N - the count of claim rule " + w.counted->name + "'s rows of " +
                       describe_key(w.rule->key_columns, w.counted_key);
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
            return std::string(c.replace ? "claim replace" : c.from_select ? "claim by INSERT ... SELECT" : "claim insert") +
                   ": claim rule " + c.rule->name + ", " +
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
        std::string operator()(const claim_delete& c) const {
            std::string out = "claim delete: claim rule " + c.rule->name + ", " + describe_table(c.table) + ", " +
                              describe_key(c.rule->idempotency_columns, c.idempotency);
            if (c.stock != nullptr)
                out += ", stock rule " + c.stock->name + " " + describe_key(c.stock->key_columns, c.stock_key);
            if (c.extra_conditions) out += ", more conditions";
            return out + (c.rule->on_cancel == cancel_policy::return_stock ? ", returns stock" : ", keeps stock");
        }
        std::string operator()(const unmodeled& u) const {
            const std::string rule = u.stock != nullptr ? "stock rule " + u.stock->name
                                                         : "claim rule " + (u.claim != nullptr ? u.claim->name : std::string("?"));
            return "unmodeled: " + rule + ": " + std::string(u.reason);
        }
    };
    return std::visit(visitor{}, f);
}

std::string describe_answer(const answer& a) {
    if (a.type == answer::kind::ok) return "OK (0 rows affected)";
    return "ERROR " + std::to_string(a.code) + " (" + a.sql_state + "): " + a.message;
}

std::string describe_sql(const rewritten_sql& r) {
    std::string s = r.sql;
    if (!r.parameters.empty()) {
        s += "  [parameters:";
        for (auto p : r.parameters) s += " ?" + std::to_string(p);
        s += "]";
    }
    return s;
}

described_statement describe_statement(const rule_index& rules, std::string_view sql, const explain_options& options,
                                       std::ostream& out) {
    const sql::prefilter_verdict verdict = rules.filter().classify(sql);
    switch (verdict) {
        case sql::prefilter_verdict::irrelevant: out << "pre-filter: irrelevant (no rule can apply)\n"; break;
        case sql::prefilter_verdict::session: out << "pre-filter: session statement (parsed)\n"; break;
        case sql::prefilter_verdict::candidate: out << "pre-filter: candidate (names a protected table)\n"; break;
    }
    described_statement d;
    d.statement = sql::parse(sql, options.lexer);
    const auto& st = d.statement;
    if (st.ours()) {
        out << "statement: " << statement_kind_name(st.kind) << "\n";
    } else {
        out << "statement: not recognised: " << sql::not_ours_reason_text(st.reason);
        if (st.error) out << " (" << st.error.message() << ")";
        else if (st.reason != sql::not_ours_reason::empty) out << " (at byte " << st.stop_offset << ")";
        out << "\n";
    }
    d.facts = match(st, rules, options.context);
    for (const auto& f : d.facts.facts) out << "fact: " << describe_fact(f) << "\n";
    return d;
}

}  // namespace claimguard::rules::match
