// The authentication exchange after the handshake response: who speaks next, and
// whether it ended in OK, for real MariaDB logins and the MySQL 8 plugin messages.
#include <gtest/gtest.h>

#include "proxy/protocol/exchange.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

struct auth_case {
    const char* name;
    std::vector<const char*> server_packets;  // payloads, in order
    std::vector<next_step> steps;             // what on_server_packet answers to each
    bool succeeded;
};

const auth_case auth_cases[] = {
    {"ok at once", {"00 00 00 02 00 00 00"}, {next_step::done}, true},
    {"access denied", {"ff 15 04 23 32 38 30 30 30 41"}, {next_step::done}, false},
    // AuthSwitchRequest: the client answers with the named plugin's data.
    {"auth switch then ok",
     {"fe 6d 79 73 71 6c 5f 6e 61 74 69 76 65 5f 70 61 73 73 77 6f 72 64 00 61 00",
      "00 00 00 02 00 00 00"},
     {next_step::read_client, next_step::done},
     true},
    // caching_sha2_password fast path: 0x01 0x03 then OK, the client stays silent.
    {"caching_sha2 fast auth", {"01 03", "00 00 00 02 00 00 00"},
     {next_step::read_server, next_step::done}, true},
    // Full authentication: 0x01 0x04, the client sends its password or asks for the
    // RSA key, the key comes as AuthMoreData, the client answers, OK.
    {"caching_sha2 full auth with public key",
     {"01 04", "01 2d 2d 2d 2d 2d 42 45 47 49 4e", "00 00 00 02 00 00 00"},
     {next_step::read_client, next_step::read_client, next_step::done},
     true},
    {"caching_sha2 full auth refused", {"01 04", "ff 15 04 23 32 38 30 30 30 41"},
     {next_step::read_client, next_step::done}, false},
    // MariaDB PAM "dialog": 0x02/0x04 prompts, each answered by the client.
    {"pam dialog", {"04 50 61 73 73 77 6f 72 64 3a 20", "00 00 00 02 00 00 00"},
     {next_step::read_client, next_step::done}, true},
};

TEST(auth_exchange, plugin_messages) {
    for (const auto& c : auth_cases) {
        SCOPED_TRACE(c.name);
        auth_exchange a;
        ASSERT_EQ(c.server_packets.size(), c.steps.size());
        for (std::size_t i = 0; i < c.steps.size(); ++i) {
            auto step = a.on_server_packet(hex(c.server_packets[i]));
            ASSERT_TRUE(step);
            EXPECT_EQ(*step, c.steps[i]) << "packet " << i;
        }
        EXPECT_EQ(a.succeeded(), c.succeeded);
    }
}

TEST(auth_exchange, empty_packet_is_an_error) {
    auth_exchange a;
    auto step = a.on_server_packet({});
    ASSERT_FALSE(step);
    EXPECT_EQ(step.error(), make_error_code(errc::empty_packet));
}

// Feeds the server packets after the handshake response of a recorded login and
// checks that the client frames come exactly where the exchange says.
void replay_login(std::span<const mariadb::captured_frame> capture, bool expect_switch) {
    const auto fs = frames(capture);
    ASSERT_GE(fs.size(), 3u);
    ASSERT_EQ(fs[1].from, 'c');  // the handshake response
    auth_exchange a;
    std::size_t i = 2;
    bool switched = false;
    for (;;) {
        ASSERT_LT(i, fs.size());
        ASSERT_EQ(fs[i].from, 's');
        auto step = a.on_server_packet(fs[i].payload);
        ASSERT_TRUE(step);
        ++i;
        if (*step == next_step::done) break;
        ASSERT_EQ(*step, next_step::read_client);
        ASSERT_LT(i, fs.size());
        EXPECT_EQ(fs[i].from, 'c');
        EXPECT_EQ(fs[i].seq, fs[i - 1].seq + 1);
        switched = true;
        ++i;
    }
    EXPECT_EQ(i, fs.size());
    EXPECT_TRUE(a.succeeded());
    EXPECT_EQ(switched, expect_switch);
}

TEST(auth_exchange, mariadb_native_password_login) {
    replay_login(mariadb::greeting_and_login_with_db_and_attrs, false);
}

TEST(auth_exchange, mariadb_switch_from_caching_sha2_to_native) {
    replay_login(mariadb::login_auth_switch, true);
}

}  // namespace
}  // namespace claimguard::protocol::test
