// Splitting a script into its statements with the recognizer's lexer.
#include "script.hpp"

#include "lexer.hpp"

namespace claimguard::rules::sql {

std::vector<std::string> split_script(const std::string& text) {
    std::vector<std::string> out;
    lexer lex(text, {});
    std::size_t start = 0;
    bool significant = false;
    int versioned = 0;  // inside /*! ... */, where a ';' does not end the statement
    const auto flush = [&](std::size_t end) {
        if (significant) {
            auto stmt = text.substr(start, end - start);
            const auto first = stmt.find_first_not_of(" \t\r\n");
            const auto last = stmt.find_last_not_of(" \t\r\n");
            out.push_back(stmt.substr(first, last - first + 1));
        }
        significant = false;
    };
    for (;;) {
        const auto t = lex.next();
        if (t.kind == token_kind::end) break;
        if (t.kind == token_kind::version_open) ++versioned;
        if (t.kind == token_kind::version_close) --versioned;
        if (t.kind == token_kind::punct && t.text(text) == ";" && versioned == 0) {
            flush(t.offset);
            start = t.end_offset();
            continue;
        }
        if (t.kind == token_kind::invalid) significant = true;  // shown as written; the row says why
        if (!is_trivia(t.kind)) significant = true;
    }
    flush(text.size());
    return out;
}

std::string one_line(std::string text, std::size_t max) {
    for (auto& c : text)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (text.size() > max) text = text.substr(0, max - 3) + "...";
    return text;
}

}  // namespace claimguard::rules::sql
