// Tests of the base64 codec against the RFC 4648 section 10 vectors and malformed input.
#include "proxy/inject/base64.hpp"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace claimguard::inject {
namespace {

struct vector_case {
    const char* name;
    std::string plain;
    std::string encoded;
};

void PrintTo(const vector_case& c, std::ostream* os) { *os << c.name; }

// RFC 4648 section 10, plus bytes that use '+' and '/' and a NUL.
const vector_case vectors[] = {
    {"empty", "", ""},
    {"f", "f", "Zg=="},
    {"fo", "fo", "Zm8="},
    {"foo", "foo", "Zm9v"},
    {"foob", "foob", "Zm9vYg=="},
    {"fooba", "fooba", "Zm9vYmE="},
    {"foobar", "foobar", "Zm9vYmFy"},
    {"high_bits", std::string("\xfb\xff\xbf", 3), "+/+/"},
    {"nul", std::string("\0a", 2), "AGE="},
};

class base64_vectors : public testing::TestWithParam<vector_case> {};

TEST_P(base64_vectors, encodes_and_decodes) {
    const vector_case& c = GetParam();
    EXPECT_EQ(base64_encode(c.plain), c.encoded);
    auto decoded = base64_decode(c.encoded);
    ASSERT_TRUE(decoded) << decoded.error().message();
    EXPECT_EQ(*decoded, c.plain);
}

INSTANTIATE_TEST_SUITE_P(rfc4648, base64_vectors, testing::ValuesIn(vectors),
                         [](const auto& info) { return std::string(info.param.name); });

struct bad_case {
    const char* name;
    std::string text;
};

void PrintTo(const bad_case& c, std::ostream* os) { *os << c.name; }

const bad_case bad_inputs[] = {
    {"length_not_multiple_of_4", "Zm9"},
    {"character_outside_alphabet", "Zm9*"},
    {"whitespace", "Zm9v\nYmFy"},
    {"padding_in_the_middle", "Zg==Zm9v"},
    {"three_pads", "Z==="},
    {"nonzero_bits_under_one_pad", "Zm9="},
    {"nonzero_bits_under_two_pads", "Zh=="},
    {"url_safe_alphabet", "-_-_"},
};

class base64_bad : public testing::TestWithParam<bad_case> {};

TEST_P(base64_bad, is_refused) {
    auto decoded = base64_decode(GetParam().text);
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), make_error_code(errc::bad_base64));
}

INSTANTIATE_TEST_SUITE_P(malformed, base64_bad, testing::ValuesIn(bad_inputs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(base64, round_trips_every_byte_value) {
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (std::size_t len = 0; len <= all.size(); len += 37) {
        const std::string part = all.substr(0, len);
        auto decoded = base64_decode(base64_encode(part));
        ASSERT_TRUE(decoded);
        EXPECT_EQ(*decoded, part) << "length " << len;
    }
}

}  // namespace
}  // namespace claimguard::inject
