// Literal decoding (MySQL's unescape rules, multibyte aware), key comparison, identifier matching.
#include "rules/sql/values.hpp"

#include <limits>

#include "rules/sql/text.hpp"

namespace claimguard::rules::sql {
namespace {

constexpr std::size_t max_int64_digits = 19;

// Canonical text of sign + integer digits + fraction digits; sets `integer` when whole and in range.
void canonical_decimal(bool negative, std::string_view int_digits, std::string_view frac_digits, literal_value& out) {
    while (int_digits.size() > 1 && int_digits.front() == '0') int_digits.remove_prefix(1);
    while (!frac_digits.empty() && frac_digits.back() == '0') frac_digits.remove_suffix(1);
    if (int_digits.empty()) int_digits = "0";
    const bool zero = int_digits == "0" && frac_digits.empty();
    out.bytes.clear();
    if (negative && !zero) out.bytes.push_back('-');
    out.bytes.append(int_digits);
    if (!frac_digits.empty()) {
        out.bytes.push_back('.');
        out.bytes.append(frac_digits);
        return;
    }
    if (int_digits.size() > max_int64_digits) return;
    std::uint64_t v = 0;
    for (char ch : int_digits) v = v * 10 + static_cast<std::uint64_t>(ch - '0');
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (!negative && v <= max) out.integer = static_cast<std::int64_t>(v);
    if (negative && v <= max + 1) out.integer = v == max + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(v);
}

[[nodiscard]] int hex_value(char ch) noexcept {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return ch - 'A' + 10;
}

void decode_hex_digits(std::string_view digits, literal_value& out) {
    out.kind = literal_kind::hex;
    out.bytes.clear();
    std::size_t i = 0;
    if (digits.size() % 2 != 0) {  // 0x123 is 0x0123
        out.bytes.push_back(static_cast<char>(hex_value(digits[0])));
        i = 1;
    }
    for (; i + 1 < digits.size(); i += 2)
        out.bytes.push_back(static_cast<char>(hex_value(digits[i]) * 16 + hex_value(digits[i + 1])));
}

void decode_bit_digits(std::string_view digits, literal_value& out) {
    out.kind = literal_kind::bit;
    out.bytes.clear();
    const std::size_t lead = digits.size() % 8;
    std::size_t i = 0;
    auto take = [&](std::size_t n) {
        unsigned v = 0;
        for (std::size_t k = 0; k < n; ++k) v = (v << 1) | static_cast<unsigned>(digits[i++] - '0');
        out.bytes.push_back(static_cast<char>(v));
    };
    if (lead != 0) take(lead);
    while (i < digits.size()) take(8);
}

// Big-endian value of up to 8 bytes below 2^63.
void integer_from_bytes(literal_value& out, bool negative) {
    std::size_t first = 0;
    while (first < out.bytes.size() && out.bytes[first] == '\0') ++first;
    if (out.bytes.size() - first > sizeof(std::int64_t)) return;
    std::uint64_t v = 0;
    for (std::size_t i = first; i < out.bytes.size(); ++i) v = (v << 8) | static_cast<unsigned char>(out.bytes[i]);
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return;
    out.integer = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
}

[[nodiscard]] bool is_numeric(literal_kind k) noexcept {
    return k == literal_kind::integer || k == literal_kind::decimal || k == literal_kind::boolean;
}

[[nodiscard]] bool is_binary(literal_kind k) noexcept { return k == literal_kind::hex || k == literal_kind::bit; }

}  // namespace

std::string decode_string(std::string_view text, const lexer_options& options) {
    std::string out;
    if (!text.empty() && (text[0] == 'N' || text[0] == 'n')) text.remove_prefix(1);
    if (text.size() < 2) return out;
    const char quote = text[0];
    const std::string_view body = text.substr(1, text.size() - 2);
    const bool backslash = !options.no_backslash_escapes;
    out.reserve(body.size());
    const char* end = body.data() + body.size();
    for (std::size_t i = 0; i < body.size();) {
        if (const std::size_t n = multibyte_length(options.client_charset, body.data() + i, end); n != 0) {
            out.append(body.substr(i, n));
            i += n;
            continue;
        }
        const char ch = body[i];
        if (backslash && ch == '\\' && i + 1 < body.size()) {
            const char e = body[i + 1];
            switch (e) {
                case 'n': out.push_back('\n'); break;
                case 't': out.push_back('\t'); break;
                case 'r': out.push_back('\r'); break;
                case 'b': out.push_back('\b'); break;
                case '0': out.push_back('\0'); break;
                case 'Z': out.push_back('\x1a'); break;
                case '_':
                case '%':
                    out.push_back('\\');  // kept for LIKE patterns, as the server does
                    out.push_back(e);
                    break;
                default: out.push_back(e); break;
            }
            i += 2;
        } else if (ch == quote) {  // only doubled inside the body
            out.push_back(quote);
            i += 2;
        } else {
            out.push_back(ch);
            ++i;
        }
    }
    return out;
}

literal_value decode_literal(const parsed_statement& st, const operand& op) {
    literal_value v;
    if (op.kind != operand_kind::literal || op.value_token >= st.tokens.size()) return v;
    const token& t = st.tokens[op.value_token];
    const std::string_view text = t.text(st.sql);
    switch (t.kind) {
        case token_kind::string:
            v.kind = literal_kind::string;
            for (std::uint32_t i = op.value_token; i < op.span.last && st.tokens[i].kind == token_kind::string; ++i)
                v.bytes += decode_string(st.tokens[i].text(st.sql), st.options);
            break;
        case token_kind::integer:
            v.kind = literal_kind::integer;
            canonical_decimal(op.negative, text, {}, v);
            break;
        case token_kind::decimal: {
            v.kind = literal_kind::decimal;
            const auto dot = text.find('.');
            canonical_decimal(op.negative, text.substr(0, dot), text.substr(dot + 1), v);
            break;
        }
        case token_kind::real:
            v.kind = literal_kind::real;
            if (op.negative) v.bytes.push_back('-');
            for (char ch : text) v.bytes.push_back(ascii_lower(ch));
            break;
        case token_kind::hex_number:
            decode_hex_digits(text.substr(2), v);
            integer_from_bytes(v, op.negative);
            break;
        case token_kind::hex_string:
            decode_hex_digits(text.substr(2, text.size() - 3), v);
            integer_from_bytes(v, op.negative);
            break;
        case token_kind::bit_number:
            decode_bit_digits(text.substr(2), v);
            integer_from_bytes(v, op.negative);
            break;
        case token_kind::bit_string:
            decode_bit_digits(text.substr(2, text.size() - 3), v);
            integer_from_bytes(v, op.negative);
            break;
        case token_kind::word:  // TRUE / FALSE
            v.kind = literal_kind::boolean;
            v.integer = iequals(text, "TRUE") ? 1 : 0;
            v.bytes.assign(1, *v.integer != 0 ? '1' : '0');
            break;
        default:
            break;
    }
    return v;
}

std::optional<std::string> canonical_number(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    bool negative = false;
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
        negative = text.front() == '-';
        text.remove_prefix(1);
    }
    const auto dot = text.find('.');
    const std::string_view int_digits = text.substr(0, dot);
    const std::string_view frac_digits = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    if (int_digits.empty() && frac_digits.empty()) return std::nullopt;
    for (char ch : int_digits)
        if (!is_digit(ch)) return std::nullopt;
    for (char ch : frac_digits)
        if (!is_digit(ch)) return std::nullopt;
    literal_value v;
    canonical_decimal(negative, int_digits, frac_digits, v);
    return v.bytes;
}

bool same_value(const literal_value& a, const literal_value& b) {
    if (a.kind == literal_kind::null || b.kind == literal_kind::null) return false;
    if (is_numeric(a.kind) && is_numeric(b.kind)) return a.bytes == b.bytes;
    if (a.kind == literal_kind::real || b.kind == literal_kind::real) return a.kind == b.kind && a.bytes == b.bytes;
    if (a.kind == literal_kind::string && b.kind == literal_kind::string) return a.bytes == b.bytes;
    if (is_binary(a.kind) || is_binary(b.kind)) {
        if (is_numeric(a.kind) || is_numeric(b.kind)) return a.integer && b.integer && *a.integer == *b.integer;
        return a.bytes == b.bytes;
    }
    // One string, one number: the server compares them as numbers.
    const literal_value& s = a.kind == literal_kind::string ? a : b;
    const literal_value& n = a.kind == literal_kind::string ? b : a;
    const auto canon = canonical_number(s.bytes);
    return canon && *canon == n.bytes;
}

std::string unquote_identifier(std::string_view raw) {
    if (raw.size() < 2 || (raw.front() != '`' && raw.front() != '"')) return std::string(raw);
    const char q = raw.front();
    std::string out;
    const std::string_view body = raw.substr(1, raw.size() - 2);
    for (std::size_t i = 0; i < body.size(); ++i) {
        out.push_back(body[i]);
        if (body[i] == q && i + 1 < body.size() && body[i + 1] == q) ++i;
    }
    return out;
}

bool identifier_equals(std::string_view raw, std::string_view name) noexcept {
    if (raw.size() < 2 || (raw.front() != '`' && raw.front() != '"')) return iequals(raw, name);
    const char q = raw.front();
    const std::string_view body = raw.substr(1, raw.size() - 2);
    std::size_t j = 0;
    for (std::size_t i = 0; i < body.size(); ++i) {
        if (j >= name.size() || ascii_lower(body[i]) != ascii_lower(name[j])) return false;
        ++j;
        if (body[i] == q && i + 1 < body.size() && body[i + 1] == q) ++i;
    }
    return j == name.size();
}

std::string quote_identifier(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 2);
    out.push_back('`');
    for (char ch : name) {
        out.push_back(ch);
        if (ch == '`') out.push_back('`');
    }
    out.push_back('`');
    return out;
}

sql_mode_flags parse_sql_mode(std::string_view value) noexcept {
    sql_mode_flags f;
    while (!value.empty()) {
        const auto comma = value.find(',');
        std::string_view mode = value.substr(0, comma);
        while (!mode.empty() && is_space(mode.front())) mode.remove_prefix(1);
        while (!mode.empty() && is_space(mode.back())) mode.remove_suffix(1);
        // The combination modes include both ANSI_QUOTES and PIPES_AS_CONCAT (MySQL 8: ANSI; MariaDB:
        // all of them; the server's own answer to SELECT @@sql_mode lists them expanded too).
        const bool combination = iequals(mode, "ANSI") || iequals(mode, "DB2") || iequals(mode, "MAXDB") ||
                                 iequals(mode, "MSSQL") || iequals(mode, "ORACLE") || iequals(mode, "POSTGRESQL");
        if (combination || iequals(mode, "ANSI_QUOTES")) f.ansi_quotes = true;
        if (combination || iequals(mode, "PIPES_AS_CONCAT")) f.pipes_as_concat = true;
        if (iequals(mode, "NO_BACKSLASH_ESCAPES")) f.no_backslash_escapes = true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return f;
}

}  // namespace claimguard::rules::sql
