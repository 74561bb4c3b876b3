// The recognizer's entry point and the grammar shared by its statements: names, values, WHERE.
#include "rules/sql/parser.hpp"

#include "rules/sql/errors.hpp"
#include "rules/sql/parser_detail.hpp"

namespace claimguard::rules::sql {

std::string_view not_ours_reason_text(not_ours_reason r) noexcept {
    switch (r) {
        case not_ours_reason::none: return "recognised";
        case not_ours_reason::empty: return "no statement (only comments or whitespace)";
        case not_ours_reason::lex_error: return "the text does not lex as MySQL SQL";
        case not_ours_reason::other_statement: return "a kind of statement claimguard does not read";
        case not_ours_reason::unsupported_syntax: return "a shape claimguard does not read (join, subquery, OR, function in WHERE, ...)";
        case not_ours_reason::several_statements: return "several statements in one query";
        case not_ours_reason::insert_select: return "INSERT ... SELECT (the rows come from a query)";
        case not_ours_reason::subquery_in_set: return "a shape claimguard does not read (a column set from a subquery)";
        case not_ours_reason::sql_mode_unknown:
            return "the session's sql_mode is not known, and the text reads differently with ANSI_QUOTES";
    }
    return "?";
}

boost::system::error_code lex_statement(std::string_view sql, const lexer_options& options, token_vector& out,
                                        std::uint32_t& placeholder_count) {
    out.clear();
    placeholder_count = 0;
    if (sql.size() > max_statement_bytes) return errc::statement_too_long;
    lexer lx(sql, options);
    std::uint8_t gap = 0;
    for (;;) {
        token t = lx.next();
        if (t.kind == token_kind::end) break;
        if (is_trivia(t.kind)) {
            gap |= token_flag::gap_before;
            if (t.kind != token_kind::whitespace) gap |= token_flag::comment_before;
            continue;
        }
        if (t.kind == token_kind::invalid) {
            const char c = sql[t.offset];
            const bool binary_literal = (c == 'x' || c == 'X' || c == 'b' || c == 'B') && t.length >= 2 &&
                                        sql[t.offset + 1] == '\'';
            return binary_literal ? errc::malformed_literal : errc::unterminated_literal;
        }
        if (out.size() >= max_statement_tokens) return errc::too_many_tokens;
        t.flags |= gap;
        gap = 0;
        out.push_back(t);
    }
    placeholder_count = lx.placeholder_count();
    if (lx.unterminated_version()) return errc::unterminated_version;
    return {};
}

namespace detail {
namespace {

[[nodiscard]] bool is_number_kind(token_kind k) noexcept {
    return k == token_kind::integer || k == token_kind::decimal || k == token_kind::real ||
           k == token_kind::hex_number || k == token_kind::bit_number;
}

[[nodiscard]] bool is_introducer_target(token_kind k) noexcept {
    return k == token_kind::string || k == token_kind::hex_string || k == token_kind::bit_string ||
           k == token_kind::hex_number || k == token_kind::bit_number;
}

// Functions MySQL lets you call without parentheses.
[[nodiscard]] bool is_niladic_function(std::string_view w) noexcept {
    return iequals(w, "CURRENT_TIMESTAMP") || iequals(w, "CURRENT_DATE") || iequals(w, "CURRENT_TIME") ||
           iequals(w, "CURRENT_USER") || iequals(w, "LOCALTIME") || iequals(w, "LOCALTIMESTAMP") ||
           iequals(w, "UTC_DATE") || iequals(w, "UTC_TIME") || iequals(w, "UTC_TIMESTAMP");
}

[[nodiscard]] bool is_binary_operator(const cursor& c) noexcept {
    const token& t = c.tok();
    if (t.kind == token_kind::punct) {
        const std::string_view p = t.text(c.st.sql);
        return p == "+" || p == "-" || p == "*" || p == "/" || p == "%" || p == "=" || p == "<>" || p == "!=" ||
               p == "<" || p == "<=" || p == ">" || p == ">=" || p == "<=>" || p == "&" || p == "|" || p == "^" ||
               p == "<<" || p == ">>" || p == "||" || p == "&&" || p == "->" || p == "->>";
    }
    return c.is_word("AND") || c.is_word("OR") || c.is_word("XOR") || c.is_word("DIV") || c.is_word("MOD");
}

[[nodiscard]] bool comparison(const cursor& c, compare_op& op) noexcept {
    const token& t = c.tok();
    if (t.kind != token_kind::punct) return false;
    const std::string_view p = t.text(c.st.sql);
    if (p == "=") op = compare_op::eq;
    else if (p == "<=>") op = compare_op::null_safe_eq;
    else if (p == "<>" || p == "!=") op = compare_op::ne;
    else if (p == "<") op = compare_op::lt;
    else if (p == "<=") op = compare_op::le;
    else if (p == ">") op = compare_op::gt;
    else if (p == ">=") op = compare_op::ge;
    else return false;
    return true;
}

[[nodiscard]] compare_op mirror(compare_op op) noexcept {
    switch (op) {
        case compare_op::lt: return compare_op::gt;
        case compare_op::le: return compare_op::ge;
        case compare_op::gt: return compare_op::lt;
        case compare_op::ge: return compare_op::le;
        default: return op;
    }
}

// From "(" to its ")" (both consumed); fails on a subquery or at the end of the text.
[[nodiscard]] bool skip_parenthesized(cursor& c) {
    int depth = 0;
    do {
        if (c.at_end()) return false;
        if (c.is_word("SELECT") || c.is_word("WITH") || c.is_word("VALUES") || c.is_word("TABLE")) return false;
        if (c.is_punct("(")) ++depth;
        else if (c.is_punct(")")) --depth;
        else if (c.is_punct(";")) return false;
        ++c.pos;
    } while (depth > 0);
    return true;
}

[[nodiscard]] bool parse_unary(cursor& c, operand& out);

[[nodiscard]] bool parse_primary(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    const token& t = c.tok();
    out = operand{};
    auto finish = [&](operand_kind kind) {
        out.kind = kind;
        out.span = {start, c.pos};
        return true;
    };
    switch (t.kind) {
        case token_kind::integer:
        case token_kind::decimal:
        case token_kind::real:
        case token_kind::hex_number:
        case token_kind::bit_number:
        case token_kind::hex_string:
        case token_kind::bit_string:
            out.value_token = c.pos++;
            return finish(operand_kind::literal);
        case token_kind::string:
            out.value_token = c.pos++;
            // Adjacent plain strings are one literal: 'a' 'b' is 'ab'.
            while (c.is_kind(token_kind::string) && (c.tok().flags & token_flag::national) == 0) ++c.pos;
            return finish(operand_kind::literal);
        case token_kind::placeholder:
            out.value_token = c.pos++;
            return finish(operand_kind::placeholder);
        case token_kind::user_var:
            ++c.pos;
            return finish(operand_kind::expression);
        case token_kind::system_var:
            ++c.pos;
            if (c.is_punct(".") && (c.is_kind(token_kind::word, 1) || c.is_kind(token_kind::quoted_ident, 1)))
                c.pos += 2;
            return finish(operand_kind::expression);
        case token_kind::punct:
            if (c.is_punct("(")) {
                if (c.depth >= max_expression_depth) return false;
                ++c.pos;
                ++c.depth;
                operand inner;
                const bool ok = parse_expression(c, inner) && c.accept_punct(")");
                --c.depth;
                if (!ok) return false;
                return finish(operand_kind::expression);
            }
            return false;
        case token_kind::word:
        case token_kind::quoted_ident:
            break;
        default:
            return false;
    }
    const std::string_view w = t.text(c.st.sql);
    if (t.kind == token_kind::word) {
        if (w.size() > 1 && w[0] == '_' && is_introducer_target(c.tok(1).kind)) {
            out.introducer = c.pos++;
            out.value_token = c.pos++;
            if (c.st.tokens[out.value_token].kind == token_kind::string)
                while (c.is_kind(token_kind::string) && (c.tok().flags & token_flag::national) == 0) ++c.pos;
            return finish(operand_kind::literal);
        }
        if (c.is_punct("(", 1)) {
            if (iequals(w, "EXISTS")) return false;
            ++c.pos;
            if (!skip_parenthesized(c)) return false;
            return finish(operand_kind::expression);
        }
        if (iequals(w, "NULL")) {
            ++c.pos;
            return finish(operand_kind::null);
        }
        if (iequals(w, "TRUE") || iequals(w, "FALSE")) {
            out.value_token = c.pos++;
            return finish(operand_kind::literal);
        }
        if (iequals(w, "DEFAULT")) {
            ++c.pos;
            return finish(operand_kind::default_);
        }
        if (iequals(w, "INTERVAL")) {
            ++c.pos;
            operand amount;
            if (!parse_unary(c, amount) || !c.is_kind(token_kind::word)) return false;
            ++c.pos;
            return finish(operand_kind::expression);
        }
        if (is_niladic_function(w)) {
            ++c.pos;
            return finish(operand_kind::expression);
        }
    }
    if (!c.is_name()) return false;
    if (!parse_name_ref(c, out.column, 3)) return false;
    if (c.is_punct("(")) {  // schema.function(...)
        if (!skip_parenthesized(c)) return false;
        out.column = name_ref{};
        return finish(operand_kind::expression);
    }
    return finish(operand_kind::column);
}

bool parse_unary(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    bool negative = false;
    bool other_prefix = false;
    for (;;) {
        if (c.is_punct("-")) negative = !negative;
        else if (c.is_punct("+")) {
        } else if (c.is_punct("!") || c.is_punct("~") || c.is_word("NOT") || c.is_word("BINARY")) {
            other_prefix = true;
        } else {
            break;
        }
        ++c.pos;
    }
    const bool prefixed = c.pos != start;
    const bool signed_number = prefixed && !other_prefix && is_number_kind(c.tok().kind);
    if (!parse_primary(c, out)) return false;
    if (signed_number) {
        out.negative = negative;
        out.span.first = start;
    } else if (prefixed) {
        out = operand{};
        out.span = {start, c.pos};
    }
    return true;
}

}  // namespace

bool parse_name_ref(cursor& c, name_ref& out, int max_parts) {
    out = name_ref{};
    if (!c.is_name()) return false;
    const std::uint32_t start = c.pos;
    std::uint32_t parts[3] = {c.pos++, no_token, no_token};
    int n = 1;
    // After a ".", MySQL reads any word as a name, reserved or not.
    while (n < max_parts && c.is_punct(".") &&
           (c.is_kind(token_kind::word, 1) || c.is_kind(token_kind::quoted_ident, 1))) {
        parts[n++] = c.pos + 1;
        c.pos += 2;
    }
    out.span = {start, c.pos};
    out.name = parts[n - 1];
    if (n >= 2) out.qualifier = parts[n - 2];
    if (n == 3) out.schema = parts[0];
    return true;
}

bool parse_table_ref(cursor& c, table_ref& out, bool allow_alias) {
    out = table_ref{};
    const std::uint32_t start = c.pos;
    if (!parse_name_ref(c, out.name, 2)) return false;
    if (c.is_word("PARTITION")) return false;
    if (allow_alias) {
        if (c.accept_word("AS")) {
            if (!c.is_name()) return false;
            out.alias = c.pos++;
        } else if (c.is_name()) {
            out.alias = c.pos++;
        }
    }
    // Index hints: {USE|FORCE|IGNORE} {INDEX|KEY} [FOR {JOIN|ORDER BY|GROUP BY}] (names)
    while ((c.is_word("USE") || c.is_word("FORCE") || c.is_word("IGNORE")) &&
           (c.is_word("INDEX", 1) || c.is_word("KEY", 1))) {
        c.pos += 2;
        if (c.accept_word("FOR")) {
            if (c.accept_word("JOIN")) {
            } else if ((c.accept_word("ORDER") || c.accept_word("GROUP")) && c.accept_word("BY")) {
            } else {
                return false;
            }
        }
        if (!c.is_punct("(") || !skip_parenthesized(c)) return false;
        c.accept_punct(",");
    }
    out.span = {start, c.pos};
    return true;
}

bool parse_value_operand(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    operand v;
    if (parse_unary(c, v) &&
        (v.kind == operand_kind::literal || v.kind == operand_kind::placeholder || v.kind == operand_kind::null)) {
        out = v;
        return true;
    }
    c.pos = start;
    return false;
}

bool parse_expression(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    if (!parse_unary(c, out)) return false;
    bool compound = false;
    for (;;) {
        if (c.is_word("IS")) {
            ++c.pos;
            c.accept_word("NOT");
            if (!(c.accept_word("NULL") || c.accept_word("TRUE") || c.accept_word("FALSE") ||
                  c.accept_word("UNKNOWN")))
                return false;
        } else if (c.is_word("COLLATE")) {
            ++c.pos;
            if (!(c.is_kind(token_kind::word) || c.is_kind(token_kind::quoted_ident) || c.is_kind(token_kind::string)))
                return false;
            ++c.pos;
        } else if (is_binary_operator(c)) {
            ++c.pos;
            operand rhs;
            if (!parse_unary(c, rhs)) return false;
        } else {
            break;
        }
        compound = true;
    }
    if (compound) {
        out = operand{};
        out.span = {start, c.pos};
    }
    return true;
}

namespace {

[[nodiscard]] bool parse_conjunction(cursor& c, where_clause& w, int depth, bool multi_table);

// Parentheses nest at most this deep in a WHERE clause we read.
constexpr int max_where_depth = 16;

// One side of a comparison: a column or a value (literal, ?, NULL), with at most one "+ term" or
// "- term" after it, the term a literal or ?. Anything longer (`c - 1 - 1`, `c * 2`) fails, and so
// the whole clause is not ours: only shapes whose meaning is certain are read.
struct comparison_side {
    bool is_column = false;
    name_ref column;
    operand value;
    bool has_term = false;
    bool term_minus = false;
    operand term;
};

[[nodiscard]] bool parse_side(cursor& c, comparison_side& s) {
    // `_latin1 'A'` is a literal with an introducer, not a column `_latin1`.
    const std::string_view w = c.text();
    const bool introducer =
        c.is_kind(token_kind::word) && w.size() > 1 && w[0] == '_' && is_introducer_target(c.tok(1).kind);
    if (c.is_name() && !introducer) {
        s.is_column = true;
        if (!parse_name_ref(c, s.column, 3)) return false;
    } else if (!parse_value_operand(c, s.value)) {
        return false;
    }
    if (c.is_punct("+") || c.is_punct("-")) {
        s.has_term = true;
        s.term_minus = c.is_punct("-");
        ++c.pos;
        if (!parse_value_operand(c, s.term) || s.term.kind == operand_kind::null) return false;
    }
    return true;
}

// `multi_table`: a column may be compared with a column (a join condition).
[[nodiscard]] bool parse_predicate(cursor& c, where_clause& w, bool multi_table) {
    predicate p;
    const std::uint32_t start = c.pos;
    comparison_side left;
    if (!parse_side(c, left)) return false;
    if (left.is_column && !left.has_term && c.is_word("IS")) {
        p.column = left.column;
        ++c.pos;
        p.kind = c.accept_word("NOT") ? predicate_kind::is_not_null : predicate_kind::is_null;
        if (!c.accept_word("NULL")) return false;
    } else if (left.is_column && !left.has_term && (c.is_word("IN") || (c.is_word("NOT") && c.is_word("IN", 1)))) {
        p.column = left.column;
        p.kind = c.accept_word("NOT") ? predicate_kind::not_in_list : predicate_kind::in_list;
        ++c.pos;  // IN
        if (!c.accept_punct("(")) return false;
        p.list_first = static_cast<std::uint32_t>(w.list_values.size());
        do {
            operand v;
            if (!parse_value_operand(c, v)) return false;
            w.list_values.push_back(v);
        } while (c.accept_punct(","));
        if (!c.accept_punct(")")) return false;
        p.list_count = static_cast<std::uint32_t>(w.list_values.size()) - p.list_first;
    } else {
        compare_op op{};
        if (!comparison(c, op)) return false;
        ++c.pos;
        comparison_side right;
        if (!parse_side(c, right)) return false;
        if (!left.is_column && !right.is_column) {
            if (left.has_term || right.has_term) return false;
            p.kind = predicate_kind::constant;
            p.op = op;
            p.value = left.value;
        } else if (left.is_column && right.is_column) {
            if (!multi_table || left.has_term || right.has_term) return false;
            p.kind = predicate_kind::column_compare;
            p.op = op;
            p.column = left.column;
            p.value.kind = operand_kind::column;
            p.value.column = right.column;
            p.value.span = right.column.span;
        } else {
            // The column goes on the left, the rest on the value's side: `c - 2 >= 0` is
            // `c >= 0 + 2` (its term changes sign), `5 - 1 < c` is `c > 5 - 1`.
            const comparison_side& col = left.is_column ? left : right;
            const comparison_side& val = left.is_column ? right : left;
            p.column = col.column;
            p.op = left.is_column ? op : mirror(op);
            p.value = val.value;
            if (col.has_term || val.has_term) {
                p.kind = predicate_kind::arithmetic;
                p.list_first = static_cast<std::uint32_t>(w.list_values.size());
                auto add_term = [&](const operand& t, bool minus) {
                    if (minus) p.subtract |= static_cast<std::uint8_t>(1u << p.list_count);
                    w.list_values.push_back(t);
                    ++p.list_count;
                };
                if (val.has_term) add_term(val.term, val.term_minus);
                if (col.has_term) add_term(col.term, !col.term_minus);
            }
        }
    }
    if (c.is_punct("(")) return false;  // a function call, not a column
    p.span = {start, c.pos};
    w.predicates.push_back(p);
    return true;
}

bool parse_conjunction(cursor& c, where_clause& w, int depth, bool multi_table) {
    if (depth > max_where_depth) return false;
    do {
        if (c.is_punct("(")) {
            ++c.pos;
            if (!parse_conjunction(c, w, depth + 1, multi_table) || !c.accept_punct(")")) return false;
        } else if (!parse_predicate(c, w, multi_table)) {
            return false;
        }
    } while (c.accept_word("AND") || c.accept_punct("&&"));
    return true;
}

}  // namespace

bool parse_where(cursor& c, where_clause& out, bool multi_table) {
    out.present = true;
    const std::uint32_t start = c.pos;
    if (!parse_conjunction(c, out, 0, multi_table)) return false;
    out.span = {start, c.pos};
    return true;
}

bool parse_join_condition(cursor& c, where_clause& out) { return parse_conjunction(c, out, 0, true); }

bool parse_limit(cursor& c, token_span& out) {
    const std::uint32_t start = c.pos;
    if (!c.accept_word("LIMIT")) return false;
    auto count = [&] {
        if (!c.is_kind(token_kind::integer) && !c.is_kind(token_kind::placeholder)) return false;
        ++c.pos;
        return true;
    };
    if (!count()) return false;
    if (c.accept_punct(",") || c.accept_word("OFFSET"))
        if (!count()) return false;
    out = {start, c.pos};
    return true;
}

bool parse_assignment(cursor& c, assignment& out) {
    out = assignment{};
    const std::uint32_t start = c.pos;
    if (!parse_name_ref(c, out.column, 3)) return false;
    if (!c.accept_punct("=") && !c.accept_punct(":=")) return false;
    const std::uint32_t value_start = c.pos;
    auto ends_here = [&] {
        return c.at_statement_end() || c.is_punct(",") || c.is_word("WHERE") || c.is_word("ORDER") ||
               c.is_word("LIMIT") || c.is_word("ON");
    };
    // col = literal | ? | NULL | DEFAULT
    if (c.accept_word("DEFAULT")) {
        out.kind = assignment_kind::value;
        out.value.kind = operand_kind::default_;
        out.value.span = {value_start, c.pos};
        if (ends_here()) {
            out.span = {start, c.pos};
            return true;
        }
        c.pos = value_start;
    } else if (parse_value_operand(c, out.value) && ends_here()) {
        out.kind = assignment_kind::value;
        out.span = {start, c.pos};
        return true;
    }
    c.pos = value_start;
    // col = base +/- amount
    if (c.is_name() && parse_name_ref(c, out.base, 3) && (c.is_punct("+") || c.is_punct("-"))) {
        out.sign = c.text()[0];
        ++c.pos;
        if (parse_value_operand(c, out.value) && out.value.kind != operand_kind::null && ends_here()) {
            out.kind = assignment_kind::relative;
            out.span = {start, c.pos};
            return true;
        }
    }
    c.pos = value_start;
    out.base = name_ref{};
    out.sign = '+';
    if (!parse_expression(c, out.value)) return false;
    out.kind = assignment_kind::expression;
    if (out.value.kind == operand_kind::literal || out.value.kind == operand_kind::placeholder ||
        out.value.kind == operand_kind::null || out.value.kind == operand_kind::default_)
        out.kind = assignment_kind::value;
    out.span = {start, c.pos};
    return true;
}

}  // namespace detail

parsed_statement parse(std::string_view sql, const lexer_options& options) {
    parsed_statement st;
    st.sql = sql;
    st.options = options;
    if (auto ec = lex_statement(sql, options, st.tokens, st.placeholder_count)) {
        st.reason = not_ours_reason::lex_error;
        st.error = ec;
        return st;
    }
    if (st.tokens.empty()) {
        st.reason = not_ours_reason::empty;
        return st;
    }
    detail::cursor c(st);
    bool ok = false;
    statement_kind kind = statement_kind::not_ours;
    st.reason = not_ours_reason::unsupported_syntax;
    if (c.is_word("SELECT")) {
        ok = detail::parse_select(c, st.body.emplace<select_statement>());
        kind = statement_kind::select;
    } else if (c.is_word("UPDATE")) {
        ok = detail::parse_update(c, st.body.emplace<update_statement>());
        kind = statement_kind::update;
    } else if (c.is_word("INSERT") || c.is_word("REPLACE")) {
        ok = detail::parse_insert(c, st.body.emplace<insert_statement>());
        kind = statement_kind::insert;
    } else if (c.is_word("DELETE")) {
        ok = detail::parse_delete(c, st.body.emplace<delete_statement>());
        kind = statement_kind::delete_;
    } else if (c.is_word("BEGIN") || c.is_word("START") || c.is_word("COMMIT") || c.is_word("ROLLBACK") ||
               c.is_word("SAVEPOINT") || c.is_word("RELEASE")) {
        ok = detail::parse_transaction(c, st.body.emplace<transaction_statement>());
        kind = statement_kind::transaction;
    } else if (c.is_word("SET")) {
        ok = detail::parse_set(c, st.body.emplace<set_statement>());
        kind = statement_kind::set;
    } else if (c.is_word("USE")) {
        ok = detail::parse_use(c, st.body.emplace<use_statement>());
        kind = statement_kind::use;
    } else {
        st.reason = not_ours_reason::other_statement;
    }
    if (ok) {
        const bool semicolon = c.accept_punct(";");
        if (c.at_end()) {
            st.kind = kind;
            st.reason = not_ours_reason::none;
            return st;
        }
        if (semicolon) st.reason = not_ours_reason::several_statements;
    }
    st.stop_offset = c.tok().offset;
    st.body.emplace<std::monostate>();
    return st;
}

}  // namespace claimguard::rules::sql
