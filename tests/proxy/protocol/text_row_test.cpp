// Text-protocol rows: real MariaDB rows of every column type, NULLs, malformed rows.
#include <gtest/gtest.h>

#include "proxy/protocol/text_row.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

using namespace std::string_view_literals;

void expect_row(const text_row& got, const std::vector<text_value>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].has_value(), want[i].has_value()) << "column " << i;
        if (got[i] && want[i]) {
            EXPECT_EQ(*got[i], *want[i]) << "column " << i;
        }
    }
}

void expect_round_trip(const byte_buffer& p, std::size_t columns) {
    auto row = parse_text_row(p, columns);
    ASSERT_TRUE(row);
    byte_buffer out;
    serialize_text_row(*row, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

constexpr std::size_t types_columns = 19;

TEST(text_row, every_type_as_mariadb_formats_it) {
    const auto fs = frames(mariadb::query_types_text_eof);
    const auto& p = fs[22].payload;  // count, 19 columns, EOF, then the first row
    auto row = parse_text_row(p, types_columns);
    ASSERT_TRUE(row) << row.error().message();
    // The literals of the INSERT in tools/capture_mariadb.py, as the server prints them.
    expect_row(*row, {"1"sv, "-5"sv, "-300"sv, "-70000"sv, "-2000000000"sv,
                      "18446744073709551615"sv, "-9000000000000000000"sv, "1.5"sv, "-2.25"sv,
                      "-123.456"sv, "2024-02-29"sv, "2024-02-29 13:14:15.123456"sv,
                      "2001-02-03 04:05:06"sv, "-838:59:58.999999"sv, "2024"sv,
                      // '\0\1\2' in SQL is NUL then "12": \1 and \2 are no escapes.
                      "h\xc3\xa9llo"sv, "\x00" "12"sv, "\x02\xaa"sv /* b'1010101010' */,
                      "y"sv});
    expect_round_trip(p, types_columns);
}

TEST(text_row, nulls) {
    const auto fs = frames(mariadb::query_types_text_eof);
    auto row = parse_text_row(fs[23].payload, types_columns);
    ASSERT_TRUE(row);
    std::vector<text_value> want(types_columns, std::nullopt);
    want[0] = "2"sv;
    expect_row(*row, want);
    expect_round_trip(fs[23].payload, types_columns);

    auto zero = parse_text_row(fs[24].payload, types_columns);
    ASSERT_TRUE(zero);
    std::vector<text_value> want3(types_columns, std::nullopt);
    want3[0] = "3"sv;
    want3[10] = "0000-00-00"sv;
    want3[11] = "2020-01-01 00:00:00.000000"sv;
    want3[13] = "00:00:00.000000"sv;
    expect_row(*zero, want3);
    expect_round_trip(fs[24].payload, types_columns);
}

TEST(text_row, string_then_null) {
    const auto fs = frames(mariadb::query_two_result_sets_eof);
    auto row = parse_text_row(fs[10].payload, 2);  // SELECT 'a' AS x, NULL AS y
    ASSERT_TRUE(row);
    expect_row(*row, {"a"sv, std::nullopt});
}

TEST(text_row, long_value_uses_fc_length) {
    const std::string big(70000, 'z');  // needs the 3-byte (0xFD) length
    const text_value values[] = {std::string_view(big), std::nullopt, ""sv};
    byte_buffer out;
    serialize_text_row(values, out);
    EXPECT_EQ(to_hex(bytes_view(out).first(4)), "fd701101");  // 70000 = 0x011170
    auto row = parse_text_row(out, 3);
    ASSERT_TRUE(row);
    EXPECT_EQ((*row)[0]->size(), big.size());
    EXPECT_FALSE((*row)[1]);
    EXPECT_EQ(*(*row)[2], "");
}

struct bad_row {
    const char* name;
    const char* bytes;
    std::size_t columns;
    errc error;
};

TEST(text_row, malformed) {
    const bad_row cases[] = {
        {"more columns than bytes", "01 61", 3, errc::truncated},
        {"value past end", "05 61 62", 1, errc::length_past_end},
        {"err header where a value starts", "ff 00", 2, errc::bad_lenenc},
        {"trailing bytes", "01 61 fb", 1, errc::unexpected_packet},
        {"missing column", "01 61 01", 2, errc::length_past_end},
        {"truncated length", "fc 01", 1, errc::truncated},
    };
    for (const auto& c : cases) {
        auto row = parse_text_row(hex(c.bytes), c.columns);
        ASSERT_FALSE(row) << c.name;
        EXPECT_EQ(row.error(), make_error_code(c.error)) << c.name;
    }
}

TEST(text_row, hostile_column_count_does_not_allocate) {
    const auto p = hex("01 61");
    auto row = parse_text_row(p, std::size_t{1} << 40);
    ASSERT_FALSE(row);
    EXPECT_EQ(row.error(), make_error_code(errc::truncated));
}

}  // namespace
}  // namespace claimguard::protocol::test
