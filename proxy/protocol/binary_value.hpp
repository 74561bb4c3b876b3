// Column/parameter types (MYSQL_TYPE_*), column flags, and one binary-protocol value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "wire.hpp"

namespace claimguard::protocol {

// enum_field_types: the type byte of a column definition and of a COM_STMT_EXECUTE
// parameter. It decides how a value is encoded in the binary protocol.
enum class field_type : std::uint8_t {
    decimal = 0x00,
    tiny = 0x01,
    short_ = 0x02,
    long_ = 0x03,
    float_ = 0x04,
    double_ = 0x05,
    null = 0x06,
    timestamp = 0x07,
    longlong = 0x08,
    int24 = 0x09,
    date = 0x0A,
    time = 0x0B,
    datetime = 0x0C,
    year = 0x0D,
    newdate = 0x0E,     // server-internal, never on the wire
    varchar = 0x0F,
    bit = 0x10,
    timestamp2 = 0x11,  // server-internal
    datetime2 = 0x12,   // server-internal
    time2 = 0x13,       // server-internal
    vector = 0xF2,      // MySQL 9
    json = 0xF5,
    newdecimal = 0xF6,
    enum_ = 0xF7,
    set = 0xF8,
    tiny_blob = 0xF9,
    medium_blob = 0xFA,
    long_blob = 0xFB,
    blob = 0xFC,
    var_string = 0xFD,
    string = 0xFE,
    geometry = 0xFF,
};

// Column definition flags (only the ones the codec or the engine look at).
namespace column_flag {
inline constexpr std::uint16_t not_null = 0x0001;
inline constexpr std::uint16_t primary_key = 0x0002;
inline constexpr std::uint16_t unique_key = 0x0004;
inline constexpr std::uint16_t multiple_key = 0x0008;
inline constexpr std::uint16_t blob = 0x0010;
inline constexpr std::uint16_t is_unsigned = 0x0020;
inline constexpr std::uint16_t zerofill = 0x0040;
inline constexpr std::uint16_t binary = 0x0080;
inline constexpr std::uint16_t enum_ = 0x0100;
inline constexpr std::uint16_t auto_increment = 0x0200;
inline constexpr std::uint16_t timestamp = 0x0400;
inline constexpr std::uint16_t set = 0x0800;
}  // namespace column_flag

// The second byte of a COM_STMT_EXECUTE parameter type.
inline constexpr std::uint8_t param_unsigned_flag = 0x80;

// What the binary protocol needs to know to read or write one value: the type
// byte, and for integers whether the value is unsigned.
struct value_type {
    field_type type = field_type::null;
    bool is_unsigned = false;
    friend bool operator==(const value_type&, const value_type&) = default;
};

// DATE, DATETIME, TIMESTAMP or TIME exactly as on the wire, without the length
// byte: 0, 4, 7 or 11 bytes for dates, 0, 8 or 12 for TIME.
struct temporal_view {
    bytes_view raw;
};

// A COM_STMT_EXECUTE parameter whose value came earlier through
// COM_STMT_SEND_LONG_DATA: it takes no bytes in the execute packet.
struct long_data_value {};

// One value in the binary protocol. std::monostate is SQL NULL; integer columns
// give int64_t (signed) or uint64_t (unsigned); FLOAT and DOUBLE give double;
// strings, decimals, blobs, bits, enums, JSON give the raw bytes.
using binary_value = std::variant<std::monostate, std::int64_t, std::uint64_t, double, bytes_view,
                                  temporal_view, long_data_value>;

// Value equality on content (bytes compared, doubles compared bit for bit).
[[nodiscard]] bool equal_values(const binary_value& a, const binary_value& b);

// Types whose values always take the same number of bytes, and that number:
// TINY 1, SHORT/YEAR 2, LONG/INT24/FLOAT 4, LONGLONG/DOUBLE 8, NULL 0.
[[nodiscard]] bool is_fixed_size(field_type t);
[[nodiscard]] std::size_t fixed_size(field_type t);  // 0 when !is_fixed_size(t)
// DATE, DATETIME, TIMESTAMP, TIME: a length byte then that many bytes.
[[nodiscard]] bool is_temporal(field_type t);
// True for the types encoded as a length-encoded string.
[[nodiscard]] bool is_length_encoded(field_type t);

// Reads one non-NULL value of type `t`. On a type the binary protocol cannot
// carry the reader fails with errc::bad_value.
[[nodiscard]] binary_value read_binary_value(reader& r, value_type t);

// Appends `v` encoded as type `t`. Returns errc::bad_value (and writes nothing)
// when the value does not fit the type: wrong kind, integer out of range,
// temporal of a length the type does not allow, or NULL/long data (those are
// never written as a value).
[[nodiscard]] boost::system::error_code write_binary_value(byte_buffer& out, value_type t,
                                                           const binary_value& v);

}  // namespace claimguard::protocol
