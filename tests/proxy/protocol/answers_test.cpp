// OK and ERR replies synthesized by the proxy, compared with what a real server sends.
#include <gtest/gtest.h>

#include "proxy/protocol/answers.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

constexpr std::uint32_t caps = cap::protocol_41 | cap::transactions | cap::session_track;

// The OK of an INSERT read inside the sidecar's own transaction (decremented_by_trigger), answered after its
// COMMIT: the status flags are the ones after the COMMIT, everything else is the server's.
TEST(answers, ok_with_status_keeps_rows_and_insert_id) {
    ok_packet ok;
    ok.affected_rows = 1;
    ok.last_insert_id = 4242;
    ok.warnings = 1;
    ok.status = status::autocommit | status::in_trans;
    const auto raw = make_ok_frame(3, ok, caps);
    const auto patched = ok_with_status(raw, status::autocommit, caps);
    ASSERT_TRUE(patched);
    EXPECT_EQ((*patched)[3], 3);  // the sequence id stays
    const auto back = parse_ok(bytes_view(*patched).subspan(4), caps);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->affected_rows, 1u);
    EXPECT_EQ(back->last_insert_id, 4242u);
    EXPECT_EQ(back->warnings, 1);
    EXPECT_EQ(back->status, status::autocommit);
    // Not an OK (an ERR): left to the caller as it is.
    const auto err = make_err_frame(1, 1644, "45000", "sold out");
    EXPECT_FALSE(ok_with_status(err, status::autocommit, caps));
}

TEST(answers, ok_matches_mariadb_byte_for_byte) {
    // MariaDB's reply to "DO 1" (autocommit on, nothing affected) is the OK we synthesize.
    const auto fs = frames(mariadb::query_do_eof);
    const auto ours = make_ok_frame(reply_seq(fs[0].seq), 0, status::autocommit, caps);
    EXPECT_EQ(to_hex(ours), to_hex(fs[1].raw));
}

TEST(answers, ok_in_the_binary_protocol_is_the_same_packet) {
    // MariaDB's OK to COM_STMT_RESET and to COM_QUERY "DO 1" are identical packets.
    const auto reset = frames(mariadb::stmt_reset_deof);
    const auto ours = make_ok_frame(reply_seq(reset[0].seq), 0, status::autocommit,
                                    caps | cap::deprecate_eof);
    EXPECT_EQ(to_hex(ours), to_hex(reset[1].raw));
}

TEST(answers, ok_layout) {
    ok_packet ok;
    ok.header = eof_header;  // forced back to 0x00: an answer never ends a result set
    ok.affected_rows = 1;
    ok.status = status::in_trans | status::more_results_exist | status::session_state_changed;
    ok.warnings = 0;
    const auto f = make_ok_frame(1, ok, caps);
    // header: length 7, seq 1; then 00, affected 1, insert id 0, status IN_TRANS only, warnings 0.
    EXPECT_EQ(to_hex(f), to_hex(hex("07 00 00 01 00 01 00 01 00 00 00")));
}

TEST(answers, ok_with_info_and_without_session_tracking) {
    ok_packet ok;
    ok.affected_rows = 0;
    ok.status = status::autocommit;
    ok.info = "sold out";
    const auto tracked = make_ok_frame(1, ok, caps);
    EXPECT_EQ(to_hex(tracked),
              to_hex(hex("10 00 00 01 00 00 00 02 00 00 00 08 73 6f 6c 64 20 6f 75 74")));
    const auto plain = make_ok_frame(1, ok, cap::protocol_41);
    EXPECT_EQ(to_hex(plain),
              to_hex(hex("0f 00 00 01 00 00 00 02 00 00 00 73 6f 6c 64 20 6f 75 74")));
}

TEST(answers, err_matches_mariadb_byte_for_byte) {
    const auto fs = frames(mariadb::query_err_eof);
    const auto ours = make_err_frame(reply_seq(fs[0].seq), 1146, "42S02",
                                     "Table 'cg.nosuch' doesn't exist");
    EXPECT_EQ(to_hex(ours), to_hex(fs[1].raw));
}

TEST(answers, err_for_a_refused_claim) {
    const auto f = make_err_frame(1, 1062, "23000", "already claimed");
    auto s = scan_packet(f, 1 << 20);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->first_seq, 1);
    auto e = parse_err(s->first_payload);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, 1062);
    EXPECT_EQ(e->sql_state, "23000");
    EXPECT_EQ(e->message, "already claimed");
}

TEST(answers, reply_seq_wraps) {
    EXPECT_EQ(reply_seq(0), 1);
    EXPECT_EQ(reply_seq(255), 0);
}

// A query of several statements: each statement's reply renumbered on from the last, and the packet
// that ends it (OK or EOF) says more results follow, except the last one's.
TEST(answers, stitch_ok_reply) {
    const auto ok = make_ok_frame(1, 2, status::autocommit, caps);
    const auto s = stitch_reply(ok, 5, true);
    ASSERT_TRUE(s.ok);
    EXPECT_FALSE(s.err);
    EXPECT_EQ(s.next_seq, 6);
    EXPECT_EQ(s.raw[3], 5);
    // header, affected rows (1 byte), insert id (1 byte), then the status flags
    EXPECT_EQ(s.raw[4 + 3] | (s.raw[4 + 4] << 8), status::autocommit | status::more_results_exist);
    const auto last = stitch_reply(ok, 5, false);
    EXPECT_EQ(last.raw[4 + 3] | (last.raw[4 + 4] << 8), status::autocommit);
}

TEST(answers, stitch_result_set_ending_in_eof) {
    // A result set without CLIENT_DEPRECATE_EOF ends with an EOF: warnings, then the status flags.
    byte_buffer eof = {5, 0, 0, 7, 0xFE, 0, 0, 0x02, 0};
    byte_buffer reply = {1, 0, 0, 1, 0x01};  // column count 1 (not a real result set: the flags matter here)
    reply.insert(reply.end(), eof.begin(), eof.end());
    const auto s = stitch_reply(reply, 3, true);
    ASSERT_TRUE(s.ok);
    EXPECT_EQ(s.next_seq, 5);
    EXPECT_EQ(s.raw[3], 3);
    EXPECT_EQ(s.raw[5 + 3], 4);
    EXPECT_EQ(s.raw[5 + 4 + 3], 0x02 | status::more_results_exist);
}

TEST(answers, stitch_err_stops) {
    const auto err = make_err_frame(1, 1062, "23000", "Duplicate entry");
    const auto s = stitch_reply(err, 2, true);
    EXPECT_TRUE(s.err);
    EXPECT_EQ(s.raw[3], 2);
    EXPECT_EQ(byte_buffer(s.raw.begin() + 4, s.raw.end()), byte_buffer(err.begin() + 4, err.end()));
    EXPECT_FALSE(stitch_reply(byte_buffer{9, 0, 0}, 1, true).ok);  // a frame cut short
}

}  // namespace
}  // namespace claimguard::protocol::test
