// Length-encoded integers and strings, fixed-width integers, NUL-terminated strings.
#include <gtest/gtest.h>

#include <limits>

#include "proxy/protocol/wire.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

struct lenenc_case {
    const char* name;
    const char* bytes;
    std::uint64_t value;  // when error == ok
    errc error;
    std::size_t consumed;
};

// Values and widths from the protocol's definition of int<lenenc>; the error rows
// are the truncated and reserved prefixes (CVE-2017-3599 style).
const lenenc_case lenenc_cases[] = {
    {"zero", "00", 0, errc::ok, 1},
    {"largest one byte", "fa", 250, errc::ok, 1},
    {"smallest fc", "fc fb 00", 251, errc::ok, 3},
    {"largest fc", "fc ff ff", 0xFFFF, errc::ok, 3},
    {"smallest fd", "fd 00 00 01", 0x10000, errc::ok, 4},
    {"largest fd", "fd ff ff ff", 0xFFFFFF, errc::ok, 4},
    {"smallest fe", "fe 00 00 00 01 00 00 00 00", 0x1000000, errc::ok, 9},
    {"largest fe", "fe ff ff ff ff ff ff ff ff", std::numeric_limits<std::uint64_t>::max(),
     errc::ok, 9},
    {"trailing bytes stay", "05 ff", 5, errc::ok, 1},
    {"fb is null not an integer", "fb", 0, errc::bad_lenenc, 0},
    {"ff is an err header", "ff 00 00", 0, errc::bad_lenenc, 0},
    {"empty", "", 0, errc::truncated, 0},
    {"fc alone", "fc", 0, errc::truncated, 0},
    {"fc 01", "fc 01", 0, errc::truncated, 0},
    {"fd 01 02", "fd 01 02", 0, errc::truncated, 0},
    {"fe plus 7 bytes", "fe 01 02 03 04 05 06 07", 0, errc::truncated, 0},
    {"fe alone", "fe", 0, errc::truncated, 0},
};

void PrintTo(const lenenc_case& c, std::ostream* os) { *os << c.name; }

class lenenc_read : public ::testing::TestWithParam<lenenc_case> {};

TEST_P(lenenc_read, decodes_or_fails) {
    const auto& c = GetParam();
    const auto in = hex(c.bytes);
    reader r(in);
    const auto v = r.lenenc();
    EXPECT_EQ(r.error(), c.error);
    if (c.error == errc::ok) {
        EXPECT_EQ(v, c.value);
        EXPECT_EQ(r.position(), c.consumed);
    } else {
        // A failed read sticks: later reads see nothing.
        EXPECT_EQ(r.remaining(), 0u);
        EXPECT_EQ(r.u8(), 0);
        EXPECT_FALSE(r.ok());
    }
}

INSTANTIATE_TEST_SUITE_P(cases, lenenc_read, ::testing::ValuesIn(lenenc_cases),
                         [](const auto& info) {
                             std::string n = info.param.name;
                             for (auto& ch : n)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

TEST(lenenc_write, minimal_encodings_round_trip) {
    // Every successful read case must be written back to the same bytes.
    for (const auto& c : lenenc_cases) {
        if (c.error != errc::ok) continue;
        byte_buffer out;
        writer(out).lenenc(c.value);
        const auto in = hex(c.bytes);
        EXPECT_EQ(to_hex(out), to_hex(bytes_view(in).first(c.consumed))) << c.name;
        EXPECT_EQ(lenenc_size(c.value), c.consumed) << c.name;
    }
}

struct lenenc_str_case {
    const char* name;
    const char* bytes;
    const char* value;
    errc error;
};

const lenenc_str_case lenenc_str_cases[] = {
    {"empty string", "00", "", errc::ok},
    {"abc", "03 61 62 63", "abc", errc::ok},
    {"length past end", "04 61 62 63", "", errc::length_past_end},
    {"fc length past end", "fc 00 01 61", "", errc::length_past_end},
    {"huge fe length", "fe ff ff ff ff ff ff ff ff 61", "", errc::length_past_end},
    {"truncated length", "fd 01 02", "", errc::truncated},
    {"null marker", "fb", "", errc::bad_lenenc},
};

TEST(lenenc_str, table) {
    for (const auto& c : lenenc_str_cases) {
        const auto in = hex(c.bytes);
        reader r(in);
        const auto s = r.lenenc_str();
        EXPECT_EQ(r.error(), c.error) << c.name;
        if (c.error == errc::ok) {
            EXPECT_EQ(s, c.value) << c.name;
            EXPECT_TRUE(r.empty()) << c.name;
        }
    }
}

TEST(lenenc_str, long_string_uses_fc_prefix) {
    const std::string s(300, 'x');
    byte_buffer out;
    writer(out).lenenc_str(s);
    ASSERT_EQ(out.size(), 3u + 300u);
    EXPECT_EQ(to_hex(bytes_view(out).first(3)), "fc2c01");  // 300 = 0x012c
    reader r(out);
    EXPECT_EQ(r.lenenc_str(), s);
    EXPECT_TRUE(r.ok());
}

TEST(fixed_integers, little_endian_both_ways) {
    byte_buffer out;
    writer w(out);
    w.u8(0x01);
    w.u16(0x0302);
    w.u24(0x060504);
    w.u32(0x0a090807);
    w.u64(0x1211100f0e0d0c0bull);
    EXPECT_EQ(to_hex(out), "0102030405060708090a0b0c0d0e0f101112");
    reader r(out);
    EXPECT_EQ(r.u8(), 0x01);
    EXPECT_EQ(r.u16(), 0x0302);
    EXPECT_EQ(r.u24(), 0x060504u);
    EXPECT_EQ(r.u32(), 0x0a090807u);
    EXPECT_EQ(r.u64(), 0x1211100f0e0d0c0bull);
    EXPECT_TRUE(r.empty());
    EXPECT_EQ(r.u8(), 0);
    EXPECT_EQ(r.error(), errc::truncated);
}

TEST(fixed_integers, truncated_read_fails) {
    const auto in = hex("01 02 03");
    reader r(in);
    EXPECT_EQ(r.u32(), 0u);
    EXPECT_EQ(r.error(), errc::truncated);
}

TEST(null_terminated, splits_at_first_nul) {
    const auto in = hex("61 62 00 63 00");
    reader r(in);
    EXPECT_EQ(r.null_terminated(), "ab");
    EXPECT_EQ(r.null_terminated(), "c");
    EXPECT_TRUE(r.empty());
}

TEST(null_terminated, missing_nul_is_truncated) {
    const auto in = hex("61 62");
    reader r(in);
    EXPECT_EQ(r.null_terminated(), "");
    EXPECT_EQ(r.error(), errc::truncated);
}

TEST(errors, every_code_has_a_message) {
    for (int e = static_cast<int>(errc::truncated); e <= static_cast<int>(errc::missing_param_types);
         ++e) {
        const auto ec = make_error_code(static_cast<errc>(e));
        EXPECT_NE(ec.message(), "unknown protocol error") << e;
        EXPECT_STREQ(ec.category().name(), "claimguard.protocol");
    }
}

}  // namespace
}  // namespace claimguard::protocol::test
