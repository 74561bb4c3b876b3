// Decoders and encoders for COM_QUERY, COM_STMT_PREPARE and COM_INIT_DB.
#include "command_packets.hpp"

#include "command.hpp"

namespace claimguard::protocol {

namespace {

result<std::string_view> parse_string_command(bytes_view payload, std::uint8_t command) {
    if (payload.empty()) return errc::empty_packet;
    if (payload[0] != command) return errc::unexpected_packet;
    return as_chars(payload.subspan(1));
}

void serialize_string_command(std::uint8_t command, std::string_view text, byte_buffer& out) {
    writer w(out);
    w.u8(command);
    w.str(text);
}

}  // namespace

result<std::string_view> parse_query(bytes_view payload) {
    return parse_string_command(payload, com::query);
}
result<std::string_view> parse_stmt_prepare(bytes_view payload) {
    return parse_string_command(payload, com::stmt_prepare);
}
result<std::string_view> parse_init_db(bytes_view payload) {
    return parse_string_command(payload, com::init_db);
}

void serialize_query(std::string_view sql, byte_buffer& out) {
    serialize_string_command(com::query, sql, out);
}
void serialize_stmt_prepare(std::string_view sql, byte_buffer& out) {
    serialize_string_command(com::stmt_prepare, sql, out);
}
void serialize_init_db(std::string_view schema, byte_buffer& out) {
    serialize_string_command(com::init_db, schema, out);
}

}  // namespace claimguard::protocol
