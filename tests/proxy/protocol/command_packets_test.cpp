// COM_QUERY, COM_STMT_PREPARE and COM_INIT_DB: the string they carry, both directions.
#include <gtest/gtest.h>

#include "captures_libmariadb.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

TEST(command_packets, captured_requests) {
    const auto q = frames(mariadb::query_two_result_sets_eof)[0].payload;
    auto sql = parse_query(q);
    ASSERT_TRUE(sql);
    EXPECT_EQ(*sql, "SELECT 1; SELECT 'a' AS x, NULL AS y");
    byte_buffer out;
    serialize_query(*sql, out);
    EXPECT_EQ(to_hex(out), to_hex(q));

    const auto p = payload_of(libmariadb::prepare_12_params);
    auto prep = parse_stmt_prepare(p);
    ASSERT_TRUE(prep);
    EXPECT_EQ(*prep, "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?");
    out.clear();
    serialize_stmt_prepare(*prep, out);
    EXPECT_EQ(to_hex(out), to_hex(p));

    const auto db = frames(mariadb::init_db_eof)[0].payload;
    auto schema = parse_init_db(db);
    ASSERT_TRUE(schema);
    EXPECT_EQ(*schema, "cg");
    out.clear();
    serialize_init_db(*schema, out);
    EXPECT_EQ(to_hex(out), to_hex(db));
}

TEST(command_packets, bytes_are_kept_as_sent) {
    // gbk 0xbf27 and a backslash: the view is the exact bytes, nothing unescaped.
    const auto q = hex("03 53 45 4c 45 43 54 20 27 bf 27 5c 27");
    auto sql = parse_query(q);
    ASSERT_TRUE(sql);
    EXPECT_EQ(to_hex(as_bytes(*sql)), to_hex(bytes_view(q).subspan(1)));
}

TEST(command_packets, wrong_command_or_empty) {
    auto e = parse_query(hex(""));
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error(), make_error_code(errc::empty_packet));
    auto w = parse_query(hex("16 53"));
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), make_error_code(errc::unexpected_packet));
    EXPECT_FALSE(parse_init_db(hex("03 63 67")));
    EXPECT_FALSE(parse_stmt_prepare(hex("03 63 67")));
    auto empty_sql = parse_query(hex("03"));
    ASSERT_TRUE(empty_sql);
    EXPECT_EQ(*empty_sql, "");
}

TEST(command_names, metrics_labels) {
    EXPECT_EQ(command_name(com::query), "query");
    EXPECT_EQ(command_name(com::stmt_execute), "stmt_execute");
    EXPECT_EQ(command_name(0x42), "other");
    EXPECT_TRUE(is_refused_command(com::binlog_dump));
    EXPECT_FALSE(is_refused_command(com::query));
}

}  // namespace
}  // namespace claimguard::protocol::test
