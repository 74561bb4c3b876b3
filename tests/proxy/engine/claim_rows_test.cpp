// A claim INSERT of several rows (Connector/J rewriteBatchedStatements, PyMySQL executemany):
// one claim per row, each with its own take, with scripted database replies. Reproducer P13:
// `INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)` was refused
// (multi_row_insert).
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

const std::string take_sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ";

std::string give_back(std::string_view key, int units) {
    return "UPDATE `coupon_stock` SET `remain` = `remain` + " + std::to_string(units) +
           ", `version` = `version` + 1 WHERE `campaign_id` = " + std::string(key);
}

std::size_t count(const trace& t, event e) { return std::count(t.events.begin(), t.events.end(), e); }

// The app's decrements, each answered with one row taken.
void take(session& s, std::string_view key, int times, std::uint16_t status = autocommit) {
    for (int i = 0; i < times; ++i) {
        auto t = s.exec(take_sql + std::string(key), {ok_rows(1, status)}, status);
        ASSERT_TRUE(t.has(event::took)) << t.d.note;
    }
}

// P13: two rows, two takes: the statement goes as written, each row uses its take, the server's
// reply (2 rows) is the app's answer.
TEST(claim_rows, each_row_uses_its_take) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {ok_rows(2)});
    ASSERT_EQ(t.d.what, verdict::claim) << t.d.note;
    EXPECT_EQ(t.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_EQ(count(t, event::claim_inserted), 2u);
    EXPECT_FALSE(t.has(event::claim_unbacked));
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);
}

// Rows of different stock keys each find their own key's take.
TEST(claim_rows, rows_of_different_keys) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 1));
    ASSERT_NO_FATAL_FAILURE(take(s, "2", 2));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 2), (1, 1), (2, 2)", {ok_rows(3)});
    EXPECT_EQ(count(t, event::claim_inserted), 3u);
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"2"}), 0u);
}

// One row has no take behind it (its decrement was refused or never came): the statement would issue
// a claim without stock. Answered sold out as a whole, nothing sent; the other row's take waits on.
TEST(claim_rows, a_row_without_a_take_blocks_the_statement) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 1));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {});
    EXPECT_TRUE(t.sent().empty());
    EXPECT_TRUE(t.has(event::blocked));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 1u);
    // The app retries with the one row it has stock for: it goes in with that take.
    auto one = s.exec(s.claim_sql("1", "1"), {ok_rows(1)});
    EXPECT_TRUE(one.has(event::claim_inserted));
    EXPECT_FALSE(one.has(event::claim_unbacked));
}

// A plain INSERT with a duplicate row fails as a whole (ERR 1062): every row's unit goes back, one
// give-back per stock key, and the app hears the claim rule's duplicate answer.
TEST(claim_rows, duplicate_gives_every_rows_unit_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    ASSERT_NO_FATAL_FAILURE(take(s, "2", 1));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 2), (3, 1)",
                    {error_reply(1062), ok_rows(1), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back("1", 2), give_back("2", 1)}));
    EXPECT_EQ(count(t, event::duplicate_db), 1u);
    EXPECT_EQ(count(t, event::compensated), 2u);
    EXPECT_FALSE(t.has(event::claim_inserted));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"2"}), 0u);
}

// INSERT IGNORE skips the duplicate rows: the server's OK says how many went in; the skipped rows'
// units go back and the server's reply stands.
TEST(claim_rows, insert_ignore_gives_back_the_skipped_rows) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 3));
    auto t = s.exec("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1), (3, 1)",
                    {ok_rows(2), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back("1", 1)}));
    EXPECT_EQ(count(t, event::claim_inserted), 2u);
    EXPECT_EQ(count(t, event::duplicate_db), 1u);
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);
}

// Another error (not a duplicate) also fails the whole statement: the units go back, the server's
// error stands.
TEST(claim_rows, other_error_gives_back_and_relays_the_error) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)",
                    {error_reply(1048), ok_rows(1)});
    EXPECT_EQ(t.sent(), (std::vector<std::string>{"<statement>", give_back("1", 2)}));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

// In a transaction the rows may come before their decrements: each is a claim ahead, and the COMMIT
// stands only when every one of them got its decrement.
TEST(claim_rows, rows_ahead_in_a_transaction_need_a_decrement_each) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {ok_rows(2, in_trans)},
                    in_trans);
    EXPECT_EQ(count(t, event::claim_ahead), 2u);
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 1, in_trans));
    auto commit = s.exec("COMMIT", {ok_rows(0)}, in_trans);
    EXPECT_EQ(commit.d.what, verdict::rollback_instead) << "one row has no decrement";
    (void)s.end(false);

    auto again = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {ok_rows(2, in_trans)},
                        in_trans);
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2, in_trans));
    auto good = s.exec("COMMIT", {}, in_trans);
    EXPECT_EQ(good.d.what, verdict::forward);
}

// A duplicate in a transaction: the rows' units go back inside it (a rollback undoes that with the
// takes). An error that ended the transaction (a deadlock) took the takes with it: nothing is sent.
TEST(claim_rows, errors_in_a_transaction) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2, in_trans));
    auto dup = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)",
                      {error_reply(1062, in_trans), ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(dup.sent(), (std::vector<std::string>{"<statement>", give_back("1", 2)}));
    ASSERT_NE(s.entry({"1"}), nullptr);
    EXPECT_EQ(s.entry({"1"})->credits.size(), 2u);  // the app's own give-backs are absorbed
    (void)s.end(false);

    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2, in_trans));
    auto deadlock = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)",
                           {error_reply(1213, autocommit)}, in_trans);
    EXPECT_EQ(deadlock.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_FALSE(deadlock.has(event::compensated));
}

// The Redis first filter row by row: each row's key is asked for, then the statement goes.
TEST(claim_rows, redis_key_per_row) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {ok_rows(2)}, autocommit,
                    resolve_literal, redis_reply::acquired, true);
    ASSERT_EQ(t.actions.size(), 4u);  // two keys, the statement, the server's reply
    EXPECT_EQ(t.actions[0].type, action::kind::redis_acquire);
    EXPECT_EQ(t.actions[0].redis_key, "lock:coupon:1:1");
    EXPECT_EQ(t.actions[1].redis_key, "lock:coupon:2:1");
    EXPECT_EQ(t.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_EQ(count(t, event::claim_inserted), 2u);
}

// Redis says a row is claimed already: a plain INSERT would fail whole, so it is answered "already
// claimed" without the database and every row's unit goes back.
TEST(claim_rows, redis_duplicate_row_answers_without_the_database) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {ok_rows(1)}, autocommit,
                    resolve_literal, redis_reply::held, true);
    EXPECT_EQ(t.sent(), std::vector<std::string>{give_back("1", 2)});
    EXPECT_TRUE(t.has(event::duplicate_redis));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: already claimed");
    // INSERT IGNORE: the server skips such a row; the statement goes and its affected rows decide.
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto ignore = s.exec("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)",
                         {ok_rows(1), ok_rows(1)}, autocommit, resolve_literal, redis_reply::held, true);
    EXPECT_EQ(ignore.sent(), (std::vector<std::string>{"<statement>", give_back("1", 1)}));
}

// Observe mode: relayed as written; the memory follows what enforce would do.
TEST(claim_rows, observe_mode_relays) {
    session s(variant_id::observe);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)", {});
    EXPECT_EQ(t.last().type, action::kind::relay);
    EXPECT_TRUE(t.has(event::would_block));
}

// A COM_STMT_BULK_EXECUTE of a prepared claim INSERT (Connector/C array binding, Connector/J
// useBulkStmts) is the claim INSERT of several rows it means: one claim per row of values, each with
// its own take; the bulk goes once, as the app sent it. It was refused (bulk_execute) before.
const std::string bulk_claim = "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)";

// Which of the bulk's values the give-backs a trace sent bind.
std::vector<std::uint32_t> bulk_give_back_values(const trace& t) {
    std::vector<std::uint32_t> out;
    for (const auto& a : t.actions)
        if (a.type == action::kind::send_sql) out.insert(out.end(), a.sql.parameters.begin(), a.sql.parameters.end());
    return out;
}

TEST(claim_rows, bulk_rows_each_use_their_take) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    ASSERT_NO_FATAL_FAILURE(take(s, "2", 1));
    auto t = s.exec_bulk(bulk_claim, {{1, 1}, {2, 2}, {3, 1}}, {ok_rows(3)});
    ASSERT_EQ(t.d.what, verdict::claim) << t.d.note;
    ASSERT_EQ(t.d.rows.size(), 3u);
    EXPECT_EQ(t.d.rows[1].key, (key_tuple{"2"}));
    EXPECT_EQ(t.d.rows[2].idempotency, (key_tuple{"3", "1"}));
    EXPECT_EQ(t.sent(), std::vector<std::string>{"<statement>"});
    EXPECT_EQ(t.last().type, action::kind::reply_client);  // the server's own OK: 3 rows
    EXPECT_EQ(count(t, event::claim_inserted), 3u);
    EXPECT_FALSE(t.has(event::claim_unbacked));
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"2"}), 0u);
}

// In autocommit with require_decrement, a row of values without a take makes the whole bulk the
// exhausted answer: nothing is sent, and the other rows' takes wait on.
TEST(claim_rows, bulk_row_without_a_take_is_the_exhausted_answer) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 1));
    auto t = s.exec_bulk(bulk_claim, {{1, 1}, {2, 1}}, {});
    EXPECT_TRUE(t.sent().empty());
    EXPECT_TRUE(t.has(event::blocked));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message, "claimguard: coupon_stock is sold out for this key");
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 1u);
}

// The server runs a bulk as one statement (measured on MariaDB 10.11): a duplicate row fails it whole,
// so every row's unit goes back and the app hears the duplicate answer. Under IGNORE the OK counts the
// rows that went in; the skipped rows' units go back.
TEST(claim_rows, bulk_duplicate_row_gives_every_rows_unit_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 3));
    auto dup = s.exec_bulk(bulk_claim, {{1, 1}, {2, 1}, {3, 1}}, {error_reply(1062), ok_rows(1)});
    // The give-back names the key as the bulk bound it: the first row's campaign_id, value 1 of the
    // values laid end to end (the session runs it with the bulk's values).
    EXPECT_EQ(dup.sent(), (std::vector<std::string>{"<statement>", give_back("?", 3)}));
    EXPECT_EQ(bulk_give_back_values(dup), (std::vector<std::uint32_t>{1}));
    EXPECT_EQ(count(dup, event::duplicate_db), 1u);
    EXPECT_FALSE(dup.has(event::claim_inserted));
    ASSERT_EQ(dup.last().type, action::kind::answer);
    EXPECT_EQ(dup.last().answer.message, "claimguard: already claimed");
    EXPECT_EQ(s.ledger().waiting_takes("coupon_stock", {"1"}), 0u);

    ASSERT_NO_FATAL_FAILURE(take(s, "1", 3));
    auto ignore = s.exec_bulk("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (?, ?)",
                              {{1, 1}, {2, 1}, {3, 1}}, {ok_rows(2), ok_rows(1)});
    EXPECT_EQ(ignore.sent(), (std::vector<std::string>{"<statement>", give_back("?", 1)}));
    EXPECT_EQ(bulk_give_back_values(ignore), (std::vector<std::uint32_t>{5}));  // the third row's campaign_id
    EXPECT_EQ(count(ignore, event::claim_inserted), 2u);
    EXPECT_EQ(ignore.last().type, action::kind::reply_client);
}

// Each row of values has its own Redis key; a key a committed claim holds answers the plain bulk
// "already claimed" without the database.
TEST(claim_rows, bulk_redis_key_per_row_of_values) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    ASSERT_NO_FATAL_FAILURE(take(s, "1", 2));
    auto t = s.exec_bulk(bulk_claim, {{1, 1}, {2, 1}}, {ok_rows(2)}, autocommit, redis_reply::acquired, true);
    ASSERT_EQ(t.actions.size(), 4u);
    EXPECT_EQ(t.actions[0].redis_key, "lock:coupon:1:1");
    EXPECT_EQ(t.actions[1].redis_key, "lock:coupon:2:1");
    EXPECT_EQ(count(t, event::claim_inserted), 2u);
}

// What the engine does not decide this way keeps the bulk_execute refusal: a bulk of a stock-table
// write, of a REPLACE, one without rows or past the row limit.
TEST(claim_rows, bulk_shapes_not_modelled) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    EXPECT_EQ(s.exec_bulk("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ?", {{1}}, {}).d.what,
              verdict::forward);
    EXPECT_EQ(s.exec_bulk("REPLACE INTO coupon_order (user_id, campaign_id) VALUES (?, ?)", {{1, 1}}, {}).d.what,
              verdict::forward);
    EXPECT_EQ(s.exec_bulk(bulk_claim, {}, {}).d.what, verdict::forward);
    const std::vector<std::vector<std::int64_t>> too_many(max_bulk_claim_rows + 1, {1, 1});
    EXPECT_EQ(s.exec_bulk(bulk_claim, too_many, {}).d.what, verdict::forward);
    // A row whose key is not a value (NULL or DEFAULT indicators reach the engine as unknown):
    // the claim INSERT of several rows' own refusal.
    EXPECT_TRUE(
        s.exec_bulk("INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, DEFAULT)", {{1}, {2}}, {}).d.unmodeled);
}

}  // namespace
}  // namespace claimguard::engine::test
