// Splitting a query of several statements where the server splits it.
#include "several_statements.hpp"

#include "rules/sql/lexer.hpp"

namespace claimguard::engine {

namespace sql = rules::sql;

namespace {

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
    return true;
}

bool icontains(std::string_view text, std::string_view word) {
    for (std::size_t i = 0; i + word.size() <= text.size(); ++i)
        if (iequals(text.substr(i, word.size()), word)) return true;
    return false;
}

// A SET that may change how the server reads the statements after it (sql_mode: where a string
// ends; the client character set: which bytes are quotes). The server splits the rest of the query
// as it reads it then, which the split here, made up front, cannot follow.
bool changes_reading(std::string_view first_word, std::string_view statement) {
    return iequals(first_word, "SET") && (icontains(statement, "sql_mode") || icontains(statement, "names") ||
                                          icontains(statement, "character") || icontains(statement, "charset"));
}

// Words that open a compound statement (BEGIN NOT ATOMIC ... END, a routine, trigger or event body,
// IF/CASE/LOOP/WHILE/REPEAT/FOR blocks): their inner `;` do not end a statement, the server reads the
// whole block as one. A split here would cut it apart.
bool opens_compound(std::string_view word) {
    for (std::string_view w : {"CREATE", "ALTER", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR", "DECLARE", "END",
                               "ELSE", "ELSEIF", "WHEN", "UNTIL", "DO", "LEAVE", "ITERATE", "RETURN"})
        if (iequals(word, w)) return true;
    return false;
}

}  // namespace

std::vector<std::string_view> split_statements(std::string_view text, const sql::lexer_options& options) {
    std::vector<std::string_view> out;
    sql::lexer lex(text, options);
    std::size_t start = 0;         // where the current statement starts
    bool significant = false;      // the current statement has a token that is not trivia
    bool first_word_seen = false;  // its first word was looked at
    std::string_view first_word;
    std::size_t words = 0;  // significant tokens of the current statement so far
    int versioned = 0;      // inside /*! ... */
    for (;;) {
        const auto t = lex.next();
        if (t.kind == sql::token_kind::end) break;
        if (t.kind == sql::token_kind::invalid) return {};
        if (t.kind == sql::token_kind::version_open) ++versioned;
        if (t.kind == sql::token_kind::version_close) --versioned;
        if (t.kind == sql::token_kind::punct && t.text(text) == ";") {
            if (versioned > 0 || !significant) return {};  // inside a versioned comment; an empty statement
            out.push_back(text.substr(start, t.offset - start));
            if (changes_reading(first_word, out.back())) return {};
            start = t.end_offset();
            significant = first_word_seen = false;
            words = 0;
            continue;
        }
        if (sql::is_trivia(t.kind)) continue;
        significant = true;
        const auto word = t.text(text);
        ++words;
        if (!first_word_seen) {
            first_word_seen = true;
            first_word = word;
            if (iequals(first_word, "LOAD")) return {};  // LOAD DATA LOCAL: the client sends a file
            if (opens_compound(first_word)) return {};
        } else if (iequals(word, "BEGIN") || (words == 2 && iequals(first_word, "BEGIN") && iequals(word, "NOT"))) {
            return {};  // a block: BEGIN NOT ATOMIC, or BEGIN after a label or inside a routine's definition
        } else if (words == 2 && t.kind == sql::token_kind::punct && word == ":") {
            return {};  // label: BEGIN / LOOP / WHILE ...
        }
    }
    if (lex.unterminated_version()) return {};
    if (significant) out.push_back(text.substr(start));
    if (out.size() < 2) return {};
    return out;
}

}  // namespace claimguard::engine
