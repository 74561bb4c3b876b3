// The compressed protocol's frames: zlib round trips, raw frames, packets across frames, sequence ids,
// the size limit, and broken frames answered with an error (never a crash).
#include <gtest/gtest.h>

#include <zlib.h>

#include "proxy/protocol/compression.hpp"
#include "proxy/protocol/frame.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {
namespace {

constexpr std::size_t no_limit = std::size_t{1} << 30;

byte_buffer text(std::size_t n) {  // compressible, like rows of a result set
    byte_buffer b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>("row value "[i % 10]);
    return b;
}

byte_buffer packets(std::initializer_list<std::size_t> sizes) {  // ordinary packets numbered 0, 1, ...
    byte_buffer out;
    std::uint8_t seq = 0;
    for (auto n : sizes) write_packet(out, seq, text(n));
    return out;
}

// Inflates every frame in `stream`, checking their ids run on from `seq`.
byte_buffer inflate_all(bytes_view stream, std::uint8_t seq) {
    byte_buffer out;
    while (!stream.empty()) {
        auto frame = scan_compressed_frame(stream, seq++, no_limit);
        EXPECT_TRUE(frame);
        if (!frame || frame->raw_size == 0) break;
        const std::size_t at = out.size();
        out.resize(at + frame->payload_size);
        EXPECT_TRUE(inflate_frame(stream.first(frame->raw_size), *frame, std::span(out).subspan(at)));
        stream = stream.subspan(frame->raw_size);
    }
    return out;
}

TEST(compression, round_trip_of_several_packets_in_one_frame) {
    const auto plain = packets({10, 300, 0, 5000});
    byte_buffer stream;
    std::uint8_t seq = 3;
    write_compressed(stream, seq, plain);
    EXPECT_EQ(seq, 4);  // one frame
    EXPECT_LT(stream.size(), plain.size());
    EXPECT_NE(load_u24(stream.data() + 4), 0u);  // compressed: the length before compression is set
    EXPECT_EQ(load_u24(stream.data() + 4), plain.size());
    EXPECT_EQ(inflate_all(stream, 3), plain);
}

TEST(compression, small_payloads_go_uncompressed) {
    const auto plain = packets({min_compress_length - 4 - 1});  // 49 bytes with its header
    byte_buffer stream;
    std::uint8_t seq = 0;
    write_compressed(stream, seq, plain);
    ASSERT_EQ(stream.size(), compressed_header_size + plain.size());
    EXPECT_EQ(to_hex(bytes_view(stream).first(7)), "31000000000000");  // 49 bytes, id 0, not compressed
    EXPECT_EQ(inflate_all(stream, 0), plain);
}

TEST(compression, incompressible_payloads_go_uncompressed) {
    byte_buffer noise(4000);
    std::uint32_t x = 12345;
    for (auto& b : noise) b = static_cast<std::uint8_t>((x = x * 1103515245 + 12345) >> 16);
    byte_buffer stream;
    std::uint8_t seq = 0;
    write_compressed(stream, seq, noise);
    EXPECT_EQ(load_u24(stream.data() + 4), 0u);
    EXPECT_EQ(inflate_all(stream, 0), noise);
}

TEST(compression, a_payload_past_16_mib_takes_several_frames) {
    const auto plain = packets({max_frame_payload + 100});  // an ordinary packet of two frames
    byte_buffer stream;
    std::uint8_t seq = 0;
    write_compressed(stream, seq, plain);
    EXPECT_EQ(seq, 2);
    EXPECT_EQ(inflate_all(stream, 0), plain);
}

TEST(compression, a_packet_spanning_two_frames_is_whole_once_both_are_inflated) {
    const auto plain = packets({200});
    byte_buffer stream;
    std::uint8_t seq = 0;
    write_compressed(stream, seq, bytes_view(plain).first(120));
    write_compressed(stream, seq, bytes_view(plain).subspan(120));
    // The first frame alone holds part of the packet: scan_packet asks for more.
    auto first = scan_compressed_frame(stream, 0, no_limit);
    ASSERT_TRUE(first);
    byte_buffer part(first->payload_size);
    ASSERT_TRUE(inflate_frame(bytes_view(stream).first(first->raw_size), *first, part));
    auto scan = scan_packet(part, no_limit);
    ASSERT_TRUE(scan);
    EXPECT_EQ(scan->raw_size, 0u);
    const auto all = inflate_all(stream, 0);
    scan = scan_packet(all, no_limit);
    ASSERT_TRUE(scan);
    EXPECT_EQ(scan->raw_size, plain.size());
}

TEST(compression, a_frame_not_all_there_asks_for_more) {
    const auto plain = packets({500});
    byte_buffer stream;
    std::uint8_t seq = 0;
    write_compressed(stream, seq, plain);
    for (std::size_t n = 0; n < stream.size(); ++n) {
        auto frame = scan_compressed_frame(bytes_view(stream).first(n), 0, no_limit);
        ASSERT_TRUE(frame) << n;
        EXPECT_EQ(frame->raw_size, 0u) << n;
    }
}

TEST(compression, sequence_ids_are_checked_from_the_header_on) {
    const auto stream = hex("05 00 00 07 00 00 00 01 00 00 00 0e");  // uncompressed COM_PING, id 7
    EXPECT_EQ(scan_compressed_frame(stream, 0, no_limit).error(), errc::bad_sequence);
    EXPECT_EQ(scan_compressed_frame(bytes_view(stream).first(7), 0, no_limit).error(), errc::bad_sequence);
    auto frame = scan_compressed_frame(stream, 7, no_limit);
    ASSERT_TRUE(frame);
    EXPECT_EQ(frame->raw_size, 12u);
    EXPECT_EQ(frame->seq, 7);
    EXPECT_EQ(frame->payload_size, 5u);
}

TEST(compression, a_frame_announcing_more_than_the_limit_is_refused_from_its_header) {
    EXPECT_EQ(scan_compressed_frame(hex("10 00 00 00 00 00 00"), 0, 15).error(), errc::packet_too_large);
    EXPECT_EQ(scan_compressed_frame(hex("05 00 00 00 00 10 00"), 0, 4095).error(), errc::packet_too_large);
    EXPECT_TRUE(scan_compressed_frame(hex("05 00 00 00 00 10 00"), 0, 4096));
}

TEST(compression, broken_streams_are_an_error) {
    const auto plain = packets({400});
    byte_buffer good;
    std::uint8_t seq = 0;
    write_compressed(good, seq, plain);
    ASSERT_NE(load_u24(good.data() + 4), 0u);
    auto inflate = [](byte_buffer stream) {
        auto frame = scan_compressed_frame(stream, 0, no_limit);
        EXPECT_TRUE(frame && frame->raw_size);
        byte_buffer out(frame->payload_size);
        return inflate_frame(stream, *frame, out);
    };
    EXPECT_TRUE(inflate(good));

    auto corrupt = good;
    corrupt[compressed_header_size + 5] ^= 0xFF;
    EXPECT_EQ(inflate(corrupt).error(), errc::bad_compression);

    auto longer = good;  // announces one byte more than the stream holds
    longer[4] = static_cast<std::uint8_t>(longer[4] + 1);
    EXPECT_EQ(inflate(longer).error(), errc::bad_compression);

    auto shorter = good;  // announces one byte less
    shorter[4] = static_cast<std::uint8_t>(shorter[4] - 1);
    EXPECT_EQ(inflate(shorter).error(), errc::bad_compression);

    auto cut = good;  // the zlib stream ends early; the frame's length says so
    cut.resize(cut.size() - 4);
    cut[0] = static_cast<std::uint8_t>(cut[0] - 4);
    EXPECT_EQ(inflate(cut).error(), errc::bad_compression);

    auto trailing = good;  // bytes after the end of the zlib stream
    trailing.push_back(0);
    trailing[0] = static_cast<std::uint8_t>(trailing[0] + 1);
    EXPECT_EQ(inflate(trailing).error(), errc::bad_compression);

    const auto garbage = hex("04 00 00 00 0a 00 00 de ad be ef");
    EXPECT_EQ(inflate(garbage).error(), errc::bad_compression);
}

TEST(compression, reads_what_zlib_compress_writes_as_libmariadb_does) {
    const auto plain = packets({1000});
    uLongf size = compressBound(static_cast<uLong>(plain.size()));
    byte_buffer body(size);
    ASSERT_EQ(compress(body.data(), &size, plain.data(), static_cast<uLong>(plain.size())), Z_OK);
    byte_buffer stream = {static_cast<std::uint8_t>(size),         static_cast<std::uint8_t>(size >> 8),         0, 0,
                          static_cast<std::uint8_t>(plain.size()), static_cast<std::uint8_t>(plain.size() >> 8), 0};
    stream.insert(stream.end(), body.begin(), body.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_EQ(inflate_all(stream, 0), plain);
}

TEST(compression, continuation_frames_are_renumbered_from_the_first) {
    // libmariadb numbers every frame of a compressed command split at 16 MiB 0.
    auto plain = packets({max_frame_payload + 10});
    const std::size_t second = frame_header_size + max_frame_payload;
    plain[second + 3] = 0;
    EXPECT_EQ(scan_packet(plain, no_limit).error(), errc::bad_sequence);
    renumber_continuations(std::span(plain).first(second + 2));  // the second header not all there yet
    EXPECT_EQ(plain[second + 3], 0);
    renumber_continuations(plain);
    EXPECT_EQ(plain[second + 3], 1);
    auto scan = scan_packet(plain, no_limit);
    ASSERT_TRUE(scan);
    EXPECT_EQ(scan->frames, 2u);

    auto single = packets({30, 30});  // packets of one frame keep their ids
    single[3] = 4;
    renumber_continuations(single);
    EXPECT_EQ(single[3], 4);
    EXPECT_EQ(single[4 + 30 + 3], 1);
}

TEST(compression, the_servers_ordinary_ids_are_numbered_on_as_uncompressed) {
    // MariaDB, compressed, restarts its ordinary ids from its compressed ones after each frame: a reply
    // of two frames numbered 1, 2 then 2, 3 (net_flush). Renumbered from the command's next id, 1..4.
    byte_buffer reply;
    for (std::uint8_t seq : {1, 2, 2, 3}) {
        std::uint8_t s = seq;
        write_packet(reply, s, text(5 + seq));
    }
    sequence_renumbering r;
    r.restart(1);
    // Fed in pieces that cut headers and bodies anywhere.
    for (std::size_t pos = 0, piece = 1; pos < reply.size(); pos += piece, piece = piece % 5 + 1)
        r.apply(std::span(reply).subspan(pos, std::min(piece, reply.size() - pos)));
    std::vector<int> ids;
    for (std::size_t pos = 0; pos < reply.size(); pos += 4 + load_u24(reply.data() + pos))
        ids.push_back(reply[pos + 3]);
    EXPECT_EQ(ids, (std::vector<int>{1, 2, 3, 4}));
}

TEST(compression, next_sequence_id_is_after_the_last_frame_written) {
    EXPECT_EQ(next_sequence_id(packets({10})), 1);
    EXPECT_EQ(next_sequence_id(packets({10, 20, 30})), 3);  // LOCAL INFILE data: on from the last packet
    EXPECT_EQ(next_sequence_id(packets({max_frame_payload + 1})), 2);
    EXPECT_EQ(next_sequence_id({}), 0);
}

}  // namespace
}  // namespace claimguard::protocol::test
