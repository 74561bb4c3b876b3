// packet_buffer: no storage until first use, a small one for small requests, released standard storage
// reused from the thread's spares, and growing or compacting keeps the unread bytes.
#include "proxy/session/packet_buffer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace claimguard::session {
namespace {

// Appends `bytes`, asking for at least `room` (a socket read asks for more than it gets).
void append(packet_buffer& b, const std::string& bytes, std::size_t room = packet_buffer::standard_bytes) {
    auto space = b.prepare(std::max(room, bytes.size()));
    std::memcpy(space.data(), bytes.data(), bytes.size());
    b.commit(bytes.size());
}

std::string readable(const packet_buffer& b) {
    auto r = b.readable();
    return {r.begin(), r.end()};
}

// Each test runs on a thread of its own: the spare list is per thread and starts empty there.
template <class F>
void on_fresh_thread(F f) {
    std::thread t(f);
    t.join();
}

TEST(PacketBuffer, WritableIsTheUnreadBytesToPatchInPlace) {
    // A compressed client's continuation frame ids are renumbered there (client_link::inflate_front).
    packet_buffer b;
    EXPECT_TRUE(b.writable().empty());
    append(b, "xxabcd");
    b.consume(2);
    ASSERT_EQ(b.writable().size(), 4u);
    b.writable()[1] = 'B';
    EXPECT_EQ(readable(b), "aBcd");
}

TEST(PacketBuffer, HoldsNoStorageUntilFirstUse) {
    packet_buffer b;
    EXPECT_EQ(b.capacity(), 0u);
    EXPECT_EQ(b.size(), 0u);
    EXPECT_TRUE(b.readable().empty());
    b.release();  // nothing to give back
    EXPECT_EQ(b.capacity(), 0u);
}

TEST(PacketBuffer, SmallRequestTakesSmallStorageThenGrowsToStandard) {
    on_fresh_thread([] {
        packet_buffer b;
        append(b, "hello", 1);
        EXPECT_EQ(b.capacity(), packet_buffer::small_bytes);
        // What client_link asks for when a packet did not fit: room for max(standard, 2 x held) in all.
        const std::string rest(packet_buffer::small_bytes - 5, 'r');
        append(b, rest, 1);
        EXPECT_EQ(b.capacity(), packet_buffer::small_bytes);  // it still fitted
        append(b, "!", std::max(packet_buffer::standard_bytes, 2 * b.size()) - b.size());
        EXPECT_EQ(b.capacity(), packet_buffer::standard_bytes);
        EXPECT_EQ(readable(b), "hello" + rest + "!");
        b.consume(b.size());
        b.shrink_if_idle(packet_buffer::small_bytes);  // between commands: the standard one goes to the spares
        EXPECT_EQ(b.capacity(), 0u);
        EXPECT_EQ(packet_buffer::spare_buffers(), 1u);
        append(b, "x", 1);
        EXPECT_EQ(b.capacity(), packet_buffer::small_bytes);
        EXPECT_EQ(packet_buffer::spare_buffers(), 1u);  // a small request never takes a spare
    });
}

TEST(PacketBuffer, TakesStandardStorageAndGivesItBackWhenEmpty) {
    on_fresh_thread([] {
        packet_buffer b;
        append(b, "abc");
        EXPECT_EQ(b.capacity(), packet_buffer::standard_bytes);
        b.release();  // bytes still unread: kept
        EXPECT_EQ(b.capacity(), packet_buffer::standard_bytes);
        EXPECT_EQ(readable(b), "abc");
        b.consume(3);
        b.release();
        EXPECT_EQ(b.capacity(), 0u);
        EXPECT_EQ(packet_buffer::spare_buffers(), 1u);
        // The next use takes the spare rather than a new allocation.
        append(b, "de");
        EXPECT_EQ(packet_buffer::spare_buffers(), 0u);
        EXPECT_EQ(readable(b), "de");
    });
}

TEST(PacketBuffer, SpareListIsBounded) {
    on_fresh_thread([] {
        std::vector<packet_buffer> buffers(packet_buffer::spare_buffers_per_thread + 5);
        for (auto& b : buffers) append(b, "x");
        for (auto& b : buffers) {
            b.consume(1);
            b.release();
            EXPECT_EQ(b.capacity(), 0u);
        }
        EXPECT_EQ(packet_buffer::spare_buffers(), packet_buffer::spare_buffers_per_thread);
    });
}

TEST(PacketBuffer, GrowsForALargePacketKeepingItsBytesAndFreesItWhenIdle) {
    on_fresh_thread([] {
        packet_buffer b;
        append(b, "head");
        b.consume(1);  // begin moved: growth compacts first
        const std::string big(packet_buffer::standard_bytes * 2, 'z');
        append(b, big);
        EXPECT_GE(b.capacity(), packet_buffer::standard_bytes * 2 + 3);
        EXPECT_EQ(readable(b), "ead" + big);
        EXPECT_EQ(packet_buffer::spare_buffers(), 1u);  // the standard storage it outgrew
        b.consume(b.size());
        b.shrink_if_idle(packet_buffer::standard_bytes);
        EXPECT_EQ(b.capacity(), 0u);
        EXPECT_EQ(packet_buffer::spare_buffers(), 1u);  // a large one is freed, never kept as a spare
    });
}

TEST(PacketBuffer, ShrinkKeepsStandardStorage) {
    packet_buffer b;
    append(b, "x");
    b.consume(1);
    b.shrink_if_idle(packet_buffer::standard_bytes);
    EXPECT_EQ(b.capacity(), packet_buffer::standard_bytes);
}

TEST(PacketBuffer, CompactsRatherThanGrowsWhenThereIsRoom) {
    packet_buffer b;
    append(b, std::string(packet_buffer::standard_bytes - 10, 'a'));
    b.consume(packet_buffer::standard_bytes - 20);
    append(b, std::string(100, 'b'), 100);
    EXPECT_EQ(b.capacity(), packet_buffer::standard_bytes);
    EXPECT_EQ(readable(b), std::string(10, 'a') + std::string(100, 'b'));
}

}  // namespace
}  // namespace claimguard::session
