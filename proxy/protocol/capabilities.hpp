// Capability and server status flags, and the capabilities the proxy masks.
#pragma once

#include <cstdint>

namespace claimguard::protocol {

namespace cap {
inline constexpr std::uint32_t long_password = 1u << 0;  // CLIENT_MYSQL in MariaDB
inline constexpr std::uint32_t found_rows = 1u << 1;
inline constexpr std::uint32_t long_flag = 1u << 2;
inline constexpr std::uint32_t connect_with_db = 1u << 3;
inline constexpr std::uint32_t no_schema = 1u << 4;
inline constexpr std::uint32_t compress = 1u << 5;
inline constexpr std::uint32_t odbc = 1u << 6;
inline constexpr std::uint32_t local_files = 1u << 7;
inline constexpr std::uint32_t ignore_space = 1u << 8;
inline constexpr std::uint32_t protocol_41 = 1u << 9;
inline constexpr std::uint32_t interactive = 1u << 10;
inline constexpr std::uint32_t ssl = 1u << 11;
inline constexpr std::uint32_t ignore_sigpipe = 1u << 12;
inline constexpr std::uint32_t transactions = 1u << 13;
inline constexpr std::uint32_t reserved = 1u << 14;
inline constexpr std::uint32_t secure_connection = 1u << 15;
inline constexpr std::uint32_t multi_statements = 1u << 16;
inline constexpr std::uint32_t multi_results = 1u << 17;
inline constexpr std::uint32_t ps_multi_results = 1u << 18;
inline constexpr std::uint32_t plugin_auth = 1u << 19;
inline constexpr std::uint32_t connect_attrs = 1u << 20;
inline constexpr std::uint32_t plugin_auth_lenenc_data = 1u << 21;
inline constexpr std::uint32_t can_handle_expired_passwords = 1u << 22;
inline constexpr std::uint32_t session_track = 1u << 23;
inline constexpr std::uint32_t deprecate_eof = 1u << 24;
inline constexpr std::uint32_t optional_resultset_metadata = 1u << 25;
inline constexpr std::uint32_t zstd_compression = 1u << 26;
inline constexpr std::uint32_t query_attributes = 1u << 27;
inline constexpr std::uint32_t ssl_verify_server_cert = 1u << 30;
inline constexpr std::uint32_t remember_options = 1u << 31;

// Capabilities whose wire format the proxy does not parse, so it never offers them. zlib compression
// (compress) is relayed: the proxy inflates and deflates both links (compression.hpp). zstd (MySQL
// 8.0.18+) is not: MariaDB does not offer it, so nothing here could test it end to end.
inline constexpr std::uint32_t never_offered = zstd_compression | optional_resultset_metadata | query_attributes;
}  // namespace cap

// MariaDB extended capabilities (the last 4 filler bytes of greeting and handshake response).
namespace mariadb_cap {
inline constexpr std::uint32_t progress = 1u << 0;
inline constexpr std::uint32_t com_multi = 1u << 1;
inline constexpr std::uint32_t stmt_bulk_operations = 1u << 2;
inline constexpr std::uint32_t extended_metadata = 1u << 3;
inline constexpr std::uint32_t cache_metadata = 1u << 4;
// COM_MULTI bundles commands and cached metadata omits column definitions; the proxy
// tracks neither, so it never offers them. Progress reports (an ERR header with code
// 0xFFFF before a reply) are relayed: command_exchange skips them.
inline constexpr std::uint32_t never_offered = com_multi | cache_metadata;
}  // namespace mariadb_cap

namespace status {
inline constexpr std::uint16_t in_trans = 0x0001;
inline constexpr std::uint16_t autocommit = 0x0002;
inline constexpr std::uint16_t more_results_exist = 0x0008;
inline constexpr std::uint16_t no_good_index_used = 0x0010;
inline constexpr std::uint16_t no_index_used = 0x0020;
inline constexpr std::uint16_t cursor_exists = 0x0040;
inline constexpr std::uint16_t last_row_sent = 0x0080;
inline constexpr std::uint16_t db_dropped = 0x0100;
inline constexpr std::uint16_t no_backslash_escapes = 0x0200;
inline constexpr std::uint16_t metadata_changed = 0x0400;
inline constexpr std::uint16_t query_was_slow = 0x0800;
inline constexpr std::uint16_t ps_out_params = 0x1000;
inline constexpr std::uint16_t in_trans_readonly = 0x2000;
inline constexpr std::uint16_t session_state_changed = 0x4000;
}  // namespace status

}  // namespace claimguard::protocol
