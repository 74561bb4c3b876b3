// Issue 17's reproducers at the engine: every write of a protected table decided from evidence,
// nothing ambiguous taken silently (R6-R11 and the paths around them).
#include <gtest/gtest.h>

#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

// R6: the optimistic relative write loses its version race while stock is left: a conflict (the
// server's 0 rows stand, the app retries), never "sold out".
TEST(silent_paths, r6_relative_version_conflict_is_not_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 77 AND version = 0",
        {ok_rows(0), counter_row(99)});
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(t.sent()[1], "SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 77");
    EXPECT_EQ(t.last().type, action::kind::reply_client);
    EXPECT_TRUE(t.has(event::conflict));
    EXPECT_FALSE(t.has(event::exhausted));
}

TEST(silent_paths, r6_relative_version_write_when_sold_out_is_sold_out) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec(
        "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 77 AND version = 0",
        {ok_rows(0), counter_row(0)});
    EXPECT_TRUE(t.has(event::exhausted));
    EXPECT_EQ(t.last().type, action::kind::answer);
}

// R7: an absolute write with no read behind it takes only if it lowers the counter; at or above it
// (a restock through the app's account, or a stale write) it is refused, never "sold out".
TEST(silent_paths, r7_absolute_write_above_the_counter_is_refused) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 150 WHERE campaign_id = 77", {ok_rows(0), counter_row(99)});
    ASSERT_EQ(t.sent().size(), 2u);
    EXPECT_EQ(t.sent()[0],
              "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 77 AND "
              "remain >= 1 AND remain > 150");
    EXPECT_TRUE(t.has(event::not_lower));
    EXPECT_FALSE(t.has(event::exhausted));
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_NE(t.last().answer.message.find("not a take"), std::string::npos) << t.last().answer.message;
}

TEST(silent_paths, r7_absolute_write_below_the_counter_takes) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = 98 WHERE campaign_id = 77", {ok_rows(1)});
    EXPECT_TRUE(t.has(event::took));
    EXPECT_EQ(t.last().type, action::kind::reply_client);
}

// A bound absolute value keeps its placeholder in the added condition.
TEST(silent_paths, r7_prepared_absolute_write_compares_with_the_bound_value) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto t = s.exec("UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", {ok_rows(1)}, autocommit,
                    bound_integers({98, 77}));
    ASSERT_EQ(t.actions.front().type, action::kind::send_sql);
    EXPECT_EQ(t.actions.front().sql.sql,
              "UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = ? AND "
              "remain >= 1 AND remain > ?");
    EXPECT_EQ(
        std::vector<std::uint32_t>(t.actions.front().sql.parameters.begin(), t.actions.front().sql.parameters.end()),
        (std::vector<std::uint32_t>{1, 0}));
}

// R8: read 98, write 96: the app means two units and the rule says one: refused by default.
TEST(silent_paths, r8_amount_a_fresh_read_contradicts_is_refused) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    s.read("77", 98);
    auto t = s.exec("UPDATE coupon_stock SET remain = 96 WHERE campaign_id = 77", {});
    EXPECT_EQ(t.d.what, verdict::refuse);
    EXPECT_EQ(t.d.reason, "amount_mismatch");
    EXPECT_TRUE(t.sent().empty());
    ASSERT_EQ(t.last().type, action::kind::answer);
    EXPECT_EQ(t.last().answer.message.find("(unmodeled: refuse)"), std::string::npos);
}

// ... `amount_evidence: read` takes what the app meant.
TEST(silent_paths, r8_amount_evidence_read_takes_what_the_app_meant) {
    session s(variant_id::evidence_read);
    ASSERT_TRUE(s.ready()) << s.error();
    s.read("77", 98);
    auto t = s.exec("UPDATE coupon_stock SET remain = 96 WHERE campaign_id = 77", {ok_rows(1)});
    EXPECT_EQ(t.d.what, verdict::take);
    EXPECT_EQ(t.d.units, 2);
    ASSERT_FALSE(t.sent().empty());
    EXPECT_NE(t.sent()[0].find("remain = remain - 2"), std::string::npos) << t.sent()[0];
    EXPECT_NE(t.sent()[0].find("remain >= 2"), std::string::npos) << t.sent()[0];
}

// A read right before, at or below the written value: not a take (a restock after reading).
TEST(silent_paths, write_at_or_above_a_fresh_read_is_refused) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    s.read("77", 99);
    auto t = s.exec("UPDATE coupon_stock SET remain = 150 WHERE campaign_id = 77", {});
    EXPECT_EQ(t.d.what, verdict::refuse);
    EXPECT_EQ(t.d.reason, "absolute_not_lower");
}

// A read is evidence for the next command only (or within its transaction): a pool's earlier
// borrower's read does not contradict this write, which is decided by the database instead.
TEST(silent_paths, an_old_read_is_no_evidence) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    s.read("77", 100);
    (void)s.exec("SELECT 1", {});
    auto t = s.exec("UPDATE coupon_stock SET remain = 59 WHERE campaign_id = 77", {ok_rows(1)});
    EXPECT_EQ(t.d.what, verdict::take);
    EXPECT_TRUE(t.d.only_if_lower);
    EXPECT_TRUE(t.has(event::took));
}

TEST(silent_paths, a_read_in_the_same_transaction_is_evidence) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    (void)s.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 77 FOR UPDATE", {counter_row(50, in_trans)},
                 in_trans);
    (void)s.exec("SELECT 1", {}, in_trans);
    auto t = s.exec("UPDATE coupon_stock SET remain = 49 WHERE campaign_id = 77", {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(t.d.what, verdict::take);
    EXPECT_FALSE(t.d.only_if_lower);
}

// Issue 17 row 18: a decrement in a transaction that holds the key's row lock (a locking read of
// it) says so, and admission lets it through at once (a holder of the key's slot may wait for
// that lock). A plain read takes no lock; the next transaction holds none.
TEST(silent_paths, a_locking_read_in_the_transaction_marks_the_row_lock_held) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const char* take = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 77";
    (void)s.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 77", {counter_row(50, in_trans)}, in_trans);
    auto plain = s.exec(take, {ok_rows(1, in_trans)}, in_trans);
    EXPECT_EQ(plain.d.what, verdict::take);
    EXPECT_FALSE(plain.d.holds_row_lock);
    (void)s.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 77 LOCK IN SHARE MODE",
                 {counter_row(49, in_trans)}, in_trans);
    auto locked = s.exec(take, {ok_rows(1, in_trans)}, in_trans);
    EXPECT_TRUE(locked.d.holds_row_lock);
    auto other_key = s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 78",
                            {ok_rows(1, in_trans)}, in_trans);
    EXPECT_FALSE(other_key.d.holds_row_lock);
    (void)s.end(true);
    auto next = s.exec(take, {ok_rows(1)});
    EXPECT_FALSE(next.d.holds_row_lock);
    // A locking read in autocommit holds nothing after it.
    (void)s.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 77 FOR UPDATE", {counter_row(47)});
    EXPECT_FALSE(s.exec(take, {ok_rows(1)}).d.holds_row_lock);
}

// R10: a take undone by ROLLBACK TO SAVEPOINT leaves nothing in the ledger to back another
// connection's claim.
TEST(silent_paths, r10_savepoint_rollback_undoes_the_take) {
    take_ledger ledger;
    session a(variant_id::coupon, &ledger, 1), b(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.memory.set_savepoint("s", 0);
    auto t = a.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 77", {ok_rows(1, in_trans)}, in_trans);
    ASSERT_TRUE(t.has(event::took));
    std::vector<session_memory::returned_take> returned;
    ASSERT_TRUE(a.memory.rollback_to_savepoint("S", returned).has_value());  // names compare without case
    EXPECT_TRUE(returned.empty());
    (void)a.end(true);
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"77"}), 0u);
    auto claim = b.exec(b.claim_sql("50", "77"), {});
    EXPECT_TRUE(claim.has(event::blocked));  // no take behind it: exhausted, never inserted
}

// A claim of the transaction that borrowed a committed take from the ledger, undone by ROLLBACK TO:
// the take goes back to the ledger for the next claim.
TEST(silent_paths, savepoint_rollback_returns_a_borrowed_take) {
    take_ledger ledger;
    session a(variant_id::coupon, &ledger, 1), b(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    auto take = b.exec("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 77", {ok_rows(1)});
    ASSERT_TRUE(take.has(event::took));
    ASSERT_EQ(ledger.waiting_takes("coupon_stock", {"77"}), 1u);
    a.memory.set_savepoint("s", 0);
    auto claim = a.exec(a.claim_sql("50", "77"), {ok_rows(1, in_trans)}, in_trans);
    ASSERT_TRUE(claim.has(event::claim_inserted));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"77"}), 0u);
    std::vector<session_memory::returned_take> returned;
    ASSERT_TRUE(a.memory.rollback_to_savepoint("s", returned));
    ASSERT_EQ(returned.size(), 1u);
    EXPECT_EQ(returned[0].units, 1);
}

// Upserts of the stock row overwrite the counter: the rule's policy, audited, never forwarded silently.
TEST(silent_paths, stock_row_upserts_get_the_policy) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    for (const char* sql : {"REPLACE INTO coupon_stock (campaign_id, remain) VALUES (77, 99)",
                            "INSERT INTO coupon_stock (campaign_id, remain) VALUES (77, 99) ON DUPLICATE KEY UPDATE "
                            "remain = VALUES(remain)",
                            "UPDATE coupon_stock SET campaign_id = 78 WHERE campaign_id = 77"}) {
        auto d = s.run(sql);
        EXPECT_TRUE(d.unmodeled) << sql;
        EXPECT_EQ(d.what, verdict::refuse) << sql;
    }
    EXPECT_EQ(s.run("REPLACE INTO coupon_stock (campaign_id, remain) VALUES (77, 99)").reason, "stock_row_upsert");
    EXPECT_FALSE(s.run("INSERT INTO coupon_stock (campaign_id, remain) VALUES (78, 100)").unmodeled);  // a new row only
}

// Issue "Refuse less": INSERT ... SELECT claims and counters recomputed from a subquery get the
// policy under their own reason, with a note that says what to write instead.
TEST(silent_paths, insert_select_and_counter_from_subquery_get_the_policy_with_advice) {
    const char* insert_select =
        "INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id FROM coupon_stock WHERE remain > 0";
    const char* from_subquery =
        "UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 77) "
        "WHERE campaign_id = 77";
    for (const auto variant : {variant_id::coupon, variant_id::forward_unmodeled}) {
        session s(variant);
        ASSERT_TRUE(s.ready()) << s.error();
        const verdict expected = variant == variant_id::coupon ? verdict::refuse : verdict::forward;
        auto d = s.run(insert_select);
        EXPECT_TRUE(d.unmodeled);
        EXPECT_EQ(d.what, expected);
        EXPECT_EQ(d.reason, "insert_select");
        EXPECT_NE(d.note.find("then INSERT ... VALUES (...)"), std::string_view::npos) << d.note;
        d = s.run(from_subquery);
        EXPECT_TRUE(d.unmodeled);
        EXPECT_EQ(d.what, expected);
        EXPECT_EQ(d.reason, "counter_from_subquery");
        EXPECT_NE(d.note.find("relative change"), std::string_view::npos) << d.note;
    }
    // Near misses keep their verdicts: arithmetic without a subquery is an absolute write (a take).
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    EXPECT_FALSE(s.run("UPDATE coupon_stock SET remain = 100 - 3 WHERE campaign_id = 77").unmodeled);
    EXPECT_EQ(s.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id IN (SELECT 77)").reason,
              "unsupported_syntax");
}

// R11: SQL-level PREPARE of a write of a protected table gets the policy at PREPARE time.
TEST(silent_paths, r11_sql_prepare_of_a_write_gets_the_policy) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    auto d = s.run("PREPARE u FROM 'UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?'");
    EXPECT_TRUE(d.unmodeled);
    EXPECT_EQ(d.reason, "sql_prepare");
    EXPECT_EQ(d.what, verdict::refuse);
    EXPECT_FALSE(s.run("PREPARE r FROM 'SELECT remain FROM coupon_stock WHERE campaign_id = ?'").unmodeled);
    EXPECT_TRUE(s.run("SET @q = 'INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 77)'").unmodeled);
    EXPECT_FALSE(s.run("SET @q = 'hello'").unmodeled);
}

TEST(silent_paths, r11_execute_of_a_tracked_name_gets_the_policy) {
    const auto& env = env_for(variant_id::forward_unmodeled);
    ASSERT_TRUE(env.error.empty()) << env.error;
    static const std::vector<std::string> reached{"coupon_stock"};
    match::match_context ctx;
    ctx.sql_prepared = [](const void*, std::string_view name) -> const std::vector<std::string>* {
        return name == "u" ? &reached : nullptr;
    };
    const std::string sql = "EXECUTE `U` USING @r, @c";
    const auto st = rules::sql::parse(sql, {});
    const auto facts = match::match(st, *env.index, ctx);
    ASSERT_EQ(facts.facts.size(), 1u);
    const auto* u = std::get_if<match::unmodeled>(&facts.facts[0]);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->code, "sql_execute");
    session_memory memory;
    const auto d = decide(facts, *env.rules, resolve_literal, memory);
    EXPECT_EQ(d.what, verdict::forward);  // policy forward: forwarded, audited and counted
    EXPECT_TRUE(d.unmodeled);
    const std::string other = "EXECUTE v";
    EXPECT_TRUE(match::match(rules::sql::parse(other, {}), *env.index, ctx).facts.empty());
}

// XA: the boundaries are seen; a prepared XA transaction holding a claim without stock is refused.
TEST(silent_paths, xa_boundaries_are_seen) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const std::string sql = "XA ROLLBACK 'x'";
    const auto st = rules::sql::parse(sql, {});
    const auto facts = match::match(st, *env_for(variant_id::coupon).index);
    ASSERT_EQ(facts.facts.size(), 1u);
    const auto* b = std::get_if<match::transaction_boundary>(&facts.facts[0]);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->event, match::transaction_event::xa_rollback);
    s.memory.transaction_poisoned = true;
    s.memory.poisoned_rule = "coupon_stock";
    EXPECT_EQ(s.run("XA PREPARE 'x'").what, verdict::refuse);
}


// One database per tenant: the same campaign in two databases is two rows. A take in one backs no
// claim in the other, and a duplicate's give-back goes to the database the claim named.
TEST(silent_paths, keys_carry_their_database) {
    take_ledger ledger;
    session a(variant_id::coupon, &ledger, 1), b(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    a.memory.database = "tenant_a";
    b.memory.database = "tenant_b";
    auto take = a.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(1)});
    ASSERT_TRUE(take.has(event::took));
    EXPECT_EQ(take.d.key, (key_tuple{"7", "tenant_a"}));
    auto other = b.exec(b.claim_sql("1", "7"), {});
    EXPECT_TRUE(other.has(event::blocked));  // tenant_b has no take
    // Qualified names win over the default database: the take is tenant_a's whatever b's default is.
    auto qualified = b.exec("UPDATE tenant_a.coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(1)});
    EXPECT_EQ(qualified.d.key, (key_tuple{"7", "tenant_a"}));
    auto dup = b.exec("INSERT INTO tenant_a.coupon_order (user_id, campaign_id) VALUES (1, 7)",
                      {error_reply(1062), ok_rows(1)});
    ASSERT_TRUE(dup.has(event::compensated));
    EXPECT_EQ(dup.sent().back(),
              "UPDATE `tenant_a`.`coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE "
              "`campaign_id` = 7");
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"7", "tenant_a"}), 1u);  // a's take still waits for its claim
    EXPECT_EQ(a.run(a.claim_sql("42", "7")).redis_key, "lock:coupon:42:7:tenant_a");  // tenants' Redis keys differ
}


// Leaks visible in production: a take no claim used is reported by the sweep with its key even
// when the key is never touched again, and the units waiting are known per rule.
TEST(silent_paths, unclaimed_takes_are_reported_by_the_sweep) {
    take_ledger ledger;
    const auto t0 = take_ledger::clock::now();
    ledger.add_take("coupon_stock", {"7", "shop"}, 2, 11, t0);
    ledger.add_take("coupon_stock", {"8", "shop"}, 1, 12, t0 + std::chrono::seconds(30));
    EXPECT_EQ(ledger.waiting_units(), (std::map<std::string, std::int64_t>{{"coupon_stock", 3}}));
    EXPECT_TRUE(ledger.sweep(t0 + std::chrono::seconds(59)).empty());
    const auto dropped = ledger.sweep(t0 + take_ledger::take_lifetime + std::chrono::seconds(1));
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].key, (key_tuple{"7", "shop"}));
    EXPECT_EQ(dropped[0].units, 2);
    EXPECT_EQ(dropped[0].session, 11u);
    EXPECT_EQ(dropped[0].age, std::chrono::seconds(61));
    EXPECT_EQ(ledger.waiting_units(), (std::map<std::string, std::int64_t>{{"coupon_stock", 1}}));
    EXPECT_TRUE(ledger.sweep(t0 + std::chrono::seconds(62)).empty());  // reported once
}


// Each save in its own transaction (TypeORM): the take committed, then START TRANSACTION; the claim
// (a duplicate) gives the unit back inside the transaction; the app's ROLLBACK undoes that give-back.
// The unit goes back after the rollback, in autocommit, not to the ledger (found by the model test:
// per_statement_giveback_undone, one unit leaked per double click).
TEST(silent_paths, give_back_undone_by_a_rollback_is_sent_again_after_it) {
    take_ledger ledger;
    session s(variant_id::coupon, &ledger, 1);
    ASSERT_TRUE(s.ready()) << s.error();
    auto take = s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(1)});
    ASSERT_TRUE(take.has(event::took));
    auto dup = s.exec(s.claim_sql("1", "7"), {error_reply(1062, in_trans), ok_rows(1, in_trans)}, in_trans);
    ASSERT_TRUE(dup.has(event::compensated));
    EXPECT_TRUE(s.end(false).empty());
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"7"}), 0u);  // not owed to another claim
    ASSERT_EQ(s.memory.after_rollback.size(), 1u);
    EXPECT_EQ(s.memory.after_rollback[0].sql,
              "UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE `campaign_id` = 7");
    // Committed instead: the give-back stands, nothing to send.
    auto take2 = s.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(1)});
    s.memory.after_rollback.clear();
    (void)s.exec(s.claim_sql("1", "7"), {error_reply(1062, in_trans), ok_rows(1, in_trans)}, in_trans);
    (void)s.end(true);
    EXPECT_TRUE(s.memory.after_rollback.empty());
}


// A pool lends the connection whose decrement was just refused to another user whose take succeeded
// elsewhere: the claim uses that waiting take (before, it was answered sold out and the unit leaked;
// model test regression pool_claim_on_refused_session). With no take waiting: sold out, as before.
TEST(silent_paths, claim_after_a_refusal_uses_a_waiting_take) {
    take_ledger ledger;
    session c5(variant_id::coupon, &ledger, 5), c3(variant_id::coupon, &ledger, 3);
    ASSERT_TRUE(c5.ready()) << c5.error();
    auto took = c5.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(1)});
    ASSERT_TRUE(took.has(event::took));
    auto refused = c3.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(0)});
    ASSERT_TRUE(refused.has(event::exhausted));
    auto claim = c3.exec(c3.claim_sql("1", "7"), {ok_rows(1)});
    EXPECT_TRUE(claim.has(event::claim_inserted));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"7"}), 0u);
    auto refused2 = c3.exec("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", {ok_rows(0)});
    ASSERT_TRUE(refused2.has(event::exhausted));
    auto blocked = c3.exec(c3.claim_sql("2", "7"), {});
    EXPECT_TRUE(blocked.has(event::blocked));
    EXPECT_TRUE(blocked.sent().empty());
}

// A claim's ERR in a transaction may have rolled the whole transaction back, take included: a
// give-back then would run in autocommit and add a unit nobody took. A deadlock says so (its ERR
// ends the transaction); a lock wait timeout may (innodb_rollback_on_timeout), so the server is asked.
TEST(silent_paths, claim_error_that_ended_the_transaction_gives_nothing_back) {
    session s(variant_id::coupon);
    ASSERT_TRUE(s.ready()) << s.error();
    const char* take = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7";
    ASSERT_TRUE(s.exec(take, {ok_rows(1, in_trans)}, in_trans).has(event::took));
    auto deadlock = s.exec(s.claim_sql("1", "7"), {error_reply(1213, autocommit)}, in_trans);
    EXPECT_FALSE(deadlock.has(event::compensated));
    EXPECT_EQ(deadlock.sent().size(), 1u);  // the claim only
    EXPECT_EQ(deadlock.last().type, action::kind::reply_client);
    (void)s.end(false);

    ASSERT_TRUE(s.exec(take, {ok_rows(1, in_trans)}, in_trans).has(event::took));
    auto rolled_back = s.exec(s.claim_sql("1", "7"), {error_reply(1205, in_trans), ok_rows(0, autocommit)}, in_trans);
    ASSERT_EQ(rolled_back.sent().size(), 2u);
    EXPECT_EQ(rolled_back.sent()[1], "SHOW COUNT(*) WARNINGS");
    EXPECT_FALSE(rolled_back.has(event::compensated));
    EXPECT_EQ(rolled_back.last().type, action::kind::reply_client);
    (void)s.end(false);

    // Only the statement rolled back (the default): the unit goes back inside the transaction.
    ASSERT_TRUE(s.exec(take, {ok_rows(1, in_trans)}, in_trans).has(event::took));
    auto statement_only =
        s.exec(s.claim_sql("1", "7"), {error_reply(1205, in_trans), ok_rows(0, in_trans), ok_rows(1, in_trans)}, in_trans);
    ASSERT_EQ(statement_only.sent().size(), 3u);
    EXPECT_TRUE(statement_only.has(event::compensated));
}

}  // namespace
}  // namespace claimguard::engine::test
