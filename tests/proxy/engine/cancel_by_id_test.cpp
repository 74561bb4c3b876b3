// A cancellation whose WHERE does not pin the stock key (DELETE ... WHERE id = ?, an ORM's delete of a
// row it loaded) under on_cancel: return_stock: the claim rows are read with their lock first, in the
// DELETE's transaction, and each stock key they name gets its rows' units back; the app's restock of
// any sum of those units after it is absorbed once.
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

using rows_t = std::vector<std::vector<std::optional<std::string>>>;

const std::string read_42 =
    "SELECT `campaign_id`, `user_id`, `campaign_id` FROM coupon_order WHERE id = 42 LIMIT 1001 FOR UPDATE";

std::string give_back(int units, int key) {
    return "UPDATE `coupon_stock` SET `remain` = `remain` + " + std::to_string(units) +
           ", `version` = `version` + 1 WHERE `campaign_id` = " + std::to_string(key);
}

reply_summary rows(rows_t values, std::uint16_t status = in_trans) {
    return reply_summary::result_rows(std::move(values), status);
}

std::string restock(int n, int key) {
    return "UPDATE coupon_stock SET remain = remain + " + std::to_string(n) +
           " WHERE campaign_id = " + std::to_string(key);
}

// The usual ORM delete: read (locked), DELETE, the give-back, all in our BEGIN ... COMMIT.
TEST(cancel_by_id, reads_the_row_then_gives_its_unit_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE id = 42", {ok_rows(0, in_trans), rows({{"1", "5", "1"}}),
                                                               ok_rows(1, in_trans), ok_rows(1, in_trans), ok_rows(0)});
    EXPECT_EQ(t.d.what, verdict::cancel) << t.d.note;
    EXPECT_FALSE(t.d.unmodeled);
    EXPECT_TRUE(t.d.read_claim_rows);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", read_42, "<statement>", give_back(1, 1), "COMMIT"}));
    EXPECT_TRUE(t.actions[1].read_rows);
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::ok);
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.last().status, autocommit);
    EXPECT_TRUE(t.has(event::cancelled_returned));
    // The app's restock right after is the same give-back: absorbed once.
    auto first = s.exec(restock(1, 1), {});
    EXPECT_TRUE(first.has(event::absorbed));
    EXPECT_TRUE(first.sent().empty());
    auto second = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(second.has(event::restocked));
}

// Rows of two stock keys: one give-back per key, of its rows' units; the restock of a key's sum
// (+ 2 for its two rows) is absorbed once, never more than its credits.
TEST(cancel_by_id, rows_of_two_keys_give_back_per_key) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE id IN (1, 2, 3)",
                    {ok_rows(0, in_trans), rows({{"1", "5", "1"}, {"2", "6", "2"}, {"1", "7", "1"}}),
                     ok_rows(3, in_trans), ok_rows(1, in_trans), ok_rows(1, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{
                            "BEGIN",
                            "SELECT `campaign_id`, `user_id`, `campaign_id` FROM coupon_order WHERE id IN (1, 2, 3) "
                            "LIMIT 1001 FOR UPDATE",
                            "<statement>", give_back(2, 1), give_back(1, 2), "COMMIT"}));
    EXPECT_EQ(t.last().ok_rows, 3u);
    auto both = s.exec(restock(2, 1), {});
    EXPECT_TRUE(both.has(event::absorbed));
    auto more = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(more.has(event::restocked));
    auto too_much = s.exec(restock(2, 2), {ok_rows(1)});  // key 2 has one credit: + 2 is a real restock
    EXPECT_TRUE(too_much.has(event::restocked));
    auto other = s.exec(restock(1, 2), {});
    EXPECT_TRUE(other.has(event::absorbed));
}

// An N-row cancellation then one restock of N: absorbed once, whole (the ledger's sum of credits).
TEST(cancel_by_id, restock_of_n_after_n_rows_absorbed_once) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("DELETE FROM coupon_order WHERE user_id = 5",
                 {ok_rows(0, in_trans), rows({{"1", "5", "1"}, {"1", "5", "1"}, {"1", "5", "1"}}), ok_rows(3, in_trans),
                  ok_rows(1, in_trans), ok_rows(0)});
    auto three = s.exec(restock(3, 1), {});
    EXPECT_TRUE(three.has(event::absorbed));
    auto again = s.exec(restock(3, 1), {ok_rows(1)});
    EXPECT_TRUE(again.has(event::restocked));
    auto one = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(one.has(event::restocked));
}

// The pinned-key path's credits add up too: a 2-row DELETE by stock key, then one + 2.
TEST(cancel_by_id, pinned_cancellation_restock_of_the_sum_absorbed) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("DELETE FROM coupon_order WHERE campaign_id = 1 AND created_at < '2026-01-01'",
                 {ok_rows(0, in_trans), ok_rows(2, in_trans), ok_rows(1, in_trans), ok_rows(0)});
    auto two = s.exec(restock(2, 1), {});
    EXPECT_TRUE(two.has(event::absorbed));
    auto one = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(one.has(event::restocked));
}

// Nothing read, nothing deleted: no give-back, nothing to absorb.
TEST(cancel_by_id, no_row_gives_nothing_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE id = 42",
                    {ok_rows(0, in_trans), rows({}), ok_rows(0, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", read_42, "<statement>", "COMMIT"}));
    EXPECT_EQ(t.last().ok_rows, 0u);
    EXPECT_TRUE(t.events.empty());
    auto r = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(r.has(event::restocked));
}

// The DELETE removed other rows than were read: never committed, the app gets an error.
TEST(cancel_by_id, rows_deleted_other_than_read_roll_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("DELETE FROM coupon_order WHERE id = 42",
                    {ok_rows(0, in_trans), rows({{"1", "5", "1"}}), ok_rows(2, in_trans), ok_rows(0)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"BEGIN", read_42, "<statement>", "ROLLBACK"}));
    EXPECT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::error);
    EXPECT_NE(t.last().answer.message.find("not the 1 read before it"), std::string::npos) << t.last().answer.message;
    EXPECT_NE(t.last().answer.message.find("the DELETE was rolled back"), std::string::npos);
    EXPECT_FALSE(t.has(event::cancelled_returned));
    auto r = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(r.has(event::restocked));
}

// A failure at each step rolls our transaction back; the app gets that step's error.
TEST(cancel_by_id, a_failure_at_each_step_rolls_back) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    const std::string del = "DELETE FROM coupon_order WHERE id = 42";
    auto read_fails = s.exec(del, {ok_rows(0, in_trans), error_reply(1205, in_trans), ok_rows(0)});
    EXPECT_EQ(read_fails.sent(), (std::vector<std::string>{"BEGIN", read_42, "ROLLBACK"}));
    EXPECT_EQ(read_fails.last().type, action::kind::reply_client);

    auto delete_fails =
        s.exec(del, {ok_rows(0, in_trans), rows({{"1", "5", "1"}}), error_reply(1205, in_trans), ok_rows(0)});
    EXPECT_EQ(delete_fails.sent(), (std::vector<std::string>{"BEGIN", read_42, "<statement>", "ROLLBACK"}));
    EXPECT_EQ(delete_fails.last().type, action::kind::reply_client);

    auto give_back_fails = s.exec(del, {ok_rows(0, in_trans), rows({{"1", "5", "1"}}), ok_rows(1, in_trans),
                                        error_reply(1205, in_trans), ok_rows(0)});
    EXPECT_EQ(give_back_fails.sent(),
              (std::vector<std::string>{"BEGIN", read_42, "<statement>", give_back(1, 1), "ROLLBACK"}));
    EXPECT_EQ(give_back_fails.last().type, action::kind::reply_client);

    auto commit_fails = s.exec(del, {ok_rows(0, in_trans), rows({{"1", "5", "1"}}), ok_rows(1, in_trans),
                                     ok_rows(1, in_trans), error_reply(1213)});
    EXPECT_EQ(commit_fails.sent(),
              (std::vector<std::string>{"BEGIN", read_42, "<statement>", give_back(1, 1), "COMMIT"}));
    EXPECT_EQ(commit_fails.last().type, action::kind::reply_client);
    for (const auto* t : {&read_fails, &delete_fails, &give_back_fails, &commit_fails})
        EXPECT_FALSE(t->has(event::cancelled_returned));
    auto r = s.exec(restock(1, 1), {ok_rows(1)});  // nothing was given back: nothing to absorb
    EXPECT_TRUE(r.has(event::restocked));

    // A row whose stock key is NULL: refused before the DELETE, nothing deleted.
    auto null_key = s.exec(del, {ok_rows(0, in_trans), rows({{std::nullopt, "5", std::nullopt}}), ok_rows(0)});
    EXPECT_EQ(null_key.sent(), (std::vector<std::string>{"BEGIN", read_42, "ROLLBACK"}));
    EXPECT_EQ(null_key.last().answer.type, rules::answer::kind::error);
    EXPECT_NE(null_key.last().answer.message.find("nothing was deleted"), std::string::npos);
}

// In the app's transaction: no BEGIN/COMMIT of ours; its restock later in it is absorbed, after its
// COMMIT too; its ROLLBACK leaves nothing to absorb.
TEST(cancel_by_id, in_the_apps_transaction) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    const std::string del = "DELETE FROM coupon_order WHERE id = 42";
    auto t = s.exec(del, {rows({{"1", "5", "1"}}), ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.sent(), (std::vector<std::string>{read_42, "<statement>", give_back(1, 1)}));
    EXPECT_EQ(t.last().ok_rows, 1u);
    EXPECT_EQ(t.last().status, in_trans);
    EXPECT_TRUE(t.has(event::cancelled_returned));
    auto in_it = s.exec(restock(1, 1), {}, in_trans);
    EXPECT_TRUE(in_it.has(event::absorbed));

    (void)s.exec(del, {rows({{"2", "5", "2"}, {"2", "6", "2"}}), ok_rows(2, in_trans), ok_rows(1, in_trans)}, in_trans);
    s.end(true);
    auto after_commit = s.exec(restock(2, 2), {});
    EXPECT_TRUE(after_commit.has(event::absorbed));

    (void)s.exec(del, {rows({{"1", "5", "1"}}), ok_rows(1, in_trans), ok_rows(1, in_trans)}, in_trans);
    s.end(false);
    auto after_rollback = s.exec(restock(1, 1), {ok_rows(1)});
    EXPECT_TRUE(after_rollback.has(event::restocked));

    // Other rows deleted than read, in the app's transaction: an error telling it to roll back.
    auto odd = s.exec(del, {rows({{"1", "5", "1"}}), ok_rows(0, in_trans)}, in_trans);
    EXPECT_EQ(odd.last().answer.type, rules::answer::kind::error);
    EXPECT_NE(odd.last().answer.message.find("roll the transaction back"), std::string::npos);
}

// A prepared DELETE: the read binds the execute's values as the DELETE does.
TEST(cancel_by_id, prepared_delete_binds_the_read) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t =
        s.exec("DELETE FROM coupon_order WHERE id = ?",
               {ok_rows(0, in_trans), rows({{"3", "5", "3"}}), ok_rows(1, in_trans), ok_rows(1, in_trans), ok_rows(0)},
               autocommit, bound_integers({42}));
    ASSERT_EQ(t.sent().size(), 5u);
    EXPECT_EQ(t.sent()[1],
              "SELECT `campaign_id`, `user_id`, `campaign_id` FROM coupon_order WHERE id = ? LIMIT 1001 FOR UPDATE");
    ASSERT_EQ(t.actions[1].sql.parameters.size(), 1u);
    EXPECT_EQ(t.actions[1].sql.parameters[0], 0u);
    EXPECT_EQ(t.sent()[3], give_back(1, 3));
    EXPECT_TRUE(t.has(event::cancelled_returned));
}

// More rows than claimguard reads for one DELETE: the rule's unmodeled policy (refuse: nothing deleted).
TEST(cancel_by_id, over_the_row_limit_gets_the_unmodeled_policy) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    rows_t many(max_cancel_rows + 1, {std::string("1"), std::string("5"), std::string("1")});
    auto t = s.exec("DELETE FROM coupon_order WHERE user_id > 0", {ok_rows(0, in_trans), rows(many), ok_rows(0)});
    ASSERT_EQ(t.sent().size(), 3u);
    EXPECT_EQ(t.sent()[2], "ROLLBACK");
    EXPECT_EQ(t.last().answer.type, rules::answer::kind::error);
    EXPECT_NE(t.last().answer.message.find("more than 1000 claim rows"), std::string::npos);
    EXPECT_TRUE(t.has(event::unmodeled_refused));
    EXPECT_EQ(t.d.reason, "cancel_rows_over_limit");
}

// Still refused (cancel_without_stock_key): ORDER BY / LIMIT (the rows read need not be those deleted).
// A DELETE the parser does not read (several tables) is unmodeled as before.
TEST(cancel_by_id, still_refused_where_the_rows_cannot_be_read) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto limited = s.exec("DELETE FROM coupon_order WHERE user_id = 5 ORDER BY id LIMIT 1", {});
    EXPECT_EQ(limited.d.what, verdict::refuse);
    EXPECT_EQ(limited.d.reason, "cancel_without_stock_key");
    EXPECT_TRUE(limited.has(event::unmodeled_refused));
    auto joined = s.exec("DELETE o FROM coupon_order o JOIN users u ON u.id = o.user_id WHERE u.id = 5", {});
    EXPECT_EQ(joined.d.what, verdict::refuse);
    EXPECT_TRUE(joined.d.unmodeled);
}

// A row read: its stock key as decide() keys the stock row, the literal for the give-back, the Redis key.
TEST(cancel_by_id, claim_row_of_a_read_row) {
    session s(variant_id::return_stock);
    ASSERT_TRUE(s.ready()) << s.error();
    auto d = s.run("DELETE FROM coupon_order WHERE id = 42");
    ASSERT_TRUE(d.read_claim_rows);
    EXPECT_TRUE(d.redis_key.empty());
    std::vector<std::optional<std::string>> values{"7", "5", "7"};
    auto row = claim_row_of(d, values);
    ASSERT_TRUE(row);
    EXPECT_EQ(row->key, key_tuple{"7"});
    ASSERT_EQ(row->key_literals.size(), 1u);
    EXPECT_TRUE(row->key_literals[0].integer);
    EXPECT_EQ(row->redis_key, "lock:coupon:5:7");
    std::vector<std::optional<std::string>> text{"007", "5", "007"};  // a string key keeps its bytes
    auto t = claim_row_of(d, text);
    ASSERT_TRUE(t);
    EXPECT_FALSE(t->key_literals[0].integer);
    EXPECT_EQ(t->key_literals[0].value, "007");
    std::vector<std::optional<std::string>> short_row{"7", "5"};
    EXPECT_FALSE(claim_row_of(d, short_row));
}

TEST(take_ledger_test, restock_of_a_sum_of_credits_used_once) {
    take_ledger ledger;
    for (int i = 0; i < 3; ++i) ledger.add_credit("r", {"1"}, 1, 7);
    EXPECT_FALSE(ledger.use_credit("r", {"1"}, 4, 7));  // more than the credits: none used
    EXPECT_TRUE(ledger.use_credit("r", {"1"}, 3, 8));   // another connection of the pool
    EXPECT_FALSE(ledger.use_credit("r", {"1"}, 1, 7));
}

}  // namespace
}  // namespace claimguard::engine::test
