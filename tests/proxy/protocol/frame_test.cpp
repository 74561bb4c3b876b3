// Frame scanning, 16 MiB splitting and joining, sequence checks.
#include <gtest/gtest.h>

#include "proxy/protocol/frame.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

constexpr std::size_t no_limit = std::size_t{1} << 30;

byte_buffer pattern(std::size_t n) {
    byte_buffer b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 7 + 3);
    return b;
}

TEST(scan_packet, single_frame) {
    const auto buf = hex("03 00 00 05 61 62 63 ff");  // one packet and a stray byte
    auto s = scan_packet(buf, no_limit);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->raw_size, 7u);
    EXPECT_EQ(s->payload_size, 3u);
    EXPECT_EQ(s->frames, 1u);
    EXPECT_EQ(s->first_seq, 5);
    EXPECT_EQ(s->last_seq, 5);
    EXPECT_EQ(to_hex(s->first_payload), "616263");
}

TEST(scan_packet, needs_more_bytes) {
    const char* partial[] = {"", "03", "03 00 00", "03 00 00 00", "03 00 00 00 61 62"};
    for (const char* p : partial) {
        const auto buf = hex(p);
        auto s = scan_packet(buf, no_limit);
        ASSERT_TRUE(s) << p;
        EXPECT_EQ(s->raw_size, 0u) << p;
    }
}

TEST(scan_packet, empty_payload) {
    const auto buf = hex("00 00 00 03");
    auto s = scan_packet(buf, no_limit);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->raw_size, 4u);
    EXPECT_EQ(s->payload_size, 0u);
}

TEST(scan_packet, too_large_is_refused_before_the_payload_arrives) {
    const auto buf = hex("65 00 00 00");  // announces 101 bytes, none sent yet
    auto s = scan_packet(buf, 100);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), make_error_code(errc::packet_too_large));
    EXPECT_TRUE(scan_packet(buf, 101));
}

struct split_case {
    const char* name;
    std::size_t payload;
    std::vector<std::size_t> frame_sizes;  // derived from the 0xFFFFFF rule
};

const split_case split_cases[] = {
    {"small", 10, {10}},
    {"one below the limit", max_frame_payload - 1, {max_frame_payload - 1}},
    {"exactly 0xFFFFFF gets an empty frame", max_frame_payload, {max_frame_payload, 0}},
    {"0xFFFFFF plus one", max_frame_payload + 1, {max_frame_payload, 1}},
    {"twice 0xFFFFFF", 2 * max_frame_payload, {max_frame_payload, max_frame_payload, 0}},
    {"empty", 0, {0}},
};

TEST(write_packet, splits_and_scans_back) {
    for (const auto& c : split_cases) {
        SCOPED_TRACE(c.name);
        const auto payload = pattern(c.payload);
        byte_buffer out;
        std::uint8_t seq = 7;
        write_packet(out, seq, payload);
        EXPECT_EQ(seq, 7 + c.frame_sizes.size());
        // Walk the frames by hand: sizes and consecutive sequence ids.
        std::size_t pos = 0;
        for (std::size_t i = 0; i < c.frame_sizes.size(); ++i) {
            ASSERT_GE(out.size() - pos, frame_header_size);
            const auto h = parse_frame_header(out.data() + pos);
            EXPECT_EQ(h.size, c.frame_sizes[i]);
            EXPECT_EQ(h.seq, 7 + i);
            pos += frame_header_size + h.size;
        }
        EXPECT_EQ(pos, out.size());
        auto s = scan_packet(out, no_limit);
        ASSERT_TRUE(s);
        EXPECT_EQ(s->raw_size, out.size());
        EXPECT_EQ(s->payload_size, c.payload);
        EXPECT_EQ(s->frames, c.frame_sizes.size());
        EXPECT_EQ(s->first_seq, 7);
        EXPECT_EQ(s->last_seq, 7 + c.frame_sizes.size() - 1);
        EXPECT_TRUE(join_payload(out) == payload);
    }
}

TEST(scan_packet, split_packet_waits_for_its_last_frame) {
    const auto payload = pattern(max_frame_payload);
    byte_buffer out;
    std::uint8_t seq = 0;
    write_packet(out, seq, payload);
    // Without the trailing empty frame the packet is not complete.
    auto s = scan_packet(bytes_view(out).first(out.size() - frame_header_size), no_limit);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->raw_size, 0u);
}

TEST(scan_packet, bad_continuation_sequence) {
    byte_buffer out;
    std::uint8_t seq = 0;
    write_packet(out, seq, pattern(max_frame_payload + 1));
    out[frame_header_size + max_frame_payload + 3] = 5;  // second frame should be seq 1
    auto s = scan_packet(out, no_limit);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), make_error_code(errc::bad_sequence));
}

TEST(scan_packet, continuation_sequence_wraps) {
    byte_buffer out;
    std::uint8_t seq = 0xFF;
    write_packet(out, seq, pattern(max_frame_payload + 2));
    EXPECT_EQ(seq, 1);
    auto s = scan_packet(out, no_limit);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->first_seq, 0xFF);
    EXPECT_EQ(s->last_seq, 0x00);
}

TEST(scan_packet, limit_counts_all_frames) {
    byte_buffer out;
    std::uint8_t seq = 0;
    write_packet(out, seq, pattern(max_frame_payload + 1));
    auto s = scan_packet(out, max_frame_payload);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error(), make_error_code(errc::packet_too_large));
}

TEST(scan_packet, captured_reply_splits_into_its_frames) {
    // All server frames of a real reply concatenated: scanning finds them one by one.
    const auto fs = frames(mariadb::query_two_result_sets_eof);
    byte_buffer stream;
    std::size_t server_frames = 0;
    for (const auto& f : fs) {
        if (f.from != 's') continue;
        stream.insert(stream.end(), f.raw.begin(), f.raw.end());
        ++server_frames;
    }
    std::size_t pos = 0, n = 0;
    while (pos < stream.size()) {
        auto s = scan_packet(bytes_view(stream).subspan(pos), no_limit);
        ASSERT_TRUE(s);
        ASSERT_GT(s->raw_size, 0u);
        pos += s->raw_size;
        ++n;
    }
    EXPECT_EQ(n, server_frames);
}

}  // namespace
}  // namespace claimguard::protocol::test
