// Text helpers of the rules model: UTF-8, MySQL identifiers, case-insensitive names, FNV-1a.
#include "rules/model/text.hpp"

#include "rules/model/limits.hpp"

namespace claimguard::rules {
namespace {

struct utf8_char {
    std::uint32_t code_point = 0;
    std::size_t size = 0;  // 0: invalid sequence
};

utf8_char decode_utf8(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    if (b0 < 0x80)
        return {b0, 1};
    std::size_t size = 0;
    std::uint32_t cp = 0;
    std::uint32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
        size = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        size = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        size = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
        return {};
    }
    if (s.size() - i < size)
        return {};
    for (std::size_t k = 1; k < size; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80)
            return {};
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return {};
    return {cp, size};
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto c = decode_utf8(s, i);
        if (c.size == 0)
            return i;
        i += c.size;
    }
    return std::nullopt;
}

std::size_t utf8_length(std::string_view s) {
    std::size_t n = 0;
    for (const char c : s)
        n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

std::string_view utf8_prefix(std::string_view s, std::size_t max_chars) {
    std::size_t chars = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
            if (chars == max_chars)
                return s.substr(0, i);
            ++chars;
        }
    }
    return s;
}

std::string identifier_problem(std::string_view id) {
    if (id.empty())
        return "is empty";
    if (first_invalid_utf8(id))
        return "is not valid UTF-8";
    for (std::size_t i = 0; i < id.size();) {
        const auto c = decode_utf8(id, i);
        if (c.code_point < 0x20 || c.code_point == 0x7F)
            return "contains a control character";
        if (c.code_point > 0xFFFF)
            return "contains a character MySQL does not allow in names (outside the Basic Multilingual Plane)";
        i += c.size;
    }
    if (utf8_length(id) > max_identifier_chars)
        return "is longer than " + std::to_string(max_identifier_chars) + " characters, the MySQL limit for names";
    if (id.back() == ' ')
        return "ends with a space, which MySQL does not allow in names";
    return {};
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i]))
            return false;
    }
    return true;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::uint64_t fnv1a64(std::string_view data, std::uint64_t state) {
    constexpr std::uint64_t prime = 0x100000001b3ULL;
    for (const char c : data) {
        state ^= static_cast<unsigned char>(c);
        state *= prime;
    }
    return state;
}

std::string to_hex(std::uint64_t value, std::size_t digits) {
    constexpr std::string_view hex = "0123456789abcdef";
    std::string out(digits, '0');
    for (std::size_t i = digits; i-- > 0 && value != 0; value >>= 4)
        out[i] = hex[value & 0xF];
    return out;
}

std::string printable(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
            c = '?';
    return out;
}

}  // namespace claimguard::rules
