// The parsed forms of the statements the claim engine reads; everything else is "not ours".
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <variant>

#include <boost/container/small_vector.hpp>
#include <boost/system/error_code.hpp>

#include "rules/sql/token.hpp"

namespace claimguard::rules::sql {

// Longest statement the recognizer reads; longer ones are "not ours" (forwarded untouched).
inline constexpr std::size_t max_statement_bytes = std::size_t{16} << 20;
// Most significant tokens the recognizer reads in one statement.
inline constexpr std::size_t max_statement_tokens = std::size_t{1} << 20;

inline constexpr std::uint32_t no_token = std::numeric_limits<std::uint32_t>::max();

template <class T, std::size_t N>
using small_vector = boost::container::small_vector<T, N>;

// The significant tokens of a statement (trivia dropped, token_flag::gap_before kept).
using token_vector = small_vector<token, 48>;

// Tokens [first, last) of parsed_statement::tokens.
struct token_span {
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    [[nodiscard]] bool empty() const noexcept { return first >= last; }
};

// [[schema.]table.]column or [schema.]table, as written.
struct name_ref {
    token_span span;
    std::uint32_t name = no_token;       // the last part
    std::uint32_t qualifier = no_token;  // the part before it: table (of a column) or schema (of a table)
    std::uint32_t schema = no_token;     // schema of schema.table.column
};

enum class operand_kind : std::uint8_t {
    literal,      // string, number, hex, bit, TRUE/FALSE (with sign or introducer as written)
    placeholder,  // ? of a prepared statement
    null,         // NULL
    default_,     // DEFAULT
    word,         // a bare word as a SET value: ON, OFF, utf8mb4
    column,       // a column reference
    expression,   // anything else we only skip over: NOW(), CONCAT(@@sql_mode, ',X'), a + b
};

struct operand {
    operand_kind kind = operand_kind::expression;
    token_span span;                        // everything written, sign and introducer included
    std::uint32_t value_token = no_token;   // literal: first token after sign and introducer; placeholder: the ?
    std::uint32_t introducer = no_token;    // _utf8mb4 of _utf8mb4'x'
    bool negative = false;                  // an odd number of unary minus signs before a number
    name_ref column;                        // operand_kind::column and word
};

enum class compare_op : std::uint8_t { eq, null_safe_eq, ne, lt, le, gt, ge };

enum class predicate_kind : std::uint8_t {
    compare,
    in_list,
    not_in_list,
    is_null,
    is_not_null,
    constant,  // literal op literal, as in MyBatis' "WHERE 1=1 AND ..." (no column)
    // A comparison with integer arithmetic on either side, moved to the value's side:
    // `c - 2 >= 0` is `c >= 0 + 2`, `0 <= c - ?` is `c >= 0 + ?`, `c > 5 - 1` is `c > 5 - 1`.
    // column op value + terms, the terms (a literal or ?, at most one per side) in
    // where_clause::list_values[list_first, list_first + list_count), bit i of `subtract` set
    // when term i is subtracted.
    arithmetic,
    // column op column: only in a multi-table UPDATE (its join condition, `c.id = s.campaign_id`).
    column_compare,
};

// One AND-ed condition of a WHERE clause, the column always on the left (`7 = id` is stored
// as `id = 7`, `5 < c` as `c > 5`).
struct predicate {
    predicate_kind kind = predicate_kind::compare;
    compare_op op = compare_op::eq;
    std::uint8_t subtract = 0;  // arithmetic: bit i set when term i is subtracted
    name_ref column;
    operand value;                 // compare, arithmetic; column_compare: the right-hand column
    std::uint32_t list_first = 0;  // in_list: where_clause::list_values[list_first, list_first + list_count)
    std::uint32_t list_count = 0;  // (arithmetic: its terms, the same way)
    token_span span;
};

struct where_clause {
    bool present = false;
    token_span span;  // the condition after WHERE
    // The AND-ed conditions; in a multi-table UPDATE, those of each join's ON come first (an inner
    // join's ON filters rows exactly as WHERE does). `span` covers only the WHERE part.
    small_vector<predicate, 4> predicates;
    small_vector<operand, 4> list_values;
};

struct table_ref {
    name_ref name;
    std::uint32_t alias = no_token;
    token_span span;  // name, alias and index hints as written
};

enum class select_item_kind : std::uint8_t { star, column, expression };

struct select_item {
    select_item_kind kind = select_item_kind::expression;
    name_ref column;                  // column: the column; star: the qualifier of t.* (empty for *)
    token_span span;                  // without the alias
    std::uint32_t alias = no_token;
};

enum class lock_clause : std::uint8_t { none, for_update, for_share, lock_in_share_mode };

struct select_statement {
    small_vector<select_item, 8> items;
    bool has_from = false;
    table_ref table;
    where_clause where;
    token_span order_by;
    token_span limit;
    lock_clause lock = lock_clause::none;
};

enum class assignment_kind : std::uint8_t {
    value,       // col = literal | ? | NULL | DEFAULT
    relative,    // col = base + amount | base - amount, amount a literal or ?
    expression,  // col = anything else
};

struct assignment {
    name_ref column;
    assignment_kind kind = assignment_kind::expression;
    operand value;  // value: the value; relative: the amount; expression: the whole expression
    name_ref base;  // relative: the column on the right
    char sign = '+';
    token_span span;  // "col = expr"
};

struct update_statement {
    token_span modifiers;  // LOW_PRIORITY, IGNORE
    table_ref table;
    // A multi-table UPDATE (`UPDATE a s JOIN b c ON ... SET`, `UPDATE a s, b c SET`): the other
    // tables, inner joins only (a LEFT JOIN's ON does not filter the left table's rows).
    small_vector<table_ref, 1> joined;
    token_span tables;  // every table reference as written, with JOIN and ON: what a rewrite copies
    small_vector<assignment, 4> assignments;
    where_clause where;
    token_span limit;
};

struct insert_statement {
    bool replace = false;
    bool ignore = false;
    bool set_form = false;         // INSERT ... SET col = value
    bool has_column_list = false;  // columns known (column list or SET form)
    table_ref table;
    small_vector<name_ref, 8> columns;
    std::uint32_t row_width = 0;   // values per row
    small_vector<operand, 16> values;  // row-major: row r, column c at r * row_width + c
    small_vector<assignment, 2> on_duplicate;
    bool returning = false;  // MariaDB's RETURNING ...: the reply is a result set of the inserted rows
    [[nodiscard]] std::size_t row_count() const noexcept { return row_width == 0 ? 0 : values.size() / row_width; }
};

// DELETE [LOW_PRIORITY] [QUICK] [IGNORE] FROM t [[AS] a] [WHERE ...] [ORDER BY ...] [LIMIT n]: one
// table (a multi-table DELETE, USING, PARTITION, RETURNING are not read).
struct delete_statement {
    token_span modifiers;  // LOW_PRIORITY, QUICK, IGNORE
    table_ref table;
    where_clause where;  // present == false: every row of the table
    token_span order_by;
    token_span limit;
};

// INSERT [IGNORE] INTO t (columns) SELECT <items> FROM <one table> [WHERE ...]: the only INSERT ... SELECT
// the matcher may model (a claim by INSERT ... SELECT from its stock row). Kept beside a statement whose
// reason is insert_select, when the SELECT parses as a plain one-table SELECT above and ends the text.
struct insert_select_form {
    insert_statement insert;  // the table, IGNORE and the column list (no values)
    select_statement select;
    std::uint32_t select_token = no_token;  // the SELECT keyword: where the rows start
    // Per select item: a literal, ?, NULL or DEFAULT as read, else an operand of kind column or expression.
    small_vector<operand, 8> item_values;
};

// UPDATE <t> SET <c> = N - (SELECT COUNT(*) FROM <t2> [alias] [WHERE ...]) WHERE ... (or SET c = (SELECT N -
// COUNT(*) FROM ...)): a column recomputed from a count of rows, its only assignment. Kept beside a
// statement whose reason is subquery_in_set when the whole text reads so.
struct counter_recompute_form {
    table_ref table;    // the UPDATE's table
    name_ref column;    // the column it sets
    operand total;      // N, a literal
    table_ref counted;  // the table whose rows are counted
    where_clause count_where;
    where_clause where;  // the UPDATE's WHERE
};

enum class transaction_kind : std::uint8_t { begin, commit, rollback, savepoint, rollback_to_savepoint, release_savepoint };

enum class tristate : std::uint8_t { unset, yes, no };

struct transaction_statement {
    transaction_kind kind = transaction_kind::begin;
    bool read_only = false;
    bool read_write = false;
    bool consistent_snapshot = false;
    tristate chain = tristate::unset;
    tristate release = tristate::unset;
    std::uint32_t savepoint = no_token;
};

struct use_statement {
    std::uint32_t database = no_token;
};

enum class variable_scope : std::uint8_t { session, global, persist, persist_only, user };
enum class set_target : std::uint8_t { variable, names, character_set };

struct set_item {
    set_target target = set_target::variable;
    variable_scope scope = variable_scope::session;
    std::uint32_t name_token = no_token;  // variable: the token holding the name
    std::string_view name;                // variable: the name as written, without @@ or scope
    operand value;                        // names/character_set: the character set (word, string or DEFAULT)
    std::uint32_t collation = no_token;   // SET NAMES x COLLATE y
    token_span span;
};

struct set_statement {
    small_vector<set_item, 4> items;
};

enum class statement_kind : std::uint8_t { not_ours, select, update, insert, transaction, use, set, delete_ };

enum class not_ours_reason : std::uint8_t {
    none,
    empty,               // only comments and whitespace
    lex_error,           // the server would reject it too (see parsed_statement::error)
    other_statement,     // a statement kind we do not read (CREATE, CALL, TRUNCATE, ...)
    unsupported_syntax,  // joins, subqueries, OR, functions in WHERE, ...
    several_statements,  // more than one statement in one query
    // INSERT / REPLACE whose rows come from a query: INSERT ... SELECT, INSERT ... (SELECT ...),
    // INSERT ... WITH ... SELECT, INSERT ... TABLE t.
    insert_select,
    // UPDATE that sets a column from a subquery: SET c = (SELECT ...), SET c = 100 - (SELECT ...).
    // parsed_statement::not_ours_table and not_ours_column name the table and that column.
    subquery_in_set,
    // Set by the engine, not the parser: the session's sql_mode is not known and the text reads
    // differently with and without ANSI_QUOTES ("x" a string or a name).
    sql_mode_unknown,
};

[[nodiscard]] std::string_view not_ours_reason_text(not_ours_reason r) noexcept;

struct parsed_statement {
    std::string_view sql;
    lexer_options options;
    token_vector tokens;
    std::uint32_t placeholder_count = 0;
    statement_kind kind = statement_kind::not_ours;
    not_ours_reason reason = not_ours_reason::empty;
    boost::system::error_code error;  // reason == lex_error
    std::uint32_t stop_offset = 0;    // not_ours: byte offset where recognition stopped
    // reason == subquery_in_set: the UPDATE's table and the first column it sets from a subquery.
    table_ref not_ours_table;
    name_ref not_ours_column;
    // reason == insert_select: the statement in the one form the matcher may model (none otherwise).
    std::shared_ptr<const insert_select_form> insert_select;
    // reason == subquery_in_set: the UPDATE in the one recompute form the matcher may model (none otherwise).
    std::shared_ptr<const counter_recompute_form> counter_recompute;
    std::variant<std::monostate, select_statement, update_statement, insert_statement, transaction_statement,
                 use_statement, set_statement, delete_statement>
        body;

    [[nodiscard]] std::string_view text(std::uint32_t tok) const noexcept {
        return tok < tokens.size() ? tokens[tok].text(sql) : std::string_view{};
    }
    // The bytes from the first token's start to the last token's end, as written.
    [[nodiscard]] std::string_view text(token_span s) const noexcept {
        if (s.empty()) return {};
        const auto begin = tokens[s.first].offset;
        return sql.substr(begin, tokens[s.last - 1].end_offset() - begin);
    }
    [[nodiscard]] bool ours() const noexcept { return kind != statement_kind::not_ours; }
};

}  // namespace claimguard::rules::sql
