// The MySQL lexer, following sql_lex.cc: comments, versioned comments, quoting, multibyte strings.
#include "rules/sql/lexer.hpp"

#include "rules/sql/text.hpp"

namespace claimguard::rules::sql {
namespace {

// Digits MySQL reads as the version of a versioned comment: 5 (50700), or 6 followed by a
// space (100100, MySQL 8.0.34+ and MariaDB).
constexpr std::size_t short_version_digits = 5;
constexpr std::size_t long_version_digits = 6;

[[nodiscard]] bool is_identifier_kind(token_kind k) noexcept {
    return k == token_kind::word || k == token_kind::quoted_ident;
}

}  // namespace

std::string_view token_kind_name(token_kind k) noexcept {
    switch (k) {
        case token_kind::whitespace: return "whitespace";
        case token_kind::comment: return "comment";
        case token_kind::hint: return "hint";
        case token_kind::version_open: return "version_open";
        case token_kind::version_close: return "version_close";
        case token_kind::word: return "word";
        case token_kind::quoted_ident: return "quoted_ident";
        case token_kind::string: return "string";
        case token_kind::hex_string: return "hex_string";
        case token_kind::hex_number: return "hex_number";
        case token_kind::bit_string: return "bit_string";
        case token_kind::bit_number: return "bit_number";
        case token_kind::integer: return "integer";
        case token_kind::decimal: return "decimal";
        case token_kind::real: return "real";
        case token_kind::placeholder: return "placeholder";
        case token_kind::user_var: return "user_var";
        case token_kind::system_var: return "system_var";
        case token_kind::punct: return "punct";
        case token_kind::invalid: return "invalid";
        case token_kind::end: return "end";
    }
    return "?";
}

token lexer::make(token_kind kind, std::size_t begin, std::uint8_t flags, std::uint32_t aux) noexcept {
    token t;
    t.offset = static_cast<std::uint32_t>(begin);
    t.length = static_cast<std::uint32_t>(pos_ - begin);
    t.kind = kind;
    t.flags = flags;
    t.aux = aux;
    if (!is_trivia(kind)) {
        name_follows_dot_ = kind == token_kind::punct && t.length == 1 && sql_[begin] == '.' &&
                            is_identifier_kind(last_kind_) && last_end_ == begin;
        last_kind_ = kind;
        last_end_ = pos_;
    }
    return t;
}

token lexer::next() noexcept {
    const std::size_t begin = pos_;
    if (pos_ >= sql_.size()) return make(token_kind::end, begin);
    const char c = sql_[pos_];
    const char c1 = at(pos_ + 1);

    if (is_space(c)) return lex_whitespace(begin);
    if (c == '#') return lex_line_comment(begin);
    if (c == '-' && c1 == '-' && (pos_ + 2 >= sql_.size() || is_space_or_control(sql_[pos_ + 2])))
        return lex_line_comment(begin);
    if (c == '/' && c1 == '*') return lex_block_comment(begin);
    if (c == '*' && c1 == '/' && in_version_) {
        pos_ += 2;
        in_version_ = false;
        return make(token_kind::version_close, begin);
    }
    if (name_follows_dot_ && is_ident_byte(c)) return lex_word(begin);
    switch (c) {
        case '\'':
            return lex_quoted(begin, begin + 1, '\'', token_kind::string, !options_.no_backslash_escapes, 0);
        case '"':
            if (options_.ansi_quotes) return lex_quoted(begin, begin + 1, '"', token_kind::quoted_ident, false, 0);
            return lex_quoted(begin, begin + 1, '"', token_kind::string, !options_.no_backslash_escapes, 0);
        case '`':
            return lex_quoted(begin, begin + 1, '`', token_kind::quoted_ident, false, 0);
        case 'N':
        case 'n':
            if (c1 == '\'')
                return lex_quoted(begin, begin + 2, '\'', token_kind::string, !options_.no_backslash_escapes,
                                  token_flag::national);
            break;
        case 'X':
        case 'x':
            if (c1 == '\'') return lex_prefixed_binary(begin, true);
            break;
        case 'B':
        case 'b':
            if (c1 == '\'') return lex_prefixed_binary(begin, false);
            break;
        case '.':
            if (is_digit(c1) && !(is_identifier_kind(last_kind_) && last_end_ == begin)) return lex_number(begin);
            break;
        case '?':
            ++pos_;
            return make(token_kind::placeholder, begin, 0, placeholders_++);
        case '@':
            return lex_variable(begin);
        default:
            break;
    }
    if (is_digit(c)) return lex_number(begin);
    if (is_ident_byte(c)) return lex_word(begin);
    return lex_punct(begin);
}

token lexer::lex_whitespace(std::size_t begin) noexcept {
    while (pos_ < sql_.size() && is_space(sql_[pos_])) ++pos_;
    return make(token_kind::whitespace, begin);
}

token lexer::lex_line_comment(std::size_t begin) noexcept {
    while (pos_ < sql_.size() && sql_[pos_] != '\n') ++pos_;
    return make(token_kind::comment, begin);
}

token lexer::lex_block_comment(std::size_t begin) noexcept {
    pos_ += 2;  // "/*"
    const char kind = at(pos_);
    const bool mysql_version = kind == '!';
    const bool mariadb_version = kind == 'M' && at(pos_ + 1) == '!';
    if ((mysql_version || (mariadb_version && options_.mariadb)) && !in_version_) {
        pos_ += mysql_version ? 1 : 2;
        std::size_t digits = 0;
        while (digits < long_version_digits && is_digit(at(pos_ + digits))) ++digits;
        if (digits == long_version_digits && !is_space(at(pos_ + digits))) digits = short_version_digits;
        std::uint32_t version = 0;
        if (digits >= short_version_digits) {
            for (std::size_t i = 0; i < digits; ++i) version = version * 10 + static_cast<std::uint32_t>(sql_[pos_ + i] - '0');
            pos_ += digits;
        }
        if (options_.server_version == 0 || version <= options_.server_version) {
            in_version_ = true;
            return make(token_kind::version_open, begin, 0, version);
        }
        // Above the server's version: the server skips it like any comment.
    }
    const token_kind result = kind == '+' ? token_kind::hint : token_kind::comment;
    while (pos_ + 1 < sql_.size()) {
        if (sql_[pos_] == '*' && sql_[pos_ + 1] == '/') {
            pos_ += 2;
            return make(result, begin);
        }
        ++pos_;
    }
    pos_ = sql_.size();
    return make(token_kind::invalid, begin);
}

bool lexer::skip_quoted_body(char quote, bool backslash, std::uint8_t& flags) noexcept {
    const bool multibyte = options_.client_charset != charset::single_byte;
    while (pos_ < sql_.size()) {
        // A whole multibyte character first: its trail byte may be 0x5c or a quote.
        if (const std::size_t n = multibyte ? mb_length(pos_) : 0; n != 0) {
            pos_ += n;
            continue;
        }
        const char c = sql_[pos_++];
        if (c == '\\' && backslash) {
            if (pos_ >= sql_.size()) return false;
            ++pos_;  // the server skips exactly one byte after a backslash
            flags |= token_flag::has_escape;
        } else if (c == quote) {
            if (pos_ < sql_.size() && sql_[pos_] == quote) {
                ++pos_;
                flags |= token_flag::has_escape;
            } else {
                return true;
            }
        }
    }
    return false;
}

token lexer::lex_quoted(std::size_t begin, std::size_t body, char quote, token_kind kind, bool backslash,
                        std::uint8_t flags) noexcept {
    pos_ = body;
    if (!skip_quoted_body(quote, backslash, flags)) {
        pos_ = sql_.size();
        return make(token_kind::invalid, begin);
    }
    return make(kind, begin, flags);
}

token lexer::lex_prefixed_binary(std::size_t begin, bool hex) noexcept {
    pos_ = begin + 2;  // X' or b'
    std::size_t digits = 0;
    while (pos_ < sql_.size() && (hex ? is_hex_digit(sql_[pos_]) : (sql_[pos_] == '0' || sql_[pos_] == '1'))) {
        ++pos_;
        ++digits;
    }
    if (at(pos_) != '\'') return make(token_kind::invalid, begin);
    ++pos_;
    if (hex && digits % 2 != 0) return make(token_kind::invalid, begin);
    return make(hex ? token_kind::hex_string : token_kind::bit_string, begin);
}

token lexer::lex_number(std::size_t begin) noexcept {
    pos_ = begin;
    // 0x.. and 0b.. are numbers only when nothing identifier-like follows the digits.
    if (sql_[pos_] == '0' && (at(pos_ + 1) == 'x' || at(pos_ + 1) == 'b')) {
        const bool hex = at(pos_ + 1) == 'x';
        std::size_t p = pos_ + 2;
        while (p < sql_.size() && (hex ? is_hex_digit(sql_[p]) : (sql_[p] == '0' || sql_[p] == '1'))) ++p;
        if (p > pos_ + 2 && !is_ident_byte(at(p))) {
            pos_ = p;
            return make(hex ? token_kind::hex_number : token_kind::bit_number, begin);
        }
    }
    token_kind kind = token_kind::integer;
    while (pos_ < sql_.size() && is_digit(sql_[pos_])) ++pos_;
    if (at(pos_) == '.') {
        kind = token_kind::decimal;
        ++pos_;
        while (pos_ < sql_.size() && is_digit(sql_[pos_])) ++pos_;
    }
    const char e = at(pos_);
    if ((e == 'e' || e == 'E') &&
        (is_digit(at(pos_ + 1)) || ((at(pos_ + 1) == '+' || at(pos_ + 1) == '-') && is_digit(at(pos_ + 2))))) {
        kind = token_kind::real;
        pos_ += is_digit(at(pos_ + 1)) ? 1 : 2;
        while (pos_ < sql_.size() && is_digit(sql_[pos_])) ++pos_;
        return make(kind, begin);
    }
    // Digits followed by identifier bytes (123abc) are an identifier.
    if (kind == token_kind::integer && is_ident_byte(at(pos_))) return lex_word(begin);
    return make(kind, begin);
}

void lexer::skip_ident_bytes() noexcept {
    if (options_.client_charset == charset::single_byte) {
        while (pos_ < sql_.size() && is_ident_byte(sql_[pos_])) ++pos_;
        return;
    }
    while (pos_ < sql_.size() && is_ident_byte(sql_[pos_])) {
        const std::size_t n = mb_length(pos_);
        pos_ += n != 0 ? n : 1;
    }
}

token lexer::lex_word(std::size_t begin) noexcept {
    pos_ = begin;
    skip_ident_bytes();
    return make(token_kind::word, begin);
}

token lexer::lex_variable(std::size_t begin) noexcept {
    pos_ = begin + 1;
    const char c = at(pos_);
    if (c == '@') {
        ++pos_;
        const std::size_t name = pos_;
        skip_ident_bytes();
        if (pos_ == name) {  // "@@" alone
            pos_ = begin + 1;
            return make(token_kind::punct, begin);
        }
        return make(token_kind::system_var, begin);
    }
    if (c == '\'' || (c == '"' && !options_.ansi_quotes))
        return lex_quoted(begin, begin + 2, c, token_kind::user_var, !options_.no_backslash_escapes, 0);
    if (c == '`' || c == '"') return lex_quoted(begin, begin + 2, c, token_kind::user_var, false, 0);
    const std::size_t name = pos_;
    while (pos_ < sql_.size() && (is_ident_byte(sql_[pos_]) || sql_[pos_] == '.')) {
        const std::size_t n = mb_length(pos_);
        pos_ += n != 0 ? n : 1;
    }
    if (pos_ == name) return make(token_kind::punct, begin);
    return make(token_kind::user_var, begin);
}

token lexer::lex_punct(std::size_t begin) noexcept {
    const char c = sql_[pos_];
    const char c1 = at(pos_ + 1);
    std::size_t n = 1;
    if ((c == '<' && c1 == '=' && at(pos_ + 2) == '>') || (c == '-' && c1 == '>' && at(pos_ + 2) == '>')) {
        n = 3;
    } else if ((c == '<' && (c1 == '=' || c1 == '>' || c1 == '<')) || (c == '>' && (c1 == '=' || c1 == '>')) ||
               (c == '!' && c1 == '=') || (c == ':' && c1 == '=') || (c == '|' && c1 == '|') ||
               (c == '&' && c1 == '&') || (c == '-' && c1 == '>')) {
        n = 2;
    }
    pos_ += n;
    return make(token_kind::punct, begin);
}

}  // namespace claimguard::rules::sql
