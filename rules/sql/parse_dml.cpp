// SELECT, UPDATE, INSERT, REPLACE and DELETE in the single-table shapes the claim engine reads.
#include "rules/sql/parser_detail.hpp"

namespace claimguard::rules::sql::detail {
namespace {

[[nodiscard]] bool skip_select_modifiers(cursor& c) {
    for (;;) {
        if (c.accept_word("ALL") || c.accept_word("DISTINCT") || c.accept_word("DISTINCTROW") ||
            c.accept_word("HIGH_PRIORITY") || c.accept_word("STRAIGHT_JOIN") || c.accept_word("SQL_SMALL_RESULT") ||
            c.accept_word("SQL_BIG_RESULT") || c.accept_word("SQL_BUFFER_RESULT") || c.accept_word("SQL_NO_CACHE") ||
            c.accept_word("SQL_CACHE") || c.accept_word("SQL_CALC_FOUND_ROWS"))
            continue;
        return true;
    }
}

[[nodiscard]] bool parse_select_item(cursor& c, select_item& item) {
    item = select_item{};
    const std::uint32_t start = c.pos;
    if (c.accept_punct("*")) {
        item.kind = select_item_kind::star;
        item.span = {start, c.pos};
        return true;
    }
    // t.* and db.t.*
    for (std::uint32_t parts = 1; parts <= 2; ++parts) {
        bool qualified_star = c.is_name();
        for (std::uint32_t i = 0; qualified_star && i < parts; ++i)
            qualified_star = c.is_punct(".", 2 * i + 1) &&
                             (i + 1 == parts ? c.is_punct("*", 2 * i + 2)
                                             : (c.is_kind(token_kind::word, 2 * i + 2) ||
                                                c.is_kind(token_kind::quoted_ident, 2 * i + 2)));
        if (qualified_star) {
            if (!parse_name_ref(c, item.column, static_cast<int>(parts))) return false;
            c.pos += 2;  // . *
            item.kind = select_item_kind::star;
            item.span = {start, c.pos};
            return true;
        }
    }
    operand e;
    if (!parse_expression(c, e)) return false;
    item.kind = e.kind == operand_kind::column ? select_item_kind::column : select_item_kind::expression;
    if (item.kind == select_item_kind::column) item.column = e.column;
    item.span = {start, c.pos};
    if (c.accept_word("AS")) {
        if (!c.is_name() && !c.is_kind(token_kind::string)) return false;
        item.alias = c.pos++;
    } else if (c.is_name() || c.is_kind(token_kind::string)) {
        item.alias = c.pos++;
    }
    return true;
}

[[nodiscard]] bool parse_order_by(cursor& c, token_span& out) {
    const std::uint32_t start = c.pos;
    if (!c.accept_word("ORDER") || !c.accept_word("BY")) return false;
    do {
        name_ref col;
        if (!parse_name_ref(c, col, 3)) return false;
        if (!c.accept_word("ASC")) c.accept_word("DESC");
    } while (c.accept_punct(","));
    out = {start, c.pos};
    return true;
}

[[nodiscard]] bool parse_locking(cursor& c, lock_clause& out) {
    if (c.accept_word("LOCK")) {
        if (!c.accept_word("IN") || !c.accept_word("SHARE") || !c.accept_word("MODE")) return false;
        out = lock_clause::lock_in_share_mode;
        return true;
    }
    if (!c.accept_word("FOR")) return false;
    if (c.accept_word("UPDATE")) {
        out = lock_clause::for_update;
    } else if (c.accept_word("SHARE")) {
        out = lock_clause::for_share;
    } else {
        return false;
    }
    if (c.accept_word("OF")) {
        do {
            name_ref t;
            if (!parse_name_ref(c, t, 2)) return false;
        } while (c.accept_punct(","));
    }
    if (c.accept_word("NOWAIT")) return true;
    if (c.accept_word("SKIP")) return c.accept_word("LOCKED");
    return true;
}

}  // namespace

bool parse_select(cursor& c, select_statement& out) {
    ++c.pos;  // SELECT
    if (!skip_select_modifiers(c)) return false;
    do {
        if (!parse_select_item(c, out.items.emplace_back())) return false;
    } while (c.accept_punct(","));
    if (c.accept_word("FROM")) {
        if (c.accept_word("DUAL")) {
            out.has_from = false;
        } else {
            if (!parse_table_ref(c, out.table, true)) return false;
            out.has_from = true;
        }
    }
    if (c.accept_word("WHERE") && !parse_where(c, out.where)) return false;
    if (c.is_word("ORDER") && !parse_order_by(c, out.order_by)) return false;
    if (c.is_word("LIMIT") && !parse_limit(c, out.limit)) return false;
    if (c.is_word("FOR") || c.is_word("LOCK")) {
        if (!parse_locking(c, out.lock)) return false;
    }
    return c.at_statement_end();
}

namespace {

// After an UPDATE's assignment at the cursor did not parse: whether its value holds a subquery
// (a SELECT inside parentheses, or "(" then WITH, TABLE or VALUES), as in SET c = (SELECT ...) or
// SET c = 100 - (SELECT COUNT(*) ...). If so, the statement's reason says so, with the table and
// the column. Runs only on statements that are not ours anyway; the cursor ends anywhere.
void note_subquery_assignment(cursor& c, const table_ref& table) {
    name_ref column;
    if (!parse_name_ref(c, column, 3)) return;
    if (!c.accept_punct("=") && !c.accept_punct(":=")) return;
    std::uint32_t depth = 0;
    for (; !c.at_statement_end(); ++c.pos) {
        if (c.is_punct("(")) {
            ++depth;
            if (c.is_word("WITH", 1) || c.is_word("TABLE", 1) || c.is_word("VALUES", 1)) break;
        } else if (c.is_punct(")")) {
            if (depth == 0) return;
            --depth;
        } else if (depth == 0) {
            if (c.is_punct(",") || c.is_word("WHERE") || c.is_word("ORDER") || c.is_word("LIMIT")) return;
        } else if (c.is_word("SELECT")) {
            break;
        }
    }
    if (c.at_statement_end()) return;
    c.st.reason = not_ours_reason::subquery_in_set;
    c.st.not_ours_table = table;
    c.st.not_ours_column = column;
}

// After an UPDATE's first assignment at the cursor did not parse and holds a subquery: whether the
// statement is UPDATE t SET c = N - (SELECT COUNT(*) FROM t2 [WHERE ...]) WHERE ... (or c = (SELECT N -
// COUNT(*) FROM ...)) and nothing more; if so, its parts go to parsed_statement::counter_recompute.
void note_counter_recompute(cursor& c, const table_ref& table) {
    auto form = std::make_shared<counter_recompute_form>();
    form->table = table;
    if (!parse_name_ref(c, form->column, 3)) return;
    if (!c.accept_punct("=") && !c.accept_punct(":=")) return;
    const auto total = [&] {
        return parse_value_operand(c, form->total) && form->total.kind == operand_kind::literal && c.accept_punct("-");
    };
    const auto count_from = [&] {
        if (!c.accept_word("COUNT") || !c.accept_punct("(") || !c.accept_punct("*") || !c.accept_punct(")"))
            return false;
        if (!c.accept_word("FROM") || !parse_table_ref(c, form->counted, true)) return false;
        return !c.accept_word("WHERE") || parse_where(c, form->count_where);
    };
    if (c.is_punct("(") && c.is_word("SELECT", 1)) {
        c.pos += 2;
        if (!total() || !count_from() || !c.accept_punct(")")) return;
    } else if (!total() || !c.accept_punct("(") || !c.accept_word("SELECT") || !count_from() || !c.accept_punct(")")) {
        return;
    }
    if (!c.accept_word("WHERE") || !parse_where(c, form->where)) return;
    c.accept_punct(";");
    if (!c.at_end()) return;
    c.st.counter_recompute = std::move(form);
}

// INSERT's rows from a query: SELECT, WITH ... SELECT, TABLE t, or one of those in parentheses.
[[nodiscard]] bool at_insert_query(const cursor& c) noexcept {
    const std::uint32_t at = c.is_punct("(") ? 1 : 0;
    return c.is_word("SELECT", at) || c.is_word("WITH", at) || c.is_word("TABLE", at);
}

}  // namespace

bool parse_update(cursor& c, update_statement& out) {
    ++c.pos;  // UPDATE
    const std::uint32_t modifiers = c.pos;
    while (c.accept_word("LOW_PRIORITY") || c.accept_word("IGNORE")) {
    }
    out.modifiers = {modifiers, c.pos};
    const std::uint32_t tables = c.pos;
    if (!parse_table_ref(c, out.table, true)) return false;
    // Inner joins only: `, t`, `[INNER | CROSS] JOIN t [ON ...]`, `STRAIGHT_JOIN t [ON ...]`. A
    // LEFT/RIGHT/NATURAL join, USING, or parentheses are not ours. (One table, the common case,
    // meets SET at once.)
    while (!c.is_word("SET")) {
        if (c.accept_punct(",")) {
            if (!parse_table_ref(c, out.joined.emplace_back(), true)) return false;
            continue;
        }
        if (c.is_word("INNER") || c.is_word("CROSS")) ++c.pos;
        if (!c.accept_word("JOIN") && !c.accept_word("STRAIGHT_JOIN")) return false;
        if (!parse_table_ref(c, out.joined.emplace_back(), true)) return false;
        if (c.accept_word("ON") && !parse_join_condition(c, out.where)) return false;
    }
    out.tables = {tables, c.pos};
    const bool multi_table = !out.joined.empty();
    if (!c.accept_word("SET")) return false;
    do {
        const std::uint32_t start = c.pos;
        if (!parse_assignment(c, out.assignments.emplace_back())) {
            c.pos = start;
            if (!multi_table) note_subquery_assignment(c, out.table);
            if (!multi_table && c.st.reason == not_ours_reason::subquery_in_set && out.assignments.size() == 1) {
                c.pos = start;
                note_counter_recompute(c, out.table);
            }
            return false;
        }
    } while (c.accept_punct(","));
    if (c.accept_word("WHERE") && !parse_where(c, out.where, multi_table)) return false;
    // The server takes no LIMIT (or ORDER BY) in a multi-table UPDATE.
    if (!multi_table && c.is_word("LIMIT") && !parse_limit(c, out.limit)) return false;
    return c.at_statement_end();
}

namespace {

[[nodiscard]] bool parse_insert_value(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    if (parse_value_operand(c, out) && (c.is_punct(",") || c.is_punct(")"))) return true;
    c.pos = start;
    return parse_expression(c, out);
}

[[nodiscard]] bool parse_values_rows(cursor& c, insert_statement& out) {
    bool first = true;
    do {
        c.accept_word("ROW");
        if (!c.accept_punct("(")) return false;
        std::uint32_t width = 0;
        if (!c.is_punct(")")) {
            do {
                if (!parse_insert_value(c, out.values.emplace_back())) return false;
                ++width;
            } while (c.accept_punct(","));
        }
        if (!c.accept_punct(")")) return false;
        if (first) {
            out.row_width = width;
            first = false;
        } else if (width != out.row_width) {
            return false;  // the server rejects rows of different widths
        }
    } while (c.accept_punct(","));
    if (out.row_width == 0) out.values.clear();
    // MySQL 8.0.19 row alias: VALUES (...) AS new [(a, b)]
    if (c.accept_word("AS")) {
        if (!c.is_name()) return false;
        ++c.pos;
        if (c.accept_punct("(")) {
            do {
                if (!c.is_name()) return false;
                ++c.pos;
            } while (c.accept_punct(","));
            if (!c.accept_punct(")")) return false;
        }
    }
    return true;
}

// INSERT [IGNORE] INTO t (columns) SELECT ...: keeps the statement's parts when the SELECT is a plain
// one we read and ends the text (parsed_statement::insert_select). Only a plain INSERT or INSERT
// IGNORE with a column list: REPLACE and ON DUPLICATE KEY UPDATE change rows that exist, and without
// a column list the row's columns are not known here. The cursor ends anywhere (the statement is not
// ours either way).
void note_insert_select(cursor& c, const insert_statement& ins) {
    if (ins.replace || !ins.has_column_list || ins.set_form) return;
    auto form = std::make_shared<insert_select_form>();
    form->insert = ins;
    form->select_token = c.pos;
    if (!parse_select(c, form->select)) return;
    c.accept_punct(";");
    if (!c.at_end()) return;
    for (const auto& item : form->select.items) {
        cursor v(c.st);
        v.pos = item.span.first;
        operand& op = form->item_values.emplace_back();
        if (item.kind == select_item_kind::expression && parse_value_operand(v, op) && v.pos == item.span.last)
            continue;
        op = operand{};
        op.span = item.span;
        if (item.kind == select_item_kind::column) {
            op.kind = operand_kind::column;
            op.column = item.column;
        }
    }
    c.st.insert_select = std::move(form);
}

}  // namespace

bool parse_insert(cursor& c, insert_statement& out) {
    out.replace = c.is_word("REPLACE");
    ++c.pos;
    for (;;) {
        if (c.accept_word("LOW_PRIORITY") || c.accept_word("DELAYED") || c.accept_word("HIGH_PRIORITY")) continue;
        if (c.accept_word("IGNORE")) {
            out.ignore = true;
            continue;
        }
        break;
    }
    c.accept_word("INTO");
    if (!parse_table_ref(c, out.table, false)) return false;
    if (c.is_punct("(")) {
        if (at_insert_query(c)) {
            c.st.reason = not_ours_reason::insert_select;
            return false;
        }
        if (c.is_word("VALUES", 1) || c.is_punct("(", 1)) return false;
        ++c.pos;
        if (!c.is_punct(")")) {
            do {
                if (!parse_name_ref(c, out.columns.emplace_back(), 3)) return false;
            } while (c.accept_punct(","));
        }
        if (!c.accept_punct(")")) return false;
        out.has_column_list = true;
    }
    if (c.accept_word("VALUES") || c.accept_word("VALUE")) {
        if (!parse_values_rows(c, out)) return false;
        if (out.has_column_list && out.row_width != out.columns.size()) return false;
    } else if (!out.has_column_list && c.accept_word("SET")) {
        out.set_form = true;
        out.has_column_list = true;
        do {
            assignment a;
            if (!parse_assignment(c, a)) return false;
            out.columns.push_back(a.column);
            operand v = a.value;
            if (a.kind != assignment_kind::value) {
                v = operand{};
                v.span = {a.column.span.last + 1, a.span.last};
            }
            out.values.push_back(v);
        } while (c.accept_punct(","));
        out.row_width = static_cast<std::uint32_t>(out.columns.size());
    } else {
        if (at_insert_query(c)) {
            c.st.reason = not_ours_reason::insert_select;
            if (c.is_word("SELECT")) note_insert_select(c, out);
        }
        return false;
    }
    if (c.is_word("ON")) {
        if (out.replace) return false;
        ++c.pos;
        if (!c.accept_word("DUPLICATE") || !c.accept_word("KEY") || !c.accept_word("UPDATE")) return false;
        do {
            if (!parse_assignment(c, out.on_duplicate.emplace_back())) return false;
        } while (c.accept_punct(","));
    }
    if (c.accept_word("RETURNING")) {
        // MariaDB 10.5+: the inserted row comes back as a result set (Django uses it). What it
        // returns does not matter to the engine.
        out.returning = true;
        if (c.at_statement_end()) return false;
        while (!c.at_statement_end()) ++c.pos;
    }
    return c.at_statement_end();
}

bool parse_delete(cursor& c, delete_statement& out) {
    ++c.pos;  // DELETE
    const std::uint32_t modifiers = c.pos;
    while (c.accept_word("LOW_PRIORITY") || c.accept_word("QUICK") || c.accept_word("IGNORE")) {
    }
    out.modifiers = {modifiers, c.pos};
    // "DELETE t1 FROM t1 JOIN ...", "DELETE FROM t1, t2 USING ..." and "DELETE FROM t USING ..."
    // (several tables) stop here or at the name list.
    if (!c.accept_word("FROM")) return false;
    if (!parse_table_ref(c, out.table, true)) return false;
    if (c.accept_word("WHERE") && !parse_where(c, out.where)) return false;
    if (c.is_word("ORDER") && !parse_order_by(c, out.order_by)) return false;
    if (c.is_word("LIMIT") && !parse_limit(c, out.limit)) return false;
    return c.at_statement_end();  // RETURNING (MariaDB) is not read
}

}  // namespace claimguard::rules::sql::detail
