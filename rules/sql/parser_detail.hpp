// Internal to the parser: the token cursor and the grammar pieces shared by the statement parsers.
#pragma once

#include <cstdint>
#include <string_view>

#include "rules/sql/statement.hpp"
#include "rules/sql/text.hpp"

namespace claimguard::rules::sql::detail {

// Parenthesised expressions nest at most this deep in a statement we read (the parser
// recurses on them; deeper input is "not ours", never a stack overflow).
inline constexpr std::uint32_t max_expression_depth = 64;

// A bare word MySQL reserves: never a table, column or alias name unless quoted.
[[nodiscard]] bool is_reserved(std::string_view word) noexcept;

class cursor {
public:
    explicit cursor(parsed_statement& st) noexcept : st(st) {}

    [[nodiscard]] const token& tok(std::uint32_t ahead = 0) const noexcept {
        const std::size_t i = std::size_t{pos} + ahead;
        return i < st.tokens.size() ? st.tokens[i] : end_token_;
    }
    [[nodiscard]] std::string_view text(std::uint32_t ahead = 0) const noexcept { return tok(ahead).text(st.sql); }
    [[nodiscard]] bool at_end() const noexcept { return pos >= st.tokens.size(); }
    [[nodiscard]] bool is_kind(token_kind k, std::uint32_t ahead = 0) const noexcept { return tok(ahead).kind == k; }
    [[nodiscard]] bool is_word(std::string_view kw, std::uint32_t ahead = 0) const noexcept {
        const token& t = tok(ahead);
        return t.kind == token_kind::word && iequals(t.text(st.sql), kw);
    }
    [[nodiscard]] bool is_punct(std::string_view p, std::uint32_t ahead = 0) const noexcept {
        const token& t = tok(ahead);
        return t.kind == token_kind::punct && t.text(st.sql) == p;
    }
    // A name: a quoted identifier or a bare word MySQL does not reserve.
    [[nodiscard]] bool is_name(std::uint32_t ahead = 0) const noexcept {
        const token& t = tok(ahead);
        return t.kind == token_kind::quoted_ident || (t.kind == token_kind::word && !is_reserved(t.text(st.sql)));
    }
    bool accept_word(std::string_view kw) noexcept {
        if (!is_word(kw)) return false;
        ++pos;
        return true;
    }
    bool accept_punct(std::string_view p) noexcept {
        if (!is_punct(p)) return false;
        ++pos;
        return true;
    }
    // End of statement: the end of the text or a ";".
    [[nodiscard]] bool at_statement_end() const noexcept { return at_end() || is_punct(";"); }

    parsed_statement& st;
    std::uint32_t pos = 0;
    std::uint32_t depth = 0;  // nesting of parenthesised expressions being read

private:
    token end_token_{static_cast<std::uint32_t>(st.sql.size()), 0, 0, token_kind::end, 0};
};

// [[schema.]table.]column with at most `max_parts` parts.
[[nodiscard]] bool parse_name_ref(cursor& c, name_ref& out, int max_parts);
[[nodiscard]] bool parse_table_ref(cursor& c, table_ref& out, bool allow_alias);
// literal | ? | NULL, restoring the cursor when it is none of those.
[[nodiscard]] bool parse_value_operand(cursor& c, operand& out);
// Any expression we can skip over safely (no subquery); the operand keeps its exact shape
// when it is a single literal, placeholder, NULL, DEFAULT or column.
[[nodiscard]] bool parse_expression(cursor& c, operand& out);
// After WHERE: AND-ed comparisons (with one `+ n` / `- n` on a side), IN lists, IS [NOT] NULL,
// in parentheses or not. `multi_table`: also column-to-column comparisons (join conditions).
[[nodiscard]] bool parse_where(cursor& c, where_clause& out, bool multi_table = false);
// After ON of a multi-table UPDATE's inner join: the same conjunction, its predicates added to
// `out` (the statement's WHERE clause) without changing its span.
[[nodiscard]] bool parse_join_condition(cursor& c, where_clause& out);
// "LIMIT n [, m]" or "LIMIT n OFFSET m", n and m integers or placeholders; span includes LIMIT.
[[nodiscard]] bool parse_limit(cursor& c, token_span& out);
// "col = value" of UPDATE ... SET, INSERT ... SET and ON DUPLICATE KEY UPDATE.
[[nodiscard]] bool parse_assignment(cursor& c, assignment& out);

[[nodiscard]] bool parse_select(cursor& c, select_statement& out);
[[nodiscard]] bool parse_update(cursor& c, update_statement& out);
[[nodiscard]] bool parse_insert(cursor& c, insert_statement& out);
[[nodiscard]] bool parse_delete(cursor& c, delete_statement& out);
[[nodiscard]] bool parse_transaction(cursor& c, transaction_statement& out);
[[nodiscard]] bool parse_set(cursor& c, set_statement& out);
[[nodiscard]] bool parse_use(cursor& c, use_statement& out);

}  // namespace claimguard::rules::sql::detail
