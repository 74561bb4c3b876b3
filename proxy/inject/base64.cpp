// Standard base64 with padding, encode and strict decode.
#include "proxy/inject/base64.hpp"

#include <array>
#include <cstdint>

namespace claimguard::inject {

namespace {

constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char pad = '=';
constexpr std::size_t group_bytes = 3;
constexpr std::size_t group_chars = 4;
constexpr std::uint8_t invalid = 0xff;

constexpr std::array<std::uint8_t, 256> make_reverse() {
    std::array<std::uint8_t, 256> table{};
    for (auto& v : table) v = invalid;
    for (std::size_t i = 0; i < alphabet.size(); ++i)
        table[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
    return table;
}
constexpr auto reverse = make_reverse();

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + group_bytes - 1) / group_bytes * group_chars);
    std::size_t i = 0;
    for (; i + group_bytes <= bytes.size(); i += group_bytes) {
        const std::uint32_t v = (static_cast<std::uint8_t>(bytes[i]) << 16) |
                                (static_cast<std::uint8_t>(bytes[i + 1]) << 8) |
                                static_cast<std::uint8_t>(bytes[i + 2]);
        out += alphabet[(v >> 18) & 0x3f];
        out += alphabet[(v >> 12) & 0x3f];
        out += alphabet[(v >> 6) & 0x3f];
        out += alphabet[v & 0x3f];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest == 1) {
        const std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
        out += alphabet[(v >> 18) & 0x3f];
        out += alphabet[(v >> 12) & 0x3f];
        out += pad;
        out += pad;
    } else if (rest == 2) {
        const std::uint32_t v =
            (static_cast<std::uint8_t>(bytes[i]) << 16) | (static_cast<std::uint8_t>(bytes[i + 1]) << 8);
        out += alphabet[(v >> 18) & 0x3f];
        out += alphabet[(v >> 12) & 0x3f];
        out += alphabet[(v >> 6) & 0x3f];
        out += pad;
    }
    return out;
}

result<std::string> base64_decode(std::string_view text) {
    if (text.size() % group_chars != 0) return make_error_code(errc::bad_base64);
    std::string out;
    out.reserve(text.size() / group_chars * group_bytes);
    for (std::size_t i = 0; i < text.size(); i += group_chars) {
        const bool last = i + group_chars == text.size();
        std::size_t pads = 0;
        if (last) {
            if (text[i + 3] == pad) ++pads;
            if (pads == 1 && text[i + 2] == pad) ++pads;
        }
        std::uint32_t v = 0;
        for (std::size_t k = 0; k < group_chars; ++k) {
            if (k >= group_chars - pads) {
                v <<= 6;
                continue;
            }
            const std::uint8_t d = reverse[static_cast<unsigned char>(text[i + k])];
            if (d == invalid) return make_error_code(errc::bad_base64);
            v = (v << 6) | d;
        }
        // Bits under the padding must be zero, or two texts would decode to the same bytes.
        if ((pads == 1 && (v & 0xff) != 0) || (pads == 2 && (v & 0xffff) != 0))
            return make_error_code(errc::bad_base64);
        out += static_cast<char>((v >> 16) & 0xff);
        if (pads < 2) out += static_cast<char>((v >> 8) & 0xff);
        if (pads < 1) out += static_cast<char>(v & 0xff);
    }
    return out;
}

}  // namespace claimguard::inject
