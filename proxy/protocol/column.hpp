// Result set metadata: the column count packet and Protocol::ColumnDefinition41
// (with MariaDB's extended metadata when that capability is negotiated).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "binary_value.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// The fixed-length block of a column definition is always announced as 12 bytes.
inline constexpr std::uint8_t column_fixed_fields_size = 0x0C;
// Columns a result set or a prepared statement may declare; the prepare OK packet
// carries counts as 16-bit integers, and a larger count in a column count packet
// is treated as a hostile packet.
inline constexpr std::uint64_t max_result_columns = 0xFFFF;

// One column definition. Views point into the decoded payload.
struct column_definition {
    std::string_view catalog = "def";
    std::string_view schema;
    std::string_view table;      // alias as written in the query
    std::string_view org_table;  // physical table
    std::string_view name;       // alias as written in the query
    std::string_view org_name;   // physical column
    // MariaDB extended metadata block (entries of u8 kind + lenenc string), raw,
    // present only when MARIADB_CLIENT_EXTENDED_METADATA was negotiated.
    bytes_view extended_metadata;
    std::uint16_t charset = 0;
    std::uint32_t column_length = 0;
    field_type type = field_type::null;
    std::uint16_t flags = 0;
    std::uint8_t decimals = 0;
    // COM_FIELD_LIST appends each column's default value: has_default says the
    // field was there, default_value is nullopt when the default is NULL (0xFB).
    bool has_default = false;
    std::optional<std::string_view> default_value;
};

[[nodiscard]] result<column_definition> parse_column_definition(bytes_view payload,
                                                                std::uint32_t mariadb_capabilities);
void serialize(const column_definition& c, std::uint32_t mariadb_capabilities, byte_buffer& out);

// What a binary row needs to know about the column.
inline value_type value_type_of(const column_definition& c) {
    return {c.type, (c.flags & column_flag::is_unsigned) != 0};
}

// The decoded MariaDB extended metadata: type name (e.g. "inet6", "uuid") and
// format name (e.g. "json"); unknown entry kinds are skipped.
struct extended_metadata {
    std::string_view data_type_name;
    std::string_view format_name;
};
[[nodiscard]] result<extended_metadata> parse_extended_metadata(bytes_view raw);

// The first packet of a result set: the number of columns (1..max_result_columns).
// CLIENT_OPTIONAL_RESULTSET_METADATA and MARIADB_CLIENT_CACHE_METADATA add a
// trailing byte; the proxy never offers either, so trailing bytes are an error.
[[nodiscard]] result<std::uint64_t> parse_column_count(bytes_view payload);
void serialize_column_count(std::uint64_t count, byte_buffer& out);

}  // namespace claimguard::protocol
