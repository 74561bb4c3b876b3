// Decoders and encoders for the greeting, handshake response, OK, ERR and EOF packets.
#include "packets.hpp"

#include <algorithm>

#include "frame.hpp"

namespace claimguard::protocol {

result<server_greeting> parse_server_greeting(bytes_view payload) {
    reader r(payload);
    server_greeting g;
    g.protocol_version = r.u8();
    if (r.ok() && g.protocol_version != 10) return errc::protocol_version;
    g.server_version = r.null_terminated();
    g.connection_id = r.u32();
    g.auth_data_1 = r.fixed(8);
    r.skip(1);
    std::uint32_t lower = r.u16();
    if (!r.ok()) return r.error();
    // Servers older than 4.1 end the greeting here. The proxy needs the 4.1 fields
    // (and could not re-encode such a greeting), so it is refused like a cut one.
    if (r.empty()) return errc::truncated;
    g.charset = r.u8();
    g.status = r.u16();
    std::uint32_t upper = r.u16();
    g.capabilities = lower | upper << 16;
    g.auth_data_len = r.u8();
    r.skip(6);
    std::uint32_t ext = r.u32();
    if (is_mariadb(g.capabilities)) g.mariadb_capabilities = ext;
    if (g.capabilities & cap::secure_connection) {
        std::size_t n = g.auth_data_len > 8 ? g.auth_data_len - 8u : 0u;
        g.auth_data_2 = r.fixed(std::max<std::size_t>(13, n));
    }
    if (g.capabilities & cap::plugin_auth) {
        auto rest = r.rest();
        auto nul = std::find(rest.begin(), rest.end(), std::uint8_t{0});
        g.auth_plugin = as_chars(rest.subspan(0, static_cast<std::size_t>(nul - rest.begin())));
        g.auth_plugin_terminated = nul != rest.end();
        (void)r.rest_str();
    }
    if (!r.ok()) return r.error();
    return g;
}

void serialize(const server_greeting& g, byte_buffer& out) {
    writer w(out);
    w.u8(g.protocol_version);
    w.null_terminated(g.server_version);
    w.u32(g.connection_id);
    w.bytes(g.auth_data_1);
    w.u8(0);
    w.u16(g.capabilities & 0xFFFF);
    w.u8(g.charset);
    w.u16(g.status);
    w.u16(g.capabilities >> 16);
    w.u8(g.auth_data_len);
    w.zeros(6);
    w.u32(is_mariadb(g.capabilities) ? g.mariadb_capabilities : 0);
    if (g.capabilities & cap::secure_connection) w.bytes(g.auth_data_2);
    if (g.capabilities & cap::plugin_auth) {
        w.str(g.auth_plugin);
        if (g.auth_plugin_terminated) w.u8(0);
    }
}

result<handshake_response> parse_handshake_response(bytes_view payload) {
    reader r(payload);
    handshake_response h;
    h.capabilities = r.u32();
    if (r.ok() && !(h.capabilities & cap::protocol_41)) return errc::unexpected_packet;
    h.max_packet = r.u32();
    h.charset = r.u8();
    r.skip(19);
    std::uint32_t ext = r.u32();
    if (!r.ok()) return r.error();
    if (is_mariadb(h.capabilities)) h.mariadb_capabilities = ext;
    if (r.empty()) {
        if (!(h.capabilities & cap::ssl)) return errc::truncated;
        h.is_ssl_request = true;
        return h;
    }
    h.username = r.null_terminated();
    if (h.capabilities & cap::plugin_auth_lenenc_data) {
        h.auth_response = as_bytes(r.lenenc_str());
    } else if (h.capabilities & cap::secure_connection) {
        h.auth_response = r.fixed(r.u8());
    } else {
        h.auth_response = as_bytes(r.null_terminated());
    }
    if ((h.capabilities & cap::connect_with_db) && !r.empty()) h.database = r.null_terminated();
    if ((h.capabilities & cap::plugin_auth) && !r.empty()) h.auth_plugin = r.null_terminated();
    if ((h.capabilities & cap::connect_attrs) && !r.empty()) {
        h.attributes = as_bytes(r.lenenc_str());
        h.has_attributes = true;
    }
    if (!r.ok()) return r.error();
    return h;
}

void serialize(const handshake_response& h, byte_buffer& out) {
    writer w(out);
    w.u32(h.capabilities);
    w.u32(h.max_packet);
    w.u8(h.charset);
    w.zeros(19);
    w.u32(is_mariadb(h.capabilities) ? h.mariadb_capabilities : 0);
    if (h.is_ssl_request) return;
    w.null_terminated(h.username);
    if (h.capabilities & cap::plugin_auth_lenenc_data) {
        w.lenenc(h.auth_response.size());
        w.bytes(h.auth_response);
    } else if (h.capabilities & cap::secure_connection) {
        w.u8(static_cast<std::uint8_t>(h.auth_response.size()));
        w.bytes(h.auth_response);
    } else {
        w.bytes(h.auth_response);
        w.u8(0);
    }
    if (h.capabilities & cap::connect_with_db) w.null_terminated(h.database);
    if (h.capabilities & cap::plugin_auth) w.null_terminated(h.auth_plugin);
    if (h.has_attributes) {
        w.lenenc(h.attributes.size());
        w.bytes(h.attributes);
    }
}

void patch_capabilities(byte_buffer& payload, std::uint32_t capabilities) {
    if (payload.size() < 4) return;
    for (int i = 0; i < 4; ++i) payload[i] = static_cast<std::uint8_t>(capabilities >> (8 * i));
}

result<ok_packet> parse_ok(bytes_view payload, std::uint32_t capabilities) {
    reader r(payload);
    ok_packet ok;
    ok.header = r.u8();
    if (r.ok() && ok.header != ok_header && ok.header != eof_header) return errc::unexpected_packet;
    ok.affected_rows = r.lenenc();
    ok.last_insert_id = r.lenenc();
    if (capabilities & cap::protocol_41) {
        ok.status = r.u16();
        ok.warnings = r.u16();
    }
    if (!r.ok()) return r.error();
    if (capabilities & cap::session_track) {
        if (!r.empty()) ok.info = r.lenenc_str();
        if ((ok.status & status::session_state_changed) && !r.empty())
            ok.session_state = r.lenenc_str();
    } else {
        ok.info = r.rest_str();
    }
    if (!r.ok()) return r.error();
    return ok;
}

void serialize(const ok_packet& ok, std::uint32_t capabilities, byte_buffer& out) {
    writer w(out);
    w.u8(ok.header);
    w.lenenc(ok.affected_rows);
    w.lenenc(ok.last_insert_id);
    if (capabilities & cap::protocol_41) {
        w.u16(ok.status);
        w.u16(ok.warnings);
    }
    if (capabilities & cap::session_track) {
        if (!ok.info.empty() || (ok.status & status::session_state_changed)) w.lenenc_str(ok.info);
        if (ok.status & status::session_state_changed) w.lenenc_str(ok.session_state);
    } else {
        w.str(ok.info);
    }
}

result<err_packet> parse_err(bytes_view payload) {
    reader r(payload);
    if (r.u8() != err_header) return r.ok() ? errc::unexpected_packet : r.error();
    err_packet e;
    e.code = r.u16();
    if (r.peek() == '#') {
        r.skip(1);
        e.sql_state = r.fixed_str(5);
    }
    e.message = r.rest_str();
    if (!r.ok()) return r.error();
    return e;
}

void serialize(const err_packet& e, byte_buffer& out) {
    writer w(out);
    w.u8(err_header);
    w.u16(e.code);
    if (!e.sql_state.empty()) {
        w.u8('#');
        w.str(e.sql_state.substr(0, 5));
        if (e.sql_state.size() < 5) w.str(std::string(5 - e.sql_state.size(), '0'));
    }
    w.str(e.message);
}

result<eof_packet> parse_eof(bytes_view payload) {
    reader r(payload);
    if (r.u8() != eof_header) return r.ok() ? errc::unexpected_packet : r.error();
    eof_packet e;
    if (r.empty()) return e;  // pre-4.1
    e.warnings = r.u16();
    e.status = r.u16();
    if (!r.ok()) return r.error();
    return e;
}

void serialize(const eof_packet& e, byte_buffer& out) {
    writer w(out);
    w.u8(eof_header);
    w.u16(e.warnings);
    w.u16(e.status);
}

byte_buffer make_err_frame(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                           std::string_view message) {
    byte_buffer payload;
    serialize(err_packet{code, sql_state, message}, payload);
    byte_buffer out;
    write_packet(out, seq, payload);
    return out;
}

}  // namespace claimguard::protocol
