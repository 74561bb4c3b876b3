// Command bytes of the command phase and their names for metrics and logs.
#pragma once

#include <cstdint>
#include <string_view>

namespace claimguard::protocol {

namespace com {
inline constexpr std::uint8_t sleep = 0x00;
inline constexpr std::uint8_t quit = 0x01;
inline constexpr std::uint8_t init_db = 0x02;
inline constexpr std::uint8_t query = 0x03;
inline constexpr std::uint8_t field_list = 0x04;
inline constexpr std::uint8_t create_db = 0x05;
inline constexpr std::uint8_t drop_db = 0x06;
inline constexpr std::uint8_t refresh = 0x07;
inline constexpr std::uint8_t shutdown = 0x08;
inline constexpr std::uint8_t statistics = 0x09;
inline constexpr std::uint8_t process_info = 0x0A;
inline constexpr std::uint8_t connect = 0x0B;
inline constexpr std::uint8_t process_kill = 0x0C;
inline constexpr std::uint8_t debug = 0x0D;
inline constexpr std::uint8_t ping = 0x0E;
inline constexpr std::uint8_t time = 0x0F;
inline constexpr std::uint8_t delayed_insert = 0x10;
inline constexpr std::uint8_t change_user = 0x11;
inline constexpr std::uint8_t binlog_dump = 0x12;
inline constexpr std::uint8_t table_dump = 0x13;
inline constexpr std::uint8_t connect_out = 0x14;
inline constexpr std::uint8_t register_slave = 0x15;
inline constexpr std::uint8_t stmt_prepare = 0x16;
inline constexpr std::uint8_t stmt_execute = 0x17;
inline constexpr std::uint8_t stmt_send_long_data = 0x18;
inline constexpr std::uint8_t stmt_close = 0x19;
inline constexpr std::uint8_t stmt_reset = 0x1A;
inline constexpr std::uint8_t set_option = 0x1B;
inline constexpr std::uint8_t stmt_fetch = 0x1C;
inline constexpr std::uint8_t daemon = 0x1D;
inline constexpr std::uint8_t binlog_dump_gtid = 0x1E;
inline constexpr std::uint8_t reset_connection = 0x1F;
inline constexpr std::uint8_t stmt_bulk_execute = 0xFA;  // MariaDB
inline constexpr std::uint8_t multi = 0xFE;              // MariaDB COM_MULTI
}  // namespace com

// Lower-case name for metrics labels ("query", "stmt_execute", ...); "other" if unknown.
std::string_view command_name(std::uint8_t command);

// Replication streams and COM_MULTI are never relayed: their replies are not
// request/response shaped.
bool is_refused_command(std::uint8_t command);

}  // namespace claimguard::protocol
