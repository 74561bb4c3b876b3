// Prepared-statement packets: real libmariadb COM_STMT_* requests and MariaDB prepare replies.
#include <gtest/gtest.h>

#include <limits>

#include "binary_values.hpp"
#include "captures_libmariadb.hpp"
#include "proxy/protocol/prepared.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

// The parameters tools/libmariadb_driver.c binds (its MYSQL_BIND array).
const std::vector<value_type> driver_types = {
    {field_type::tiny, false},     {field_type::short_, true},   {field_type::long_, false},
    {field_type::longlong, true},  {field_type::float_, false},  {field_type::double_, false},
    {field_type::string, false},   {field_type::blob, false},    {field_type::null, false},
    {field_type::date, false},     {field_type::datetime, false}, {field_type::time, false},
};

expected_values driver_values(std::int64_t first, bool string_as_long_data) {
    expected_values v;
    v.i(first).u(65535).i(-2000000000).u(std::numeric_limits<std::uint64_t>::max()).d(1.5);
    v.d(-2.25);
    if (string_as_long_data) {
        v.long_data();
    } else {
        v.s("h\xc3\xa9llo");
    }
    v.s(std::string_view("\x00\x01\x02", 3)).null().t(date_bytes(2024, 2, 29));
    v.t(datetime_bytes(2024, 2, 29, 13, 14, 15, 123456));
    v.t(time_bytes(true, 34, 22, 59, 58, 999999));  // MYSQL_TIME day 34, 22:59:58.999999
    return v;
}

execute_context context(std::uint16_t params, std::span<const value_type> previous = {},
                        std::span<const std::uint16_t> long_data = {}) {
    execute_context c;
    c.param_count = params;
    c.previous_types = previous;
    c.long_data_params = long_data;
    return c;
}

void expect_round_trip(const byte_buffer& p, const stmt_execute& e) {
    byte_buffer out;
    ASSERT_FALSE(serialize(e, out));
    EXPECT_EQ(to_hex(out), to_hex(p));
}

std::uint32_t driver_statement_id() {
    // The same statement is reset and closed at the end of the driver's run.
    auto c = parse_stmt_close(payload_of(libmariadb::stmt_close));
    EXPECT_TRUE(c);
    return c ? c->statement_id : 0;
}

TEST(stmt_execute, libmariadb_12_params_with_types) {
    const auto p = payload_of(libmariadb::execute_12_params_with_types);
    auto e = parse_stmt_execute(p, context(12));
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ(e->statement_id, driver_statement_id());
    EXPECT_EQ(e->flags, cursor_type::no_cursor);
    EXPECT_EQ(e->iteration_count, 1u);
    EXPECT_TRUE(e->new_params_bound);
    EXPECT_EQ(e->param_types, driver_types);
    expect_values(e->params, driver_values(-5, false).values);
    expect_round_trip(p, *e);
}

TEST(stmt_execute, libmariadb_types_not_resent) {
    const auto p = payload_of(libmariadb::execute_12_params_types_not_resent);
    auto e = parse_stmt_execute(p, context(12, driver_types));
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_FALSE(e->new_params_bound);
    EXPECT_EQ(e->param_types, driver_types);
    expect_values(e->params, driver_values(7, false).values);  // the driver set ti = 7
    expect_round_trip(p, *e);

    auto without = parse_stmt_execute(p, context(12));
    ASSERT_FALSE(without);
    EXPECT_EQ(without.error(), make_error_code(errc::missing_param_types));
}

TEST(stmt_execute, libmariadb_param_sent_as_long_data) {
    const auto p = payload_of(libmariadb::execute_12_params_param_6_long_data);
    const std::uint16_t long_data[] = {6};
    auto e = parse_stmt_execute(
        p, context(12, driver_types, long_data));
    ASSERT_TRUE(e) << e.error().message();
    expect_values(e->params, driver_values(7, true).values);
    expect_round_trip(p, *e);
    // Without knowing about the long data the packet does not decode.
    EXPECT_FALSE(parse_stmt_execute(p, context(12, driver_types)));
}

TEST(stmt_execute, long_data_ids_out_of_range_or_repeated) {
    // Ids the statement does not have are ignored; a repeated id counts once.
    const auto p = payload_of(libmariadb::execute_12_params_param_6_long_data);
    const std::uint16_t long_data[] = {6, 6, 12, 4000};
    auto e = parse_stmt_execute(p, context(12, driver_types, long_data));
    ASSERT_TRUE(e) << e.error().message();
    expect_values(e->params, driver_values(7, true).values);
}

TEST(stmt_execute, libmariadb_cursor) {
    const auto p = payload_of(libmariadb::execute_cursor_1_param);
    auto e = parse_stmt_execute(p, context(1));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->flags, cursor_type::read_only);
    EXPECT_EQ(e->param_types, (std::vector<value_type>{{field_type::long_, false}}));
    expected_values v;
    v.i(0);
    expect_values(e->params, v.values);
    expect_round_trip(p, *e);
}

TEST(stmt_execute, raw_client_two_params_and_none) {
    const auto fs = frames(mariadb::execute_eof);
    auto e = parse_stmt_execute(fs[0].payload, context(2));
    ASSERT_TRUE(e);
    const std::vector<value_type> types = {{field_type::long_, false},
                                           {field_type::var_string, false}};
    EXPECT_EQ(e->param_types, types);
    expected_values v;
    v.i(0).s("x");
    expect_values(e->params, v.values);
    expect_round_trip(fs[0].payload, *e);

    const auto none = frames(mariadb::execute_types_eof)[0].payload;
    auto n = parse_stmt_execute(none, context(0));
    ASSERT_TRUE(n);
    EXPECT_TRUE(n->params.empty());
    expect_round_trip(none, *n);
}

TEST(stmt_execute, built_by_the_engine) {
    // What the claim engine will send: a key as LONGLONG and a code as VAR_STRING.
    static const byte_buffer code = bytes_of("k1");
    stmt_execute e;
    e.statement_id = 5;
    e.new_params_bound = true;
    e.param_types = {{field_type::longlong, false}, {field_type::var_string, false}};
    e.params = {std::int64_t{42}, bytes_view(code)};
    byte_buffer out;
    ASSERT_FALSE(serialize(e, out));
    // command, id, flags, iterations, NULL bitmap, bound flag, 2 types, 2 values.
    EXPECT_EQ(to_hex(out), to_hex(hex("17 05000000 00 01000000 00 01 0800 fd00 "
                                      "2a00000000000000 02 6b 31")));
    e.params[1] = std::monostate{};
    out.clear();
    ASSERT_FALSE(serialize(e, out));
    EXPECT_EQ(to_hex(out), to_hex(hex("17 05000000 00 01000000 02 01 0800 fd00 "
                                      "2a00000000000000")));
}

struct bad_execute {
    const char* name;
    std::string bytes;
    std::uint16_t params;
    errc error;
};

TEST(stmt_execute, malformed) {
    const bad_execute cases[] = {
        {"wrong command", "16 01000000 00 01000000", 0, errc::unexpected_packet},
        {"header truncated", "17 01000000 00 0100", 0, errc::truncated},
        {"trailing bytes without params", "17 01000000 00 01000000 00", 0,
         errc::unexpected_packet},
        {"params but nothing after the header", "17 01000000 00 01000000", 1, errc::truncated},
        {"hostile param count",
         "17 01000000 00 01000000 " + std::string(16384, '0') + " 01 03",
         65535, errc::truncated},
        {"value missing", "17 01000000 00 01000000 00 01 0300", 1, errc::truncated},
        {"string past end", "17 01000000 00 01000000 00 01 fd00 05 61", 1,
         errc::length_past_end},
        {"unknown type", "17 01000000 00 01000000 00 01 1200 00", 1, errc::bad_value},
        {"trailing bytes after values", "17 01000000 00 01000000 00 01 0100 05 06", 1,
         errc::unexpected_packet},
        {"empty", "", 0, errc::truncated},
    };
    for (const auto& c : cases) {
        auto e = parse_stmt_execute(hex(c.bytes), context(c.params));
        ASSERT_FALSE(e) << c.name;
        EXPECT_EQ(e.error(), make_error_code(c.error)) << c.name;
    }
}

TEST(stmt_execute, serialize_refuses_mismatched_types) {
    stmt_execute e;
    e.params = {std::int64_t{1}};
    byte_buffer out;
    EXPECT_EQ(serialize(e, out), make_error_code(errc::bad_value));
    e.param_types = {{field_type::tiny, false}};
    e.params = {std::int64_t{1000}};
    EXPECT_EQ(serialize(e, out), make_error_code(errc::bad_value));
}

// Two COM_STMT_BULK_EXECUTE packets libmariadb 3.3 sent for INSERT INTO k VALUES (?,?,?) with
// STMT_ATTR_ARRAY_SIZE 3 (captured between it and MariaDB 10.11): first with the types, then, the
// same bind executed again, without them (the server keeps the first bulk's types).
constexpr std::string_view libmariadb_bulk_with_types =
    "fa 10000000 8000 0300 fe00 0300 "
    "00 07000000 00 02 6162 00 07000000 "
    "00 08000000 00 01 63 01 "
    "00 09000000 00 00 02";
constexpr std::string_view libmariadb_bulk_without_types =
    "fa 10000000 0000 "
    "00 07000000 00 02 6162 00 07000000 "
    "00 08000000 00 01 63 01 "
    "00 09000000 00 00 02";

TEST(stmt_bulk_execute, libmariadb_three_rows_with_indicators) {
    const auto p = hex(libmariadb_bulk_with_types);
    auto e = parse_stmt_bulk_execute(p, context(3), 100);
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ(e->statement_id, 16u);
    EXPECT_EQ(e->flags, bulk_flag::send_types_to_server);
    const std::vector<value_type> types = {
        {field_type::long_, false}, {field_type::string, false}, {field_type::long_, false}};
    EXPECT_EQ(e->param_types, types);
    ASSERT_EQ(e->rows(3), 3u);
    expected_values v;
    v.i(7).s("ab").i(7).i(8).s("c").null().i(9).s("").null();
    expect_values(e->values, v.values);
    const std::vector<bulk_indicator> indicators = {
        bulk_indicator::none, bulk_indicator::none, bulk_indicator::none, bulk_indicator::none,    bulk_indicator::none,
        bulk_indicator::null, bulk_indicator::none, bulk_indicator::none, bulk_indicator::default_};
    EXPECT_EQ(e->indicators, indicators);
    byte_buffer out;
    ASSERT_FALSE(serialize(*e, out));
    EXPECT_EQ(to_hex(out), to_hex(p));

    // Without types: the ones the statement's earlier execute (or bulk) bound.
    const auto again = hex(libmariadb_bulk_without_types);
    EXPECT_EQ(parse_stmt_bulk_execute(again, context(3), 100).error(), make_error_code(errc::missing_param_types));
    auto a = parse_stmt_bulk_execute(again, context(3, types), 100);
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->param_types, types);
    EXPECT_EQ(a->indicators, indicators);
    expect_values(a->values, v.values);
    out.clear();
    ASSERT_FALSE(serialize(*a, out));
    EXPECT_EQ(to_hex(out), to_hex(again));
}

TEST(stmt_bulk_execute, row_limit_and_empty_bulk) {
    const auto p = hex(libmariadb_bulk_with_types);
    EXPECT_TRUE(parse_stmt_bulk_execute(p, context(3), 3));
    EXPECT_EQ(parse_stmt_bulk_execute(p, context(3), 2).error(), make_error_code(errc::too_many_rows));
    // No rows at all: nothing to run, nothing held.
    auto none = parse_stmt_bulk_execute(hex("fa 01000000 8000 0300"), context(1), 10);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->rows(1), 0u);
    // A NULL-typed parameter with indicator none takes no bytes: one byte per row, still bounded.
    auto nulls = parse_stmt_bulk_execute(hex("fa 01000000 8000 0600 00 00 00"), context(1), 10);
    ASSERT_TRUE(nulls);
    EXPECT_EQ(nulls->rows(1), 3u);
    byte_buffer out;
    ASSERT_FALSE(serialize(*nulls, out));
    EXPECT_EQ(to_hex(out), to_hex(hex("fa 01000000 8000 0600 00 00 00")));
}

TEST(stmt_bulk_execute, malformed) {
    const bad_execute cases[] = {
        {"wrong command", "17 01000000 8000 0300 00 01000000", 1, errc::unexpected_packet},
        {"flags truncated", "fa 01000000 80", 1, errc::truncated},
        {"no parameters", "fa 01000000 8000", 0, errc::unexpected_packet},
        {"hostile param count", "fa 01000000 8000 0300", 65535, errc::truncated},
        {"unknown indicator", "fa 01000000 8000 0300 04", 1, errc::unexpected_packet},
        {"value missing", "fa 01000000 8000 0300 00 0100", 1, errc::truncated},
        {"string past end", "fa 01000000 8000 fd00 00 05 61", 1, errc::length_past_end},
        {"ends inside a row", "fa 01000000 8000 0300 0300 00 01000000", 2, errc::truncated},
        {"unknown type", "fa 01000000 8000 1200 00 00", 1, errc::bad_value},
        {"empty", "", 1, errc::truncated},
    };
    for (const auto& c : cases) {
        auto e = parse_stmt_bulk_execute(hex(c.bytes), context(c.params), 100);
        ASSERT_FALSE(e) << c.name;
        EXPECT_EQ(e.error(), make_error_code(c.error)) << c.name;
    }
}

TEST(prepare_ok, two_params_three_columns) {
    const auto fs = frames(mariadb::prepare_2_params_3_columns_eof);
    auto p = parse_prepare_ok(fs[1].payload);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->column_count, 3);  // SELECT a, b, c ... WHERE a > ? AND b <> ?
    EXPECT_EQ(p->param_count, 2);
    EXPECT_EQ(p->warnings, 0);
    EXPECT_FALSE(p->metadata_follows);
    byte_buffer out;
    serialize(*p, out);
    EXPECT_EQ(to_hex(out), to_hex(fs[1].payload));
    // The execute of that statement names the same id.
    EXPECT_EQ(peek_statement_id(frames(mariadb::execute_eof)[0].payload).value(),
              p->statement_id);
}

TEST(prepare_ok, optional_metadata_byte_and_malformed) {
    auto with_flag = parse_prepare_ok(hex("00 07000000 0100 0000 00 0000 01"));
    ASSERT_TRUE(with_flag);
    EXPECT_EQ(with_flag->metadata_follows, 1);
    byte_buffer out;
    serialize(*with_flag, out);
    EXPECT_EQ(to_hex(out), to_hex(hex("00 07000000 0100 0000 00 0000 01")));
    EXPECT_FALSE(parse_prepare_ok(hex("00 07000000 0100 0000 00 0000 01 02")));
    EXPECT_FALSE(parse_prepare_ok(hex("00 07000000 0100 0000 00 00")));
    EXPECT_FALSE(parse_prepare_ok(hex("ff 1e 04 23 34 32 53 32 32")));
    EXPECT_FALSE(parse_prepare_ok(hex("")));
}

TEST(small_statement_commands, libmariadb_packets) {
    const auto id = driver_statement_id();
    const auto reset_p = payload_of(libmariadb::stmt_reset);
    auto reset = parse_stmt_reset(reset_p);
    ASSERT_TRUE(reset);
    EXPECT_EQ(reset->statement_id, id);

    const auto fetch_p = payload_of(libmariadb::fetch_2_rows);
    auto fetch = parse_stmt_fetch(fetch_p);
    ASSERT_TRUE(fetch);
    EXPECT_EQ(fetch->rows, 2u);  // STMT_ATTR_PREFETCH_ROWS = 2 in the driver

    const auto l1 = payload_of(libmariadb::send_long_data_1);
    const auto l2 = payload_of(libmariadb::send_long_data_2);
    auto d1 = parse_stmt_send_long_data(l1);
    auto d2 = parse_stmt_send_long_data(l2);
    ASSERT_TRUE(d1 && d2);
    EXPECT_EQ(d1->statement_id, id);
    EXPECT_EQ(d1->param_id, 6);
    EXPECT_EQ(as_chars(d1->data), "long ");
    EXPECT_EQ(as_chars(d2->data), "data");

    byte_buffer out;
    serialize(*reset, out);
    EXPECT_EQ(to_hex(out), to_hex(reset_p));
    out.clear();
    serialize(*fetch, out);
    EXPECT_EQ(to_hex(out), to_hex(fetch_p));
    out.clear();
    serialize(*d1, out);
    EXPECT_EQ(to_hex(out), to_hex(l1));
    out.clear();
    serialize(*parse_stmt_close(payload_of(libmariadb::stmt_close)), out);
    EXPECT_EQ(to_hex(out), to_hex(payload_of(libmariadb::stmt_close)));

    for (const auto& p : {reset_p, l1, payload_of(libmariadb::stmt_close),
                          payload_of(libmariadb::execute_12_params_with_types)})
        EXPECT_EQ(peek_statement_id(p).value(), id);
    // The fetch belongs to the cursor statement prepared after it.
    EXPECT_EQ(fetch->statement_id,
              peek_statement_id(payload_of(libmariadb::execute_cursor_1_param)).value());
    EXPECT_NE(fetch->statement_id, id);
}

TEST(small_statement_commands, malformed) {
    EXPECT_FALSE(parse_stmt_close(hex("19 01 00 00")));
    EXPECT_FALSE(parse_stmt_close(hex("19 01 00 00 00 00")));
    EXPECT_FALSE(parse_stmt_close(hex("1a 01 00 00 00")));  // that is a reset
    EXPECT_FALSE(parse_stmt_reset(hex("1a")));
    EXPECT_FALSE(parse_stmt_fetch(hex("1c 01 00 00 00 02 00 00")));
    EXPECT_FALSE(parse_stmt_send_long_data(hex("18 01 00 00 00 06")));
    auto empty_chunk = parse_stmt_send_long_data(hex("18 01 00 00 00 06 00"));
    ASSERT_TRUE(empty_chunk);
    EXPECT_TRUE(empty_chunk->data.empty());
    EXPECT_FALSE(peek_statement_id(hex("03 01 00 00 00")));
    EXPECT_FALSE(peek_statement_id(hex("17 01 00")));
    EXPECT_FALSE(peek_statement_id(hex("")));
}

}  // namespace
}  // namespace claimguard::protocol::test
