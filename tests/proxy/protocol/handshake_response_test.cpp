// HandshakeResponse41 and SSLRequest: real libmariadb packets plus layouts built from the docs.
#include <gtest/gtest.h>

#include <map>

#include "captures_libmariadb.hpp"
#include "proxy/protocol/packets.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

// Decodes a CONNECT_ATTRS block (lenenc key, lenenc value pairs).
std::map<std::string, std::string> attributes(bytes_view raw) {
    std::map<std::string, std::string> out;
    reader r(raw);
    while (r.ok() && !r.empty()) {
        auto k = r.lenenc_str();
        auto v = r.lenenc_str();
        out[std::string(k)] = std::string(v);
    }
    EXPECT_TRUE(r.ok());
    return out;
}

void expect_round_trip(const byte_buffer& p) {
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h) << h.error().message();
    byte_buffer out;
    serialize(*h, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(handshake_response, libmariadb_with_database_and_attributes) {
    const auto p = payload_of(libmariadb::handshake_response_with_db_and_attrs);
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_FALSE(h->is_ssl_request);
    EXPECT_TRUE(h->capabilities & cap::connect_with_db);
    EXPECT_TRUE(h->capabilities & cap::plugin_auth_lenenc_data);
    EXPECT_TRUE(h->capabilities & cap::multi_statements);  // the driver asked for it
    EXPECT_FALSE(h->capabilities & cap::long_password);    // CLIENT_MYSQL off: MariaDB client
    EXPECT_EQ(h->mariadb_capabilities, mariadb_cap::progress | mariadb_cap::stmt_bulk_operations |
                                           mariadb_cap::extended_metadata |
                                           mariadb_cap::cache_metadata);
    EXPECT_EQ(h->max_packet, 1u << 20);  // libmariadb's default max_allowed_packet
    EXPECT_EQ(h->charset, 45);           // utf8mb4_general_ci
    EXPECT_EQ(h->username, "cg");
    EXPECT_EQ(h->auth_response.size(), 20u);  // SHA1-sized native password scramble
    EXPECT_EQ(h->database, "cg");
    EXPECT_EQ(h->auth_plugin, "mysql_native_password");
    ASSERT_TRUE(h->has_attributes);
    auto attrs = attributes(h->attributes);
    EXPECT_EQ(attrs["_client_name"], "libmariadb");
    EXPECT_EQ(attrs["_server_host"], "127.0.0.1");
    expect_round_trip(p);
}

TEST(handshake_response, libmariadb_without_database) {
    const auto p = payload_of(libmariadb::handshake_response_without_db);
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    EXPECT_FALSE(h->capabilities & cap::connect_with_db);
    EXPECT_EQ(h->database, "");
    EXPECT_EQ(h->auth_plugin, "mysql_native_password");
    EXPECT_TRUE(h->has_attributes);
    expect_round_trip(p);
}

TEST(handshake_response, raw_client_with_database_and_one_attribute) {
    const auto p = decode_frame('c', mariadb::greeting_and_login_with_db_and_attrs[1].hex).payload;
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->max_packet, 1u << 24);
    EXPECT_EQ(h->database, "cg");
    auto attrs = attributes(h->attributes);
    ASSERT_EQ(attrs.size(), 1u);
    EXPECT_EQ(attrs["_client_name"], "capture");
    expect_round_trip(p);
}

TEST(handshake_response, thirty_two_byte_auth_response) {
    // A client proposing caching_sha2_password to a MariaDB server (before its auth switch).
    const auto p = decode_frame('c', mariadb::login_auth_switch[1].hex).payload;
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->auth_response.size(), 32u);
    EXPECT_EQ(h->auth_plugin, "caching_sha2_password");
    expect_round_trip(p);
}

// The fixed 32-byte prefix: capabilities, max packet, charset, 19 zero bytes,
// 4 bytes MariaDB extended capabilities (zero for MySQL clients).
byte_buffer prefix(std::uint32_t caps, std::uint32_t ext = 0) {
    byte_buffer p;
    writer w(p);
    w.u32(caps);
    w.u32(16 * 1024 * 1024);
    w.u8(33);
    w.zeros(19);
    w.u32(ext);
    return p;
}

TEST(handshake_response, ssl_request) {
    const std::uint32_t caps = cap::long_password | cap::protocol_41 | cap::ssl |
                               cap::secure_connection | cap::plugin_auth;
    const auto p = prefix(caps);
    ASSERT_EQ(p.size(), 32u);
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    EXPECT_TRUE(h->is_ssl_request);
    EXPECT_EQ(h->username, "");
    expect_round_trip(p);
}

TEST(handshake_response, ssl_request_from_mariadb_client_keeps_extended_capabilities) {
    const std::uint32_t caps = cap::protocol_41 | cap::ssl | cap::secure_connection;
    const auto p = prefix(caps, mariadb_cap::extended_metadata);
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    EXPECT_TRUE(h->is_ssl_request);
    EXPECT_EQ(h->mariadb_capabilities, mariadb_cap::extended_metadata);
    expect_round_trip(p);
}

TEST(handshake_response, thirty_two_bytes_without_ssl_is_truncated) {
    const auto p = prefix(cap::long_password | cap::protocol_41);
    auto h = parse_handshake_response(p);
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error(), make_error_code(errc::truncated));
}

struct layout_case {
    const char* name;
    std::uint32_t caps;
    const char* tail;  // bytes after the 32-byte prefix
    const char* user;
    std::size_t auth_size;
    const char* database;
    const char* plugin;
};

// Auth response encodings: lenenc (PLUGIN_AUTH_LENENC_CLIENT_DATA), one length
// byte (SECURE_CONNECTION), NUL-terminated (neither).
const layout_case layout_cases[] = {
    {"secure connection u8 length", cap::long_password | cap::protocol_41 | cap::secure_connection,
     "75 00 02 aa bb", "u", 2, "", ""},
    {"null terminated auth", cap::long_password | cap::protocol_41, "75 00 aa bb 00", "u", 2, "",
     ""},
    {"lenenc auth with db and plugin",
     cap::long_password | cap::protocol_41 | cap::secure_connection | cap::plugin_auth_lenenc_data |
         cap::connect_with_db | cap::plugin_auth,
     "75 00 01 aa 64 62 00 70 00", "u", 1, "db", "p"},
    {"empty auth, plugin only",
     cap::long_password | cap::protocol_41 | cap::secure_connection | cap::plugin_auth,
     "72 6f 6f 74 00 00 70 00", "root", 0, "", "p"},
};

TEST(handshake_response, layouts) {
    for (const auto& c : layout_cases) {
        SCOPED_TRACE(c.name);
        auto p = prefix(c.caps);
        const auto tail = hex(c.tail);
        p.insert(p.end(), tail.begin(), tail.end());
        auto h = parse_handshake_response(p);
        ASSERT_TRUE(h) << h.error().message();
        EXPECT_EQ(h->username, c.user);
        EXPECT_EQ(h->auth_response.size(), c.auth_size);
        EXPECT_EQ(h->database, c.database);
        EXPECT_EQ(h->auth_plugin, c.plugin);
        EXPECT_FALSE(h->has_attributes);
        expect_round_trip(p);
    }
}

TEST(handshake_response, pre_41_client_is_refused) {
    auto p = prefix(cap::long_password);
    p.push_back(0);
    auto h = parse_handshake_response(p);
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error(), make_error_code(errc::unexpected_packet));
}

TEST(handshake_response, auth_length_past_end) {
    auto p = prefix(cap::protocol_41 | cap::secure_connection | cap::plugin_auth_lenenc_data);
    const auto tail = hex("75 00 fc 00 10 aa");  // claims 4096 bytes of auth data
    p.insert(p.end(), tail.begin(), tail.end());
    auto h = parse_handshake_response(p);
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error(), make_error_code(errc::length_past_end));
}

TEST(handshake_response, truncations_never_crash) {
    const auto p = payload_of(libmariadb::handshake_response_with_db_and_attrs);
    for (std::size_t n = 0; n < p.size(); ++n) {
        auto h = parse_handshake_response(bytes_view(p).first(n));
        if (n <= 32) {
            EXPECT_FALSE(h) << n;  // no CLIENT_SSL: 32 bytes is not an SSLRequest
        }
    }
}

TEST(handshake_response, patch_capabilities_keeps_the_rest) {
    auto p = payload_of(libmariadb::handshake_response_with_db_and_attrs);
    const auto before = p;
    auto h = parse_handshake_response(p);
    ASSERT_TRUE(h);
    const std::uint32_t masked = h->capabilities & ~cap::compress & ~cap::ssl;
    patch_capabilities(p, masked);
    auto again = parse_handshake_response(p);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->capabilities, masked);
    EXPECT_TRUE(std::equal(p.begin() + 4, p.end(), before.begin() + 4));
}

}  // namespace
}  // namespace claimguard::protocol::test
