// Counter-read templates (stock rule read_cache): real MariaDB 10.11 replies kept and rebuilt with
// another value and status must equal, byte for byte, what the server itself sent for that value.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "captures_read_cache.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

namespace rc = read_cache;

constexpr std::uint32_t caps_eof = cap::protocol_41 | cap::transactions;
constexpr std::uint32_t caps_ok = caps_eof | cap::deprecate_eof;
constexpr std::uint16_t autocommit = status::autocommit;
constexpr std::uint16_t in_transaction = status::autocommit | status::in_trans;

struct rebuild_case {
    const char* name;
    std::string_view kept;  // the reply kept (counter 5, autocommit)
    std::string_view want;  // what the server sent for the rebuilt value and status
    std::uint32_t caps;
    bool binary;
    std::int64_t value;
    std::uint16_t status;
};

const rebuild_case rebuild_cases[] = {
    {"text_eof_same", rc::text_eof_5, rc::text_eof_5, caps_eof, false, 5, autocommit},
    {"text_eof_value", rc::text_eof_5, rc::text_eof_4, caps_eof, false, 4, autocommit},
    {"text_eof_status", rc::text_eof_5, rc::text_eof_4_in_transaction, caps_eof, false, 4, in_transaction},
    {"text_ok_value", rc::text_ok_5, rc::text_ok_4, caps_ok, false, 4, autocommit},
    {"text_ok_status", rc::text_ok_5, rc::text_ok_5_in_transaction, caps_ok, false, 5, in_transaction},
    {"binary_eof_value", rc::binary_eof_5, rc::binary_eof_4, caps_eof, true, 4, autocommit},
    {"binary_eof_status", rc::binary_eof_5, rc::binary_eof_4_in_transaction, caps_eof, true, 4, in_transaction},
    {"binary_ok_value", rc::binary_ok_5, rc::binary_ok_4, caps_ok, true, 4, autocommit},
    {"binary_ok_status", rc::binary_ok_5, rc::binary_ok_5_in_transaction, caps_ok, true, 5, in_transaction},
    // kept in a transaction, served in autocommit: the status is the session's, not the kept one's
    {"text_from_transaction", rc::text_eof_4_in_transaction, rc::text_eof_5, caps_eof, false, 5, autocommit},
};

TEST(counter_reply, rebuilt_replies_are_the_servers_bytes) {
    for (const auto& c : rebuild_cases) {
        SCOPED_TRACE(c.name);
        const auto kept = hex(c.kept);
        auto t = parse_counter_reply(kept, c.caps, 0, c.binary, 1, "remain");
        ASSERT_TRUE(t);
        auto out = rebuild_counter_reply(*t, c.value, c.status, 1);
        ASSERT_TRUE(out);
        EXPECT_EQ(to_hex(*out), c.want);
    }
}

TEST(counter_reply, the_value_read_and_the_counter_found_by_name) {
    const auto kept = hex(rc::text_eof_4);
    auto by_position = parse_counter_reply(kept, caps_eof, 0, false, 1, "");
    auto by_label = parse_counter_reply(kept, caps_eof, 0, false, std::nullopt, "`REMAIN`");
    ASSERT_TRUE(by_position && by_label);
    EXPECT_EQ(by_position->value, 4);
    EXPECT_EQ(by_label->value, 4);
    EXPECT_EQ(by_label->index, 1u);
    EXPECT_FALSE(parse_counter_reply(kept, caps_eof, 0, false, std::nullopt, "nope"));
}

// SELECT *, remain AS `Left` ...: after a star the counter is found by the label as written, quoted
// and in another case than the server's column name (reply_view's column_index).
TEST(counter_reply, the_counter_found_by_a_quoted_alias_after_a_star) {
    for (auto [capture, caps] :
         {std::pair{rc::star_alias_text_eof, caps_eof}, std::pair{rc::star_alias_text_ok, caps_ok}}) {
        const auto kept = hex(capture);
        for (std::string_view label : {"`Left`", "`LEFT`", "Left"}) {
            SCOPED_TRACE(label);
            auto t = parse_counter_reply(kept, caps, 0, false, std::nullopt, label);
            ASSERT_TRUE(t);
            EXPECT_EQ(t->index, 3u);
            EXPECT_EQ(t->value, 4);
            auto same = rebuild_counter_reply(*t, 4, autocommit, 1);
            ASSERT_TRUE(same);
            EXPECT_EQ(to_hex(*same), capture);
        }
    }
}

TEST(counter_reply, sequence_ids_follow_the_command) {
    const auto kept = hex(rc::binary_eof_5);
    auto t = parse_counter_reply(kept, caps_eof, 0, true, 1, "");
    ASSERT_TRUE(t);
    auto out = rebuild_counter_reply(*t, 5, autocommit, 7);
    ASSERT_TRUE(out);
    std::uint8_t want = 7;
    for (bytes_view rest(*out); !rest.empty(); ++want) {
        ASSERT_GE(rest.size(), 4u);
        EXPECT_EQ(rest[3], want);
        rest = rest.subspan(4 + (rest[0] | rest[1] << 8 | rest[2] << 16));
    }
    EXPECT_EQ(want, 7 + 7);  // count, 3 definitions, EOF, row, EOF
}

TEST(counter_reply, several_columns_of_every_integer_type) {
    // SELECT tu, s, m, i, b, bu, name FROM wide: TINYINT UNSIGNED 200, SMALLINT -7, MEDIUMINT 70000,
    // INT 5, BIGINT -9000000000, BIGINT UNSIGNED 18e18, VARCHAR 'héllo'; each one the counter in turn.
    struct column {
        std::uint32_t index;
        std::int64_t value, other;
        bool fits_other;
    };
    const column columns[] = {{0, 200, 255, true},
                              {1, -7, 40000, false},
                              {2, 70000, -8388608, true},
                              {3, 5, -2147483648LL, true},
                              {4, -9000000000LL, 1, true}};
    for (auto [kept_hex, caps, binary] :
         {std::tuple{rc::wide_text_eof, caps_eof, false}, std::tuple{rc::wide_binary_eof, caps_eof, true},
          std::tuple{rc::wide_text_ok, caps_ok, false}, std::tuple{rc::wide_binary_ok, caps_ok, true}}) {
        const auto kept = hex(kept_hex);
        for (const auto& c : columns) {
            SCOPED_TRACE(testing::Message() << "binary " << binary << " column " << c.index);
            auto t = parse_counter_reply(kept, caps, 0, binary, c.index, "");
            ASSERT_TRUE(t);
            EXPECT_EQ(t->value, c.value);
            auto same = rebuild_counter_reply(*t, c.value, autocommit, 1);
            ASSERT_TRUE(same);
            EXPECT_EQ(to_hex(*same), kept_hex);
            EXPECT_EQ(rebuild_counter_reply(*t, c.other, autocommit, 1).has_value(), c.fits_other);
        }
        // BIGINT UNSIGNED beyond INT64_MAX and the VARCHAR are no counters
        EXPECT_FALSE(parse_counter_reply(kept, caps, 0, binary, 5, ""));
        EXPECT_FALSE(parse_counter_reply(kept, caps, 0, binary, 6, ""));
        EXPECT_FALSE(rebuild_counter_reply(*parse_counter_reply(kept, caps, 0, binary, 0, ""), -1, autocommit, 1));
    }
}

TEST(counter_reply, what_is_never_a_template) {
    const auto kept = hex(rc::text_eof_5);
    // the capabilities do not match the reply: no EOF after the definitions
    EXPECT_FALSE(parse_counter_reply(kept, caps_ok, 0, false, 1, ""));
    // text parsed as binary
    EXPECT_FALSE(parse_counter_reply(kept, caps_eof, 0, true, 1, ""));
    // cut short, or a second row
    EXPECT_FALSE(parse_counter_reply(bytes_view(kept).first(kept.size() - 9), caps_eof, 0, false, 1, ""));
    constexpr std::size_t eof_frame = 9, row_frame = 10;  // 7, 5, 0 as three 1-byte strings
    byte_buffer two_rows(kept.begin(), kept.end() - eof_frame);
    two_rows.insert(two_rows.end(), kept.end() - eof_frame - row_frame, kept.end() - eof_frame);
    two_rows.insert(two_rows.end(), kept.end() - eof_frame, kept.end());
    EXPECT_FALSE(parse_counter_reply(two_rows, caps_eof, 0, false, 1, ""));
    // a NULL counter
    auto null_counter = kept;
    null_counter[null_counter.size() - eof_frame - 4] = 0xFB;  // "01 35" -> "FB": the frame shrinks
    null_counter.erase(null_counter.end() - eof_frame - 3);
    null_counter[null_counter.size() - eof_frame - 9] = 5;
    EXPECT_FALSE(parse_counter_reply(null_counter, caps_eof, 0, false, 1, ""));
    // an OK, an ERR
    EXPECT_FALSE(parse_counter_reply(hex("0700000100000002000000"), caps_eof, 0, false, 0, ""));
    EXPECT_FALSE(parse_counter_reply(hex("0900000bff15040233333333"), caps_eof, 0, false, 0, ""));
    // the closing EOF says more results follow
    auto more = kept;
    more[more.size() - 2] |= status::more_results_exist;
    EXPECT_FALSE(parse_counter_reply(more, caps_eof, 0, false, 1, ""));
    // a column past the row
    EXPECT_FALSE(parse_counter_reply(kept, caps_eof, 0, false, 3, ""));
}

TEST(counter_reply, a_value_its_column_cannot_hold_is_no_template) {
    // Found by fuzz_server_packets: a binary row (3 columns, the counter a MEDIUMINT UNSIGNED) whose
    // 4-byte value is 1650555000, beyond the column's 16777215. Kept, the template could not be
    // rebuilt even with its own value.
    const auto reply = hex(
        "01000001034c0000020364656608696e636964656e740c636f75706f6e5f737491976b0c636f75706f6e5f73746f636b0b63616d"
        "706169676e5f69640b63616d706169676e5f69640c3f0014000300000850000000420000030364656608696e636964656e740c63"
        "6f75706f6e5f73746f636b0c636ff5706f6e5f73746f636b0672656d61696e0672656d69616e0c3f000b00000109ffe700000044"
        "0000040364656608696e636964656e740c636f75706f6e5f73746f636b0c636f75706f6e5f73746f636b0776657273696f6e0776"
        "657273696f6e0c3f000b00000003010000040012000005000007004e31305f5f63787861626976000007000006fe000002000000");
    EXPECT_FALSE(parse_counter_reply(reply, caps_ok, 0, true, 1, ""));
    // The same row with a value that fits is kept and rebuilt with its own value.
    auto fitting = reply;
    const std::array<std::uint8_t, 4> old_value{0x78, 0x78, 0x61, 0x62};  // 1650555000, little-endian
    auto at = std::search(fitting.begin(), fitting.end(), old_value.begin(), old_value.end());
    ASSERT_NE(at, fitting.end());
    at[3] = 0;  // 6387832 (0x617878)
    auto t = parse_counter_reply(fitting, caps_ok, 0, true, 1, "");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->value, 0x617878);
    EXPECT_TRUE(rebuild_counter_reply(*t, t->value, t->status, 1));
}

}  // namespace
}  // namespace claimguard::protocol::test
