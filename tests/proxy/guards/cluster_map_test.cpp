// Key slots against Redis's own CLUSTER KEYSLOT (values read from redis-server 7.0.15), redirect
// parsing, and the slot map built from CLUSTER SLOTS replies.
#include "proxy/guards/cluster_map.hpp"

#include <gtest/gtest.h>

namespace claimguard::guards {
namespace {

struct slot_case {
    std::string name;
    std::string key;
    std::uint16_t slot;  // redis-cli CLUSTER KEYSLOT <key>
};

class key_slot_test : public ::testing::TestWithParam<slot_case> {};

TEST_P(key_slot_test, matches_cluster_keyslot) { EXPECT_EQ(key_slot(GetParam().key), GetParam().slot); }

INSTANTIATE_TEST_SUITE_P(
    redis, key_slot_test,
    ::testing::Values(slot_case{"empty_key", "", 0}, slot_case{"empty_tag_only", "{}", 15257},
                      slot_case{"open_brace_only", "{", 4092}, slot_case{"close_brace_only", "}", 12090},
                      slot_case{"close_before_open", "}{", 12793}, slot_case{"empty_tag_then_text", "{}a", 10875},
                      slot_case{"text_then_empty_tag", "a{}", 6082}, slot_case{"tag_a", "{a}", 15495},
                      slot_case{"first_tag_wins", "a{b}c{d}", 3300}, slot_case{"empty_first_tag_hashes_all", "{}{b}", 8193},
                      slot_case{"nested_open", "{{a}}", 10276}, slot_case{"extra_close", "{a}}", 15495},
                      slot_case{"unclosed_tag", "a{b", 13340}, slot_case{"plain", "foo", 12182},
                      slot_case{"crc16_check_value", "123456789", 12739},
                      slot_case{"tagged_lock", "lock:coupon:{42}:7", 8000},
                      slot_case{"untagged_lock", "lock:coupon:42:7", 5461},
                      slot_case{"spec_example", "{user1000}.following", 3443},
                      slot_case{"spec_empty_then_tag", "foo{}{bar}", 8363},
                      slot_case{"spec_nested", "foo{{bar}}zap", 4015}, slot_case{"spec_two_tags", "foo{bar}{zap}", 5061},
                      slot_case{"space_tag", "{ }", 9314}, slot_case{"short_tag", "x{y}", 12222}),
    [](const auto& info) { return info.param.name; });

TEST(hash_tag, same_tag_same_slot) {
    EXPECT_EQ(key_slot("lock:coupon:{42}:7"), key_slot("{42}"));
    EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
    EXPECT_EQ(hash_tag("{}x"), "{}x");
}

TEST(crc16, xmodem_check_value) { EXPECT_EQ(crc16("123456789"), 0x31C3); }

struct redirect_case {
    std::string name;
    std::string error;
    bool ok;
    redirect::kind kind;
    std::uint16_t slot;
    std::string host;
    std::uint16_t port;
};

class redirect_test : public ::testing::TestWithParam<redirect_case> {};

TEST_P(redirect_test, parses) {
    const auto& c = GetParam();
    auto r = parse_redirect(c.error, "10.0.0.9");
    ASSERT_EQ(r.has_value(), c.ok);
    if (!c.ok) return;
    EXPECT_EQ(r->type, c.kind);
    EXPECT_EQ(r->slot, c.slot);
    EXPECT_EQ(r->node.host, c.host);
    EXPECT_EQ(r->node.port, c.port);
}

using k = redirect::kind;
INSTANTIATE_TEST_SUITE_P(
    errors, redirect_test,
    ::testing::Values(redirect_case{"moved", "MOVED 3999 127.0.0.1:6381", true, k::moved, 3999, "127.0.0.1", 6381},
                      redirect_case{"ask", "ASK 3999 127.0.0.1:6381", true, k::ask, 3999, "127.0.0.1", 6381},
                      redirect_case{"ipv6_bracketed", "MOVED 0 [::1]:7000", true, k::moved, 0, "::1", 7000},
                      redirect_case{"ipv6_bare", "MOVED 16383 fe80::1:7000", true, k::moved, 16383, "fe80::1", 7000},
                      redirect_case{"hostname", "MOVED 1 redis-0.redis:6379", true, k::moved, 1, "redis-0.redis", 6379},
                      redirect_case{"empty_host_is_asked_host", "MOVED 12 :7001", true, k::moved, 12, "10.0.0.9", 7001},
                      redirect_case{"slot_too_big", "MOVED 16384 127.0.0.1:1", false, k::moved, 0, "", 0},
                      redirect_case{"negative_slot", "MOVED -1 127.0.0.1:1", false, k::moved, 0, "", 0},
                      redirect_case{"no_port", "MOVED 1 127.0.0.1", false, k::moved, 0, "", 0},
                      redirect_case{"port_zero", "MOVED 1 127.0.0.1:0", false, k::moved, 0, "", 0},
                      redirect_case{"port_too_big", "ASK 1 127.0.0.1:65536", false, k::moved, 0, "", 0},
                      redirect_case{"no_node", "MOVED 1", false, k::moved, 0, "", 0},
                      redirect_case{"lowercase", "moved 1 127.0.0.1:1", false, k::moved, 0, "", 0},
                      redirect_case{"other_error", "ERR unknown command", false, k::moved, 0, "", 0},
                      redirect_case{"trydown", "TRYAGAIN Multiple keys request during rehashing", false, k::moved, 0,
                                    "", 0}),
    [](const auto& info) { return info.param.name; });

resp_value integer(long long v) { return {resp_value::kind::integer, v, {}, {}}; }
resp_value bulk(std::string s) { return {resp_value::kind::string, 0, std::move(s), {}}; }
resp_value array(std::vector<resp_value> e) { return {resp_value::kind::array, 0, {}, std::move(e)}; }

TEST(slot_map, from_cluster_slots) {
    auto reply = array({array({integer(0), integer(5460), array({bulk("127.0.0.1"), integer(7000), bulk("id0")}),
                               array({bulk("127.0.0.1"), integer(7003), bulk("id3")})}),
                        array({integer(5461), integer(10922), array({bulk(""), integer(7001), bulk("id1")})}),
                        array({integer(10923), integer(16383), array({bulk("127.0.0.1"), integer(7002)})})});
    auto map = slot_map::from_cluster_slots(reply, "10.1.1.1");
    ASSERT_TRUE(map);
    EXPECT_EQ(map->covered_slots(), 16384u);
    EXPECT_EQ(map->nodes().size(), 3u);
    EXPECT_EQ(*map->node_for(0), (node_address{"127.0.0.1", 7000}));
    EXPECT_EQ(*map->node_for(5461), (node_address{"10.1.1.1", 7001}));  // empty host: the node we asked
    EXPECT_EQ(*map->node_for(16383), (node_address{"127.0.0.1", 7002}));
    map->assign(0, {"127.0.0.1", 7002});
    EXPECT_EQ(*map->node_for(0), (node_address{"127.0.0.1", 7002}));
    EXPECT_EQ(map->nodes().size(), 3u);
}

TEST(slot_map, partial_coverage_leaves_gaps) {
    auto reply = array({array({integer(100), integer(199), array({bulk("a"), integer(1)})})});
    auto map = slot_map::from_cluster_slots(reply, "");
    ASSERT_TRUE(map);
    EXPECT_EQ(map->covered_slots(), 100u);
    EXPECT_EQ(map->node_for(99), nullptr);
    EXPECT_EQ(map->node_for(16384), nullptr);
}

TEST(slot_map, refuses_malformed_replies) {
    auto node = array({bulk("a"), integer(1)});
    for (const auto& bad : std::vector<resp_value>{
             bulk("x"), array({bulk("x")}), array({array({integer(0), integer(16384), node})}),
             array({array({integer(5), integer(4), node})}), array({array({integer(-1), integer(4), node})}),
             array({array({integer(0), integer(1)})}), array({array({integer(0), integer(1), array({bulk("a")})})}),
             array({array({integer(0), integer(1), array({bulk("a"), integer(70000)})})}),
             array({array({integer(0), integer(1), array({integer(1), integer(1)})})}),
             array({array({integer(0), integer(1), array({bulk(""), integer(1)})})})}) {
        EXPECT_FALSE(slot_map::from_cluster_slots(bad, "")) << "a reply of the wrong shape must not become a map";
    }
}

}  // namespace
}  // namespace claimguard::guards
