// Helpers for the SQL recognizer tests: readable token dumps and option shorthands.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "rules/sql/lexer.hpp"
#include "rules/sql/token.hpp"

namespace claimguard::rules::sql::test {

// Bytes outside printable ASCII as \xNN, so failures show hostile bytes.
inline std::string printable(std::string_view s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f) {
            out.push_back(c);
        } else {
            char buf[5];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        }
    }
    return out;
}

// Every token of `sql` (trivia included) as "kind:text".
inline std::vector<std::string> all_tokens(std::string_view sql, const lexer_options& o) {
    std::vector<std::string> out;
    lexer lx(sql, o);
    for (token t = lx.next(); t.kind != token_kind::end; t = lx.next())
        out.push_back(std::string(token_kind_name(t.kind)) + ":" + printable(t.text(sql)));
    return out;
}

// Only the significant tokens, as "kind:text".
inline std::vector<std::string> significant_tokens(std::string_view sql, const lexer_options& o) {
    std::vector<std::string> out;
    lexer lx(sql, o);
    for (token t = lx.next(); t.kind != token_kind::end; t = lx.next())
        if (!is_trivia(t.kind)) out.push_back(std::string(token_kind_name(t.kind)) + ":" + printable(t.text(sql)));
    return out;
}

inline lexer_options opts(charset cs = charset::single_byte, bool ansi = false, bool nbe = false) {
    lexer_options o;
    o.client_charset = cs;
    o.ansi_quotes = ansi;
    o.no_backslash_escapes = nbe;
    return o;
}

// Whether the tokens tile [0, size): contiguous, non-empty, in order, then `end` at size.
inline bool tokens_tile(std::string_view sql, const lexer_options& o, std::string* why = nullptr) {
    lexer lx(sql, o);
    std::size_t at = 0;
    for (std::size_t n = 0; n <= sql.size() + 1; ++n) {
        const token t = lx.next();
        if (t.kind == token_kind::end) {
            if (t.offset != sql.size() || at != sql.size()) {
                if (why) *why = "end at " + std::to_string(t.offset) + ", covered " + std::to_string(at);
                return false;
            }
            return true;
        }
        if (t.offset != at || t.length == 0 || t.end_offset() > sql.size()) {
            if (why) *why = "token at " + std::to_string(t.offset) + "+" + std::to_string(t.length) + ", expected " + std::to_string(at);
            return false;
        }
        at = t.end_offset();
    }
    if (why) *why = "more tokens than bytes";
    return false;
}

}  // namespace claimguard::rules::sql::test
