// Server greetings (Protocol::HandshakeV10): real MariaDB 10.11 and MySQL 8 bytes.
#include <gtest/gtest.h>

#include "captures_mysql8.hpp"
#include "proxy/protocol/packets.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

byte_buffer mariadb_greeting() {
    return decode_frame('s', mariadb::greeting_and_login_with_db_and_attrs[0].hex).payload;
}

TEST(greeting, mariadb_10_11_fields) {
    const auto p = mariadb_greeting();
    auto g = parse_server_greeting(p);
    ASSERT_TRUE(g) << g.error().message();
    EXPECT_EQ(g->protocol_version, 10);
    // MariaDB prefixes its version with "5.5.5-" for old clients.
    EXPECT_EQ(g->server_version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
    EXPECT_EQ(g->auth_data_1.size(), 8u);
    EXPECT_TRUE(is_mariadb(g->capabilities));  // CLIENT_MYSQL cleared
    EXPECT_TRUE(g->capabilities & cap::protocol_41);
    EXPECT_TRUE(g->capabilities & cap::plugin_auth);
    EXPECT_TRUE(g->capabilities & cap::deprecate_eof);
    EXPECT_TRUE(g->capabilities & cap::session_track);
    EXPECT_EQ(g->status, status::autocommit);
    EXPECT_EQ(g->auth_data_len, 21);  // 20-byte scramble + NUL
    EXPECT_EQ(g->auth_data_2.size(), 13u);
    EXPECT_EQ(g->auth_data_2.back(), 0);
    // 10.11 offers progress, bulk, extended metadata and metadata caching.
    EXPECT_EQ(g->mariadb_capabilities, mariadb_cap::progress | mariadb_cap::stmt_bulk_operations |
                                           mariadb_cap::extended_metadata |
                                           mariadb_cap::cache_metadata);
    EXPECT_EQ(g->auth_plugin, "mysql_native_password");
    EXPECT_TRUE(g->auth_plugin_terminated);
}

TEST(greeting, mariadb_round_trip) {
    const auto p = mariadb_greeting();
    auto g = parse_server_greeting(p);
    ASSERT_TRUE(g);
    byte_buffer out;
    serialize(*g, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(greeting, mariadb_masked_capabilities_re_encode) {
    // What the session does: mask what the proxy cannot honour, re-encode.
    auto p = mariadb_greeting();
    auto g = parse_server_greeting(p);
    ASSERT_TRUE(g);
    g->capabilities &= ~cap::never_offered;
    g->mariadb_capabilities &= ~mariadb_cap::never_offered;
    byte_buffer out;
    serialize(*g, out);
    auto again = parse_server_greeting(out);
    ASSERT_TRUE(again);
    // zlib compression is relayed (the proxy inflates and deflates both links), zstd is not.
    EXPECT_TRUE(again->capabilities & cap::compress);
    EXPECT_FALSE(again->capabilities & cap::zstd_compression);
    // Progress reports are relayed (issue 10), so that bit stays offered.
    EXPECT_EQ(again->mariadb_capabilities, mariadb_cap::progress |
                                               mariadb_cap::stmt_bulk_operations |
                                               mariadb_cap::extended_metadata);
    EXPECT_EQ(again->server_version, g->server_version);
    EXPECT_EQ(out.size(), p.size());
}

struct mysql_case {
    const char* name;
    std::string_view frame;
    const char* version;
    const char* plugin;
};

TEST(greeting, mysql_8) {
    const mysql_case cases[] = {
        {"8.0.39 native password", mysql8::greeting_8_0_39, "8.0.39", "mysql_native_password"},
        {"8.0.42 caching sha2", mysql8::greeting_8_0_42, "8.0.42", "caching_sha2_password"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto p = payload_of(c.frame);
        auto g = parse_server_greeting(p);
        ASSERT_TRUE(g) << g.error().message();
        EXPECT_EQ(g->server_version, c.version);
        EXPECT_FALSE(is_mariadb(g->capabilities));
        EXPECT_EQ(g->mariadb_capabilities, 0u);  // the 4 bytes are reserved zeros on MySQL
        EXPECT_EQ(g->charset, 255);              // utf8mb4_0900_ai_ci
        EXPECT_EQ(g->status, status::autocommit);
        EXPECT_EQ(g->capabilities & 0xFFFF, 0xFFFFu);
        EXPECT_TRUE(g->capabilities & cap::deprecate_eof);
        EXPECT_TRUE(g->capabilities & cap::query_attributes);
        EXPECT_EQ(g->auth_plugin, c.plugin);
        byte_buffer out;
        serialize(*g, out);
        EXPECT_EQ(to_hex(out), to_hex(p));
    }
}

TEST(greeting, every_truncation_is_an_error_not_a_crash) {
    const auto p = mariadb_greeting();
    for (std::size_t n = 0; n < p.size(); ++n) {
        auto g = parse_server_greeting(bytes_view(p).first(n));
        // A cut inside the plugin name reads as an unterminated name, which some
        // servers send; everything before it must fail.
        const std::size_t plugin_start = p.size() - std::string_view("mysql_native_password").size() - 1;
        if (n >= plugin_start) continue;
        EXPECT_FALSE(g) << "prefix of " << n << " bytes";
    }
}

TEST(greeting, pre_41_layout_is_refused) {
    // Servers before 4.1 stop after the lower capability flags (1 + version + NUL +
    // 4 + 8 + 1 + 2 bytes). The encoder cannot write that layout back, so the decoder
    // refuses it (found by fuzz_server_packets: decode/encode/decode failed).
    const auto p = mariadb_greeting();
    const std::size_t pre41_end = 1 + 33 + 4 + 8 + 1 + 2;
    auto g = parse_server_greeting(bytes_view(p).first(pre41_end));
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error(), make_error_code(errc::truncated));
}

TEST(greeting, unterminated_plugin_name_round_trips) {
    auto p = mariadb_greeting();
    p.pop_back();  // drop the final NUL
    auto g = parse_server_greeting(p);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->auth_plugin, "mysql_native_password");
    EXPECT_FALSE(g->auth_plugin_terminated);
    byte_buffer out;
    serialize(*g, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(greeting, wrong_protocol_version) {
    auto p = mariadb_greeting();
    p[0] = 9;
    auto g = parse_server_greeting(p);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error(), make_error_code(errc::protocol_version));
}

TEST(greeting, err_instead_of_greeting_is_refused) {
    // A server that refuses the connection sends ERR (e.g. 1040 Too many connections).
    const auto p = hex("ff 10 04 54 6f 6f 20 6d 61 6e 79");
    EXPECT_FALSE(parse_server_greeting(p));
}

}  // namespace
}  // namespace claimguard::protocol::test
