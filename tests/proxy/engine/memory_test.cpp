// engine memory updates over whole sessions: units taken, given back (at most once), poisoned commits.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const key_tuple campaign_7 = {"7"};

// read 100 -> decrement succeeded -> claim answered with `outcome`: the units given back.
struct claim_case {
    const char* name;
    claim_outcome outcome;
    bool in_transaction;
    std::int64_t given_back;
};

void PrintTo(const claim_case& c, std::ostream* os) { *os << c.name; }

class claim_after_decrement : public ::testing::TestWithParam<claim_case> {};

TEST_P(claim_after_decrement, gives_back_exactly_the_unit_not_claimed) {
    const auto& c = GetParam();
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 100));
    s.absolute_decrement("7", 99, true, c.in_transaction);
    ASSERT_NE(s.entry(campaign_7), nullptr);
    EXPECT_EQ(s.entry(campaign_7)->units_taken, 1);
    EXPECT_EQ(s.entry(campaign_7)->last_read, 99);  // the app's own view after its write

    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, c.outcome, c.in_transaction), c.given_back);
    EXPECT_EQ(s.entry(campaign_7)->units_taken, 0);
    EXPECT_FALSE(s.memory.transaction_poisoned);

    // Whatever happens to a second claim, the one unit taken is never given back again.
    const decision again = s.claim("42", "7");
    ASSERT_EQ(again.what, verdict::claim) << again.note;
    EXPECT_EQ(after_claim(s.memory, again, claim_outcome::duplicate, c.in_transaction), 0);
    EXPECT_EQ(after_claim(s.memory, again, claim_outcome::failed, c.in_transaction), 0);
}

const claim_case claim_cases[] = {
    {"inserted", claim_outcome::inserted, false, 0},
    {"duplicate", claim_outcome::duplicate, false, 1},
    {"failed", claim_outcome::failed, false, 1},
    {"inserted_in_transaction", claim_outcome::inserted, true, 0},
    {"duplicate_in_transaction", claim_outcome::duplicate, true, 1},
    {"failed_in_transaction", claim_outcome::failed, true, 1},
};

INSTANTIATE_TEST_SUITE_P(engine, claim_after_decrement, ::testing::ValuesIn(claim_cases),
                         [](const ::testing::TestParamInfo<claim_case>& info) { return std::string(info.param.name); });

TEST(engine_memory, claim_without_a_decrement_gives_nothing_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::duplicate, false), 0);
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::failed, false), 0);
}

TEST(engine_memory, refusal_is_answered_once) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 1));
    s.absolute_decrement("7", 0, false, false);
    ASSERT_NE(s.entry(campaign_7), nullptr);
    EXPECT_TRUE(s.entry(campaign_7)->refused);
    EXPECT_EQ(s.entry(campaign_7)->units_taken, 0);

    EXPECT_EQ(s.claim("42", "7").what, verdict::exhausted);
    EXPECT_FALSE(s.entry(campaign_7)->refused);  // used up by the exhausted answer
    EXPECT_EQ(s.claim("42", "7").what, verdict::claim);
}

TEST(engine_memory, new_read_clears_a_refusal) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 1));
    s.absolute_decrement("7", 0, false, false);
    ASSERT_NO_FATAL_FAILURE(s.read("7", 5));
    EXPECT_EQ(s.claim("42", "7").what, verdict::claim);
}

TEST(engine_memory, observe_mode_does_not_use_up_a_refusal) {
    session s(variant_id::observe);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 1));
    s.absolute_decrement("7", 0, false, false);
    for (int i = 0; i < 2; ++i) {
        const decision d = s.claim("42", "7");
        EXPECT_EQ(d.what, verdict::exhausted) << "attempt " << i;
        EXPECT_TRUE(d.observe);
    }
    EXPECT_TRUE(s.entry(campaign_7)->refused);
}

TEST(engine_memory, strict_rule_allows_one_claim_per_unit) {
    session s(variant_id::strict);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 100));
    s.absolute_decrement("7", 99, true, false);
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::inserted, false), 0);
    EXPECT_EQ(s.claim("43", "7").what, verdict::exhausted);
}

TEST(engine_memory, relative_decrement_succeeded_then_claim_duplicate) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const decision dec = s.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = '7'");
    ASSERT_EQ(dec.what, verdict::decrement) << dec.note;
    after_decrement(s.memory, dec, true, false);
    ASSERT_NE(s.entry(campaign_7), nullptr);
    EXPECT_FALSE(s.entry(campaign_7)->last_read.has_value());  // never read: nothing invented
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::duplicate, false), 1);
}

TEST(engine_memory, insert_first_then_refused_decrement_poisons_the_commit) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    EXPECT_EQ(s.run("BEGIN").what, verdict::forward);
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::inserted, true), 0);
    ASSERT_NE(s.entry(campaign_7), nullptr);
    EXPECT_EQ(s.entry(campaign_7)->claims_ahead, 1);

    const decision dec = s.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7");
    ASSERT_EQ(dec.what, verdict::decrement) << dec.note;
    after_decrement(s.memory, dec, false, true);
    EXPECT_TRUE(s.memory.transaction_poisoned);
    EXPECT_EQ(s.memory.poisoned_rule, "coupon_stock");

    const decision commit = s.run("COMMIT");
    EXPECT_EQ(commit.what, verdict::rollback_instead) << commit.note;
    after_transaction_end(s.memory);
    EXPECT_FALSE(s.memory.transaction_poisoned);
    EXPECT_EQ(s.memory.size(), 0u);
    EXPECT_EQ(s.run("COMMIT").what, verdict::forward);
}

TEST(engine_memory, refused_decrement_without_insert_first_does_not_poison) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 1));
    s.absolute_decrement("7", 0, false, true);
    EXPECT_FALSE(s.memory.transaction_poisoned);
    EXPECT_EQ(s.run("COMMIT").what, verdict::forward);
}

TEST(engine_memory, insert_first_then_decrement_backs_the_claim) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::inserted, true), 0);

    const decision dec = s.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1");
    ASSERT_EQ(dec.what, verdict::track_decrement) << dec.note;
    after_decrement(s.memory, dec, true, true);
    EXPECT_EQ(s.entry(campaign_7)->claims_ahead, 0);
    EXPECT_EQ(s.entry(campaign_7)->units_taken, 0);  // the unit backs the claim already in
    EXPECT_FALSE(s.memory.transaction_poisoned);

    // A later duplicate claim took no unit of its own: nothing goes back.
    const decision dup = s.claim("42", "7");
    ASSERT_EQ(dup.what, verdict::claim) << dup.note;
    EXPECT_EQ(after_claim(s.memory, dup, claim_outcome::duplicate, true), 0);
    EXPECT_EQ(s.run("COMMIT").what, verdict::forward);
}

TEST(engine_memory, insert_first_outside_a_transaction_is_not_counted_ahead) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::inserted, false), 0);
    const auto* e = s.entry(campaign_7);
    EXPECT_TRUE(e == nullptr || e->claims_ahead == 0);
}

TEST(engine_memory, claim_is_backed_only_by_a_unit_this_session_took) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const decision first = s.claim("42", "7");
    ASSERT_EQ(first.what, verdict::claim) << first.note;
    EXPECT_FALSE(claim_backed(s.memory, first));  // insert first: nothing taken yet

    ASSERT_NO_FATAL_FAILURE(s.read("7", 100));
    EXPECT_FALSE(claim_backed(s.memory, first));  // a read alone takes nothing
    s.absolute_decrement("7", 99, true, false);
    const decision d = s.claim("42", "7");
    ASSERT_EQ(d.what, verdict::claim) << d.note;
    EXPECT_TRUE(claim_backed(s.memory, d));
    EXPECT_EQ(after_claim(s.memory, d, claim_outcome::inserted, false), 0);
    EXPECT_FALSE(claim_backed(s.memory, d));  // the unit is used up by that claim
}

// Autocommit, insert first, twice on one connection: the decrement after the first claim is that
// claim's unit, so the second claim is not taken for a backed one (it is inserted first too).
TEST(engine_memory, autocommit_insert_first_every_time_is_never_backed) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    for (int round = 0; round < 3; ++round) {
        const decision c = s.claim(std::to_string(40 + round), "7");
        ASSERT_EQ(c.what, verdict::claim) << c.note;
        EXPECT_FALSE(claim_backed(s.memory, c)) << "round " << round;
        EXPECT_EQ(after_claim(s.memory, c, claim_outcome::inserted, false), 0);
        ASSERT_NO_FATAL_FAILURE(s.read("7", 100 - round));
        s.absolute_decrement("7", 99 - round, true, false);
        EXPECT_EQ(s.entry(campaign_7)->units_taken, 0) << "round " << round;
    }
}

TEST(engine_memory, transaction_end_resets_everything) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 100));
    s.absolute_decrement("7", 99, true, true);
    after_transaction_end(s.memory);
    EXPECT_EQ(s.memory.size(), 0u);
    // The read is forgotten: the next absolute write is not taken as a decrement.
    const decision d = s.run("UPDATE coupon_stock SET remain = 98 WHERE campaign_id = 7");
    EXPECT_EQ(d.what, verdict::forward);
    EXPECT_TRUE(d.untracked);
}

TEST(engine_memory, restock_sets_the_read_value) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(s.read("7", 10));
    const decision up = s.run("UPDATE coupon_stock SET remain = 50 WHERE campaign_id = 7");
    ASSERT_EQ(up.what, verdict::restock) << up.note;
    after_restock(s.memory, up, true);
    EXPECT_EQ(s.entry(campaign_7)->last_read, 50);
    const decision down = s.run("UPDATE coupon_stock SET remain = 49 WHERE campaign_id = 7");
    EXPECT_EQ(down.what, verdict::decrement);
    EXPECT_EQ(down.units, 1);
}

TEST(engine_memory, memory_is_bounded) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    for (std::size_t i = 0; i < session_memory::max_entries + 10; ++i) {
        auto d = s.run("SELECT remain FROM coupon_stock WHERE campaign_id = " + std::to_string(i));
        ASSERT_EQ(d.what, verdict::remember_read);
        after_read(s.memory, d, 5);
    }
    EXPECT_EQ(s.memory.size(), session_memory::max_entries);
}

}  // namespace
}  // namespace claimguard::engine::test
