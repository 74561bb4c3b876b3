// The explain dry run: what a DBA sees, from the same decide() and claim operation the proxy runs.
#include <gtest/gtest.h>

#include <sstream>

#include "proxy/engine/explain.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

std::string run(std::string_view sql, std::optional<std::int64_t> read = std::nullopt,
                variant_id v = variant_id::coupon) {
    const auto& env = env_for(v);
    EXPECT_EQ(env.error, "");
    if (!env.index) return {};
    rules::match::explain_options o;
    o.read_value = read;
    std::ostringstream out;
    explain(*env.index, sql, o, out);
    return out.str();
}

TEST(explain, incident_write_is_a_take_whatever_was_read) {
    EXPECT_EQ(run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7"),
              "pre-filter: candidate (names a protected table)\n"
              "statement: UPDATE\n"
              "fact: counter write: stock rule coupon_stock, table coupon_stock, campaign_id = 7, sets remain = 99\n"
              "decision: take (absolute write of the counter: a conditional take of the rule's units); 1 unit\n"
              "mode: enforce\n"
              "when 1 row changes:\n"
              "  send: UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1 AND remain > 99\n"
              "  answer with the server's reply\n"
              "when 0 rows change:\n"
              "  send: UPDATE coupon_stock SET remain = remain - 1, `version` = `version` + 1 WHERE campaign_id = 7 AND remain >= 1 AND remain > 99\n"
              "  send: SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 7\n"
              "  answer ERROR 1644 (45000): claimguard: coupon_stock is sold out for this key\n");
}

// A claim by INSERT ... SELECT from the stock row: its own take, then the row as INSERT ... VALUES.
TEST(explain, insert_select_claim_takes_then_inserts_the_row) {
    const auto out = run("INSERT INTO coupon_order (user_id, campaign_id) SELECT 42, campaign_id FROM coupon_stock "
                         "WHERE campaign_id = 7 AND remain > 0");
    EXPECT_NE(out.find("fact: claim by INSERT ... SELECT: claim rule coupon_order"), std::string::npos) << out;
    EXPECT_NE(out.find("when its take takes the unit and the row goes in:\n"), std::string::npos) << out;
    EXPECT_NE(out.find("  send: INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("when its take finds the floor:"), std::string::npos) << out;
    EXPECT_NE(out.find("  answer OK (0 rows affected)\n"), std::string::npos) << out;
    const auto recompute = run("UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order WHERE "
                               "campaign_id = 7) WHERE campaign_id = 7");
    EXPECT_NE(recompute.find("fact: counter recomputed: stock rule coupon_stock"), std::string::npos) << recompute;
    EXPECT_NE(recompute.find("unmodeled: counter_from_subquery; policy refuse"), std::string::npos) << recompute;
}

TEST(explain, deferred_take_in_a_transaction) {
    const auto out = run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7", std::nullopt, variant_id::defer);
    EXPECT_NE(out.find("in autocommit:\nwhen 1 row changes:"), std::string::npos) << out;
    EXPECT_NE(out.find("in a transaction (defer_decrement):\n"
                       "  answer OK (1 row affected)\n"
                       "  kept, sent just before COMMIT (or before the transaction's next statement on coupon_stock): "
                       "UPDATE `coupon_stock` SET `remain` = `remain` - 1, `version` = `version` + 1 WHERE "
                       "`campaign_id` = 7 AND `remain` >= 1\n"
                       "  at COMMIT, 1 row: the COMMIT goes through; 0 rows: ROLLBACK, then answer ERROR 1644 (45000): "
                       "claimguard: coupon_stock is sold out for this key\n"
                       "  at ROLLBACK: dropped, never sent\n"),
              std::string::npos)
        << out;
    const auto version = run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND version = 2", std::nullopt,
                             variant_id::defer);
    EXPECT_NE(version.find("(not deferred: sent in place as above)"), std::string::npos) << version;
}

TEST(explain, read_is_a_cross_check) {
    const auto out = run("UPDATE coupon_stock SET remain = 90 WHERE campaign_id = 7", 100);
    EXPECT_NE(out.find("decision: refuse (an absolute write that means other units than the rule's"), std::string::npos)
        << out;
    const auto read = run("UPDATE coupon_stock SET remain = 90 WHERE campaign_id = 7", 90 + 2, variant_id::evidence_read);
    EXPECT_NE(read.find("; 2 units"), std::string::npos) << read;
}

TEST(explain, version_write_probes_before_sold_out) {
    const auto out = run("UPDATE coupon_stock SET remain = 99, version = 4 WHERE campaign_id = 7 AND version = 3");
    EXPECT_NE(out.find("  send: SELECT `remain` FROM `coupon_stock` WHERE `campaign_id` = 7\n"), std::string::npos)
        << out;
}

TEST(explain, claim_shows_redis_give_back_and_no_take) {
    const auto out = run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (42, 7)");
    EXPECT_NE(out.find("  redis: SET lock:coupon:42:7 <token> NX PX 3000"), std::string::npos) << out;
    EXPECT_NE(out.find("  send: UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = `version` + 1 WHERE "
                       "`campaign_id` = 7\n  answer ERROR 1644 (45000): claimguard: already claimed\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("with no take of this sidecar behind it (autocommit):\n"
                       "  answer ERROR 1644 (45000): claimguard: coupon_stock is sold out for this key\n"),
              std::string::npos)
        << out;
}

// Several rows: a take per row (explain seeds one for each), each row's Redis key, the statement as
// written, and on a duplicate one give-back per stock key with the units of its rows.
TEST(explain, claim_of_several_rows) {
    const auto out = run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7), (2, 8), (3, 7)");
    EXPECT_NE(out.find("when a take of this sidecar backs each row and the rows go in:\n  redis: SET lock:coupon:1:7 "),
              std::string::npos)
        << out;
    EXPECT_NE(
        out.find("  redis: SET lock:coupon:3:7 <token> NX PX 3000 (already held: answer as a duplicate; Redis down: "
                 "the database decides)\n  send the statement as written"),
        std::string::npos)
        << out;
    EXPECT_NE(
        out.find("  send: UPDATE `coupon_stock` SET `remain` = `remain` + 2, `version` = `version` + 1 WHERE "
                 "`campaign_id` = 7\n  send: UPDATE `coupon_stock` SET `remain` = `remain` + 1, `version` = "
                 "`version` + 1 WHERE `campaign_id` = 8\n  answer ERROR 1644 (45000): claimguard: already claimed\n"),
        std::string::npos)
        << out;
}

TEST(explain, unmodeled_is_refused_by_policy) {
    const auto out = run("UPDATE coupon_stock SET remain = remain - 1 WHERE remain > 0");
    EXPECT_NE(out.find("unmodeled: no_full_key; policy refuse\n"), std::string::npos) << out;
    EXPECT_NE(out.find("  answer ERROR 1644 (45000): claimguard: rule coupon_stock refuses this statement"),
              std::string::npos)
        << out;
}

TEST(explain, observe_mode_says_so) {
    const auto out = run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7", std::nullopt, variant_id::observe);
    EXPECT_NE(out.find("mode: observe (claimguard logs that it would take; the statement is forwarded unchanged)\n"),
              std::string::npos)
        << out;
}

TEST(explain, irrelevant_statement) {
    EXPECT_EQ(run("SELECT * FROM users"), "pre-filter: irrelevant (no rule can apply)\n"
                                          "statement: SELECT\n"
                                          "decision: forward\n"
                                          "then:\n"
                                          "  forward the statement unchanged\n");
}

TEST(explain, describe_value_forms) {
    rules::match::value_ref v;
    v.type = rules::match::value_ref::kind::placeholder;
    v.placeholder_index = 2;
    EXPECT_EQ(rules::match::describe_value(v), "?2");
    v.type = rules::match::value_ref::kind::null;
    EXPECT_EQ(rules::match::describe_value(v), "NULL");
}

// Every outcome's script covers what the operation asks for: explain never invents a reply (it
// used to feed "OK, 1 row" when its script ran out) and says when it could not finish.
TEST(explain, every_statement_form_runs_to_its_end) {
    const auto& env = env_for(variant_id::coupon);
    ASSERT_TRUE(env.index);
    for (const char* sql : {
             "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain > 0",
             "UPDATE coupon_stock SET remain = remain - 1, version = version + 1 WHERE campaign_id = 7 AND version = 3",
             "UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 7",
             "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?",
             "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
             "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
             "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
             "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7) ON DUPLICATE KEY UPDATE user_id = user_id",
             "REPLACE INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
             "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7) RETURNING id",
             "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7), (2, 8)",
             "INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES (1, 7), (2, 7)",
             "DELETE FROM coupon_stock WHERE campaign_id = 7",
             "DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 7",
             "COMMIT",
         }) {
        std::ostringstream out;
        EXPECT_TRUE(explain(*env.index, sql, {}, out)) << sql << "\n" << out.str();
        EXPECT_EQ(out.str().find("error:"), std::string::npos) << sql << "\n" << out.str();
    }
}

// A cancellation under on_cancel: return_stock: explain shows our transaction around the DELETE
// and its give-back.
TEST(explain, cancellation_returning_stock_shows_its_transaction) {
    const auto& env = env_for(variant_id::return_stock);
    ASSERT_TRUE(env.index) << env.error;
    std::ostringstream out;
    EXPECT_TRUE(explain(*env.index, "DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 7", {}, out))
        << out.str();
    const std::string text = out.str();
    EXPECT_NE(text.find("decision: cancel"), std::string::npos) << text;
    EXPECT_NE(text.find("BEGIN"), std::string::npos) << text;
    EXPECT_NE(text.find("`remain` = `remain` + 1"), std::string::npos) << text;
    EXPECT_NE(text.find("COMMIT"), std::string::npos) << text;
    EXPECT_EQ(text.find("error:"), std::string::npos) << text;
}

// A cancellation by row id under return_stock: explain shows the locked read of the rows first.
TEST(explain, cancellation_by_row_id_reads_the_rows_first) {
    const auto& env = env_for(variant_id::return_stock);
    ASSERT_TRUE(env.index) << env.error;
    std::ostringstream out;
    EXPECT_TRUE(explain(*env.index, "DELETE FROM coupon_order WHERE id = 42", {}, out)) << out.str();
    const std::string text = out.str();
    EXPECT_NE(text.find("decision: cancel"), std::string::npos) << text;
    EXPECT_NE(text.find("FOR UPDATE"), std::string::npos) << text;
    EXPECT_NE(text.find("`remain` = `remain` + 1"), std::string::npos) << text;
    EXPECT_NE(text.find("COMMIT"), std::string::npos) << text;
}

// A claim whose stock the claim table's trigger decrements: explain shows the counter read around the
// INSERT in our transaction, and what each outcome answers.
TEST(explain, claim_decremented_by_trigger_shows_the_counter_around_it) {
    const auto text =
        run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)", std::nullopt, variant_id::by_trigger);
    EXPECT_NE(text.find("when the trigger takes the units:"), std::string::npos) << text;
    EXPECT_NE(text.find("send: BEGIN"), std::string::npos) << text;
    EXPECT_NE(text.find("FOR UPDATE"), std::string::npos) << text;
    EXPECT_NE(text.find("send: COMMIT"), std::string::npos) << text;
    EXPECT_NE(text.find("when the row goes in and the trigger takes nothing:"), std::string::npos) << text;
    EXPECT_NE(text.find("send: ROLLBACK"), std::string::npos) << text;
    EXPECT_NE(text.find("sold out"), std::string::npos) << text;
    EXPECT_EQ(text.find("with no take of this sidecar behind it"), std::string::npos) << text;
    EXPECT_EQ(text.find("error:"), std::string::npos) << text;
}

}  // namespace
}  // namespace claimguard::engine::test
