// The sidecar's read cache: TTL, the decrements, refusals and restocks it follows, concurrent
// refreshes, its limits; templates are real MariaDB replies (tests/proxy/protocol captures).
#include <gtest/gtest.h>

#include <sstream>

#include "proxy/engine/explain.hpp"
#include "proxy/engine/read_cache.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "tests/proxy/engine/engine_harness.hpp"
#include "tests/proxy/protocol/captures_read_cache.hpp"
#include "tests/proxy/protocol/test_support.hpp"

namespace claimguard::engine {
namespace {

using namespace std::chrono_literals;
using outcome = read_cache::outcome;

constexpr auto ttl = 50ms;
const std::string rule = "coupon_stock";
const std::string shape = "T\nSELECT remain FROM coupon_stock WHERE campaign_id = ?";
const key_tuple key{"7"};

std::shared_ptr<const protocol::counter_reply> reply() {
    static const auto kept = protocol::test::hex(protocol::test::read_cache::text_eof_5);
    auto t = protocol::parse_counter_reply(kept, protocol::cap::protocol_41, 0, false, 1, "");
    EXPECT_TRUE(t);
    return std::make_shared<const protocol::counter_reply>(std::move(*t));
}

struct read_cache_test : testing::Test {
    read_cache cache;
    read_cache::clock::time_point t0 = read_cache::clock::now();

    // A read that went to the server at `at` and found `value`.
    void server_read(std::int64_t value, read_cache::clock::time_point at, const key_tuple& k = key) {
        auto l = cache.find(rule, k, shape, ttl, at);
        EXPECT_NE(l.what, outcome::hit);
        cache.store(rule, k, shape, reply(), value, l.generation, at);
    }
};

TEST_F(read_cache_test, miss_then_hit_until_the_ttl_then_refresh) {
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0).what, outcome::miss);
    server_read(5, t0);
    auto hit = cache.find(rule, key, shape, ttl, t0 + 49ms);
    EXPECT_EQ(hit.what, outcome::hit);
    EXPECT_EQ(hit.value, 5);
    ASSERT_TRUE(hit.reply);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 50ms).what, outcome::refresh);
    server_read(3, t0 + 60ms);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 61ms).value, 3);
    // another shape of the same key has no template yet; another key nothing at all
    EXPECT_EQ(cache.find(rule, key, shape + " ", ttl, t0 + 61ms).what, outcome::miss);
    EXPECT_EQ(cache.find(rule, key_tuple{"8"}, shape, ttl, t0 + 61ms).what, outcome::miss);
}

TEST_F(read_cache_test, one_refresh_at_a_time_the_others_wait_for_its_answer) {
    server_read(5, t0);
    // The first stale read goes to the server; the herd behind it waits instead of following it.
    auto first = cache.find(rule, key, shape, ttl, t0 + 60ms);
    EXPECT_EQ(first.what, outcome::refresh);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 61ms).what, outcome::wait);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 62ms, false).what, outcome::wait);  // in a transaction too
    cache.store(rule, key, shape, reply(), 4, first.generation, t0 + 60ms);
    auto after = cache.find(rule, key, shape, ttl, t0 + 63ms);
    EXPECT_EQ(after.what, outcome::hit);
    EXPECT_EQ(after.value, 4);
    // A refresh that never answers holds the others back for max_refresh_wait at most.
    const auto stale = t0 + 60ms + ttl + 1ms;
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale).what, outcome::refresh);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale + read_cache::max_refresh_wait - 1ms).what, outcome::wait);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale + read_cache::max_refresh_wait).what, outcome::refresh);
    // One that failed says so: the next read refreshes at once.
    cache.end_refresh(rule, key);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale + read_cache::max_refresh_wait + 1ms).what, outcome::refresh);
    // A rule's max_refresh_wait holds them back for its own time instead.
    cache.end_refresh(rule, key);
    const auto later = stale + 10s;
    EXPECT_EQ(cache.find(rule, key, shape, ttl, later, true, 40ms).what, outcome::refresh);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, later + 39ms, true, 40ms).what, outcome::wait);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, later + 40ms, true, 40ms).what, outcome::refresh);
    // A read that may not refresh (in a transaction) never holds the others back.
    cache.end_refresh(rule, key);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale + 400ms, false).what, outcome::refresh);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, stale + 401ms).what, outcome::refresh);
}

TEST_F(read_cache_test, decrements_count_down_and_a_refusal_answers_the_floor) {
    server_read(3, t0);
    cache.on_take(rule, key, 1);
    cache.on_take(rule, key, 2);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 1ms).value, 0);
    cache.on_exhausted(rule, key, -2, t0 + 30ms);  // floor -2
    auto sold_out = cache.find(rule, key, shape, ttl, t0 + 40ms);
    EXPECT_EQ(sold_out.what, outcome::hit);
    EXPECT_EQ(sold_out.value, -2);
    // the refusal is fresh knowledge, the template is not: after the template's TTL, a refresh
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 55ms).what, outcome::refresh);
}

TEST_F(read_cache_test, a_restock_sends_the_next_read_to_the_server) {
    server_read(0, t0);
    cache.invalidate(rule, key);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 1ms).what, outcome::refresh);
    server_read(30, t0 + 2ms);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 3ms).value, 30);
}

// A trusted user's restock whose WHERE pins no key (issue 21): every key of the rule asks the
// server next, the other rules' keys stay answered.
TEST_F(read_cache_test, a_restock_of_every_key_of_a_rule_sends_their_reads_to_the_server) {
    server_read(0, t0);
    server_read(3, t0, key_tuple{"8"});
    cache.on_exhausted("other_rule", key, 0, t0);
    cache.invalidate_rule(rule);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 1ms).what, outcome::refresh);
    EXPECT_EQ(cache.find(rule, key_tuple{"8"}, shape, ttl, t0 + 1ms).what, outcome::refresh);
    EXPECT_EQ(cache.find("other_rule", key, shape, ttl, t0 + 1ms).what, outcome::miss) << "no template, but a value";
    cache.invalidate_rule("no_such_rule");  // nothing to do
    EXPECT_EQ(cache.keys(), 3u);
}

TEST_F(read_cache_test, a_reply_older_than_a_local_change_does_not_overwrite_it) {
    server_read(10, t0);
    auto refresh = cache.find(rule, key, shape, ttl, t0 + 60ms);  // sent to the server...
    ASSERT_EQ(refresh.what, outcome::refresh);
    cache.on_take(rule, key, 1);                                                // ...a decrement lands meanwhile...
    cache.store(rule, key, shape, reply(), 10, refresh.generation, t0 + 60ms);  // ...the reply says 10
    // the value stays unconfirmed: the next read asks the server again rather than answer 10
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 61ms).what, outcome::refresh);

    // two refreshes in flight: the first reply counts, the second (same generation) is ignored
    auto a = cache.find(rule, key, shape, ttl, t0 + 70ms);
    auto b = cache.find(rule, key, shape, ttl, t0 + 70ms);
    cache.store(rule, key, shape, reply(), 8, a.generation, t0 + 70ms);
    cache.store(rule, key, shape, reply(), 9, b.generation, t0 + 70ms);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 71ms).value, 8);
}

TEST_F(read_cache_test, changes_to_a_key_never_read_are_not_invented) {
    cache.on_take(rule, key, 1);
    cache.invalidate(rule, key);
    EXPECT_EQ(cache.keys(), 0u);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0).what, outcome::miss);
}

TEST_F(read_cache_test, bounded_keys_and_templates_evictions_counted) {
    for (std::size_t i = 0; i < read_cache::max_templates + 10; ++i) server_read(1, t0, key_tuple{std::to_string(i)});
    EXPECT_EQ(cache.templates(), read_cache::max_templates);
    EXPECT_EQ(cache.evictions(), 10u);
    for (std::size_t i = 0; i < read_cache::max_keys + 5; ++i)
        cache.on_exhausted(rule, key_tuple{"k" + std::to_string(i)}, 0, t0);
    EXPECT_EQ(cache.keys(), read_cache::max_keys);
    EXPECT_GE(cache.evictions(), 15u);
}

TEST_F(read_cache_test, a_template_too_large_is_not_kept) {
    auto big = std::make_shared<protocol::counter_reply>(*reply());
    big->row_after.resize(read_cache::max_template_bytes);
    auto l = cache.find(rule, key, shape, ttl, t0);
    cache.store(rule, key, shape, big, 5, l.generation, t0);
    EXPECT_EQ(cache.templates(), 0u);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0).what, outcome::miss);  // the value alone answers nothing
}

// read_cache_sold_out (issue 20): after a sale every attempt still reads the sold-out key; its
// refreshes back off from the TTL, doubling each time the server says it is still sold out, up to
// the rule's bound, so a herd on a sold-out key costs the database a few reads, not one per TTL.
struct sold_out_test : read_cache_test {
    const sold_out_backoff backoff{400ms, 0};

    // A refresh due at `at` (and not before): the server says `value`.
    void refresh_due_at(read_cache::clock::time_point at, std::int64_t value) {
        EXPECT_EQ(cache.find(rule, key, shape, ttl, at - 1ms, true, read_cache::max_refresh_wait, backoff).what,
                  outcome::hit);
        auto l = cache.find(rule, key, shape, ttl, at, true, read_cache::max_refresh_wait, backoff);
        ASSERT_EQ(l.what, outcome::refresh);
        cache.store(rule, key, shape, reply(), value, l.generation, at, backoff);
    }
    void read_sold_out(read_cache::clock::time_point at) {
        auto l = cache.find(rule, key, shape, ttl, at, true, read_cache::max_refresh_wait, backoff);
        EXPECT_NE(l.what, outcome::hit);
        cache.store(rule, key, shape, reply(), 0, l.generation, at, backoff);
    }
};

TEST_F(sold_out_test, refreshes_back_off_from_the_ttl_doubling_to_the_bound) {
    read_sold_out(t0);  // first seen sold out: kept for the TTL
    refresh_due_at(t0 + 50ms, 0);
    refresh_due_at(t0 + 150ms, 0);   // still sold out: 100ms
    refresh_due_at(t0 + 350ms, 0);   // 200ms
    refresh_due_at(t0 + 750ms, 0);   // 400ms: the bound
    refresh_due_at(t0 + 1150ms, 0);  // and never more
    refresh_due_at(t0 + 1550ms, 0);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 1551ms, true, read_cache::max_refresh_wait, backoff).value, 0);
    // The bound a rule may set is far beyond the doublings that reach it.
    EXPECT_EQ(read_cache::sold_out_age(1ms, {60s, 0}, 1000), 60s);
    EXPECT_EQ(read_cache::sold_out_age(50ms, {}, 10), 50ms) << "no bound: no backoff";
}

TEST_F(sold_out_test, a_key_with_stock_is_refreshed_every_ttl) {
    read_sold_out(t0);
    refresh_due_at(t0 + 50ms, 0);
    refresh_due_at(t0 + 150ms, 3);  // stock came back (another sidecar's give-back, a direct restock)
    refresh_due_at(t0 + 200ms, 3);
    refresh_due_at(t0 + 250ms, 0);  // sold out again: the backoff starts over at the TTL
    refresh_due_at(t0 + 300ms, 0);
    refresh_due_at(t0 + 400ms, 0);
}

TEST_F(sold_out_test, without_the_option_a_sold_out_key_is_refreshed_every_ttl) {
    for (auto at = t0; at < t0 + 300ms; at += 50ms) {
        auto l = cache.find(rule, key, shape, ttl, at);
        ASSERT_NE(l.what, outcome::hit);
        EXPECT_EQ(cache.find(rule, key, shape, ttl, at - 1ms).what, at == t0 ? outcome::miss : outcome::hit);
        cache.store(rule, key, shape, reply(), 0, l.generation, at);
        cache.end_refresh(rule, key);
    }
}

TEST_F(sold_out_test, a_floor_other_than_zero) {
    const sold_out_backoff below{400ms, -2};
    for (auto at : {t0, t0 + 50ms, t0 + 150ms}) {
        auto l = cache.find(rule, key, shape, ttl, at, true, read_cache::max_refresh_wait, below);
        ASSERT_NE(l.what, outcome::hit);
        cache.store(rule, key, shape, reply(), -2, l.generation, at, below);
    }
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 349ms, true, read_cache::max_refresh_wait, below).what,
              outcome::hit);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 350ms, true, read_cache::max_refresh_wait, below).what,
              outcome::refresh);
    // 0 is above the floor -2: stock, refreshed every TTL.
    cache.end_refresh(rule, key);
    cache.invalidate(rule, key);
    auto l = cache.find(rule, key, shape, ttl, t0 + 400ms, true, read_cache::max_refresh_wait, below);
    cache.store(rule, key, shape, reply(), 0, l.generation, t0 + 400ms, below);
    EXPECT_EQ(cache.find(rule, key, shape, ttl, t0 + 450ms, true, read_cache::max_refresh_wait, below).what,
              outcome::refresh);
}

// What this sidecar sees that may raise the counter starts the backoff over: its next read asks the
// server at once, and a key still sold out is kept for the TTL again.
TEST_F(sold_out_test, a_restock_or_give_back_this_sidecar_sees_starts_over) {
    const auto backed_off = [&](read_cache::clock::time_point from) {
        cache.invalidate(rule, key);  // each case from a fresh start
        read_sold_out(from);
        refresh_due_at(from + 50ms, 0);
        refresh_due_at(from + 150ms, 0);  // now kept 200ms
    };
    const auto starts_over = [&](read_cache::clock::time_point at) {
        EXPECT_EQ(cache.find(rule, key, shape, ttl, at, true, read_cache::max_refresh_wait, backoff).what,
                  outcome::refresh);
        cache.end_refresh(rule, key);
        read_sold_out(at);  // the row is still at the floor (the units were taken again)
        refresh_due_at(at + 50ms, 0);
    };
    backed_off(t0);
    cache.invalidate(rule, key);  // a restock or give-back forwarded, a reserve give-back, a trusted write
    starts_over(t0 + 160ms);
    auto t1 = t0 + 1s;
    backed_off(t1);
    cache.invalidate_rule(rule);  // a trusted write of every key
    starts_over(t1 + 160ms);
    // A refused take says sold out again: fresh, but no reason to start over.
    auto t2 = t0 + 2s;
    backed_off(t2);
    cache.on_exhausted(rule, key, 0, t2 + 160ms);
    refresh_due_at(t2 + 350ms, 0);  // the template's age, still 200ms (the TTL would have said 210ms)
    refresh_due_at(t2 + 750ms, 0);  // and on to the bound
}

// A sale that ends on this sidecar: its take, then a refusal (another sidecar took the last unit).
TEST_F(sold_out_test, a_sale_that_ends_here_backs_off_from_the_ttl) {
    auto l = cache.find(rule, key, shape, ttl, t0, true, read_cache::max_refresh_wait, backoff);
    cache.store(rule, key, shape, reply(), 2, l.generation, t0, backoff);
    cache.on_take(rule, key, 1);
    cache.on_exhausted(rule, key, 0, t0 + 10ms);
    refresh_due_at(t0 + 50ms, 0);   // the template's TTL: the first refresh, sold out as known
    refresh_due_at(t0 + 150ms, 0);  // 100ms
    refresh_due_at(t0 + 350ms, 0);  // 200ms
}

// `claimguard explain` says whether a read may be answered by the sidecar, from the same
// read_cache_bypass() the session asks.
std::string explain_with_read_cache(std::string_view sql, bool observe = false, std::string_view more = "") {
    std::string text = test::read_coupon_yaml();
    EXPECT_TRUE(
        test::replace_once(text, "    units: 1 ", "    read_cache: 50ms\n" + std::string(more) + "    units: 1 "));
    if (observe) {
        EXPECT_TRUE(test::replace_once(text, "default_mode: enforce", "default_mode: observe"));
    }
    auto loaded = rules::load_rules({{"coupon.yaml", text}});
    EXPECT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : loaded.errors[0].message);
    if (!loaded.rules) return {};
    const rules::match::rule_index index(*loaded.rules);
    std::ostringstream out;
    explain(index, sql, {}, out);
    return out.str();
}

TEST(read_cache_explain, says_which_reads_the_sidecar_answers) {
    const std::pair<std::string_view, std::string_view> cases[] = {
        {"SELECT remain FROM coupon_stock WHERE campaign_id = 7",
         "read cache: answered by this sidecar while its copy is at most 50ms old"},
        {"SELECT remain FROM coupon_stock WHERE campaign_id = 7 FOR UPDATE",
         "read cache: sent to the server: a locking read"},
        {"SELECT remain, version FROM coupon_stock WHERE campaign_id = 7",
         "read cache: sent to the server: not a plain read"},
    };
    for (const auto& [sql, want] : cases) {
        const auto out = explain_with_read_cache(sql);
        EXPECT_NE(out.find(want), std::string::npos) << out;
    }
    const auto observed = explain_with_read_cache("SELECT remain FROM coupon_stock WHERE campaign_id = 7", true);
    EXPECT_NE(observed.find("read cache: sent to the server: observe mode"), std::string::npos) << observed;
    const auto sold_out = explain_with_read_cache("SELECT remain FROM coupon_stock WHERE campaign_id = 7", false,
                                                  "    read_cache_sold_out: 2s\n");
    EXPECT_NE(sold_out.find("at most 50ms old (2000ms once the key is sold out)"), std::string::npos) << sold_out;
}

}  // namespace
}  // namespace claimguard::engine
