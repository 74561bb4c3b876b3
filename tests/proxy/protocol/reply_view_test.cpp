// The reply view over real MariaDB 10.11 replies: what a reply is, its columns and rows, how the
// rows ended, and the one rule by which a statement's name for a column finds it.
#include <gtest/gtest.h>

#include "captures_read_cache.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

namespace rc = read_cache;

constexpr std::uint32_t caps_eof = cap::protocol_41 | cap::transactions;
constexpr std::uint32_t caps_ok = caps_eof | cap::deprecate_eof;

// The server's frames of a capture, concatenated as the proxy captures a reply.
byte_buffer server_bytes(std::span<const mariadb::captured_frame> capture) {
    byte_buffer out;
    for (const auto& f : capture)
        if (f.from == 's') {
            auto raw = hex(f.hex);
            out.insert(out.end(), raw.begin(), raw.end());
        }
    return out;
}

reply_view read(const byte_buffer& raw, std::uint32_t caps) {
    auto r = read_reply(raw, caps, 0, max_frame_payload);
    if (!r) throw std::runtime_error("the capture does not frame");
    return *r;
}

struct shape_case {
    const char* name;
    std::span<const mariadb::captured_frame> capture;
    std::uint32_t caps;
    reply_kind kind;
    std::size_t columns;
    rows_end end;
    std::size_t rows;
    std::size_t after;  // packets after the closing one
};

const shape_case shape_cases[] = {
    {"select_1_eof", mariadb::query_select_1_eof, caps_eof, reply_kind::result_set, 1, rows_end::closed, 1, 0},
    {"select_1_deof", mariadb::query_select_1_deof, caps_ok, reply_kind::result_set, 1, rows_end::closed, 1, 0},
    {"do_ok", mariadb::query_do_eof, caps_eof, reply_kind::ok, 0, rows_end::malformed, 0, 0},
    {"err", mariadb::query_err_eof, caps_eof, reply_kind::err, 0, rows_end::malformed, 0, 0},
    // a result set, then a second one: the first one closes, the second follows it
    {"two_result_sets_eof", mariadb::query_two_result_sets_eof, caps_eof, reply_kind::result_set, 1, rows_end::closed,
     1, 6},
    {"two_result_sets_deof", mariadb::query_two_result_sets_deof, caps_ok, reply_kind::result_set, 1, rows_end::closed,
     1, 5},
    // CALL: rows, then the procedure's OK
    {"call_eof", mariadb::query_call_eof, caps_eof, reply_kind::result_set, 1, rows_end::closed, 2, 1},
    // an OK first (DO 1; SELECT ...): the reply is the OK, the result set comes after it
    {"ok_then_rows", mariadb::query_ok_then_rows_deof, caps_ok, reply_kind::ok, 0, rows_end::malformed, 0, 4},
    // two rows, then the statement fails
    {"err_mid_rows", mariadb::query_err_mid_rows_eof, caps_eof, reply_kind::result_set, 1, rows_end::error, 2, 0},
    {"execute_binary", mariadb::execute_eof, caps_eof, reply_kind::result_set, 3, rows_end::closed, 2, 0},
    // an execute that opened a cursor: metadata only, the rows come by COM_STMT_FETCH
    {"execute_cursor", mariadb::execute_cursor_eof, caps_eof, reply_kind::result_set, 3, rows_end::incomplete, 0, 0},
};

TEST(reply_view, what_a_reply_is_and_how_its_rows_end) {
    for (const auto& c : shape_cases) {
        SCOPED_TRACE(c.name);
        const auto raw = server_bytes(c.capture);
        const auto r = read(raw, c.caps);
        EXPECT_EQ(r.kind(), c.kind);
        EXPECT_EQ(r.column_count(), c.columns);
        if (c.kind == reply_kind::result_set) {
            EXPECT_EQ(r.end(), c.end);
            EXPECT_EQ(r.row_count(), c.rows);
            EXPECT_EQ(r.metadata().size(), 1 + c.columns + ((c.caps & cap::deprecate_eof) ? 0 : 1));
            EXPECT_EQ(r.metadata_eof().has_value(), !(c.caps & cap::deprecate_eof));
        }
        EXPECT_EQ(r.packets_after(), c.after);
    }
}

TEST(reply_view, text_rows_and_their_values) {
    const auto raw = server_bytes(mariadb::query_two_result_sets_eof);
    const auto r = read(raw, caps_eof);
    auto col = r.column(0);
    ASSERT_TRUE(col);
    EXPECT_EQ(col->name, "1");
    auto row = r.text_values(0);
    ASSERT_TRUE(row);
    ASSERT_EQ(row->size(), 1u);
    EXPECT_EQ((*row)[0], std::optional<std::string_view>("1"));
    EXPECT_FALSE(r.text_values(1));                // there is one row
    EXPECT_EQ(to_hex(r.closing()), "fe00000a00");  // more results follow

    const auto mid = server_bytes(mariadb::query_err_mid_rows_eof);
    const auto failed = read(mid, caps_eof);
    EXPECT_EQ((*failed.text_values(1))[0], std::optional<std::string_view>("2"));
    auto err = parse_err(failed.closing());
    ASSERT_TRUE(err);
    EXPECT_EQ(err->code, 1242);  // Subquery returns more than 1 row
}

TEST(reply_view, binary_rows_by_the_columns_types) {
    const auto raw = server_bytes(mariadb::execute_eof);
    const auto r = read(raw, caps_eof);
    auto types = r.column_types();
    ASSERT_TRUE(types);
    ASSERT_EQ(types->size(), 3u);
    EXPECT_EQ((*types)[0].type, field_type::long_);
    auto row = r.binary_values(0, *types);
    ASSERT_TRUE(row);
    EXPECT_EQ(std::get<std::int64_t>((*row)[0]), 1);
    EXPECT_EQ(as_chars(std::get<bytes_view>((*row)[1])), "one");
    auto second = r.binary_values(1, *types);
    ASSERT_TRUE(second);
    EXPECT_EQ(std::get<std::int64_t>((*second)[0]), 3);
    EXPECT_TRUE(std::holds_alternative<std::monostate>((*second)[2]));  // NULL
}

// The proxy's own queries collect whole payloads, not frames.
TEST(reply_view, over_payloads) {
    const auto frames_of = frames(mariadb::query_select_1_deof);
    std::vector<byte_buffer> payloads;
    for (const auto& f : frames_of)
        if (f.from == 's') payloads.push_back(f.payload);
    const reply_view r(payloads, caps_ok, 0);
    EXPECT_EQ(r.kind(), reply_kind::result_set);
    EXPECT_EQ(r.end(), rows_end::closed);
    EXPECT_EQ((*r.text_values(0))[0], std::optional<std::string_view>("1"));
    const std::vector<byte_buffer> none;
    EXPECT_EQ(reply_view(none, caps_ok, 0).kind(), reply_kind::malformed);
    const std::vector<byte_buffer> empty_packet{{}};
    EXPECT_EQ(reply_view(empty_packet, caps_ok, 0).kind(), reply_kind::malformed);
}

TEST(reply_view, cut_short) {
    const auto raw = server_bytes(mariadb::query_select_1_eof);
    // the closing EOF missing: the rows did not end
    const byte_buffer no_closing(raw.begin(), raw.end() - 9);
    const auto r = read(no_closing, caps_eof);
    EXPECT_EQ(r.end(), rows_end::incomplete);
    EXPECT_EQ(r.row_count(), 1u);
    // the definitions missing
    const byte_buffer count_only(raw.begin(), raw.begin() + 5);
    const auto head = read(count_only, caps_eof);
    EXPECT_EQ(head.kind(), reply_kind::result_set);
    EXPECT_EQ(head.end(), rows_end::malformed);
    EXPECT_EQ(head.row_count(), 0u);
    EXPECT_FALSE(head.column(0));
    // a frame cut in the middle does not frame
    EXPECT_FALSE(read_reply(bytes_view(raw).first(raw.size() - 2), caps_eof, 0, max_frame_payload));
}

// A row of 16 MiB spans two frames: counted, never decoded.
TEST(reply_view, a_row_of_several_frames) {
    auto raw = server_bytes(mariadb::query_select_1_deof);
    const auto closing = byte_buffer(raw.end() - 11, raw.end());
    raw.resize(raw.size() - 11 - 6);  // drop the row (02 00 00 03 01 31) and the closing OK
    const byte_buffer big(max_frame_payload + 10, 'x');
    std::uint8_t seq = 3;
    write_packet(raw, seq, big);
    byte_buffer ok = {closing.begin() + 4, closing.end()};
    write_packet(raw, seq, ok);
    auto r = read_reply(raw, caps_ok, 0, 2 * max_frame_payload);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->end(), rows_end::closed);
    EXPECT_EQ(r->row_count(), 1u);
    EXPECT_FALSE(r->row(0).whole);
    EXPECT_EQ(r->text_values(0).error(), errc::truncated);
}

TEST(reply_view, the_column_a_statement_names) {
    // SELECT *, remain AS `Left` FROM coupon_stock WHERE campaign_id = 7: campaign_id, remain, version, Left
    for (auto [capture, caps] :
         {std::pair{rc::star_alias_text_eof, caps_eof}, std::pair{rc::star_alias_text_ok, caps_ok}}) {
        const auto raw = hex(capture);
        const auto r = read(raw, caps);
        ASSERT_EQ(r.column_count(), 4u);
        EXPECT_EQ(r.column(3)->name, "Left");
        EXPECT_EQ(r.column(3)->org_name, "remain");
        struct lookup {
            std::string_view written;
            std::optional<std::size_t> want;
        };
        const lookup lookups[] = {
            {"remain", 1},               // the table's column: name and org_name
            {"REMAIN", 1},               // column names compare case-insensitively
            {"`remain`", 1},             // quoted as written
            {"Left", 3},                 // the alias
            {"`Left`", 3},               // the alias quoted as written (no match before: counter NULL)
            {"`LEFT`", 3},               // ... in another case
            {"\"Left\"", 3},             // ANSI_QUOTES or a string alias
            {"'left'", 3},               // a string alias: SELECT remain AS 'left'
            {"`Le``ft`", std::nullopt},  // a doubled backtick is one: "Le`ft", no such column
            {"Lef", std::nullopt},
            {"`Left", std::nullopt},  // an unbalanced quote is part of the name
            {"", std::nullopt},
        };
        for (const auto& l : lookups) {
            SCOPED_TRACE(l.written);
            EXPECT_EQ(r.column_index(l.written), l.want);
        }
        // The first column that matches: "remain" is both the second column and Left's org_name.
        auto cols = r.columns();
        ASSERT_TRUE(cols);
        EXPECT_EQ(column_index(*cols, "remain"), 1u);
        auto value = r.text_values(0);
        ASSERT_TRUE(value);
        EXPECT_EQ((*value)[3], std::optional<std::string_view>("4"));
    }
}

TEST(reply_view, doubled_quotes_inside_a_name) {
    column_definition c;
    c.name = "Le`ft";
    c.org_name = "remain";
    EXPECT_TRUE(column_name_matches(c, "`Le``ft`"));
    EXPECT_TRUE(column_name_matches(c, "`le``FT`"));
    EXPECT_FALSE(column_name_matches(c, "Le``ft"));  // bare: both backticks are the name's
    EXPECT_TRUE(column_name_matches(c, "`Remain`"));
}

}  // namespace
}  // namespace claimguard::protocol::test
