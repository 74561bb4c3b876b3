// resp_decoder and format_command: exact bytes, replies split at every byte, limits.
#include "proxy/guards/resp.hpp"

#include <gtest/gtest.h>

#include <array>

namespace claimguard::guards {
namespace {

using kind = resp_value::kind;

std::vector<resp_value> decode_all(std::string_view bytes, std::size_t chunk, bool* broken = nullptr) {
    resp_decoder d;
    std::vector<resp_value> out;
    for (std::size_t i = 0; i < bytes.size(); i += chunk) {
        if (!d.feed(bytes.substr(i, chunk))) {
            if (broken) *broken = true;
            return out;
        }
        for (;;) {
            resp_value v;
            auto s = d.next(v);
            if (s == resp_decoder::status::need_more) break;
            if (s == resp_decoder::status::broken) {
                if (broken) *broken = true;
                return out;
            }
            out.push_back(std::move(v));
        }
    }
    return out;
}

TEST(format_command, exact_bytes) {
    std::array<std::string_view, 3> args{"SET", "k", std::string_view("a\0b", 3)};
    EXPECT_EQ(format_command(args), std::string("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n", 29));
}

TEST(resp_decoder, every_type_at_every_split) {
    const std::string bytes = "+OK\r\n$-1\r\n:42\r\n-MOVED 1 127.0.0.1:7000\r\n$5\r\nhe\r\no\r\n*2\r\n*1\r\n:1\r\n$0\r\n\r\n*-1\r\n";
    for (std::size_t chunk = 1; chunk <= bytes.size(); ++chunk) {
        auto v = decode_all(bytes, chunk);
        ASSERT_EQ(v.size(), 7u) << "chunk " << chunk;
        EXPECT_TRUE(v[0].is_status("OK"));
        EXPECT_EQ(v[1].type, kind::nil);
        EXPECT_EQ(v[2].integer, 42);
        EXPECT_TRUE(v[3].is_error());
        EXPECT_EQ(v[3].str, "MOVED 1 127.0.0.1:7000");
        EXPECT_EQ(v[4].str, "he\r\no");
        ASSERT_EQ(v[5].elements.size(), 2u);
        EXPECT_EQ(v[5].elements[0].elements[0].integer, 1);
        EXPECT_EQ(v[5].elements[1].type, kind::string);
        EXPECT_EQ(v[6].type, kind::nil);
    }
}

TEST(resp_decoder, protocol_error_breaks_the_stream) {
    bool broken = false;
    auto v = decode_all("+OK\r\n?what\r\n", 64, &broken);
    EXPECT_TRUE(broken);
    EXPECT_EQ(v.size(), 1u);
}

TEST(resp_decoder, refuses_huge_arrays_without_allocating_them) {
    bool broken = false;
    (void)decode_all("*2147483647\r\n", 64, &broken);
    EXPECT_TRUE(broken);
}

TEST(resp_decoder, refuses_a_reply_past_the_byte_limit) {
    resp_decoder d;
    ASSERT_TRUE(d.feed(std::string_view("$999999999\r\n")));
    std::string chunk(1024 * 1024, 'x');
    bool ok = true;
    for (std::size_t i = 0; i <= max_pending_reply_bytes / chunk.size() && ok; ++i) {
        ok = d.feed(chunk);
        resp_value v;
        if (ok) {
            EXPECT_EQ(d.next(v), resp_decoder::status::need_more);
        }
    }
    EXPECT_FALSE(ok);
}

TEST(resp_decoder, deep_nesting_is_an_error_not_a_crash) {
    std::string deep;
    for (int i = 0; i < 20; ++i) deep += "*1\r\n";
    deep += ":1\r\n";
    bool broken = false;
    auto v = decode_all(deep, 64, &broken);
    EXPECT_TRUE(broken);
    EXPECT_TRUE(v.empty());
}

}  // namespace
}  // namespace claimguard::guards
