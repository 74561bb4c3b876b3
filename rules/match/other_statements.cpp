// Matching the statements that are neither a counter read, a counter write nor a claim insert:
// transaction and session statements (BEGIN, COMMIT, savepoints, SET autocommit / sql_mode / charset),
// and every other statement that names a protected table, which gets the rule's unmodeled policy
// (statements the parser does not model, XA, SQL-level PREPARE / EXECUTE, the database's own code).
#include <algorithm>

#include "rules/match/database_code.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/matcher_detail.hpp"
#include "rules/sql/parser.hpp"
#include "rules/sql/prefilter.hpp"
#include "rules/sql/text.hpp"

namespace claimguard::rules::match {

using sql::no_token;
using sql::operand_kind;
using sql::parsed_statement;

namespace {
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
        case sql::not_ours_reason::sql_mode_unknown: return "sql_mode_unknown";
        case sql::not_ours_reason::insert_select: return "insert_select";
        // A column other than a counter set from a subquery: a shape like any other we do not read.
        case sql::not_ours_reason::subquery_in_set: return "unsupported_syntax";
        default: return "not_recognised";
    }
}

// INSERT INTO claims (...) SELECT ... FROM stock WHERE counter > 0: which stock row each inserted
// claim consumes is not known before it runs.
constexpr std::string_view insert_select_reason =
    "INSERT ... SELECT naming the rule's table: claimguard cannot tell which stock row each inserted claim "
    "consumes; write the decrement (UPDATE stock SET c = c - 1 WHERE key = ? AND c >= 1) and then "
    "INSERT ... VALUES (...)";

// UPDATE stock SET counter = 100 - (SELECT COUNT(*) FROM claims ...): what it takes is not known
// before it runs, and two of them at once each count the same claims.
constexpr std::string_view counter_from_subquery_reason =
    "the counter recomputed from a subquery: claimguard cannot tell how many units it takes; write it as a "
    "relative change (UPDATE stock SET c = c - n WHERE key = ? AND c >= n)";

// XA START / PREPARE / COMMIT / ROLLBACK: the session's transaction boundaries in XA form.
[[nodiscard]] bool match_xa(const parsed_statement& st, match_result& out) {
    if (st.tokens.size() < 2 || !sql::iequals(st.text(0), "XA")) return false;
    const std::string_view verb = st.text(1);
    transaction_boundary b;
    if (sql::iequals(verb, "START") || sql::iequals(verb, "BEGIN"))
        b.event = transaction_event::xa_start;
    else if (sql::iequals(verb, "PREPARE"))
        b.event = transaction_event::xa_prepare;
    else if (sql::iequals(verb, "COMMIT"))
        b.event = transaction_event::xa_commit;
    else if (sql::iequals(verb, "ROLLBACK"))
        b.event = transaction_event::xa_rollback;
    else
        return true;  // XA END, XA RECOVER: nothing ends or starts
    out.facts.emplace_back(b);
    return true;
}

void unmodeled_for_rule_names(const rule_index& rules, const std::vector<std::string>& names, std::string_view why,
                              std::string_view code, match_result& out) {
    for (const auto& r : rules.rules().stocks)
        if (std::find(names.begin(), names.end(), r.name) != names.end())
            out.facts.emplace_back(unmodeled{&r, nullptr, why, code});
    for (const auto& r : rules.rules().claims)
        if (std::find(names.begin(), names.end(), r.name) != names.end())
            out.facts.emplace_back(unmodeled{nullptr, &r, why, code});
}

// PREPARE name FROM '<text>': the text is parsed and matched as the statement it becomes; every
// rule it would write (or that refuses it) gets the policy now, and the name is kept so that each
// EXECUTE of it gets the policy too. EXECUTE name: the rules its PREPARE reached.
[[nodiscard]] bool match_sql_prepared(const parsed_statement& st, const rule_index& rules, const match_context& ctx,
                                      match_result& out) {
    const sql_prepared_use use = sql_prepared_of(st);
    if (use.what == sql_prepared_use::kind::execute) {
        const std::vector<std::string>* reached =
            ctx.sql_prepared ? ctx.sql_prepared(ctx.table_columns_owner, use.name) : nullptr;
        if (reached)
            unmodeled_for_rule_names(rules, *reached,
                                     "EXECUTE of a statement prepared in SQL that writes the rule's table",
                                     "sql_execute", out);
        return true;
    }
    if (use.what != sql_prepared_use::kind::prepare) return use.what != sql_prepared_use::kind::none;
    if (st.tokens.size() < 4 || st.tokens[3].kind != sql::token_kind::string) return false;  // FROM @v: see match_set
    const std::string text = sql::decode_string(st.text(3), st.options);
    const auto inner = sql::parse(text, st.options);
    auto reached =
        as_unmodeled(match(inner, rules, ctx),
                     "a statement prepared in SQL (PREPARE ... FROM) that writes the rule's table", "sql_prepare");
    for (auto& f : reached.facts) {
        auto& u = std::get<unmodeled>(f);
        u.prepared_name = st.text(1);
        out.facts.push_back(std::move(f));
    }
    return true;
}

}  // namespace

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
                    out.facts.emplace_back(unmodeled{
                        &r, nullptr, "SQL text naming the rule's table kept in a user variable", "sql_in_variable"});
            for (const auto& r : rules.rules().claims)
                if (mentions(d.bytes, r.table.name))
                    out.facts.emplace_back(unmodeled{
                        nullptr, &r, "SQL text naming the rule's table kept in a user variable", "sql_in_variable"});
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

void match_not_ours(const parsed_statement& st, const rule_index& rules, const match_context& ctx, match_result& out) {
    if (st.reason == sql::not_ours_reason::other_statement) {
        if (match_xa(st, out)) return;
        if (match_sql_prepared(st, rules, ctx, out)) return;
    }
    if (rules.filter().classify(st.sql) != sql::prefilter_verdict::candidate) return;
    if (only_reads(st)) return;
    if (st.reason == sql::not_ours_reason::insert_select) {
        // A claim by INSERT ... SELECT from its stock row is modelled when it names no other rule's table.
        match_result claim;
        if (match_insert_select(st, rules, ctx, claim)) {
            const auto& ci = std::get<claim_insert>(claim.facts.front());
            bool others = false;
            for (const auto& s : rules.rules().stocks)
                others = others || (&s != ci.stock && mentions(st.sql, s.table.name));
            for (const auto& c : rules.rules().claims)
                others = others || (&c != ci.rule && mentions(st.sql, c.table.name));
            if (!others) {
                for (auto& f : claim.facts) out.facts.push_back(std::move(f));
                return;
            }
        }
    }
    std::string_view why = sql::not_ours_reason_text(st.reason);
    std::string_view code = not_ours_code(st.reason);
    if (st.reason == sql::not_ours_reason::insert_select) why = insert_select_reason;
    if (sets_counter_from_subquery(st, rules, ctx)) {
        // The recompute of one key from the count of its claims: the engine absorbs it after this
        // connection's claim took the unit, and refuses it otherwise (decide.cpp).
        if (match_counter_recompute(st, rules, ctx, out)) return;
        why = counter_from_subquery_reason;
        code = "counter_from_subquery";
    }
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

}  // namespace claimguard::rules::match
