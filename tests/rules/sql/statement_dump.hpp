// Renders a parsed statement as one line, so parser tests compare against readable strings.
#pragma once

#include <string>

#include "rules/sql/statement.hpp"

namespace claimguard::rules::sql::test {

inline std::string reason_name(not_ours_reason r) {
    switch (r) {
        case not_ours_reason::none: return "none";
        case not_ours_reason::empty: return "empty";
        case not_ours_reason::lex_error: return "lex_error";
        case not_ours_reason::other_statement: return "other_statement";
        case not_ours_reason::unsupported_syntax: return "unsupported_syntax";
        case not_ours_reason::several_statements: return "several_statements";
        case not_ours_reason::sql_mode_unknown: return "sql_mode_unknown";
        case not_ours_reason::insert_select: return "insert_select";
        case not_ours_reason::subquery_in_set: return "subquery_in_set";
    }
    return "?";
}

inline std::string dump_operand(const parsed_statement& st, const operand& op) {
    switch (op.kind) {
        case operand_kind::literal: return "lit:" + std::string(st.text(op.span));
        case operand_kind::placeholder: return "?" + std::to_string(st.tokens[op.value_token].aux);
        case operand_kind::null: return "NULL";
        case operand_kind::default_: return "DEFAULT";
        case operand_kind::word: return "word:" + std::string(st.text(op.span));
        case operand_kind::column: return "col:" + std::string(st.text(op.span));
        case operand_kind::expression: return "expr:" + std::string(st.text(op.span));
    }
    return "?";
}

inline std::string op_name(compare_op op) {
    switch (op) {
        case compare_op::eq: return "=";
        case compare_op::null_safe_eq: return "<=>";
        case compare_op::ne: return "<>";
        case compare_op::lt: return "<";
        case compare_op::le: return "<=";
        case compare_op::gt: return ">";
        case compare_op::ge: return ">=";
    }
    return "?";
}

inline std::string dump_where(const parsed_statement& st, const where_clause& w) {
    if (!w.present && w.predicates.empty()) return "";
    std::string s = " where=[";
    for (std::size_t i = 0; i < w.predicates.size(); ++i) {
        const auto& p = w.predicates[i];
        if (i) s += "; ";
        s += std::string(st.text(p.column.span));
        switch (p.kind) {
            case predicate_kind::compare: s += " " + op_name(p.op) + " " + dump_operand(st, p.value); break;
            case predicate_kind::in_list:
            case predicate_kind::not_in_list:
                s += p.kind == predicate_kind::in_list ? " IN (" : " NOT IN (";
                for (std::uint32_t k = 0; k < p.list_count; ++k) {
                    if (k) s += ", ";
                    s += dump_operand(st, w.list_values[p.list_first + k]);
                }
                s += ")";
                break;
            case predicate_kind::is_null: s += " IS NULL"; break;
            case predicate_kind::is_not_null: s += " IS NOT NULL"; break;
            case predicate_kind::constant: s += "constant:" + std::string(st.text(p.span)); break;
            case predicate_kind::arithmetic:
                s += " " + op_name(p.op) + " " + dump_operand(st, p.value);
                for (std::uint32_t k = 0; k < p.list_count; ++k)
                    s += std::string((p.subtract >> k) & 1 ? " - " : " + ") +
                         dump_operand(st, w.list_values[p.list_first + k]);
                break;
            case predicate_kind::column_compare: s += " " + op_name(p.op) + " " + dump_operand(st, p.value); break;
        }
    }
    return s + "]";
}

inline std::string dump_table(const parsed_statement& st, const table_ref& t) {
    std::string s = " table=" + std::string(st.text(t.name.span));
    if (t.alias != no_token) s += " alias=" + std::string(st.text(t.alias));
    return s;
}

inline std::string dump_assignment(const parsed_statement& st, const assignment& a) {
    std::string s = std::string(st.text(a.column.span)) + " = ";
    if (a.kind == assignment_kind::relative)
        return s + std::string(st.text(a.base.span)) + " " + a.sign + " " + dump_operand(st, a.value);
    return s + dump_operand(st, a.value);
}

inline std::string dump_statement(const parsed_statement& st) {
    if (!st.ours()) return "not_ours(" + reason_name(st.reason) + ")";
    if (const auto* s = std::get_if<select_statement>(&st.body)) {
        std::string out = "SELECT [";
        for (std::size_t i = 0; i < s->items.size(); ++i) {
            const auto& item = s->items[i];
            if (i) out += ", ";
            out += item.kind == select_item_kind::star ? "star:" : item.kind == select_item_kind::column ? "col:" : "expr:";
            out += std::string(st.text(item.span));
            if (item.alias != no_token) out += " AS " + std::string(st.text(item.alias));
        }
        out += "]";
        if (s->has_from) out += dump_table(st, s->table);
        out += dump_where(st, s->where);
        if (!s->order_by.empty()) out += " order=" + std::string(st.text(s->order_by));
        if (!s->limit.empty()) out += " limit=" + std::string(st.text(s->limit));
        switch (s->lock) {
            case lock_clause::none: break;
            case lock_clause::for_update: out += " lock=for_update"; break;
            case lock_clause::for_share: out += " lock=for_share"; break;
            case lock_clause::lock_in_share_mode: out += " lock=share_mode"; break;
        }
        return out;
    }
    if (const auto* u = std::get_if<update_statement>(&st.body)) {
        std::string out = "UPDATE";
        if (!u->modifiers.empty()) out += " mods=" + std::string(st.text(u->modifiers));
        out += dump_table(st, u->table);
        for (const auto& j : u->joined) out += " join" + dump_table(st, j);
        if (!u->joined.empty()) out += " tables=" + std::string(st.text(u->tables));
        out += " set=[";
        for (std::size_t i = 0; i < u->assignments.size(); ++i) {
            if (i) out += "; ";
            out += dump_assignment(st, u->assignments[i]);
        }
        out += "]" + dump_where(st, u->where);
        if (!u->limit.empty()) out += " limit=" + std::string(st.text(u->limit));
        return out;
    }
    if (const auto* d = std::get_if<delete_statement>(&st.body)) {
        std::string out = "DELETE";
        if (!d->modifiers.empty()) out += " mods=" + std::string(st.text(d->modifiers));
        out += dump_table(st, d->table) + dump_where(st, d->where);
        if (!d->order_by.empty()) out += " order=" + std::string(st.text(d->order_by));
        if (!d->limit.empty()) out += " limit=" + std::string(st.text(d->limit));
        return out;
    }
    if (const auto* ins = std::get_if<insert_statement>(&st.body)) {
        std::string out = ins->replace ? "REPLACE" : "INSERT";
        if (ins->ignore) out += " ignore";
        if (ins->set_form) out += " set_form";
        out += dump_table(st, ins->table);
        if (ins->has_column_list) {
            out += " cols=[";
            for (std::size_t i = 0; i < ins->columns.size(); ++i) {
                if (i) out += ", ";
                out += std::string(st.text(ins->columns[i].span));
            }
            out += "]";
        }
        out += " rows=[";
        for (std::size_t r = 0; r < ins->row_count(); ++r) {
            if (r) out += ", ";
            out += "(";
            for (std::size_t c = 0; c < ins->row_width; ++c) {
                if (c) out += ", ";
                out += dump_operand(st, ins->values[r * ins->row_width + c]);
            }
            out += ")";
        }
        out += "]";
        if (!ins->on_duplicate.empty()) {
            out += " on_dup=[";
            for (std::size_t i = 0; i < ins->on_duplicate.size(); ++i) {
                if (i) out += "; ";
                out += dump_assignment(st, ins->on_duplicate[i]);
            }
            out += "]";
        }
        return out;
    }
    if (const auto* t = std::get_if<transaction_statement>(&st.body)) {
        std::string out = "TXN ";
        switch (t->kind) {
            case transaction_kind::begin: out += "begin"; break;
            case transaction_kind::commit: out += "commit"; break;
            case transaction_kind::rollback: out += "rollback"; break;
            case transaction_kind::savepoint: out += "savepoint"; break;
            case transaction_kind::rollback_to_savepoint: out += "rollback_to"; break;
            case transaction_kind::release_savepoint: out += "release_savepoint"; break;
        }
        if (t->read_only) out += " read_only";
        if (t->read_write) out += " read_write";
        if (t->consistent_snapshot) out += " snapshot";
        if (t->chain != tristate::unset) out += t->chain == tristate::yes ? " chain" : " no_chain";
        if (t->release != tristate::unset) out += t->release == tristate::yes ? " release" : " no_release";
        if (t->savepoint != no_token) out += " " + std::string(st.text(t->savepoint));
        return out;
    }
    if (const auto* u = std::get_if<use_statement>(&st.body)) return "USE " + std::string(st.text(u->database));
    if (const auto* s = std::get_if<set_statement>(&st.body)) {
        std::string out = "SET [";
        for (std::size_t i = 0; i < s->items.size(); ++i) {
            const auto& item = s->items[i];
            if (i) out += "; ";
            switch (item.target) {
                case set_target::names: out += "names " + dump_operand(st, item.value); break;
                case set_target::character_set: out += "charset " + dump_operand(st, item.value); break;
                case set_target::variable: {
                    static const char* scopes[] = {"session", "global", "persist", "persist_only", "user"};
                    out += std::string(scopes[static_cast<int>(item.scope)]) + " " + std::string(item.name) + " = " +
                           dump_operand(st, item.value);
                    break;
                }
            }
            if (item.collation != no_token) out += " collate " + std::string(st.text(item.collation));
        }
        return out + "]";
    }
    return "?";
}

}  // namespace claimguard::rules::sql::test
