// Decoders and encoders for the column count and column definition packets.
#include "column.hpp"

#include "capabilities.hpp"

namespace claimguard::protocol {

namespace {
constexpr std::uint8_t ext_kind_type_name = 0x00;
constexpr std::uint8_t ext_kind_format_name = 0x01;
constexpr std::size_t column_filler_size = 2;
}  // namespace

result<column_definition> parse_column_definition(bytes_view payload,
                                                  std::uint32_t mariadb_capabilities) {
    reader r(payload);
    column_definition c;
    c.catalog = r.lenenc_str();
    c.schema = r.lenenc_str();
    c.table = r.lenenc_str();
    c.org_table = r.lenenc_str();
    c.name = r.lenenc_str();
    c.org_name = r.lenenc_str();
    if (mariadb_capabilities & mariadb_cap::extended_metadata)
        c.extended_metadata = as_bytes(r.lenenc_str());
    const auto fixed = r.lenenc();
    if (!r.ok()) return r.error();
    if (fixed != column_fixed_fields_size) return errc::unexpected_packet;
    c.charset = r.u16();
    c.column_length = r.u32();
    c.type = static_cast<field_type>(r.u8());
    c.flags = r.u16();
    c.decimals = r.u8();
    r.skip(column_filler_size);
    if (!r.ok()) return r.error();
    if (!r.empty()) {  // COM_FIELD_LIST: the column's default value
        c.has_default = true;
        if (r.peek() == null_value_marker) {
            r.skip(1);
        } else {
            c.default_value = r.lenenc_str();
        }
        if (!r.ok()) return r.error();
        if (!r.empty()) return errc::unexpected_packet;
    }
    return c;
}

void serialize(const column_definition& c, std::uint32_t mariadb_capabilities, byte_buffer& out) {
    writer w(out);
    w.lenenc_str(c.catalog);
    w.lenenc_str(c.schema);
    w.lenenc_str(c.table);
    w.lenenc_str(c.org_table);
    w.lenenc_str(c.name);
    w.lenenc_str(c.org_name);
    if (mariadb_capabilities & mariadb_cap::extended_metadata) {
        w.lenenc(c.extended_metadata.size());
        w.bytes(c.extended_metadata);
    }
    w.lenenc(column_fixed_fields_size);
    w.u16(c.charset);
    w.u32(c.column_length);
    w.u8(static_cast<std::uint8_t>(c.type));
    w.u16(c.flags);
    w.u8(c.decimals);
    w.zeros(column_filler_size);
    if (c.has_default) {
        if (c.default_value) {
            w.lenenc_str(*c.default_value);
        } else {
            w.u8(null_value_marker);
        }
    }
}

result<extended_metadata> parse_extended_metadata(bytes_view raw) {
    reader r(raw);
    extended_metadata m;
    while (r.ok() && !r.empty()) {
        const auto kind = r.u8();
        const auto value = r.lenenc_str();
        if (kind == ext_kind_type_name) m.data_type_name = value;
        if (kind == ext_kind_format_name) m.format_name = value;
    }
    if (!r.ok()) return r.error();
    return m;
}

result<std::uint64_t> parse_column_count(bytes_view payload) {
    reader r(payload);
    const auto n = r.lenenc();
    if (!r.ok()) return r.error();
    if (!r.empty() || n == 0 || n > max_result_columns) return errc::unexpected_packet;
    return n;
}

void serialize_column_count(std::uint64_t count, byte_buffer& out) { writer(out).lenenc(count); }

}  // namespace claimguard::protocol
