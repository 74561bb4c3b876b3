// What the claim engine is told of a reply, over real MariaDB 10.11 replies: a plain OK and its
// rows, an ERR (first, or after a result set's rows) and its code, the status flags after it, the
// rows of a result set, and the counter of a counter read (text and binary, by position or label).
#include <gtest/gtest.h>

#include <span>

#include "captures_mariadb.hpp"
#include "captures_read_cache.hpp"
#include "proxy/protocol/binary_value.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/reply_summary.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

namespace rc = read_cache;

constexpr std::uint32_t caps_eof = cap::protocol_41 | cap::transactions;
constexpr std::uint32_t caps_ok = caps_eof | cap::deprecate_eof;
constexpr std::uint16_t autocommit = status::autocommit;

// The reply's frames followed by a command exchange as the session's roundtrip follows them, then
// summarised. `raw`: the server's frames, concatenated as the session captures them.
reply_summary summarize(std::uint8_t command, const byte_buffer& raw, std::uint32_t caps,
                        const std::optional<counter_request>& counter = std::nullopt) {
    command_exchange exchange(command, caps, autocommit);
    auto step = exchange.start(0);
    bytes_view rest = raw;
    while (step == next_step::read_server && !rest.empty()) {
        auto packet = scan_packet(rest, max_frame_payload);
        if (!packet || packet->raw_size == 0) throw std::runtime_error("the capture does not frame");
        auto next = exchange.on_server_packet(*packet);
        if (!next) throw std::runtime_error("the exchange refused the capture");
        step = *next;
        rest = rest.subspan(packet->raw_size);
    }
    if (step != next_step::done || !rest.empty()) throw std::runtime_error("the capture is not one whole reply");
    return summarize_reply(command, exchange, raw, caps, 0, max_frame_payload, counter);
}

byte_buffer server_bytes(std::span<const mariadb::captured_frame> capture) {
    byte_buffer out;
    for (const auto& f : capture)
        if (f.from == 's') {
            auto raw = hex(f.hex);
            out.insert(out.end(), raw.begin(), raw.end());
        }
    return out;
}

struct shape_case {
    const char* name;
    std::span<const mariadb::captured_frame> capture;
    std::uint8_t command;
    std::uint32_t caps;
    bool ok, err;
    std::uint16_t err_code;
    std::uint64_t affected_rows;
    std::uint16_t status;
    std::optional<std::uint64_t> rows;
};

const shape_case shape_cases[] = {
    {"do_ok", mariadb::query_do_eof, com::query, caps_eof, true, false, 0, 0, 0x0002, std::nullopt},
    // UPDATE ... "Rows matched: 3  Changed: 0": no index used (0x20) comes with the status
    {"update_ok", mariadb::query_update_info_eof, com::query, caps_eof, true, false, 0, 0, 0x0022, std::nullopt},
    {"update_ok_deof", mariadb::query_update_info_deof, com::query, caps_ok, true, false, 0, 0, 0x0022, std::nullopt},
    // ERR 1146 (no such table): the status is the one before, an ERR carries none
    {"err", mariadb::query_err_eof, com::query, caps_eof, false, true, 1146, 0, autocommit, std::nullopt},
    // two rows, then ERR 1242 (a subquery returned more than one row): the statement failed
    // (the status is the one the EOF after the definitions said)
    {"err_mid_rows", mariadb::query_err_mid_rows_eof, com::query, caps_eof, false, true, 1242, 0, 0x0022, std::nullopt},
    {"select_1", mariadb::query_select_1_eof, com::query, caps_eof, false, false, 0, 0, 0x0002, 1},
    {"select_1_deof", mariadb::query_select_1_deof, com::query, caps_ok, false, false, 0, 0, 0x0002, 1},
    {"execute_two_rows", mariadb::execute_eof, com::stmt_execute, caps_eof, false, false, 0, 0, 0x0002, 2},
    // a cursor: metadata only, the rows come by COM_STMT_FETCH; no count of rows
    {"execute_cursor", mariadb::execute_cursor_eof, com::stmt_execute, caps_eof, false, false, 0, 0, 0x0042,
     std::nullopt},
    // DO 1; SELECT ...: an OK that says more results follow is no plain OK, nor a result set
    {"ok_then_rows", mariadb::query_ok_then_rows_deof, com::query, caps_ok, false, false, 0, 0, 0x0002, std::nullopt},
    // a prepare's OK is the statement's metadata, not an OK of the statement
    {"prepare_ok", mariadb::prepare_2_params_3_columns_eof, com::stmt_prepare, caps_eof, false, false, 0, 0, autocommit,
     std::nullopt},
    // ERR 1054 (unknown column)
    {"prepare_err", mariadb::prepare_err_eof, com::stmt_prepare, caps_eof, false, true, 1054, 0, autocommit,
     std::nullopt},
};

TEST(reply_summary, what_the_engine_is_told_of_a_reply) {
    for (const auto& c : shape_cases) {
        SCOPED_TRACE(c.name);
        const auto s = summarize(c.command, server_bytes(c.capture), c.caps);
        EXPECT_EQ(s.ok, c.ok);
        EXPECT_EQ(s.err, c.err);
        EXPECT_EQ(s.err_code, c.err_code);
        EXPECT_EQ(s.affected_rows, c.affected_rows);
        EXPECT_EQ(s.status, c.status);
        EXPECT_EQ(s.rows, c.rows);
        EXPECT_FALSE(s.counter);  // not asked for
    }
}

struct counter_case {
    const char* name;
    std::string_view capture;  // a whole reply, as hex
    std::uint8_t command;
    std::uint32_t caps;
    counter_request at;
    std::optional<std::int64_t> want;
    std::uint16_t status;
};

constexpr std::uint16_t in_transaction = status::autocommit | status::in_trans;

// SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = 7 (remain 5 or 4, version 0)
const counter_case counter_cases[] = {
    {"text_by_position", rc::text_eof_5, com::query, caps_eof, {1, "", false}, 5, autocommit},
    {"text_by_label", rc::text_eof_4, com::query, caps_eof, {std::nullopt, "`REMAIN`", false}, 4, autocommit},
    {"text_deof", rc::text_ok_5, com::query, caps_ok, {1, "", false}, 5, autocommit},
    {"text_in_transaction", rc::text_eof_4_in_transaction, com::query, caps_eof, {1, "", false}, 4, in_transaction},
    {"binary_by_position", rc::binary_eof_5, com::stmt_execute, caps_eof, {1, "", true}, 5, autocommit},
    {"binary_by_label", rc::binary_ok_4, com::stmt_execute, caps_ok, {std::nullopt, "remain", true}, 4, autocommit},
    // SELECT *, remain AS `Left` (remain 4): by the alias as written
    {"star_alias", rc::star_alias_text_eof, com::query, caps_eof, {std::nullopt, "`Left`", false}, 4, autocommit},
    // no such column, or a position past the columns: no counter
    {"label_unknown", rc::text_eof_5, com::query, caps_eof, {std::nullopt, "nope", false}, std::nullopt, autocommit},
    {"position_past", rc::text_eof_5, com::query, caps_eof, {3, "", false}, std::nullopt, autocommit},
    // the other columns are numbers too: the position decides
    {"campaign_column", rc::text_eof_5, com::query, caps_eof, {0, "", false}, 7, autocommit},
    {"version_column", rc::binary_eof_5, com::stmt_execute, caps_eof, {2, "", true}, 0, autocommit},
};

TEST(reply_summary, the_counter_of_a_counter_read) {
    for (const auto& c : counter_cases) {
        SCOPED_TRACE(c.name);
        const auto s = summarize(c.command, hex(c.capture), c.caps, c.at);
        EXPECT_FALSE(s.ok);
        EXPECT_FALSE(s.err);
        EXPECT_EQ(s.rows, std::optional<std::uint64_t>(1));
        EXPECT_EQ(s.counter, c.want);
        EXPECT_EQ(s.status, c.status);
    }
}

// Exactly one row: two rows (no key pins them to one counter), an ERR, an OK give no counter.
TEST(reply_summary, no_counter_but_of_one_row) {
    const counter_request first{0, "", false};
    EXPECT_FALSE(
        summarize(com::stmt_execute, server_bytes(mariadb::execute_eof), caps_eof, counter_request{0, "", true})
            .counter);
    EXPECT_FALSE(summarize(com::query, server_bytes(mariadb::query_err_mid_rows_eof), caps_eof, first).counter);
    EXPECT_FALSE(summarize(com::query, server_bytes(mariadb::query_do_eof), caps_eof, first).counter);
    EXPECT_EQ(summarize(com::query, server_bytes(mariadb::query_select_1_eof), caps_eof, first).counter, 1);
}

TEST(reply_summary, counter_values) {
    EXPECT_EQ(counter_value("42"), 42);
    EXPECT_EQ(counter_value("-3"), -3);
    EXPECT_FALSE(counter_value("4.5"));
    EXPECT_FALSE(counter_value(""));
    EXPECT_FALSE(counter_value("9223372036854775808"));  // past int64
    EXPECT_EQ(counter_value(binary_value(std::int64_t{-7})), -7);
    EXPECT_EQ(counter_value(binary_value(std::uint64_t{9223372036854775807ULL})), 9223372036854775807LL);
    EXPECT_FALSE(counter_value(binary_value(std::uint64_t{9223372036854775808ULL})));
    const byte_buffer decimal = bytes_of("12");  // a DECIMAL column's value, binary protocol
    EXPECT_EQ(counter_value(binary_value(bytes_view(decimal))), 12);
    EXPECT_FALSE(counter_value(binary_value(2.0)));
    EXPECT_FALSE(counter_value(binary_value(std::monostate{})));
}

}  // namespace
}  // namespace claimguard::protocol::test

namespace claimguard::protocol::test {
namespace {

// Every row of a result set as text, for the claim rows a cancellation reads before deleting them.
TEST(reply_summary, row_values_of_a_result_set) {
    const auto select_1 = server_bytes(mariadb::query_select_1_eof);
    const auto values = row_values(select_1, caps_eof, 0, max_frame_payload, false, 10);
    ASSERT_TRUE(values);
    ASSERT_EQ(values->size(), 1u);
    ASSERT_EQ((*values)[0].size(), 1u);
    EXPECT_EQ((*values)[0][0], std::optional<std::string>("1"));
    // More rows than asked for: not read at all.
    EXPECT_FALSE(row_values(select_1, caps_eof, 0, max_frame_payload, false, 0));
    // Binary rows holding a DOUBLE (1.5): not a key value claimguard compares.
    EXPECT_FALSE(row_values(server_bytes(mariadb::execute_eof), caps_eof, 0, max_frame_payload, true, 10));
    // An ERR, or an OK: no rows.
    EXPECT_FALSE(row_values(server_bytes(mariadb::query_err_eof), caps_eof, 0, max_frame_payload, false, 10));
    EXPECT_FALSE(row_values(server_bytes(mariadb::query_do_eof), caps_eof, 0, max_frame_payload, false, 10));
}

}  // namespace
}  // namespace claimguard::protocol::test
