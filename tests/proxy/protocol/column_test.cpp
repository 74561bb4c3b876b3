// Column count and column definition packets (incl. MariaDB extended metadata and
// COM_FIELD_LIST defaults), from real MariaDB 10.11 result sets.
#include <gtest/gtest.h>

#include "captures_libmariadb.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/column.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

column_definition parse_ok_or_fail(const byte_buffer& p, std::uint32_t ext = 0) {
    auto c = parse_column_definition(p, ext);
    EXPECT_TRUE(c) << c.error().message();
    return c ? *c : column_definition{};
}

void expect_round_trip(const byte_buffer& p, std::uint32_t ext = 0) {
    auto c = parse_column_definition(p, ext);
    ASSERT_TRUE(c);
    byte_buffer out;
    serialize(*c, ext, out);
    EXPECT_EQ(to_hex(out), to_hex(p));
}

TEST(column_definition, expression_without_table) {
    const auto fs = frames(mariadb::query_select_1_eof);
    const auto c = parse_ok_or_fail(fs[2].payload);
    EXPECT_EQ(c.catalog, "def");
    EXPECT_EQ(c.schema, "");
    EXPECT_EQ(c.table, "");
    EXPECT_EQ(c.name, "1");
    EXPECT_EQ(c.org_name, "");
    EXPECT_EQ(c.charset, 63);  // binary
    EXPECT_EQ(c.column_length, 1u);
    EXPECT_EQ(c.type, field_type::long_);
    EXPECT_EQ(c.flags, column_flag::not_null | column_flag::binary);
    EXPECT_FALSE(c.has_default);
    expect_round_trip(fs[2].payload);
}

TEST(column_definition, table_column) {
    const auto fs = frames(mariadb::query_ok_then_rows_eof);
    const auto c = parse_ok_or_fail(fs[3].payload);  // t3.a INT PRIMARY KEY
    EXPECT_EQ(c.schema, "cg");
    EXPECT_EQ(c.table, "t3");
    EXPECT_EQ(c.org_table, "t3");
    EXPECT_EQ(c.name, "a");
    EXPECT_EQ(c.org_name, "a");
    EXPECT_EQ(c.column_length, 11u);
    EXPECT_EQ(c.type, field_type::long_);
    EXPECT_TRUE(c.flags & column_flag::not_null);
    EXPECT_TRUE(c.flags & column_flag::primary_key);
    EXPECT_FALSE(c.flags & column_flag::is_unsigned);
    expect_round_trip(fs[3].payload);
}

struct type_case {
    const char* column;
    field_type type;
    bool is_unsigned;
    std::uint8_t decimals;
};

TEST(column_definition, every_type_of_the_types_table) {
    // From the DDL in tools/capture_mariadb.py; ENUM travels as STRING + ENUM flag.
    const type_case expected[] = {
        {"id", field_type::long_, false, 0},      {"ti", field_type::tiny, false, 0},
        {"si", field_type::short_, false, 0},     {"mi", field_type::int24, false, 0},
        {"i", field_type::long_, false, 0},       {"bu", field_type::longlong, true, 0},
        {"bs", field_type::longlong, false, 0},   {"f", field_type::float_, false, 31},
        {"d", field_type::double_, false, 31},    {"de", field_type::newdecimal, false, 3},
        {"dt", field_type::date, false, 0},       {"dtm", field_type::datetime, false, 6},
        // MariaDB flags TIMESTAMP columns UNSIGNED | BINARY.
        {"ts", field_type::timestamp, true, 0},   {"tm", field_type::time, false, 6},
        {"y", field_type::year, true, 0},         {"vc", field_type::var_string, false, 0},
        {"bl", field_type::blob, false, 0},       {"bt", field_type::bit, true, 0},
        {"en", field_type::string, false, 0},
    };
    const auto fs = frames(mariadb::query_types_text_eof);
    ASSERT_EQ(parse_column_count(fs[1].payload).value(), std::size(expected));
    for (std::size_t i = 0; i < std::size(expected); ++i) {
        SCOPED_TRACE(expected[i].column);
        const auto& p = fs[2 + i].payload;
        const auto c = parse_ok_or_fail(p);
        EXPECT_EQ(c.name, expected[i].column);
        EXPECT_EQ(c.org_table, "types");
        EXPECT_EQ(c.type, expected[i].type);
        EXPECT_EQ(value_type_of(c).is_unsigned, expected[i].is_unsigned);
        EXPECT_EQ(c.decimals, expected[i].decimals);
        expect_round_trip(p);
    }
    EXPECT_TRUE(parse_ok_or_fail(fs[2 + 18].payload).flags & column_flag::enum_);
}

TEST(column_definition, field_list_default_values) {
    const auto fs = frames(mariadb::field_list_eof);
    const auto a = parse_ok_or_fail(fs[1].payload);
    EXPECT_TRUE(a.has_default);
    ASSERT_TRUE(a.default_value.has_value());
    EXPECT_EQ(*a.default_value, "0");
    const auto b = parse_ok_or_fail(fs[2].payload);
    EXPECT_TRUE(b.has_default);
    EXPECT_FALSE(b.default_value.has_value());  // DEFAULT NULL sent as 0xFB
    for (int i = 1; i <= 3; ++i) expect_round_trip(fs[i].payload);
}

TEST(column_definition, mariadb_extended_metadata) {
    const auto fs = frames(mariadb::query_extended_metadata_deof);
    const auto ext = mariadb_cap::extended_metadata;
    struct {
        const char* name;
        field_type type;
        const char* type_name;
        const char* format;
    } expected[] = {
        {"j", field_type::blob, "", "json"},  // JSON is LONGTEXT with format "json"
        {"ip", field_type::string, "inet6", ""},
        {"u", field_type::string, "uuid", ""},
    };
    for (std::size_t i = 0; i < std::size(expected); ++i) {
        SCOPED_TRACE(expected[i].name);
        const auto c = parse_ok_or_fail(fs[2 + i].payload, ext);
        EXPECT_EQ(c.name, expected[i].name);
        EXPECT_EQ(c.type, expected[i].type);
        auto m = parse_extended_metadata(c.extended_metadata);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->data_type_name, expected[i].type_name);
        EXPECT_EQ(m->format_name, expected[i].format);
        expect_round_trip(fs[2 + i].payload, ext);
        // Without the capability the extra block is misread: refused, not guessed.
        EXPECT_FALSE(parse_column_definition(fs[2 + i].payload, 0));
    }
}

TEST(column_definition, libmariadb_empty_extended_metadata) {
    const auto ext = mariadb_cap::extended_metadata;
    for (auto frame_hex : libmariadb::columns_12) {
        const auto p = payload_of(frame_hex);
        const auto c = parse_ok_or_fail(p, ext);
        EXPECT_EQ(c.name, "?");
        EXPECT_TRUE(c.extended_metadata.empty());
        expect_round_trip(p, ext);
    }
}

TEST(column_definition, every_truncation_fails) {
    const auto fs = frames(mariadb::query_ok_then_rows_eof);
    const auto& p = fs[3].payload;
    for (std::size_t n = 0; n < p.size(); ++n)
        EXPECT_FALSE(parse_column_definition(bytes_view(p).first(n), 0)) << n;
}

TEST(column_definition, malformed) {
    const auto fs = frames(mariadb::query_select_1_eof);
    auto p = fs[2].payload;
    auto bad_fixed = p;
    bad_fixed[p.size() - 13] = 0x0B;  // fixed-fields length must be 0x0C
    auto c = parse_column_definition(bad_fixed, 0);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), make_error_code(errc::unexpected_packet));
    auto trailing = p;
    trailing.push_back(0x01);  // default value "?" of length 1 but no byte
    EXPECT_FALSE(parse_column_definition(trailing, 0));
    auto two_defaults = p;
    two_defaults.push_back(0xFB);
    two_defaults.push_back(0xFB);
    EXPECT_FALSE(parse_column_definition(two_defaults, 0));
}

TEST(extended_metadata, unknown_kinds_are_skipped_and_truncation_fails) {
    const auto raw = hex("07 02 61 62 00 01 78");  // the result views into it
    auto m = parse_extended_metadata(raw);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data_type_name, "x");
    EXPECT_EQ(m->format_name, "");
    EXPECT_FALSE(parse_extended_metadata(hex("00 05 61")));
    EXPECT_FALSE(parse_extended_metadata(hex("00")));
}

struct count_case {
    const char* name;
    const char* bytes;
    std::uint64_t value;
    errc error;
};

TEST(column_count, table) {
    const count_case cases[] = {
        {"one", "01", 1, errc::ok},
        {"nineteen", "13", 19, errc::ok},
        {"256 columns", "fc 00 01", 256, errc::ok},
        {"the most", "fc ff ff", max_result_columns, errc::ok},
        {"zero", "00", 0, errc::unexpected_packet},
        {"too many", "fd 00 00 01", 0, errc::unexpected_packet},
        {"metadata-follows byte (never offered)", "0c 01", 0, errc::unexpected_packet},
        {"truncated", "fc 01", 0, errc::truncated},
        {"empty", "", 0, errc::truncated},
    };
    for (const auto& c : cases) {
        auto n = parse_column_count(hex(c.bytes));
        if (c.error == errc::ok) {
            ASSERT_TRUE(n) << c.name;
            EXPECT_EQ(*n, c.value) << c.name;
            byte_buffer out;
            serialize_column_count(*n, out);
            EXPECT_EQ(to_hex(out), to_hex(hex(c.bytes))) << c.name;
        } else {
            ASSERT_FALSE(n) << c.name;
            EXPECT_EQ(n.error(), make_error_code(c.error)) << c.name;
        }
    }
}

}  // namespace
}  // namespace claimguard::protocol::test
