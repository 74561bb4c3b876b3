// Generic and connection-phase packets: greeting, handshake response, OK, ERR, EOF.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "capabilities.hpp"
#include "frame.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// Protocol v10 server greeting. Views point into the decoded payload.
struct server_greeting {
    std::uint8_t protocol_version = 10;
    std::string_view server_version;
    std::uint32_t connection_id = 0;
    bytes_view auth_data_1;        // 8 bytes
    std::uint32_t capabilities = 0;
    std::uint8_t charset = 0;
    std::uint16_t status = 0;
    std::uint8_t auth_data_len = 0;
    std::uint32_t mariadb_capabilities = 0;  // only when !(capabilities & CLIENT_MYSQL)
    bytes_view auth_data_2;        // as on the wire, including any trailing NUL
    std::string_view auth_plugin;
    bool auth_plugin_terminated = true;  // some servers omit the final NUL
};
[[nodiscard]] result<server_greeting> parse_server_greeting(bytes_view payload);
void serialize(const server_greeting& g, byte_buffer& out);

// True when the greeting comes from a MariaDB server (it clears CLIENT_MYSQL).
inline bool is_mariadb(std::uint32_t capabilities) { return !(capabilities & cap::long_password); }

// HandshakeResponse41 (or the 32-byte SSLRequest prefix when `is_ssl_request`).
// The auth response is kept as a view only to re-emit it; it is never logged.
struct handshake_response {
    std::uint32_t capabilities = 0;
    std::uint32_t max_packet = 0;
    std::uint8_t charset = 0;
    std::uint32_t mariadb_capabilities = 0;
    bool is_ssl_request = false;
    std::string_view username;
    bytes_view auth_response;
    std::string_view database;
    std::string_view auth_plugin;
    bytes_view attributes;  // raw key/value block, without its length prefix
    bool has_attributes = false;
};
[[nodiscard]] result<handshake_response> parse_handshake_response(bytes_view payload);
void serialize(const handshake_response& r, byte_buffer& out);
// Overwrites the 4 capability bytes at the start of a handshake response payload.
void patch_capabilities(byte_buffer& payload, std::uint32_t capabilities);

inline constexpr std::uint8_t ok_header = 0x00;
inline constexpr std::uint8_t eof_header = 0xFE;
inline constexpr std::uint8_t err_header = 0xFF;
inline constexpr std::uint8_t local_infile_header = 0xFB;

struct ok_packet {
    std::uint8_t header = ok_header;  // 0xFE when it ends a result set (CLIENT_DEPRECATE_EOF)
    std::uint64_t affected_rows = 0;
    std::uint64_t last_insert_id = 0;
    std::uint16_t status = 0;
    std::uint16_t warnings = 0;
    std::string_view info;
    std::string_view session_state;  // only with SERVER_SESSION_STATE_CHANGED
};
[[nodiscard]] result<ok_packet> parse_ok(bytes_view payload, std::uint32_t capabilities);
void serialize(const ok_packet& ok, std::uint32_t capabilities, byte_buffer& out);

struct err_packet {
    std::uint16_t code = 0;
    std::string_view sql_state;  // 5 characters, empty when the server sent none
    std::string_view message;
};
[[nodiscard]] result<err_packet> parse_err(bytes_view payload);
void serialize(const err_packet& err, byte_buffer& out);

struct eof_packet {
    std::uint16_t warnings = 0;
    std::uint16_t status = 0;
};
[[nodiscard]] result<eof_packet> parse_eof(bytes_view payload);
void serialize(const eof_packet& eof, byte_buffer& out);

// An EOF packet (or the OK that replaces it under CLIENT_DEPRECATE_EOF) ends a
// row stream. A row can also start with 0xFE (an 8-byte length prefix), so the
// size disambiguates: MySQL's own rule.
inline bool is_eof_packet(bytes_view payload, std::uint32_t capabilities) {
    if (payload.empty() || payload[0] != eof_header) return false;
    return (capabilities & cap::deprecate_eof) ? payload.size() < max_frame_payload
                                               : payload.size() < 9;
}

// A whole ERR packet, framed, ready to write.
byte_buffer make_err_frame(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                           std::string_view message);

}  // namespace claimguard::protocol
