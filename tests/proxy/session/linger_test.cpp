// The lingering close's bounds without sockets (proxy/session/linger.hpp): how a read ends it, and the
// process-wide limit on sessions lingering at once.
#include "proxy/session/linger.hpp"

#include <gtest/gtest.h>

namespace {

using namespace claimguard::session;

linger_end ended(const linger_read& r) {
    linger_end end = linger_end::eof;
    EXPECT_EQ(next_linger_step(r, end), linger_step::stop);
    return end;
}

TEST(linger, reads_on_while_the_client_sends_within_the_bounds) {
    linger_end end = linger_end::full;
    EXPECT_EQ(next_linger_step({}, end), linger_step::more);
    EXPECT_EQ(next_linger_step({.dropped = linger_max_bytes - 1}, end), linger_step::more);
    EXPECT_EQ(end, linger_end::full);  // untouched until it stops
}

TEST(linger, each_way_it_ends) {
    EXPECT_EQ(ended({.failed = true, .eof = true}), linger_end::eof);
    EXPECT_EQ(ended({.failed = true}), linger_end::error);  // a reset
    EXPECT_EQ(ended({.failed = true, .cancelled = true}), linger_end::timeout);
    EXPECT_EQ(ended({.failed = true, .cancelled = true, .draining = true}), linger_end::drain);
    EXPECT_EQ(ended({.dropped = linger_max_bytes}), linger_end::bytes);
    // The client's close wins over the byte bound reached with the same read.
    EXPECT_EQ(ended({.failed = true, .eof = true, .dropped = linger_max_bytes}), linger_end::eof);
}

TEST(linger, bounds_cover_a_whole_oversized_frame) {
    constexpr std::size_t max_frame = (1u << 24) - 1 + 4;  // a 16 MiB - 1 payload and its header
    EXPECT_GE(linger_max_bytes, max_frame);
    EXPECT_GT(linger_timeout.count(), 0);
    EXPECT_EQ(to_string(linger_end::full), "full");
}

TEST(linger_slots, at_most_capacity_at_once) {
    linger_slots slots(2);
    EXPECT_TRUE(slots.try_take());
    EXPECT_TRUE(slots.try_take());
    EXPECT_FALSE(slots.try_take());  // the third closes at once
    EXPECT_EQ(slots.in_use(), 2u);
    slots.give_back();
    EXPECT_TRUE(slots.try_take());
    EXPECT_FALSE(slots.try_take());
    EXPECT_EQ(lingering_closes().in_use(), 0u);
}

}  // namespace
