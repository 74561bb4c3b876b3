// Matching statements to stock and claim rules: counter reads, counter writes and claim inserts (tables,
// key columns, counters, guards). The other statements (transactions, SET, everything the policy
// sees): other_statements.cpp.
#include "rules/match/matcher.hpp"
#include "rules/match/matcher_detail.hpp"

#include <algorithm>

#include "rules/sql/parser.hpp"
#include "rules/sql/prefilter.hpp"
#include "rules/sql/text.hpp"

namespace claimguard::rules::match {
namespace {

using sql::compare_op;
using sql::name_ref;
using sql::no_token;
using sql::operand_kind;
using sql::parsed_statement;
using sql::predicate_kind;
using sql::table_ref;
using sql::where_clause;

// Two identifiers as written (quoted or not) that name the same thing.
[[nodiscard]] bool same_identifier(std::string_view a, std::string_view b) {
    return sql::identifier_equals(b, sql::unquote_identifier(a));
}

[[nodiscard]] bool table_matches(const parsed_statement& st, const table_ref& t, const table_name& rule_table,
                                 const match_context& ctx) {
    if (!sql::identifier_equals(st.text(t.name.name), rule_table.name)) return false;
    if (rule_table.schema.empty()) return true;
    if (t.name.qualifier != no_token) return sql::identifier_equals(st.text(t.name.qualifier), rule_table.schema);
    if (ctx.current_database) return sql::iequals(*ctx.current_database, rule_table.schema);
    return true;
}

[[nodiscard]] table_use use_of(const parsed_statement& st, const table_ref& t) {
    table_use u;
    u.written = st.text(t.span);
    if (t.name.qualifier != no_token) u.schema = st.text(t.name.qualifier);
    if (t.alias != no_token) u.alias = st.text(t.alias);
    return u;
}

// Whether `col` names `column` of the statement's table `t` (qualified by alias or name).
[[nodiscard]] bool column_is(const parsed_statement& st, const name_ref& col, std::string_view column,
                             const table_ref& t) {
    if (!sql::identifier_equals(st.text(col.name), column)) return false;
    if (col.qualifier == no_token) return true;
    const std::string_view q = st.text(col.qualifier);
    if (t.alias != no_token && same_identifier(st.text(t.alias), q)) return true;
    if (!same_identifier(st.text(t.name.name), q)) return false;
    if (col.schema == no_token || t.name.qualifier == no_token) return true;
    return same_identifier(st.text(t.name.qualifier), st.text(col.schema));
}

struct key_scan {
    small_vector<value_ref, 2> key;
    bool full = true;
    bool extra = false;
};

[[nodiscard]] key_scan scan_key(const parsed_statement& st, const where_clause& w, const table_ref& t,
                                const std::vector<std::string>& key_columns) {
    key_scan out;
    small_vector<bool, 8> used(w.predicates.size(), false);
    for (const auto& kc : key_columns) {
        value_ref v;
        for (std::size_t i = 0; i < w.predicates.size(); ++i) {
            const auto& p = w.predicates[i];
            if (!column_is(st, p.column, kc, t)) continue;
            const sql::operand* op = nullptr;
            if (p.kind == predicate_kind::compare && (p.op == compare_op::eq || p.op == compare_op::null_safe_eq))
                op = &p.value;
            else if (p.kind == predicate_kind::in_list && p.list_count == 1)
                op = &w.list_values[p.list_first];
            if (op == nullptr) continue;
            value_ref candidate = make_value(st, *op);
            if (!candidate.is_bindable()) continue;
            v = std::move(candidate);
            used[i] = true;
            break;
        }
        if (v.type == value_ref::kind::absent) out.full = false;
        out.key.push_back(std::move(v));
    }
    out.extra = std::find(used.begin(), used.end(), false) != used.end();
    return out;
}

void match_select(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    const auto& s = std::get<sql::select_statement>(st.body);
    if (!s.has_from) return;
    for (const auto& rule : rules.rules().stocks) {
        if (!table_matches(st, s.table, rule.table, ctx)) continue;
        counter_read r;
        bool found = false;
        bool star_seen = false;
        for (std::size_t i = 0; i < s.items.size() && !found; ++i) {
            const auto& item = s.items[i];
            if (item.kind == sql::select_item_kind::star) {
                star_seen = true;
            } else if (item.kind == sql::select_item_kind::column && column_is(st, item.column, rule.counter_column, s.table)) {
                found = true;
                if (!star_seen) r.counter_position = static_cast<std::uint32_t>(i);
                r.counter_label = item.alias != no_token ? st.text(item.alias) : st.text(item.column.name);
            }
        }
        if (!found && !star_seen) continue;
        if (!found) r.counter_label = rule.counter_column;
        key_scan k = scan_key(st, s.where, s.table, rule.key_columns);
        if (!k.full) continue;
        r.rule = &rule;
        r.table = use_of(st, s.table);
        r.key = std::move(k.key);
        r.lock = s.lock;
        r.plain = !k.extra && !s.items.empty() && s.items[0].span.first > 0 &&
                  sql::identifier_equals(st.text(s.items[0].span.first - 1), "SELECT");
        // The version column changes with every decrement: a kept reply would hand an optimistic
        // app a stale version (a conflict on each retry), so such reads always go to the server.
        for (const auto& item : s.items)
            if (item.kind == sql::select_item_kind::expression ||
                (rule.version_column && (item.kind == sql::select_item_kind::star ||
                                         column_is(st, item.column, *rule.version_column, s.table))))
                r.plain = false;
        out.facts.emplace_back(std::move(r));
    }
}

// Whether a WHERE clause has a condition on something other than the key columns and the
// counter (AND version = ?, AND status = 'ON', a join's condition): then zero rows may be that
// condition failing.
[[nodiscard]] bool says_more_than_key_and_counter(const parsed_statement& st, const where_clause& w,
                                                  const table_ref& t, const stock_rule& rule) {
    for (const auto& p : w.predicates) {
        if (p.kind == predicate_kind::constant) continue;
        if (p.kind == predicate_kind::column_compare) return true;
        if (column_is(st, p.column, rule.counter_column, t)) continue;
        bool on_key = false;
        for (const auto& kc : rule.key_columns)
            if (column_is(st, p.column, kc, t)) on_key = true;
        if (!on_key || p.kind == predicate_kind::arithmetic) return true;
    }
    return false;
}

// The integer value of a literal (placeholders and expressions are not known here).
[[nodiscard]] std::optional<std::int64_t> literal_integer(const value_ref& v) {
    if (v.type != value_ref::kind::literal) return std::nullopt;
    return v.decoded.integer;
}

// The strongest lower bound the WHERE clause puts on the counter of table `t`, and how it
// compares to floor + units. Every bound is also kept in `c.bounds`, to be judged again once
// placeholders are bound.
void find_guard(const parsed_statement& st, const where_clause& where, const table_ref& t, const stock_rule& rule,
                counter_change& c) {
    std::optional<std::int64_t> best;  // smallest counter value the bound lets through
    bool placeholder = false;
    for (const auto& p : where.predicates) {
        if (p.kind != predicate_kind::compare && p.kind != predicate_kind::arithmetic) continue;
        if (!column_is(st, p.column, rule.counter_column, t)) continue;
        if (p.op != compare_op::ge && p.op != compare_op::gt && p.op != compare_op::eq) continue;
        counter_bound b;
        b.base = make_value(st, p.value);
        b.strict = p.op == compare_op::gt;
        bool has_placeholder = b.base.type == value_ref::kind::placeholder;
        if (p.kind == predicate_kind::arithmetic) {
            for (std::uint32_t i = 0; i < p.list_count; ++i) {
                b.terms.push_back(make_value(st, where.list_values[p.list_first + i]));
                has_placeholder = has_placeholder || b.terms.back().type == value_ref::kind::placeholder;
            }
            b.subtract = p.subtract;
        }
        c.bounds.push_back(b);
        if (has_placeholder) {
            placeholder = true;
            if (!c.guard_bound && p.kind == predicate_kind::compare) {
                c.guard_bound = b.base;
                c.guard_strict = b.strict;
            }
            continue;
        }
        const std::optional<std::int64_t> lowest = b.lowest(literal_integer);
        if (!lowest) continue;
        if (!best || *lowest > *best) {
            best = lowest;
            // guard_bound names a plain `counter >= B`; an arithmetic bound is described by `bounds`.
            if (p.kind == predicate_kind::compare) {
                c.guard_bound = b.base;
                c.guard_strict = b.strict;
            } else {
                c.guard_bound.reset();
            }
        }
    }
    if (!best && !placeholder) {
        c.guard = guard_state::none;
        return;
    }
    if (!best || !c.delta) {
        c.guard = guard_state::unknown;
        return;
    }
    const std::int64_t units = -*c.delta;
    const bool enough = units <= 0 || (rule.floor <= INT64_MAX - units && *best >= rule.floor + units);
    // A literal bound too low may still be outdone by one with a placeholder: judged when bound.
    c.guard = enough ? guard_state::sufficient : placeholder ? guard_state::unknown : guard_state::insufficient;
}

// The name a table goes by in the statement: its alias, else its name.
[[nodiscard]] std::string_view effective_name(const parsed_statement& st, const table_ref& t) {
    return st.text(t.alias != no_token ? t.alias : t.name.name);
}

void match_update(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    const auto& u = std::get<sql::update_statement>(st.body);
    // Every table of the statement: more than one in a multi-table UPDATE (a join).
    small_vector<const table_ref*, 2> tables{&u.table};
    for (const auto& j : u.joined) tables.push_back(&j);
    const bool multi_table = tables.size() > 1;
    std::size_t protected_tables = 0;  // multi-table only: how many of its tables a stock rule names
    for (std::size_t i = 0; multi_table && i < tables.size(); ++i)
        for (const auto& rule : rules.rules().stocks)
            if (table_matches(st, *tables[i], rule.table, ctx)) {
                ++protected_tables;
                break;
            }
    for (const auto& rule : rules.rules().stocks) {
        const table_ref* stock = nullptr;
        for (const table_ref* t : tables)
            if (table_matches(st, *t, rule.table, ctx)) stock = t;
        if (stock == nullptr) continue;
        const table_ref& table = *stock;
        if (multi_table) {
            // Two stock rows changed by one statement (or one table twice) is not a take the engine
            // can follow; nor is a column whose table is uncertain (another table called by the stock
            // table's name, as in `JOIN campaign coupon_stock`).
            bool ambiguous = false;
            for (const table_ref* t : tables)
                if (t != stock && (same_identifier(effective_name(st, *t), st.text(table.name.name)) ||
                                   same_identifier(effective_name(st, *t), effective_name(st, table))))
                    ambiguous = true;
            if (protected_tables > 1 || ambiguous) {
                out.facts.emplace_back(unmodeled{&rule, nullptr,
                                                 "a multi-table UPDATE of more than one protected table, or with "
                                                 "table names that do not tell its tables apart",
                                                 "multi_table_update"});
                continue;
            }
        }
        std::optional<std::uint32_t> counter;
        std::optional<std::uint32_t> version;
        int counter_count = 0;
        bool key_assigned = false;
        for (std::uint32_t i = 0; i < u.assignments.size(); ++i) {
            const auto& a = u.assignments[i];
            if (column_is(st, a.column, rule.counter_column, table)) {
                ++counter_count;
                counter = i;
            } else if (rule.version_column && column_is(st, a.column, *rule.version_column, table)) {
                version = i;
            }
        }
        for (const auto& a : u.assignments) {
            for (const auto& kc : rule.key_columns)
                if (column_is(st, a.column, kc, table)) key_assigned = true;
        }
        if (key_assigned) {
            // The stock moves to another key (or a new row appears under it): not a take or a restock
            // the engine can follow.
            out.facts.emplace_back(unmodeled{&rule, nullptr, "a key column of the stock row is assigned", "key_column_assigned"});
            continue;
        }
        if (!counter) continue;
        if (counter_count > 1) {
            out.facts.emplace_back(unmodeled{&rule, nullptr, "the counter is assigned more than once", "counter_assigned_twice"});
            continue;
        }
        const auto& a = u.assignments[*counter];
        key_scan k = scan_key(st, u.where, table, rule.key_columns);
        const bool relative =
            a.kind == sql::assignment_kind::relative && column_is(st, a.base, rule.counter_column, table);
        if (!relative) {
            // Any other write of the counter (a value, an expression, NULL): the engine takes the
            // rule's units for it, whatever it says.
            counter_write w;
            w.rule = &rule;
            w.table = use_of(st, table);
            w.key = std::move(k.key);
            w.full_key = k.full;
            if (a.kind == sql::assignment_kind::value) {
                w.value = make_value(st, a.value);
            } else {
                w.value.type = value_ref::kind::expression;
                w.value.text = st.text(a.value.span);
            }
            w.assignment = *counter;
            w.version_assignment = version;
            for (const auto& p : u.where.predicates) {
                if (p.kind == predicate_kind::compare && p.op == compare_op::eq &&
                    column_is(st, p.column, rule.counter_column, table)) {
                    w.expected = make_value(st, p.value);
                    break;
                }
            }
            // A join's condition, or a condition on another table, may be what fails.
            w.extra_conditions = k.extra || multi_table;
            out.facts.emplace_back(std::move(w));
        } else {
            counter_change c;
            c.rule = &rule;
            c.table = use_of(st, table);
            c.key = std::move(k.key);
            c.full_key = k.full;
            c.sign = a.sign;
            c.amount = make_value(st, a.value);
            if (c.amount.type == value_ref::kind::literal && c.amount.decoded.integer &&
                *c.amount.decoded.integer != INT64_MIN)
                c.delta = a.sign == '-' ? -*c.amount.decoded.integer : *c.amount.decoded.integer;
            c.assignment = *counter;
            c.version_assignment = version;
            c.extra_conditions = multi_table || says_more_than_key_and_counter(st, u.where, table, rule);
            find_guard(st, u.where, table, rule, c);
            out.facts.emplace_back(std::move(c));
        }
    }
}

// The value row `row` gives `column`: by the column list, or by position in the table's
// columns (`table_columns`) for an INSERT without one.
[[nodiscard]] value_ref row_value(const parsed_statement& st, const sql::insert_statement& ins, std::size_t row,
                                  std::string_view column, const std::vector<std::string>* table_columns) {
    if (ins.has_column_list) {
        for (std::size_t c = 0; c < ins.columns.size(); ++c)
            if (column_is(st, ins.columns[c], column, ins.table)) return make_value(st, ins.values[row * ins.row_width + c]);
        return {};
    }
    if (table_columns == nullptr || table_columns->size() != ins.row_width) return {};
    for (std::size_t c = 0; c < table_columns->size(); ++c)
        if (sql::identifier_equals((*table_columns)[c], column)) return make_value(st, ins.values[row * ins.row_width + c]);
    return {};
}

void match_insert(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    const auto& ins = std::get<sql::insert_statement>(st.body);
    // REPLACE or INSERT ... ON DUPLICATE KEY UPDATE of a stock row overwrites an existing counter
    // (Sequelize's upsert, framework saves): neither a take nor a restock the engine can follow.
    // A plain INSERT of a stock row only creates one (it fails on an existing key).
    if (ins.replace || !ins.on_duplicate.empty()) {
        for (const auto& rule : rules.rules().stocks)
            if (table_matches(st, ins.table, rule.table, ctx))
                out.facts.emplace_back(unmodeled{&rule, nullptr,
                                                 "REPLACE or INSERT ... ON DUPLICATE KEY UPDATE of a stock row",
                                                 "stock_row_upsert"});
    }
    for (const auto& rule : rules.rules().claims) {
        if (!table_matches(st, ins.table, rule.table, ctx)) continue;
        claim_insert ci;
        ci.rule = &rule;
        ci.stock = rules.stock_named(rule.stock_rule);
        ci.table = use_of(st, ins.table);
        ci.replace = ins.replace;
        ci.ignore = ins.ignore;
        ci.on_duplicate_update = !ins.on_duplicate.empty();
        const std::vector<std::string>* columns = nullptr;
        if (!ins.has_column_list && ctx.table_columns) {
            columns = ctx.table_columns(ctx.table_columns_owner, rule, ci.table.schema);
            if (columns != nullptr && columns->size() != ins.row_width) columns = nullptr;
        }
        ci.columns_known = ins.has_column_list || columns != nullptr;
        for (std::size_t r = 0; r < ins.row_count(); ++r) {
            claim_row row;
            for (const auto& col : rule.idempotency_columns) row.idempotency.push_back(row_value(st, ins, r, col, columns));
            if (rule.idempotency_key_column)
                row.idempotency_key = row_value(st, ins, r, *rule.idempotency_key_column, columns);
            if (ci.stock != nullptr) {
                for (const auto& kc : ci.stock->key_columns) {
                    value_ref v;
                    for (const auto& [claim_col, stock_col] : rule.stock_key_mapping)
                        if (sql::iequals(stock_col, kc)) {
                            v = row_value(st, ins, r, claim_col, columns);
                            break;
                        }
                    row.stock_key.push_back(std::move(v));
                }
            }
            ci.rows.push_back(std::move(row));
        }
        out.facts.emplace_back(std::move(ci));
    }
}

void match_delete(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    const auto& d = std::get<sql::delete_statement>(st.body);
    // A stock row deleted is stock gone (or, re-inserted later, stock made up): nothing the engine
    // can follow.
    for (const auto& rule : rules.rules().stocks)
        if (table_matches(st, d.table, rule.table, ctx))
            out.facts.emplace_back(unmodeled{&rule, nullptr, "a DELETE of a stock row", "stock_row_delete"});
    for (const auto& rule : rules.rules().claims) {
        if (!table_matches(st, d.table, rule.table, ctx)) continue;
        bool only_constants = true;
        for (const auto& p : d.where.predicates)
            if (p.kind != predicate_kind::constant) only_constants = false;
        if (only_constants) {
            out.facts.emplace_back(unmodeled{nullptr, &rule, "a DELETE of every claim row (no condition on a column)",
                                             "delete_without_where"});
            continue;
        }
        claim_delete c;
        c.rule = &rule;
        c.stock = rules.stock_named(rule.stock_rule);
        c.table = use_of(st, d.table);
        key_scan idem = scan_key(st, d.where, d.table, rule.idempotency_columns);
        c.idempotency = std::move(idem.key);
        c.by_idempotency = idem.full;
        // The claim columns that hold the stock key, in the stock rule's key order.
        std::vector<std::string> holders;
        if (c.stock != nullptr)
            for (const auto& kc : c.stock->key_columns)
                for (const auto& [claim_col, stock_col] : rule.stock_key_mapping)
                    if (sql::iequals(stock_col, kc)) holders.push_back(claim_col);
        if (c.stock != nullptr && holders.size() == c.stock->key_columns.size()) {
            c.stock_key_held = true;
            key_scan stock = scan_key(st, d.where, d.table, holders);
            c.stock_key = std::move(stock.key);
            c.stock_key_pinned = stock.full;
        }
        for (const auto& p : d.where.predicates) {
            if (p.kind == predicate_kind::constant) continue;
            bool known = false;
            for (const auto& col : rule.idempotency_columns) known = known || column_is(st, p.column, col, d.table);
            for (const auto& col : holders) known = known || column_is(st, p.column, col, d.table);
            if (!known) c.extra_conditions = true;
        }
        if (!d.order_by.empty() || !d.limit.empty()) c.extra_conditions = c.ordered_or_limited = true;
        out.facts.emplace_back(std::move(c));
    }
}

}  // namespace

match_result as_unmodeled(const match_result& facts, std::string_view why, std::string_view code) {
    match_result out;
    auto add = [&](const stock_rule* stock, const claim_rule* claim) {
        if (stock == nullptr && claim == nullptr) return;
        for (const auto& f : out.facts) {
            const auto& u = std::get<unmodeled>(f);
            if (u.stock == stock && u.claim == claim) return;
        }
        out.facts.emplace_back(unmodeled{stock, claim, why, code});
    };
    for (const auto& f : facts.facts) {
        if (const auto* w = std::get_if<counter_write>(&f)) add(w->rule, nullptr);
        else if (const auto* c = std::get_if<counter_change>(&f)) add(c->rule, nullptr);
        else if (const auto* i = std::get_if<claim_insert>(&f)) add(nullptr, i->rule);
        else if (const auto* u = std::get_if<unmodeled>(&f)) add(u->stock, u->claim);
        else if (const auto* d = std::get_if<claim_delete>(&f))
            add(nullptr, d->rule);
    }
    return out;
}

value_ref make_value(const parsed_statement& st, const sql::operand& op) {
    value_ref v;
    v.text = st.text(op.span);
    // A literal with a comment inside (- /* x */ 5) has no clean bytes to reuse.
    bool clean = true;
    for (std::uint32_t i = op.span.first + 1; i < op.span.last; ++i)
        if ((st.tokens[i].flags & sql::token_flag::comment_before) != 0) clean = false;
    switch (op.kind) {
        case operand_kind::literal:
            if (!clean) {
                v.type = value_ref::kind::expression;
                break;
            }
            v.type = value_ref::kind::literal;
            v.decoded = sql::decode_literal(st, op);
            break;
        case operand_kind::placeholder:
            if (!clean) {
                v.type = value_ref::kind::expression;
                break;
            }
            v.type = value_ref::kind::placeholder;
            v.placeholder_index = st.tokens[op.value_token].aux;
            break;
        case operand_kind::null: v.type = value_ref::kind::null; break;
        case operand_kind::default_: v.type = value_ref::kind::default_; break;
        default: v.type = value_ref::kind::expression; break;
    }
    return v;
}

bool match_insert_select(const parsed_statement& st, const rule_index& rules, const match_context& ctx,
                         match_result& out) {
    const sql::insert_select_form* form = st.insert_select.get();
    if (form == nullptr) return false;
    const auto& ins = form->insert;
    const auto& sel = form->select;
    if (ins.replace || !ins.has_column_list || ins.set_form || !ins.on_duplicate.empty() || ins.returning) return false;
    // One stock table; no ORDER BY, LIMIT, locking clause or SELECT modifier (DISTINCT, ...): the rows
    // are exactly those the WHERE selects.
    if (!sel.has_from || !sel.order_by.empty() || !sel.limit.empty() || sel.lock != sql::lock_clause::none)
        return false;
    if (sel.items.empty() || sel.items.size() != ins.columns.size() || form->item_values.size() != sel.items.size() ||
        sel.items.front().span.first != form->select_token + 1)
        return false;
    const claim_rule* claim = nullptr;
    for (const auto& rule : rules.rules().claims) {
        if (!table_matches(st, ins.table, rule.table, ctx)) continue;
        if (claim != nullptr) return false;  // two claim rules on one table: whose claim would it be?
        claim = &rule;
    }
    if (claim == nullptr) return false;
    const stock_rule* stock = rules.stock_named(claim->stock_rule);
    if (stock == nullptr || !table_matches(st, sel.table, stock->table, ctx)) return false;

    // The WHERE: each stock key column pinned by exactly one equality with a literal or ?, and nothing
    // else but lower bounds on the counter that the take's own guard (c >= floor + units) implies. Then
    // the SELECT returns the one stock row of that key, or none.
    small_vector<const sql::operand*, 2> key_values(stock->key_columns.size(), nullptr);
    bool guarded = false;
    for (const auto& p : sel.where.predicates) {
        bool on_key = false;
        for (std::size_t k = 0; k < stock->key_columns.size(); ++k) {
            if (!column_is(st, p.column, stock->key_columns[k], sel.table)) continue;
            on_key = true;
            const sql::operand* op = nullptr;
            if (p.kind == predicate_kind::compare && (p.op == compare_op::eq || p.op == compare_op::null_safe_eq))
                op = &p.value;
            else if (p.kind == predicate_kind::in_list && p.list_count == 1)
                op = &sel.where.list_values[p.list_first];
            if (op == nullptr || key_values[k] != nullptr || !make_value(st, *op).is_bindable()) return false;
            key_values[k] = op;
        }
        if (on_key) continue;
        if (!column_is(st, p.column, stock->counter_column, sel.table)) return false;
        if (p.kind != predicate_kind::compare && p.kind != predicate_kind::arithmetic) return false;
        if (p.op != compare_op::ge && p.op != compare_op::gt) return false;
        counter_bound b;
        b.base = make_value(st, p.value);
        b.strict = p.op == compare_op::gt;
        for (std::uint32_t i = 0; p.kind == predicate_kind::arithmetic && i < p.list_count; ++i)
            b.terms.push_back(make_value(st, sel.where.list_values[p.list_first + i]));
        b.subtract = p.subtract;
        const std::optional<std::int64_t> lowest = b.lowest(literal_integer);
        // A bound with a placeholder, or above what the take checks, could fail where the take succeeds.
        if (!lowest || stock->floor > INT64_MAX - stock->units || *lowest > stock->floor + stock->units) return false;
        guarded = true;
    }
    for (const auto* v : key_values)
        if (v == nullptr) return false;

    // Each inserted column's value: a literal, ?, or NULL item, or a stock key column (the WHERE's value).
    small_vector<value_ref, 4> values;
    small_vector<sql::token_span, 4> spans;
    small_vector<std::optional<std::size_t>, 4> key_item;  // the stock key column an item names
    for (std::size_t i = 0; i < sel.items.size(); ++i) {
        const sql::operand& op = form->item_values[i];
        if (op.kind == operand_kind::column) {
            std::optional<std::size_t> which;
            for (std::size_t k = 0; k < stock->key_columns.size(); ++k)
                if (column_is(st, op.column, stock->key_columns[k], sel.table)) which = k;
            if (!which) return false;  // another column of the row: its value is not known here
            values.push_back(make_value(st, *key_values[*which]));
            spans.push_back(key_values[*which]->span);
            key_item.push_back(which);
            continue;
        }
        if (op.kind != operand_kind::literal && op.kind != operand_kind::placeholder && op.kind != operand_kind::null)
            return false;
        value_ref v = make_value(st, op);
        if (v.type == value_ref::kind::expression) return false;
        values.push_back(std::move(v));
        spans.push_back(op.span);
        key_item.push_back(std::nullopt);
    }
    auto column_index = [&](std::string_view column) -> std::optional<std::size_t> {
        for (std::size_t c = 0; c < ins.columns.size(); ++c)
            if (column_is(st, ins.columns[c], column, ins.table)) return c;
        return std::nullopt;
    };

    claim_row row;
    for (const auto& col : claim->idempotency_columns) {
        const auto c = column_index(col);
        if (!c || !values[*c].is_bindable()) return false;
        row.idempotency.push_back(values[*c]);
    }
    if (claim->idempotency_key_column) {
        const auto c = column_index(*claim->idempotency_key_column);
        row.idempotency_key = c ? values[*c] : value_ref{};
    }
    // The claim's stock key (its columns through consumes) must be the row the WHERE pins: the key
    // column itself, or the same literal as written.
    for (std::size_t k = 0; k < stock->key_columns.size(); ++k) {
        std::optional<std::size_t> c;
        for (const auto& [claim_col, stock_col] : claim->stock_key_mapping)
            if (sql::iequals(stock_col, stock->key_columns[k])) c = column_index(claim_col);
        if (!c) return false;
        const value_ref where = make_value(st, *key_values[k]);
        const bool same =
            key_item[*c] == k || (values[*c].type == value_ref::kind::literal &&
                                  where.type == value_ref::kind::literal && values[*c].text == where.text);
        if (!same) return false;
        row.stock_key.push_back(where);
    }

    claim_insert ci;
    ci.rule = claim;
    ci.stock = stock;
    ci.table = use_of(st, ins.table);
    ci.ignore = ins.ignore;
    ci.rows.push_back(std::move(row));
    ci.from_select = true;
    ci.select_guarded = guarded;
    ci.select_token = form->select_token;
    ci.select_values = std::move(spans);
    out.facts.emplace_back(std::move(ci));
    return true;
}

bool match_counter_recompute(const parsed_statement& st, const rule_index& rules, const match_context& ctx,
                             match_result& out) {
    const sql::counter_recompute_form* form = st.counter_recompute.get();
    if (form == nullptr) return false;
    for (const auto& rule : rules.rules().stocks) {
        if (!table_matches(st, form->table, rule.table, ctx) ||
            !column_is(st, form->column, rule.counter_column, form->table))
            continue;
        const key_scan key = scan_key(st, form->where, form->table, rule.key_columns);
        if (!key.full || key.extra) return false;
        for (const auto& claim : rules.rules().claims) {
            if (claim.stock_rule != rule.name || !table_matches(st, form->counted, claim.table, ctx)) continue;
            std::vector<std::string> holders;  // the claim columns holding the stock key, in its order
            for (const auto& kc : rule.key_columns)
                for (const auto& [claim_col, stock_col] : claim.stock_key_mapping)
                    if (sql::iequals(stock_col, kc)) holders.push_back(claim_col);
            if (holders.size() != rule.key_columns.size()) return false;
            const key_scan counted = scan_key(st, form->count_where, form->counted, holders);
            if (!counted.full || counted.extra) return false;
            counter_write w;
            w.rule = &rule;
            w.table = use_of(st, form->table);
            w.key = key.key;
            w.full_key = true;
            w.value.type = value_ref::kind::expression;
            w.recomputed = true;
            w.counted = &claim;
            w.counted_key = counted.key;
            out.facts.emplace_back(std::move(w));
            return true;
        }
        return false;
    }
    return false;
}

bool sets_counter_from_subquery(const parsed_statement& st, const rule_index& rules, const match_context& ctx) {
    if (st.reason != sql::not_ours_reason::subquery_in_set) return false;
    return std::any_of(rules.rules().stocks.begin(), rules.rules().stocks.end(), [&](const stock_rule& rule) {
        return table_matches(st, st.not_ours_table, rule.table, ctx) &&
               column_is(st, st.not_ours_column, rule.counter_column, st.not_ours_table);
    });
}

match_result match(const parsed_statement& st, const rule_index& rules, const match_context& context) {
    match_result out;
    switch (st.kind) {
        case sql::statement_kind::select: match_select(st, rules, context, out); break;
        case sql::statement_kind::update: match_update(st, rules, context, out); break;
        case sql::statement_kind::insert: match_insert(st, rules, context, out); break;
        case sql::statement_kind::delete_: match_delete(st, rules, context, out); break;
        case sql::statement_kind::transaction: match_transaction(st, out); break;
        case sql::statement_kind::set: match_set(st, rules, out); break;
        case sql::statement_kind::use: {
            session_change c;
            c.setting = session_setting::database;
            c.database = st.text(std::get<sql::use_statement>(st.body).database);
            out.facts.emplace_back(std::move(c));
            break;
        }
        case sql::statement_kind::not_ours: match_not_ours(st, rules, context, out); break;
    }
    match_database_code(st, rules, out);
    return out;
}

const stock_rule* stock_written(const parsed_statement& st, const rule_index& rules, const match_context& context) {
    small_vector<const table_ref*, 2> tables;
    if (const auto* u = std::get_if<sql::update_statement>(&st.body)) {
        tables.push_back(&u->table);
        for (const auto& t : u->joined) tables.push_back(&t);
    } else if (const auto* i = std::get_if<sql::insert_statement>(&st.body)) {
        tables.push_back(&i->table);
    } else if (const auto* d = std::get_if<sql::delete_statement>(&st.body)) {
        tables.push_back(&d->table);
    }
    for (const auto* t : tables)
        for (const auto& rule : rules.rules().stocks)
            if (table_matches(st, *t, rule.table, context)) return &rule;
    return nullptr;
}

}  // namespace claimguard::rules::match
