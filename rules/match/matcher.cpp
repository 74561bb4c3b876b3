// Matching statements to stock and claim rules: tables, key columns, counters, guards.
#include "rules/match/matcher.hpp"

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
// counter (AND version = ?, AND status = 'ON'): then zero rows may be that condition failing.
[[nodiscard]] bool says_more_than_key_and_counter(const parsed_statement& st, const where_clause& w,
                                                  const table_ref& t, const stock_rule& rule) {
    for (const auto& p : w.predicates) {
        if (p.kind == predicate_kind::constant) continue;
        if (column_is(st, p.column, rule.counter_column, t)) continue;
        bool on_key = false;
        for (const auto& kc : rule.key_columns)
            if (column_is(st, p.column, kc, t)) on_key = true;
        if (!on_key) return true;
    }
    return false;
}

// The strongest lower bound the WHERE clause puts on the counter, and how it compares to
// floor + units.
void find_guard(const parsed_statement& st, const sql::update_statement& u, const stock_rule& rule,
                counter_change& c) {
    std::optional<std::int64_t> best;  // smallest counter value the bound lets through
    bool placeholder = false;
    for (const auto& p : u.where.predicates) {
        if (p.kind != predicate_kind::compare || !column_is(st, p.column, rule.counter_column, u.table)) continue;
        if (p.op != compare_op::ge && p.op != compare_op::gt && p.op != compare_op::eq) continue;
        value_ref v = make_value(st, p.value);
        if (v.type == value_ref::kind::placeholder) {
            placeholder = true;
            if (!c.guard_bound) {
                c.guard_bound = v;
                c.guard_strict = p.op == compare_op::gt;
            }
            continue;
        }
        if (v.type != value_ref::kind::literal || !v.decoded.integer) continue;
        const std::int64_t b = *v.decoded.integer;
        const std::int64_t lowest = p.op == compare_op::gt ? (b == INT64_MAX ? b : b + 1) : b;
        if (!best || lowest > *best) {
            best = lowest;
            c.guard_bound = v;
            c.guard_strict = p.op == compare_op::gt;
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
    c.guard = enough ? guard_state::sufficient : guard_state::insufficient;
}

void match_update(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    const auto& u = std::get<sql::update_statement>(st.body);
    for (const auto& rule : rules.rules().stocks) {
        if (!table_matches(st, u.table, rule.table, ctx)) continue;
        std::optional<std::uint32_t> counter;
        std::optional<std::uint32_t> version;
        int counter_count = 0;
        bool key_assigned = false;
        for (std::uint32_t i = 0; i < u.assignments.size(); ++i) {
            const auto& a = u.assignments[i];
            if (column_is(st, a.column, rule.counter_column, u.table)) {
                ++counter_count;
                counter = i;
            } else if (rule.version_column && column_is(st, a.column, *rule.version_column, u.table)) {
                version = i;
            }
        }
        for (const auto& a : u.assignments) {
            for (const auto& kc : rule.key_columns)
                if (column_is(st, a.column, kc, u.table)) key_assigned = true;
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
        key_scan k = scan_key(st, u.where, u.table, rule.key_columns);
        const bool relative = a.kind == sql::assignment_kind::relative && column_is(st, a.base, rule.counter_column, u.table);
        if (!relative) {
            // Any other write of the counter (a value, an expression, NULL): the engine takes the
            // rule's units for it, whatever it says.
            counter_write w;
            w.rule = &rule;
            w.table = use_of(st, u.table);
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
                    column_is(st, p.column, rule.counter_column, u.table)) {
                    w.expected = make_value(st, p.value);
                    break;
                }
            }
            w.extra_conditions = k.extra;
            out.facts.emplace_back(std::move(w));
        } else {
            counter_change c;
            c.rule = &rule;
            c.table = use_of(st, u.table);
            c.key = std::move(k.key);
            c.full_key = k.full;
            c.sign = a.sign;
            c.amount = make_value(st, a.value);
            if (c.amount.type == value_ref::kind::literal && c.amount.decoded.integer &&
                *c.amount.decoded.integer != INT64_MIN)
                c.delta = a.sign == '-' ? -*c.amount.decoded.integer : *c.amount.decoded.integer;
            c.assignment = *counter;
            c.version_assignment = version;
            c.extra_conditions = says_more_than_key_and_counter(st, u.where, u.table, rule);
            find_guard(st, u, rule, c);
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
            columns = ctx.table_columns(ctx.table_columns_owner, rule);
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

void match_transaction(const parsed_statement& st, match_result& out) {
    const auto& t = std::get<sql::transaction_statement>(st.body);
    transaction_boundary b;
    switch (t.kind) {
        case sql::transaction_kind::begin: b.event = transaction_event::begin; break;
        case sql::transaction_kind::commit: b.event = transaction_event::commit; break;
        case sql::transaction_kind::rollback: b.event = transaction_event::rollback; break;
        case sql::transaction_kind::savepoint: b.event = transaction_event::savepoint; break;
        case sql::transaction_kind::rollback_to_savepoint: b.event = transaction_event::rollback_to_savepoint; break;
        case sql::transaction_kind::release_savepoint: b.event = transaction_event::release_savepoint; break;
    }
    b.chain = t.chain == sql::tristate::yes;
    b.release = t.release == sql::tristate::yes;
    b.read_only = t.read_only;
    if (t.savepoint != no_token) b.savepoint = st.text(t.savepoint);
    out.facts.emplace_back(b);
}

[[nodiscard]] transaction_event autocommit_event(const parsed_statement& st, const sql::operand& v) {
    if (v.kind == operand_kind::literal) {
        const auto d = sql::decode_literal(st, v);
        if (d.integer && (*d.integer == 0 || *d.integer == 1))
            return *d.integer == 1 ? transaction_event::autocommit_on : transaction_event::autocommit_off;
        if (d.kind == sql::literal_kind::string) {
            if (sql::iequals(d.bytes, "ON") || d.bytes == "1") return transaction_event::autocommit_on;
            if (sql::iequals(d.bytes, "OFF") || d.bytes == "0") return transaction_event::autocommit_off;
        }
    } else if (v.kind == operand_kind::word) {
        const std::string_view w = st.text(v.column.name);
        if (sql::iequals(w, "ON")) return transaction_event::autocommit_on;
        if (sql::iequals(w, "OFF")) return transaction_event::autocommit_off;
    }
    return transaction_event::autocommit_unknown;
}

// Whether `sql` contains `name` as a whole word, ignoring ASCII case.
[[nodiscard]] bool mentions(std::string_view sql, std::string_view name) {
    if (name.empty() || sql.size() < name.size()) return false;
    for (std::size_t i = 0; i + name.size() <= sql.size(); ++i) {
        if (i > 0 && sql::is_ident_byte(sql[i - 1])) continue;
        if (sql::iequals(sql.substr(i, name.size()), name) &&
            (i + name.size() == sql.size() || !sql::is_ident_byte(sql[i + name.size()])))
            return true;
    }
    return false;
}

// A character set named by a word, quoted name or string.
[[nodiscard]] std::optional<sql::charset> charset_of(const parsed_statement& st, const sql::operand& v) {
    if (v.kind == operand_kind::word) return sql::charset_from_name(sql::unquote_identifier(st.text(v.column.name)));
    if (v.kind == operand_kind::literal) {
        const auto d = sql::decode_literal(st, v);
        if (d.kind == sql::literal_kind::string) return sql::charset_from_name(d.bytes);
    }
    return std::nullopt;
}

void match_set(const parsed_statement& st, const rule_index& rules, match_result& out) {
    const auto& s = std::get<sql::set_statement>(st.body);
    for (const auto& item : s.items) {
        if (item.target != sql::set_target::variable) {
            session_change c;
            c.setting = session_setting::client_charset;
            c.value = make_value(st, item.value);
            if (item.value.kind == operand_kind::word) c.value.type = value_ref::kind::expression;
            c.charset = charset_of(st, item.value);
            out.facts.emplace_back(std::move(c));
            continue;
        }
        if (item.scope == sql::variable_scope::user) {
            // SQL text kept in a user variable for PREPARE ... FROM @v: the statement it becomes is
            // out of sight, so the text naming a protected table gets the policy now.
            if (item.value.kind != operand_kind::literal) continue;
            const auto d = sql::decode_literal(st, item.value);
            if (d.kind != sql::literal_kind::string) continue;
            for (const auto& r : rules.rules().stocks)
                if (mentions(d.bytes, r.table.name))
                    out.facts.emplace_back(unmodeled{&r, nullptr, "SQL text naming the rule's table kept in a user variable",
                                                     "sql_in_variable"});
            for (const auto& r : rules.rules().claims)
                if (mentions(d.bytes, r.table.name))
                    out.facts.emplace_back(unmodeled{nullptr, &r, "SQL text naming the rule's table kept in a user variable",
                                                     "sql_in_variable"});
            continue;
        }
        if (item.scope != sql::variable_scope::session) continue;  // GLOBAL/PERSIST
        const std::string name = sql::unquote_identifier(item.name);
        if (sql::iequals(name, "autocommit")) {
            transaction_boundary b;
            b.event = autocommit_event(st, item.value);
            out.facts.emplace_back(b);
        } else if (sql::iequals(name, "sql_mode")) {
            session_change c;
            c.setting = session_setting::sql_mode;
            c.value = make_value(st, item.value);
            if (item.value.kind == operand_kind::literal) {
                const auto d = sql::decode_literal(st, item.value);
                if (d.kind == sql::literal_kind::string) c.sql_mode = sql::parse_sql_mode(d.bytes);
            }
            out.facts.emplace_back(std::move(c));
        } else if (sql::iequals(name, "character_set_client")) {
            session_change c;
            c.setting = session_setting::client_charset;
            c.value = make_value(st, item.value);
            c.charset = charset_of(st, item.value);
            out.facts.emplace_back(std::move(c));
        }
    }
}

// A single statement that only reads (SELECT with a join, IN list or function; SHOW, ...): the
// guarantee never rests on reads, so it is not a shape the policy needs to see.
[[nodiscard]] bool only_reads(const parsed_statement& st) {
    if (st.reason == sql::not_ours_reason::several_statements || st.tokens.empty()) return false;
    const std::string_view first = st.text(0);
    if (sql::iequals(first, "SELECT")) {
        // SELECT ... INTO is still a read; a function call could write, but never a counter
        // claimguard promises about without the function being a rule's table write itself.
        return true;
    }
    return sql::iequals(first, "SHOW") || sql::iequals(first, "DESCRIBE") || sql::iequals(first, "DESC") ||
           sql::iequals(first, "EXPLAIN") || sql::iequals(first, "HELP");
}

[[nodiscard]] std::string_view not_ours_code(sql::not_ours_reason r) {
    switch (r) {
        case sql::not_ours_reason::several_statements: return "several_statements";
        case sql::not_ours_reason::unsupported_syntax: return "unsupported_syntax";
        case sql::not_ours_reason::other_statement: return "other_statement";
        case sql::not_ours_reason::lex_error: return "lex_error";
        default: return "not_recognised";
    }
}

// XA START / PREPARE / COMMIT / ROLLBACK: the session's transaction boundaries in XA form.
[[nodiscard]] bool match_xa(const parsed_statement& st, match_result& out) {
    if (st.tokens.size() < 2 || !sql::iequals(st.text(0), "XA")) return false;
    const std::string_view verb = st.text(1);
    transaction_boundary b;
    if (sql::iequals(verb, "START") || sql::iequals(verb, "BEGIN")) b.event = transaction_event::xa_start;
    else if (sql::iequals(verb, "PREPARE")) b.event = transaction_event::xa_prepare;
    else if (sql::iequals(verb, "COMMIT")) b.event = transaction_event::xa_commit;
    else if (sql::iequals(verb, "ROLLBACK")) b.event = transaction_event::xa_rollback;
    else return true;  // XA END, XA RECOVER: nothing ends or starts
    out.facts.emplace_back(b);
    return true;
}

void unmodeled_for_rule_names(const rule_index& rules, const std::vector<std::string>& names, std::string_view why,
                              std::string_view code, match_result& out) {
    for (const auto& r : rules.rules().stocks)
        if (std::find(names.begin(), names.end(), r.name) != names.end()) out.facts.emplace_back(unmodeled{&r, nullptr, why, code});
    for (const auto& r : rules.rules().claims)
        if (std::find(names.begin(), names.end(), r.name) != names.end()) out.facts.emplace_back(unmodeled{nullptr, &r, why, code});
}

// PREPARE name FROM '<text>': the text is parsed and matched as the statement it becomes; every
// rule it would write (or that refuses it) gets the policy now, and the name is kept so that each
// EXECUTE of it gets the policy too. EXECUTE name: the rules its PREPARE reached.
[[nodiscard]] bool match_sql_prepared(const parsed_statement& st, const rule_index& rules, const match_context& ctx,
                                      match_result& out) {
    const sql_prepared_use use = sql_prepared_of(st);
    if (use.what == sql_prepared_use::kind::execute) {
        const std::vector<std::string>* reached = ctx.sql_prepared ? ctx.sql_prepared(ctx.table_columns_owner, use.name) : nullptr;
        if (reached)
            unmodeled_for_rule_names(rules, *reached, "EXECUTE of a statement prepared in SQL that writes the rule's table",
                                     "sql_execute", out);
        return true;
    }
    if (use.what != sql_prepared_use::kind::prepare) return use.what != sql_prepared_use::kind::none;
    if (st.tokens.size() < 4 || st.tokens[3].kind != sql::token_kind::string) return false;  // FROM @v: see match_set
    const std::string text = sql::decode_string(st.text(3), st.options);
    const auto inner = sql::parse(text, st.options);
    auto reached = as_unmodeled(match(inner, rules, ctx),
                                "a statement prepared in SQL (PREPARE ... FROM) that writes the rule's table", "sql_prepare");
    for (auto& f : reached.facts) {
        auto& u = std::get<unmodeled>(f);
        u.prepared_name = st.text(1);
        out.facts.push_back(std::move(f));
    }
    return true;
}

void match_not_ours(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    if (st.reason == sql::not_ours_reason::other_statement) {
        if (match_xa(st, out)) return;
        if (match_sql_prepared(st, rules, ctx, out)) return;
    }
    if (rules.filter().classify(st.sql) != sql::prefilter_verdict::candidate) return;
    if (only_reads(st)) return;
    const std::string_view why = sql::not_ours_reason_text(st.reason);
    const std::string_view code = not_ours_code(st.reason);
    for (const auto& s : rules.rules().stocks)
        if (mentions(st.sql, s.table.name)) out.facts.emplace_back(unmodeled{&s, nullptr, why, code});
    for (const auto& c : rules.rules().claims)
        if (mentions(st.sql, c.table.name)) out.facts.emplace_back(unmodeled{nullptr, &c, why, code});
}

// Database code (issue 17): a statement naming a routine, a view or a table whose trigger reaches a
// rule's table gets that rule's unmodeled policy, code "routine", "view" or "trigger". Reads stay
// forwarded (a SELECT from a view), except a call of a stored function, which can write.
void match_database_code(const parsed_statement& st, const rule_index& rules, match_result& out) {
    const auto& routes = rules.code_routes();
    if (routes.empty() || st.tokens.empty()) return;
    const bool reads = st.kind == sql::statement_kind::select || st.kind == sql::statement_kind::transaction ||
                       st.kind == sql::statement_kind::set || st.kind == sql::statement_kind::use || only_reads(st);
    for (const auto& route : routes) {
        if (reads && route.kind != code_kind::function) continue;
        if (!names_identifier(st.sql, route.name)) continue;
        const bool seen = std::any_of(out.facts.begin(), out.facts.end(), [&](const fact& f) {
            const auto* u = std::get_if<unmodeled>(&f);
            return u != nullptr && u->stock == route.stock && u->claim == route.claim;
        });
        if (!seen) out.facts.emplace_back(unmodeled{route.stock, route.claim, route.reason, fact_code(route.kind)});
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
    }
    return out;
}

sql_prepared_use sql_prepared_of(const parsed_statement& st) {
    sql_prepared_use out;
    if (st.tokens.size() < 2) return out;
    auto name_at = [&](std::uint32_t i) {
        std::string n = sql::unquote_identifier(st.text(i));
        for (auto& ch : n) ch = sql::ascii_lower(ch);
        return n;
    };
    const std::string_view first = st.text(0);
    if (sql::iequals(first, "PREPARE") && st.tokens.size() >= 4 && sql::iequals(st.text(2), "FROM")) {
        out.what = sql_prepared_use::kind::prepare;
        out.name = name_at(1);
    } else if (sql::iequals(first, "EXECUTE")) {
        out.what = sql_prepared_use::kind::execute;
        out.name = name_at(1);
    } else if ((sql::iequals(first, "DEALLOCATE") || sql::iequals(first, "DROP")) && st.tokens.size() >= 3 &&
               sql::iequals(st.text(1), "PREPARE")) {
        out.what = sql_prepared_use::kind::deallocate;
        out.name = name_at(2);
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

match_result match(const parsed_statement& st, const rule_index& rules, const match_context& context) {
    match_result out;
    switch (st.kind) {
        case sql::statement_kind::select: match_select(st, rules, context, out); break;
        case sql::statement_kind::update: match_update(st, rules, context, out); break;
        case sql::statement_kind::insert: match_insert(st, rules, context, out); break;
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

}  // namespace claimguard::rules::match
