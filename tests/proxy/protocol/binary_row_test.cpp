// Binary-protocol rows and single values: real MariaDB rows of every column type,
// encoder range checks, malformed rows.
#include <gtest/gtest.h>

#include <limits>

#include "binary_values.hpp"
#include "captures_libmariadb.hpp"
#include "proxy/protocol/binary_row.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/column.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

constexpr std::size_t types_columns = 19;

std::vector<value_type> types_of(const std::vector<frame>& fs, std::size_t first, std::size_t n,
                                 std::uint32_t ext = 0) {
    std::vector<value_type> out;
    for (std::size_t i = 0; i < n; ++i) {
        auto c = parse_column_definition(fs[first + i].payload, ext);
        EXPECT_TRUE(c);
        out.push_back(c ? value_type_of(*c) : value_type{});
    }
    return out;
}

void expect_round_trip(const byte_buffer& p, std::span<const value_type> types) {
    auto row = parse_binary_row(p, types);
    ASSERT_TRUE(row);
    byte_buffer out;
    ASSERT_FALSE(serialize_binary_row(types, *row, out));
    EXPECT_EQ(to_hex(out), to_hex(p));
}

// The first row of the types table: the INSERT literals in tools/capture_mariadb.py.
expected_values types_row_1() {
    expected_values v;
    v.i(1).i(-5).i(-300).i(-70000).i(-2000000000).u(std::numeric_limits<std::uint64_t>::max());
    v.i(-9000000000000000000).d(1.5).d(-2.25).s("-123.456");
    v.t(date_bytes(2024, 2, 29)).t(datetime_bytes(2024, 2, 29, 13, 14, 15, 123456));
    v.t(datetime_bytes(2001, 2, 3, 4, 5, 6));
    v.t(time_bytes(true, 34, 22, 59, 58, 999999));  // -838:59:58.999999 = -(34 days 22 h)
    // '\0\1\2' in SQL is NUL then "12": \1 and \2 are no escapes.
    v.u(2024).s("h\xc3\xa9llo").s(std::string_view("\x00" "12", 3)).s("\x02\xaa").s("y");
    return v;
}

class types_rows : public ::testing::TestWithParam<bool> {};  // deprecate_eof off/on

TEST_P(types_rows, every_type_decodes) {
    const auto fs = GetParam() ? frames(mariadb::execute_types_deof)
                               : frames(mariadb::execute_types_eof);
    const auto types = types_of(fs, 2, types_columns);
    const std::size_t first_row = GetParam() ? 21 : 22;  // no EOF after metadata when on

    auto row1 = parse_binary_row(fs[first_row].payload, types);
    ASSERT_TRUE(row1) << row1.error().message();
    expect_values(*row1, types_row_1().values);

    auto row2 = parse_binary_row(fs[first_row + 1].payload, types);
    ASSERT_TRUE(row2);
    expected_values nulls;
    nulls.i(2);
    for (std::size_t i = 1; i < types_columns; ++i) nulls.null();
    expect_values(*row2, nulls.values);

    // Zero date and zero time travel as length 0; a midnight DATETIME as 4 bytes.
    auto row3 = parse_binary_row(fs[first_row + 2].payload, types);
    ASSERT_TRUE(row3);
    expected_values zeros;
    zeros.i(3);
    for (int i = 0; i < 9; ++i) zeros.null();
    zeros.t({}).t(date_bytes(2020, 1, 1)).null().t({});
    for (int i = 0; i < 5; ++i) zeros.null();
    expect_values(*row3, zeros.values);

    for (std::size_t r = 0; r < 3; ++r) expect_round_trip(fs[first_row + r].payload, types);
}

INSTANTIATE_TEST_SUITE_P(deprecate_eof, types_rows, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "on" : "off"; });

std::vector<value_type> libmariadb_types() {
    std::vector<value_type> out;
    for (auto f : libmariadb::columns_12) {
        auto c = parse_column_definition(payload_of(f), mariadb_cap::extended_metadata);
        EXPECT_TRUE(c);
        out.push_back(c ? value_type_of(*c) : value_type{});
    }
    return out;
}

TEST(binary_row, libmariadb_select_of_12_bound_parameters) {
    // SELECT ?, ... with the values bound in tools/libmariadb_driver.c.
    const auto types = libmariadb_types();
    const auto p = payload_of(libmariadb::binary_row_12_columns);
    auto row = parse_binary_row(p, types);
    ASSERT_TRUE(row) << row.error().message();
    expected_values v;
    v.i(-5).u(65535).i(-2000000000).u(std::numeric_limits<std::uint64_t>::max()).d(1.5).d(-2.25);
    v.s("h\xc3\xa9llo").s(std::string_view("\x00\x01\x02", 3)).null();
    v.t(date_bytes(2024, 2, 29)).t(datetime_bytes(2024, 2, 29, 13, 14, 15, 123456));
    v.t(time_bytes(true, 34, 22, 59, 58, 999999));
    expect_values(*row, v.values);
    expect_round_trip(p, types);

    const auto p2 = payload_of(libmariadb::binary_row_12_columns_long_data);
    auto row2 = parse_binary_row(p2, types);
    ASSERT_TRUE(row2);
    EXPECT_TRUE(equal_values((*row2)[0], binary_value{std::int64_t{7}}));
    ASSERT_TRUE(std::holds_alternative<bytes_view>((*row2)[6]));
    EXPECT_EQ(as_chars(std::get<bytes_view>((*row2)[6])), "long data");
    expect_round_trip(p2, types);
}

TEST(binary_row, null_bitmap_offset_two) {
    // 7 columns need (7 + 2 + 7) / 8 = 2 bitmap bytes; column 6 is bit 8.
    const std::vector<value_type> types(7, value_type{field_type::tiny, false});
    std::vector<binary_value> values(7, binary_value{std::int64_t{1}});
    values[0] = std::monostate{};
    values[6] = std::monostate{};
    byte_buffer out;
    ASSERT_FALSE(serialize_binary_row(types, values, out));
    EXPECT_EQ(to_hex(out), "000401" "0101010101");
    auto back = parse_binary_row(out, types);
    ASSERT_TRUE(back);
    expect_values(*back, values);
}

struct bad_row {
    const char* name;
    const char* bytes;
    std::vector<value_type> types;
    errc error;
};

TEST(binary_row, malformed) {
    const value_type tiny{field_type::tiny, false};
    const value_type date{field_type::date, false};
    const value_type time{field_type::time, false};
    const value_type str{field_type::var_string, false};
    const bad_row cases[] = {
        {"text row header", "01 00 05", {tiny}, errc::unexpected_packet},
        {"eof header", "fe 00 00 02 00", {tiny}, errc::unexpected_packet},
        {"missing bitmap", "00", {tiny}, errc::truncated},
        {"missing value", "00 00", {tiny}, errc::truncated},
        {"trailing byte", "00 00 05 06", {tiny}, errc::unexpected_packet},
        {"date of 5 bytes", "00 00 05 e8 07 02 1d 00", {date}, errc::bad_value},
        {"time of 4 bytes", "00 00 04 00 00 00 00", {time}, errc::bad_value},
        {"date past end", "00 00 07 e8 07", {date}, errc::truncated},
        {"string past end", "00 00 05 61", {str}, errc::length_past_end},
        {"server-internal type", "00 00 00", {{field_type::datetime2, false}}, errc::bad_value},
        {"empty", "", {tiny}, errc::truncated},
    };
    for (const auto& c : cases) {
        auto row = parse_binary_row(hex(c.bytes), c.types);
        ASSERT_FALSE(row) << c.name;
        EXPECT_EQ(row.error(), make_error_code(c.error)) << c.name;
    }
}

struct write_case {
    const char* name;
    value_type type;
    binary_value value;
    const char* bytes;  // nullptr: refused with bad_value
};

TEST(write_binary_value, ranges_and_kinds) {
    const value_type tiny{field_type::tiny, false}, utiny{field_type::tiny, true};
    const value_type shrt{field_type::short_, false}, ll{field_type::longlong, false};
    const value_type ull{field_type::longlong, true}, flt{field_type::float_, false};
    const value_type dbl{field_type::double_, false}, str{field_type::string, false};
    const value_type dt{field_type::datetime, false}, i24{field_type::int24, false};
    static const byte_buffer abc = bytes_of("abc");
    static const byte_buffer five(5, 0);
    const write_case cases[] = {
        {"tiny 127", tiny, std::int64_t{127}, "7f"},
        {"tiny -128", tiny, std::int64_t{-128}, "80"},
        {"tiny 128", tiny, std::int64_t{128}, nullptr},
        {"tiny from uint64 127", tiny, std::uint64_t{127}, "7f"},
        {"utiny 255", utiny, std::int64_t{255}, "ff"},
        {"utiny 256", utiny, std::uint64_t{256}, nullptr},
        {"utiny -1", utiny, std::int64_t{-1}, nullptr},
        {"short -2", shrt, std::int64_t{-2}, "feff"},
        {"int24 travels in 4 bytes", i24, std::int64_t{-1}, "ffffffff"},
        {"longlong min", ll, std::numeric_limits<std::int64_t>::min(), "0000000000000080"},
        {"longlong from too big uint64", ll, std::uint64_t{1} << 63, nullptr},
        {"ulonglong max", ull, std::numeric_limits<std::uint64_t>::max(), "ffffffffffffffff"},
        {"ulonglong from negative", ull, std::int64_t{-1}, nullptr},
        {"float 1.5", flt, 1.5, "0000c03f"},
        {"float overflow", flt, 1e300, nullptr},
        {"double -2.25", dbl, -2.25, "00000000000002c0"},
        {"int into double", dbl, std::int64_t{1}, nullptr},
        {"string", str, bytes_view(abc), "03616263"},
        {"string from int", str, std::int64_t{1}, nullptr},
        {"datetime of 5 bytes", dt, temporal_view{five}, nullptr},
        {"null is never a value", tiny, std::monostate{}, nullptr},
        {"long data is never a value", str, long_data_value{}, nullptr},
        {"null type", {field_type::null, false}, std::int64_t{0}, nullptr},
    };
    for (const auto& c : cases) {
        byte_buffer out;
        auto ec = write_binary_value(out, c.type, c.value);
        if (c.bytes) {
            EXPECT_FALSE(ec) << c.name;
            EXPECT_EQ(to_hex(out), c.bytes) << c.name;
        } else {
            EXPECT_EQ(ec, make_error_code(errc::bad_value)) << c.name;
            EXPECT_TRUE(out.empty()) << c.name;
        }
    }
}

TEST(binary_row, serialize_refuses_count_mismatch) {
    const std::vector<value_type> types(2, value_type{field_type::tiny, false});
    const std::vector<binary_value> values(1, std::int64_t{1});
    byte_buffer out;
    EXPECT_EQ(serialize_binary_row(types, values, out), make_error_code(errc::bad_value));
}

}  // namespace
}  // namespace claimguard::protocol::test
