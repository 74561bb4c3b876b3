// OK, ERR and EOF packets: real MariaDB replies and doc-built layouts, both directions.
#include <gtest/gtest.h>

#include "proxy/protocol/packets.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

constexpr std::uint32_t caps_41 = cap::protocol_41 | cap::transactions;
constexpr std::uint32_t caps_track = caps_41 | cap::session_track;
constexpr std::uint32_t caps_track_deof = caps_track | cap::deprecate_eof;

// The last server frame of a capture (the OK that ends the reply).
byte_buffer last_server_payload(std::span<const mariadb::captured_frame> capture) {
    return frames(capture).back().payload;
}

struct ok_case {
    const char* name;
    byte_buffer payload;
    std::uint32_t caps;
    std::uint8_t header;
    std::uint64_t affected_rows;
    std::uint64_t last_insert_id;
    std::uint16_t status;
    std::string_view info;
    byte_buffer session_state;
};

std::vector<ok_case> ok_cases() {
    return {
        {"mariadb DO 1", last_server_payload(mariadb::query_do_eof), caps_track, 0x00, 0, 0,
         status::autocommit, "", {}},
        {"mariadb UPDATE with info", last_server_payload(mariadb::query_update_info_eof),
         caps_track, 0x00, 0, 0, status::autocommit | status::no_index_used,
         "Rows matched: 3  Changed: 0  Warnings: 0", {}},
        // COM_INIT_DB reports the new schema through session tracking
        // (SESSION_TRACK_SCHEMA = 1, length 3, lenenc "cg").
        {"mariadb init_db with session state", last_server_payload(mariadb::init_db_eof),
         caps_track, 0x00, 0, 0, status::autocommit | status::session_state_changed, "",
         hex("01 03 02 63 67")},
        {"mariadb LOAD DATA LOCAL result", last_server_payload(mariadb::local_infile_eof),
         caps_track, 0x00, 2, 0, status::autocommit,
         "Records: 2  Deleted: 0  Skipped: 0  Warnings: 0", {}},
        {"mariadb result set end under deprecate_eof",
         last_server_payload(mariadb::query_select_1_deof), caps_track_deof, 0xFE, 0, 0,
         status::autocommit, "", {}},
        {"no session tracking: info is the rest", hex("00 01 00 02 00 00 00 68 69"), caps_41,
         0x00, 1, 0, status::autocommit, "hi", {}},
        {"multi-byte lenenc counters",
         hex("00 fc 2c 01 fe 00 00 00 00 01 00 00 00 02 00 00 00"), caps_41, 0x00, 300,
         std::uint64_t{1} << 32, status::autocommit, "", {}},
        {"without CLIENT_PROTOCOL_41: no status, no warnings", hex("00 01 00 6f 6b"), 0, 0x00,
         1, 0, 0, "ok", {}},
        {"MySQL 8 login OK", payload_of("0700000200000002000000"), caps_track, 0x00, 0, 0,
         status::autocommit, "", {}},
    };
}

TEST(ok_packet, decodes_and_round_trips) {
    for (const auto& c : ok_cases()) {
        SCOPED_TRACE(c.name);
        auto ok = parse_ok(c.payload, c.caps);
        ASSERT_TRUE(ok) << ok.error().message();
        EXPECT_EQ(ok->header, c.header);
        EXPECT_EQ(ok->affected_rows, c.affected_rows);
        EXPECT_EQ(ok->last_insert_id, c.last_insert_id);
        EXPECT_EQ(ok->status, c.status);
        EXPECT_EQ(ok->warnings, 0);
        EXPECT_EQ(ok->info, c.info);
        EXPECT_EQ(to_hex(as_bytes(ok->session_state)), to_hex(c.session_state));
        byte_buffer out;
        serialize(*ok, c.caps, out);
        EXPECT_EQ(to_hex(out), to_hex(c.payload));
    }
}

struct bad_case {
    const char* name;
    const char* bytes;
    errc error;
};

TEST(ok_packet, malformed) {
    const bad_case cases[] = {
        {"empty", "", errc::truncated},
        {"not an ok header", "01 00 00 02 00 00 00", errc::unexpected_packet},
        {"truncated affected rows", "00 fc 01", errc::truncated},
        {"missing warnings", "00 00 00 02 00", errc::truncated},
        {"info past end", "00 00 00 02 00 00 00 05 61", errc::length_past_end},
        {"session state past end", "00 00 00 02 40 00 00 00 09 01", errc::length_past_end},
        {"null marker as affected rows", "00 fb 00 02 00 00 00", errc::bad_lenenc},
    };
    for (const auto& c : cases) {
        auto ok = parse_ok(hex(c.bytes), caps_track);
        ASSERT_FALSE(ok) << c.name;
        EXPECT_EQ(ok.error(), make_error_code(c.error)) << c.name;
    }
}

TEST(err_packet, mariadb_no_such_table) {
    const auto p = last_server_payload(mariadb::query_err_eof);
    auto e = parse_err(p);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, 1146);  // ER_NO_SUCH_TABLE
    EXPECT_EQ(e->sql_state, "42S02");
    EXPECT_EQ(e->message, "Table 'cg.nosuch' doesn't exist");
    byte_buffer out;
    serialize(*e, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(err_packet, without_sql_state) {
    // Before CLIENT_PROTOCOL_41 is agreed (e.g. "too many connections" at connect).
    const auto p = hex("ff 10 04 54 6f 6f");
    auto e = parse_err(p);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, 1040);
    EXPECT_EQ(e->sql_state, "");
    EXPECT_EQ(e->message, "Too");
    byte_buffer out;
    serialize(*e, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(err_packet, malformed) {
    const bad_case cases[] = {
        {"empty", "", errc::truncated},
        {"header only", "ff", errc::truncated},
        {"half a code", "ff 10", errc::truncated},
        {"short sql state", "ff 10 04 23 34 32", errc::truncated},
        {"ok header", "00 00 00", errc::unexpected_packet},
    };
    for (const auto& c : cases) {
        auto e = parse_err(hex(c.bytes));
        ASSERT_FALSE(e) << c.name;
        EXPECT_EQ(e.error(), make_error_code(c.error)) << c.name;
    }
}

TEST(err_packet, short_sql_state_is_padded) {
    byte_buffer out;
    serialize(err_packet{1105, "HY", "x"}, out);
    EXPECT_EQ(to_hex(out), to_hex(hex("ff 51 04 23 48 59 30 30 30 78")));
}

TEST(eof_packet, mariadb_after_columns_and_rows) {
    const auto fs = frames(mariadb::query_two_result_sets_eof);
    // Frame 3 ends the first result's columns (more results follow), the last ends all.
    auto mid = parse_eof(fs[3].payload);
    ASSERT_TRUE(mid);
    EXPECT_EQ(mid->status, status::autocommit | status::more_results_exist);
    auto end = parse_eof(fs.back().payload);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->status, status::autocommit);
    EXPECT_EQ(end->warnings, 0);
    byte_buffer out;
    serialize(*end, out);
    EXPECT_EQ(to_hex(out), to_hex(fs.back().payload));
}

TEST(eof_packet, variants) {
    auto old = parse_eof(hex("fe"));  // pre-4.1: header only
    ASSERT_TRUE(old);
    EXPECT_EQ(old->status, 0);
    auto warn = parse_eof(hex("fe 03 00 22 00"));
    ASSERT_TRUE(warn);
    EXPECT_EQ(warn->warnings, 3);
    EXPECT_EQ(warn->status, 0x22);
    EXPECT_FALSE(parse_eof(hex("fe 00")));
    EXPECT_FALSE(parse_eof(hex("00 00 00 02 00")));
    EXPECT_FALSE(parse_eof(hex("")));
}

struct terminator_case {
    const char* name;
    std::size_t size;
    std::uint8_t first;
    std::uint32_t caps;
    bool is_eof;
};

TEST(is_eof_packet, size_disambiguates_rows) {
    const terminator_case cases[] = {
        {"classic eof", 5, 0xFE, caps_41, true},
        {"8 bytes", 8, 0xFE, caps_41, true},
        {"9 bytes is a row with an 8-byte length", 9, 0xFE, caps_41, false},
        {"deprecate_eof ok", 7, 0xFE, caps_track_deof, true},
        {"deprecate_eof long ok", 200, 0xFE, caps_track_deof, true},
        {"deprecate_eof 16 MiB row", max_frame_payload, 0xFE, caps_track_deof, false},
        {"ok header", 7, 0x00, caps_track_deof, false},
        {"empty", 0, 0xFE, caps_41, false},
    };
    for (const auto& c : cases) {
        byte_buffer p(c.size, 0);
        if (c.size) p[0] = c.first;
        EXPECT_EQ(is_eof_packet(p, c.caps), c.is_eof) << c.name;
    }
}

}  // namespace
}  // namespace claimguard::protocol::test
