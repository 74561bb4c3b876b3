// Multibyte character detection for the client character sets whose trail bytes can be ASCII.
#include "rules/sql/charset.hpp"

#include <array>

#include "rules/sql/text.hpp"

namespace claimguard::rules::sql {
namespace {

constexpr bool in(unsigned char c, unsigned char lo, unsigned char hi) noexcept { return c >= lo && c <= hi; }

// MariaDB numbers a NO PAD collation as its PAD SPACE base plus this offset.
constexpr std::uint16_t mariadb_nopad_offset = 1024;

struct collation_entry {
    std::uint16_t id;
    charset cs;
};

// Collation ids of the sets that need multibyte-aware lexing (MySQL and MariaDB share them).
constexpr std::array<collation_entry, 11> multibyte_collations{{
    {1, charset::big5},      // big5_chinese_ci
    {84, charset::big5},     // big5_bin
    {13, charset::sjis},     // sjis_japanese_ci
    {88, charset::sjis},     // sjis_bin
    {28, charset::gbk},      // gbk_chinese_ci
    {87, charset::gbk},      // gbk_bin
    {95, charset::cp932},    // cp932_japanese_ci
    {96, charset::cp932},    // cp932_bin
    {248, charset::gb18030},  // gb18030_chinese_ci
    {249, charset::gb18030},  // gb18030_bin
    {250, charset::gb18030},  // gb18030_unicode_520_ci
}};

struct name_entry {
    std::string_view name;
    charset cs;
};

// Every client character set MySQL 8 and MariaDB 10/11 accept in SET NAMES.
constexpr std::array<name_entry, 41> charset_names{{
    {"armscii8", charset::single_byte}, {"ascii", charset::single_byte},
    {"big5", charset::big5},            {"binary", charset::single_byte},
    {"cp1250", charset::single_byte},   {"cp1251", charset::single_byte},
    {"cp1256", charset::single_byte},   {"cp1257", charset::single_byte},
    {"cp850", charset::single_byte},    {"cp852", charset::single_byte},
    {"cp866", charset::single_byte},    {"cp932", charset::cp932},
    {"dec8", charset::single_byte},     {"eucjpms", charset::single_byte},
    {"euckr", charset::single_byte},    {"gb18030", charset::gb18030},
    {"gb2312", charset::single_byte},   {"gbk", charset::gbk},
    {"geostd8", charset::single_byte},  {"greek", charset::single_byte},
    {"hebrew", charset::single_byte},   {"hp8", charset::single_byte},
    {"keybcs2", charset::single_byte},  {"koi8r", charset::single_byte},
    {"koi8u", charset::single_byte},    {"latin1", charset::single_byte},
    {"latin2", charset::single_byte},   {"latin5", charset::single_byte},
    {"latin7", charset::single_byte},   {"macce", charset::single_byte},
    {"macroman", charset::single_byte}, {"sjis", charset::sjis},
    {"swe7", charset::single_byte},     {"tis620", charset::single_byte},
    {"ujis", charset::single_byte},     {"utf8", charset::single_byte},
    {"utf8mb3", charset::single_byte},  {"utf8mb4", charset::single_byte},
    {"utf16", charset::single_byte},    {"utf16le", charset::single_byte},
    {"utf32", charset::single_byte},
}};

}  // namespace

std::size_t multibyte_length(charset cs, const char* p, const char* end) noexcept {
    if (end - p < 2) return 0;
    const auto b0 = static_cast<unsigned char>(p[0]);
    const auto b1 = static_cast<unsigned char>(p[1]);
    switch (cs) {
        case charset::single_byte:
            return 0;
        case charset::gbk:
            return in(b0, 0x81, 0xfe) && (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfe)) ? 2 : 0;
        case charset::big5:
            return in(b0, 0xa1, 0xf9) && (in(b1, 0x40, 0x7e) || in(b1, 0xa1, 0xfe)) ? 2 : 0;
        case charset::sjis:
        case charset::cp932:
            return (in(b0, 0x81, 0x9f) || in(b0, 0xe0, 0xfc)) && (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfc)) ? 2 : 0;
        case charset::gb18030:
            if (!in(b0, 0x81, 0xfe)) return 0;
            if (in(b1, 0x40, 0x7e) || in(b1, 0x80, 0xfe)) return 2;
            if (end - p >= 4 && in(b1, 0x30, 0x39) && in(static_cast<unsigned char>(p[2]), 0x81, 0xfe) &&
                in(static_cast<unsigned char>(p[3]), 0x30, 0x39))
                return 4;
            return 0;
    }
    return 0;
}

std::optional<charset> charset_from_name(std::string_view name) noexcept {
    for (const auto& e : charset_names)
        if (iequals(name, e.name)) return e.cs;
    return std::nullopt;
}

charset charset_from_collation(std::uint16_t collation_id) noexcept {
    if (collation_id >= mariadb_nopad_offset && collation_id < 2 * mariadb_nopad_offset)
        collation_id = static_cast<std::uint16_t>(collation_id - mariadb_nopad_offset);
    for (const auto& e : multibyte_collations)
        if (e.id == collation_id) return e.cs;
    return charset::single_byte;
}

std::string_view charset_label(charset cs) noexcept {
    switch (cs) {
        case charset::single_byte: return "utf8mb4/latin1 (no ASCII trail bytes)";
        case charset::gbk: return "gbk";
        case charset::big5: return "big5";
        case charset::sjis: return "sjis";
        case charset::cp932: return "cp932";
        case charset::gb18030: return "gb18030";
    }
    return "?";
}

}  // namespace claimguard::rules::sql
