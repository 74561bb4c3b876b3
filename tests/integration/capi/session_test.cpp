// Session-level commands and authentication through claimguard: handshake, auth plugins, utility commands.
#include "tests/integration/capi/harness.hpp"

#include <fmt/format.h>

namespace claimguard::integration {
namespace {

// Sequential connect/disconnect cycles in the connection churn test.
constexpr int churn_connections = 40;

class capi_session : public ::testing::TestWithParam<std::string> {};

void record_who(transcript& t, MYSQL* m) {
    record_query(t, m, "SELECT CURRENT_USER(), USER() LIKE CONCAT(SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '@%'), DATABASE()");
}

void record_connect(transcript& t, std::string_view what, const connect_outcome& out) {
    if (!out.conn) {
        t.add(fmt::format("{}: connect ERR {} ({}) {}", what, out.error, out.sqlstate, out.message));
        return;
    }
    t.add(fmt::format("{}: connected", what));
    record_status(t, out.conn.get(), "  after connect");
    record_who(t, out.conn.get());
}

void auth_scenario(transcript& t, std::string_view target) {
    record_connect(t, "native", try_connect(target, {}));
    record_connect(t, "ed25519", try_connect(target, {.user = test_user::ed25519}));
    record_connect(t, "native wrong password", try_connect(target, {.wrong_password = true}));
    record_connect(t, "ed25519 wrong password", try_connect(target, {.user = test_user::ed25519, .wrong_password = true}));
    record_connect(t, "native empty password", try_connect(target, {.password_override = std::string(1, '\0')}));
    record_connect(t, "no database", try_connect(target, {.database = ""}));
    record_connect(t, "ed25519 no database", try_connect(target, {.user = test_user::ed25519, .database = ""}));
    record_connect(t, "database without grant", try_connect(target, {.database = "mysql"}));
    record_connect(t, "unknown database", try_connect(target, {.database = "it_no_such_db"}));
    record_connect(t, "information_schema", try_connect(target, {.database = "information_schema"}));
    record_connect(t, "no multi statements", try_connect(target, {.flags = 0}));
}

TEST_P(capi_session, authentication_native_and_ed25519) {
    expect_transparent(GetParam(), auth_scenario);
    // The transcript comparison alone would accept two identical failures: check the facts too.
    const auto wrong = try_connect(GetParam(), {.wrong_password = true});
    EXPECT_EQ(wrong.error, 1045u);
    EXPECT_EQ(wrong.sqlstate, "28000");
    EXPECT_TRUE(try_connect(GetParam(), {.user = test_user::ed25519}).conn != nullptr);
}

TEST_P(capi_session, handshake_as_seen_by_the_client) {
    auto direct = connect("direct");
    auto proxied = connect(GetParam());
    EXPECT_STREQ(mysql_get_server_info(direct.get()), mysql_get_server_info(proxied.get()));
    EXPECT_EQ(mysql_get_server_version(direct.get()), mysql_get_server_version(proxied.get()));
    EXPECT_EQ(mysql_get_proto_info(direct.get()), mysql_get_proto_info(proxied.get()));
    EXPECT_STREQ(mysql_character_set_name(direct.get()), mysql_character_set_name(proxied.get()));
    auto caps = [](MYSQL* m, mariadb_value which) {
        unsigned long v = 0;
        mariadb_get_infov(m, which, &v);
        return v;
    };
    for (auto which : {MARIADB_CONNECTION_SERVER_CAPABILITIES, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES}) {
        const unsigned long d = caps(direct.get(), which);
        const unsigned long p = caps(proxied.get(), which);
        // The proxy may mask what it cannot honour, never advertise what the server lacks.
        EXPECT_EQ(p & ~d, 0ul) << fmt::format("proxy advertises bits 0x{:x} the server does not", p & ~d);
        if (p != d) {
            std::cout << fmt::format("[ info ] {} masks capability bits 0x{:x} (info {})\n", GetParam(), d & ~p,
                                     static_cast<int>(which));
        }
    }
    unsigned long client_direct = caps(direct.get(), MARIADB_CONNECTION_CLIENT_CAPABILITIES);
    unsigned long client_proxied = caps(proxied.get(), MARIADB_CONNECTION_CLIENT_CAPABILITIES);
    if (client_direct != client_proxied) {
        std::cout << fmt::format("[ info ] negotiated client flags differ via {}: direct 0x{:x} proxied 0x{:x}\n",
                                 GetParam(), client_direct, client_proxied);
    }
    unsigned sd = 0;
    unsigned sp = 0;
    mariadb_get_infov(direct.get(), MARIADB_CONNECTION_SERVER_STATUS, &sd);
    mariadb_get_infov(proxied.get(), MARIADB_CONNECTION_SERVER_STATUS, &sp);
    EXPECT_EQ(sd, sp) << "status flags in the handshake";
    EXPECT_NE(mysql_thread_id(proxied.get()), 0ul);
}

void utility_commands_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    t.add(fmt::format("ping: {}", mysql_ping(m.get())));
    record_status(t, m.get(), "after ping");
    t.add(fmt::format("select_db information_schema: {}", mysql_select_db(m.get(), "information_schema")));
    record_status(t, m.get(), "after select_db");
    record_who(t, m.get());
    if (mysql_select_db(m.get(), "it_no_such_db") != 0) {
        record_error(t, m.get(), "select_db unknown");
    }
    t.add(fmt::format("select_db cgtest: {}", mysql_select_db(m.get(), "cgtest")));
    record_who(t, m.get());
    const char* stat = mysql_stat(m.get());
    // The counters in the text differ between two calls; its shape must not.
    t.add(fmt::format("stat: {}", stat != nullptr && std::string_view(stat).starts_with("Uptime: ") ? "Uptime: ..." : "bad"));
    if (stat == nullptr) {
        record_error(t, m.get(), "stat");
    }
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_fields (id INT NOT NULL DEFAULT 5 PRIMARY KEY, "
                 "name VARCHAR(20) DEFAULT 'dflt', other_col DATETIME DEFAULT '2000-01-01 00:00:00', "
                 "b BLOB, e ENUM('x','y') DEFAULT 'y') COMMENT 'fields'");
    for (const char* wild : {static_cast<const char*>(nullptr), "na%", "nothing%"}) {
        result_ptr fields(mysql_list_fields(m.get(), "it_fields", wild));
        if (fields) {
            t.add(fmt::format("list_fields wild={}", wild == nullptr ? "<none>" : wild));
            record_fields(t, fields.get());
        } else {
            record_error(t, m.get(), "list_fields");
        }
    }
    if (result_ptr none(mysql_list_fields(m.get(), "it_no_such_table", nullptr)); !none) {
        record_error(t, m.get(), "list_fields unknown table");
    }
    record_query(t, m.get(), "SELECT 1; SELECT 2");
    t.add(fmt::format("multi off: {}", mysql_set_server_option(m.get(), MYSQL_OPTION_MULTI_STATEMENTS_OFF)));
    record_query(t, m.get(), "SELECT 1; SELECT 2");
    record_query(t, m.get(), "SELECT 'single'");
    t.add(fmt::format("multi on: {}", mysql_set_server_option(m.get(), MYSQL_OPTION_MULTI_STATEMENTS_ON)));
    record_query(t, m.get(), "SELECT 1; SELECT 2");
    // A client that never asked for multi statements may switch them on later.
    auto plain = connect(target, {.flags = 0});
    record_query(t, plain.get(), "SELECT 1; SELECT 2");
    t.add(fmt::format("plain multi on: {}", mysql_set_server_option(plain.get(), MYSQL_OPTION_MULTI_STATEMENTS_ON)));
    record_query(t, plain.get(), "SELECT 1; SELECT 2");
    t.add(fmt::format("ping again: {}", mysql_ping(plain.get())));
}

TEST_P(capi_session, ping_init_db_statistics_field_list_set_option) {
    expect_transparent(GetParam(), utility_commands_scenario);
}

void change_user_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), "SET @it_var = 'before'; CREATE TEMPORARY TABLE it_tmp (x INT)");
    const std::string ed = user_name(test_user::ed25519);
    const std::string native = user_name(test_user::native);
    t.add(fmt::format("change to ed25519: {}",
                      +mysql_change_user(m.get(), ed.c_str(), user_password(test_user::ed25519).c_str(), "cgtest")));
    record_status(t, m.get(), "after change_user");
    record_who(t, m.get());
    record_query(t, m.get(), "SELECT @it_var");
    record_query(t, m.get(), "SELECT * FROM it_tmp");
    t.add(fmt::format("change to native, no db: {}",
                      +mysql_change_user(m.get(), native.c_str(), user_password(test_user::native).c_str(), nullptr)));
    record_who(t, m.get());
    t.add(fmt::format("change to native, information_schema: {}",
                      +mysql_change_user(m.get(), native.c_str(), user_password(test_user::native).c_str(),
                                        "information_schema")));
    record_who(t, m.get());
    record_query(t, m.get(), "SELECT 'usable after change_user'");
    for (const std::string& who : {native, ed}) {
        auto other = connect(target);
        const int bad = +mysql_change_user(other.get(), who.c_str(), "not-the-password", "cgtest");
        t.add(fmt::format("change to {} with wrong password: {}", who, bad));
        if (bad != 0) {
            record_error(t, other.get(), "change_user wrong password");
        }
        // MariaDB keeps the session open after a refused COM_CHANGE_USER; so must the proxy.
        if (mysql_ping(other.get()) != 0) {
            record_error(t, other.get(), "ping after failed change_user");
        } else {
            t.add("ping after failed change_user: ok");
            record_who(t, other.get());
        }
    }
}

TEST_P(capi_session, change_user_relays_authentication) { expect_transparent(GetParam(), change_user_scenario); }

void reset_connection_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_reset (id INT PRIMARY KEY) ENGINE=InnoDB;"
                 "SET @it_var = 42; CREATE TEMPORARY TABLE it_tmp (x INT); PREPARE sql_ps FROM 'SELECT 7';"
                 "SET autocommit = 0; INSERT INTO it_reset VALUES (1)");
    record_status(t, m.get(), "before reset");
    t.add(fmt::format("reset_connection: {}", mysql_reset_connection(m.get())));
    record_status(t, m.get(), "after reset");
    record_query(t, m.get(), "SELECT @it_var, @@autocommit, DATABASE()");
    record_query(t, m.get(), "SELECT * FROM it_tmp");
    record_query(t, m.get(), "EXECUTE sql_ps");
    record_query(t, m.get(), "SELECT COUNT(*) FROM it_reset");
    // The binary protocol works on the reset session (libmariadb itself invalidates older statements).
    stmt_ptr s(mysql_stmt_init(m.get()));
    const std::string_view q = "SELECT 'binary ps', @@autocommit";
    if (mysql_stmt_prepare(s.get(), q.data(), q.size()) != 0 || mysql_stmt_execute(s.get()) != 0) {
        record_stmt_error(t, s.get(), "prepared statement after reset");
    } else {
        record_stmt_results(t, m.get(), s.get());
    }
}

TEST_P(capi_session, reset_connection) { expect_transparent(GetParam(), reset_connection_scenario); }

void attributes_scenario(transcript& t, std::string_view target) {
    connect_options options;
    options.attributes = {{"cg_attr", "value-123"}, {"cg_empty", ""}, {"cg_utf8", "ünïcødé"}};
    auto m = connect(target, options);
    result_ptr ps;
    ASSERT_EQ(mysql_query(m.get(), "SELECT @@performance_schema"), 0);
    ps.reset(mysql_store_result(m.get()));
    ASSERT_TRUE(ps);
    MYSQL_ROW row = mysql_fetch_row(ps.get());
    ASSERT_NE(row, nullptr);
    if (std::string_view(row[0]) != "1") {
        t.add("performance_schema off: connecting with attributes works");
        return;
    }
    // Everything the client library sent (its own _client_name, _pid ... and ours) must arrive unchanged.
    record_query(t, m.get(),
                 "SELECT ATTR_NAME, ATTR_VALUE FROM performance_schema.session_connect_attrs "
                 "WHERE PROCESSLIST_ID = CONNECTION_ID() ORDER BY ATTR_NAME");
}

TEST_P(capi_session, connection_attributes) {
    expect_transparent(GetParam(), attributes_scenario);
    transcript t;
    attributes_scenario(t, GetParam());
    if (!t.contains("performance_schema off")) {
        EXPECT_TRUE(t.contains("'cg_attr' 'value-123'")) << "the attribute did not reach the server";
    }
}

void compression_scenario(transcript& t, std::string_view target) {
    // Whether or not the proxy offers CLIENT_COMPRESS, a client asking for it gets the same results.
    auto m = connect(target, {.compress = true});
    record_query(t, m.get(), "SELECT seq, REPEAT(CHAR(97 + seq % 26), seq % 500) FROM seq_1_to_2000");
    record_query(t, m.get(), "SELECT REPEAT('abc', 6000000) AS big");
    stmt_ptr s(mysql_stmt_init(m.get()));
    const std::string_view q = "SELECT seq, SHA1(seq) FROM seq_1_to_500";
    ASSERT_EQ(mysql_stmt_prepare(s.get(), q.data(), q.size()), 0) << mysql_stmt_error(s.get());
    ASSERT_EQ(mysql_stmt_execute(s.get()), 0) << mysql_stmt_error(s.get());
    record_stmt_results(t, m.get(), s.get());
}

TEST_P(capi_session, client_asking_for_compression) { expect_transparent(GetParam(), compression_scenario); }

TEST_P(capi_session, connection_churn) {
    for (int k = 0; k < churn_connections; ++k) {
        auto out = try_connect(GetParam(), {.user = k % 2 == 0 ? test_user::native : test_user::ed25519});
        ASSERT_TRUE(out.conn) << "connection " << k << ": " << out.error << " " << out.message;
        ASSERT_EQ(mysql_query(out.conn.get(), "DO 1"), 0) << mysql_error(out.conn.get());
    }
}

INSTANTIATE_TEST_SUITE_P(proxied, capi_session, ::testing::ValuesIn(proxy_targets()), target_name{});

}  // namespace
}  // namespace claimguard::integration
