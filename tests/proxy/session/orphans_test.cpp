// The orphaned-transaction bookkeeping without sockets: when a lost link counts, which connection may
// kill which orphan, the registry's bound and deadline, and how a KILL's reply is read.
#include "proxy/session/orphans.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "proxy/protocol/text_row.hpp"

namespace {

using namespace claimguard::session;
using namespace std::chrono_literals;

constexpr std::uint32_t mariadb_10_11 = 101119;
constexpr std::uint16_t in_trans = 0x0001;
constexpr std::uint16_t autocommit = 0x0002;

orphan make(std::string user, std::uint32_t thread, orphan_clock::time_point now, std::chrono::seconds deadline = 60s) {
    return orphan{std::move(user), thread, mariadb_10_11, thread + 1000, "127.0.0.1:1", now, now, now, now + deadline};
}

TEST(orphans, a_lost_link_matters_inside_a_transaction_or_without_autocommit) {
    EXPECT_TRUE(may_hold_transaction(autocommit | in_trans));
    EXPECT_TRUE(may_hold_transaction(in_trans));
    EXPECT_TRUE(may_hold_transaction(0));  // autocommit off: a statement in flight may have opened one
    EXPECT_FALSE(may_hold_transaction(autocommit));
}

TEST(orphans, kill_statement_ends_the_connection_not_the_query) {
    EXPECT_EQ(kill_statement(42), "KILL CONNECTION 42");
    EXPECT_EQ(kill_statement(4294967295u), "KILL CONNECTION 4294967295");
}

TEST(orphans, kill_reply_outcomes) {
    EXPECT_EQ(kill_outcome(true, 0), orphan_result::killed);
    EXPECT_EQ(kill_outcome(false, er_no_such_thread), orphan_result::gone);
    EXPECT_EQ(kill_outcome(false, er_kill_denied), orphan_result::failed);
    EXPECT_EQ(kill_outcome(false, 1227), orphan_result::failed);
    EXPECT_EQ(to_string(orphan_result::expired), "expired");
    EXPECT_EQ(to_string(orphan_result::dropped), "dropped");
}

struct plan_case {
    const char* name;
    std::string user;
    std::uint32_t version;
    std::uint32_t new_thread;
    kill_plan want;
};

class orphans_plan : public testing::TestWithParam<plan_case> {};

TEST_P(orphans_plan, decides) {
    const auto o = make("app", 100, orphan_clock::now());
    const auto& c = GetParam();
    EXPECT_EQ(plan_kill(o, c.user, c.version, c.new_thread), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    cases, orphans_plan,
    testing::Values(plan_case{"same_user_later_thread", "app", mariadb_10_11, 101, kill_plan::kill},
                    plan_case{"another_user_never", "other", mariadb_10_11, 101, kill_plan::not_here},
                    plan_case{"user_names_compare_exactly", "App", mariadb_10_11, 101, kill_plan::not_here},
                    // Thread ids only grow while a server runs: a smaller one means it restarted.
                    plan_case{"restarted_server", "app", mariadb_10_11, 7, kill_plan::gone},
                    plan_case{"same_thread_id", "app", mariadb_10_11, 100, kill_plan::gone},
                    plan_case{"another_server_version", "app", 101120, 101, kill_plan::gone}),
    [](const auto& info) { return std::string(info.param.name); });

// SHOW GLOBAL STATUS LIKE 'Uptime' as the server answers it: column count, two column definitions,
// (EOF), one row, EOF.
std::vector<claimguard::protocol::byte_buffer> uptime_reply(std::string_view value, bool deprecate_eof) {
    namespace proto = claimguard::protocol;
    std::vector<proto::byte_buffer> p{{0x02}, {0x03, 'd', 'e', 'f'}, {0x03, 'd', 'e', 'f'}};
    if (!deprecate_eof) p.push_back({0xfe, 0x00, 0x00, 0x22, 0x00});
    proto::byte_buffer row;
    const proto::text_value values[] = {std::string_view("Uptime"), value};
    proto::serialize_text_row(values, row);
    p.push_back(row);
    p.push_back({0xfe, 0x00, 0x00, 0x22, 0x00});
    return p;
}

TEST(orphans, uptime_from_the_reply_with_and_without_eof) {
    EXPECT_EQ(uptime_from_reply(uptime_reply("86400", false), false), 86400u);
    EXPECT_EQ(uptime_from_reply(uptime_reply("7", true), true), 7u);
    EXPECT_FALSE(uptime_from_reply(uptime_reply("7", false), true).has_value());  // the EOF is not a row
    EXPECT_FALSE(uptime_from_reply(uptime_reply("soon", true), true).has_value());
    EXPECT_FALSE(uptime_from_reply({{0xff, 0x15, 0x04, '#', '4', '2', '0', '0', '0'}}, true).has_value());  // ERR
    EXPECT_FALSE(uptime_from_reply({}, true).has_value());
}

TEST(orphans, only_a_server_that_ran_when_the_orphan_connected_gets_the_kill) {
    const auto now = orphan_clock::now();
    auto o = make("app", 100, now);
    o.connected_at = now - 60s;
    EXPECT_TRUE(same_server_run(o, 3600, now));  // up for an hour: it held the orphan
    EXPECT_FALSE(same_server_run(o, 30, now));   // restarted 30 s ago: thread 100 is someone else
    // Uptime is whole wall-clock seconds (+-1): started 59-61 s ago may be after the orphan connected.
    EXPECT_FALSE(same_server_run(o, 60, now));
    EXPECT_FALSE(same_server_run(o, 61, now));
    EXPECT_TRUE(same_server_run(o, 62, now));
}

// The identity check's one row as MariaDB sends it (deprecate_eof): Uptime, USER, TIME_MS (NULLs when
// no connection has the thread id).
std::vector<claimguard::protocol::byte_buffer> identity_reply(std::string_view uptime,
                                                              std::optional<std::string_view> user,
                                                              std::optional<std::string_view> time_ms) {
    namespace proto = claimguard::protocol;
    std::vector<proto::byte_buffer> p{{0x03}, {0x03, 'd', 'e', 'f'}, {0x03, 'd', 'e', 'f'}, {0x03, 'd', 'e', 'f'}};
    proto::byte_buffer row;
    const proto::text_value values[] = {uptime, user, time_ms};
    proto::serialize_text_row(values, row);
    p.push_back(row);
    p.push_back({0xfe, 0x00, 0x00, 0x22, 0x00});
    return p;
}

TEST(orphans, identity_check_names_the_thread_and_reads_its_row) {
    EXPECT_EQ(identity_statement(42),
              "SELECT s.VARIABLE_VALUE, p.USER, p.TIME_MS FROM information_schema.GLOBAL_STATUS s LEFT JOIN "
              "information_schema.PROCESSLIST p ON p.ID = 42 WHERE s.VARIABLE_NAME = 'UPTIME'");
    const auto t = identity_from_reply(identity_reply("3", "app", "1234.567"), true);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->uptime_s, 3u);
    EXPECT_EQ(t->user, "app");
    EXPECT_DOUBLE_EQ(t->state_ms, 1234.567);
    const auto none = identity_from_reply(identity_reply("3", std::nullopt, std::nullopt), true);
    ASSERT_TRUE(none.has_value());
    EXPECT_FALSE(none->user.has_value());
    EXPECT_FALSE(identity_from_reply(identity_reply("3", "app", std::nullopt), true).has_value());
    EXPECT_FALSE(identity_from_reply(identity_reply("3", "app", "-1.0"), true).has_value());
    EXPECT_FALSE(identity_from_reply(identity_reply("x", "app", "1.0"), true).has_value());
    // MySQL's PROCESSLIST has no TIME_MS: an ERR, and the caller falls back to the Uptime query.
    EXPECT_FALSE(identity_from_reply({{0xff, 0x16, 0x04, '#', '4', '2', 'S', '2', '2'}}, true).has_value());
    EXPECT_FALSE(identity_from_reply(uptime_reply("7", true), true).has_value());  // two columns
}

// The issue-23 case: the database started about a second before the orphan connected. Uptime alone
// left it in doubt (never killed); its row, idle since the orphan's last bytes, proves it.
TEST(orphans, identity_a_young_server_orphan_is_identified_by_its_row) {
    const auto now = orphan_clock::now();
    auto o = make("app", 100, now);
    o.connected_at = now - 800ms;
    o.last_heard_at = now - 500ms;  // the UPDATE's reply
    EXPECT_FALSE(same_server_run(o, 1, now));
    // Idle for 500 ms: its Sleep began with that reply (the check took 1 ms).
    EXPECT_EQ(identify(o, {1, "app", 500.0}, now - 1ms, now), identity_verdict::orphan);
    EXPECT_EQ(identify(o, {2, "app", 499.0}, now - 1ms, now), identity_verdict::orphan);
    // A slow reply to the check itself stays within the slack.
    EXPECT_EQ(identify(o, {1, "app", 400.0}, now - 100ms, now), identity_verdict::orphan);
}

TEST(orphans, identity_a_later_connection_with_the_id_is_never_killed) {
    const auto now = orphan_clock::now();
    auto o = make("app", 100, now);
    o.connected_at = now - 800ms;
    o.last_heard_at = now - 700ms;
    // Same id and user, but in its state only since 300 ms ago: after the orphan's last bytes by more than
    // the slack; the young server cannot prove it held the orphan.
    EXPECT_EQ(identify(o, {1, "app", 300.0}, now - 1ms, now), identity_verdict::in_doubt);
    // The id now belongs to another user, or to nobody.
    EXPECT_EQ(identify(o, {1, "other", 800.0}, now - 1ms, now), identity_verdict::other_user);
    EXPECT_EQ(identify(o, {1, std::nullopt, 0}, now - 1ms, now), identity_verdict::no_such_thread);
    // Restarted: up for 10 s, the orphan connected 60 s ago; even an old-looking row is not the orphan.
    o.connected_at = now - 60s;
    o.last_heard_at = now - 59s;
    EXPECT_EQ(identify(o, {10, "app", 59000.0}, now - 1ms, now), identity_verdict::restarted);
    // Up for 58 s (started 57-59 s ago, after the orphan's handshake): restarted.
    EXPECT_EQ(identify(o, {58, "app", 1000.0}, now - 1ms, now), identity_verdict::restarted);
}

TEST(orphans, identity_an_old_server_kills_as_before) {
    const auto now = orphan_clock::now();
    auto o = make("app", 100, now);
    o.connected_at = now - 60s;
    o.last_heard_at = now - 30s;
    // Up for an hour: the id is the orphan's even when its last statement ended after the link was lost.
    EXPECT_EQ(identify(o, {3600, "app", 1000.0}, now - 1ms, now), identity_verdict::orphan);
    EXPECT_EQ(identify(o, {3600, "app", 30000.0}, now - 1ms, now), identity_verdict::orphan);
    EXPECT_EQ(identify(o, {3600, "root", 30000.0}, now - 1ms, now), identity_verdict::other_user);
}

TEST(orphan_registry, takes_only_the_users_orphans_oldest_first) {
    orphan_registry r;
    const auto now = orphan_clock::now();
    ASSERT_TRUE(r.add(make("app", 10, now)));
    ASSERT_TRUE(r.add(make("report", 11, now)));
    ASSERT_TRUE(r.add(make("app", 12, now)));
    EXPECT_EQ(r.size(), 3u);
    auto t = r.take_for("app", mariadb_10_11, 50, now);
    ASSERT_EQ(t.kill.size(), 2u);
    EXPECT_EQ(t.kill[0].thread_id, 10u);
    EXPECT_EQ(t.kill[1].thread_id, 12u);
    EXPECT_TRUE(t.gone.empty());
    EXPECT_EQ(r.size(), 1u);
    EXPECT_TRUE(r.take_for("app", mariadb_10_11, 51, now).kill.empty());
}

TEST(orphan_registry, a_restarted_server_proves_orphans_gone) {
    orphan_registry r;
    const auto now = orphan_clock::now();
    ASSERT_TRUE(r.add(make("app", 500, now)));
    ASSERT_TRUE(r.add(make("app", 5, now)));
    auto t = r.take_for("app", mariadb_10_11, 9, now);  // ids started again: 500 is from before
    ASSERT_EQ(t.kill.size(), 1u);
    EXPECT_EQ(t.kill[0].thread_id, 5u);
    ASSERT_EQ(t.gone.size(), 1u);
    EXPECT_EQ(t.gone[0].thread_id, 500u);
    EXPECT_TRUE(r.empty());
}

TEST(orphan_registry, bounded_and_no_duplicates) {
    orphan_registry r(2);
    const auto now = orphan_clock::now();
    EXPECT_TRUE(r.add(make("app", 1, now)));
    EXPECT_TRUE(r.add(make("app", 1, now)));  // kept once
    EXPECT_TRUE(r.add(make("app", 2, now)));
    EXPECT_FALSE(r.add(make("app", 3, now)));  // full: the caller counts it dropped
    EXPECT_EQ(r.size(), 2u);
}

TEST(orphan_registry, at_most_max_per_connection) {
    orphan_registry r;
    const auto now = orphan_clock::now();
    for (std::uint32_t i = 1; i <= max_kills_per_connection + 3; ++i) ASSERT_TRUE(r.add(make("app", i, now)));
    auto t = r.take_for("app", mariadb_10_11, 1000, now);
    EXPECT_EQ(t.kill.size(), max_kills_per_connection);
    EXPECT_EQ(r.size(), 3u);
}

TEST(orphan_registry, deadline_expires_and_is_never_killed) {
    orphan_registry r;
    const auto t0 = orphan_clock::now();
    ASSERT_TRUE(r.add(make("app", 1, t0, 5s)));
    ASSERT_TRUE(r.add(make("app", 2, t0, 60s)));
    EXPECT_TRUE(r.take_expired(t0 + 4s).empty());
    // Past the first deadline a new connection leaves it alone; take_expired counts it.
    auto t = r.take_for("app", mariadb_10_11, 10, t0 + 6s);
    ASSERT_EQ(t.kill.size(), 1u);
    EXPECT_EQ(t.kill[0].thread_id, 2u);
    auto expired = r.take_expired(t0 + 6s);
    ASSERT_EQ(expired.size(), 1u);
    EXPECT_EQ(expired[0].thread_id, 1u);
    EXPECT_TRUE(r.empty());
}

TEST(orphan_registry, put_back_is_tried_first_next_time) {
    orphan_registry r;
    const auto now = orphan_clock::now();
    ASSERT_TRUE(r.add(make("app", 1, now)));
    ASSERT_TRUE(r.add(make("app", 2, now)));
    auto t = r.take_for("app", mariadb_10_11, 10, now, 1);
    ASSERT_EQ(t.kill.size(), 1u);
    r.put_back(t.kill[0]);
    auto again = r.take_for("app", mariadb_10_11, 11, now);
    ASSERT_EQ(again.kill.size(), 2u);
    EXPECT_EQ(again.kill[0].thread_id, 1u);
}

}  // namespace
