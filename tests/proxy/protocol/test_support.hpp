// Helpers for the protocol tests: hex <-> bytes, captured frames, packet spans.
#pragma once

#include <cctype>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "captures_mariadb.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/wire.hpp"

namespace claimguard::protocol::test {

// "0a 35 2e" or "0a352e" -> bytes; throws on odd digits (a broken test vector).
inline byte_buffer hex(std::string_view s) {
    byte_buffer out;
    int hi = -1;
    for (char c : s) {
        if (std::isspace(static_cast<unsigned char>(c))) continue;
        const int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                                  : std::tolower(c) - 'a' + 10;
        if (v < 0 || v > 15) throw std::invalid_argument("bad hex digit");
        if (hi < 0) {
            hi = v;
        } else {
            out.push_back(static_cast<std::uint8_t>(hi << 4 | v));
            hi = -1;
        }
    }
    if (hi >= 0) throw std::invalid_argument("odd number of hex digits");
    return out;
}

inline std::string to_hex(bytes_view b) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (auto c : b) {
        s += digits[c >> 4];
        s += digits[c & 15];
    }
    return s;
}

inline byte_buffer bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

// One recorded frame split into its parts.
struct frame {
    char from;  // 'c' client, 's' server
    std::uint8_t seq;
    byte_buffer raw;      // header + payload
    byte_buffer payload;  // without the header
};

inline frame decode_frame(char from, std::string_view frame_hex) {
    frame f{from, 0, hex(frame_hex), {}};
    if (f.raw.size() < frame_header_size) throw std::invalid_argument("frame too short");
    f.seq = f.raw[3];
    f.payload.assign(f.raw.begin() + frame_header_size, f.raw.end());
    return f;
}

// The payload of a captured frame written as hex.
inline byte_buffer payload_of(std::string_view frame_hex) {
    return decode_frame('s', frame_hex).payload;
}

inline std::vector<frame> frames(std::span<const mariadb::captured_frame> capture) {
    std::vector<frame> out;
    for (const auto& f : capture) out.push_back(decode_frame(f.from, f.hex));
    return out;
}

}  // namespace claimguard::protocol::test
