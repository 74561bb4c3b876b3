// watch_unlisted_tables: what the watcher files for tables no rule names (the read-then-write of a
// counter, the INSERT after it), and what it leaves alone.
#include "proxy/engine/unlisted_watch.hpp"

#include <gtest/gtest.h>

#include "rules/sql/parser.hpp"

namespace claimguard::engine {
namespace {

std::optional<unlisted_shape> see(unlisted_watch& w, std::string_view sql, std::string_view db = "shop") {
    return w.observe(rules::sql::parse(sql, {}), db);
}

using notes = std::vector<std::string>;

TEST(unlisted_watch, the_incidents_read_then_absolute_write_is_a_take_and_the_insert_after_it_its_claim) {
    unlisted_watch w;
    EXPECT_FALSE(see(w, "SELECT remain FROM coupon_stock WHERE campaign_id = 7"));
    const auto take = see(w, "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7");
    ASSERT_TRUE(take);
    EXPECT_EQ(take->table, "shop.coupon_stock");
    EXPECT_EQ(take->action, "would-rewritten");
    EXPECT_EQ(take->notes, (notes{"counter: remain", "key_columns: campaign_id", "after_read: yes"}));
    const auto claim = see(
        w, "INSERT INTO coupon_order (id, user_id, campaign_id, created_at) VALUES (5, 42, 7, '2026-12-04 10:00:00')");
    ASSERT_TRUE(claim);
    EXPECT_EQ(claim->table, "shop.coupon_order");
    EXPECT_EQ(claim->action, "would-claimed");
    EXPECT_EQ(claim->notes, (notes{"after: shop.coupon_stock", "consumes: campaign_id=campaign_id",
                                   "columns: user_id, campaign_id"}));
    // One claim per take: a second INSERT is not filed.
    EXPECT_FALSE(see(w, "INSERT INTO audit_trail (what) VALUES ('x')"));
}

TEST(unlisted_watch, a_relative_decrement_needs_no_read_and_an_optimistic_lock_names_its_version) {
    unlisted_watch w;
    const auto dec = see(w, "UPDATE other.stock SET remain = remain - 2 WHERE sku = 'a'");
    ASSERT_TRUE(dec);
    EXPECT_EQ(dec->table, "other.stock");  // the schema as written
    EXPECT_EQ(dec->notes, (notes{"counter: remain", "key_columns: sku", "units: 2", "after_read: no"}));
    EXPECT_FALSE(see(w, "SELECT * FROM items WHERE id = 1"));
    const auto locked = see(w, "UPDATE items SET remain = 4, version = 8 WHERE id = 1 AND version = 7");
    ASSERT_TRUE(locked);
    EXPECT_EQ(locked->notes, (notes{"counter: remain", "key_columns: id", "version: version", "after_read: yes"}));
    // Django's save() writes every column it read: the counter is the number, not the name before it.
    EXPECT_FALSE(see(w, "SELECT id, name, remain FROM items WHERE id = 1"));
    const auto saved = see(w, "UPDATE items SET name = 'Sale', remain = 3 WHERE id = 1");
    ASSERT_TRUE(saved);
    EXPECT_EQ(saved->notes.front(), "counter: remain");
}

TEST(unlisted_watch, writes_that_are_not_a_counters_and_inserts_without_a_take_are_not_filed) {
    unlisted_watch w;
    EXPECT_FALSE(see(w, "UPDATE users SET name = 'x' WHERE id = 1"));  // not read before: not a counter
    EXPECT_FALSE(see(w, "UPDATE users SET visits = visits + 1 WHERE id = 1"));
    EXPECT_FALSE(see(w, "INSERT INTO log (a) VALUES (1)"));
    EXPECT_FALSE(see(w, "SELECT remain FROM s WHERE id = 1"));
    EXPECT_FALSE(see(w, "UPDATE s SET remain = 3"));  // no key
    EXPECT_FALSE(see(w, "DELETE FROM s WHERE id = 1"));
    // The read belongs to the connection: a new one (reset) has not read anything.
    w.reset();
    EXPECT_FALSE(see(w, "UPDATE s SET remain = 3 WHERE id = 1"));
}

TEST(unlisted_watch, reads_are_bounded_per_connection) {
    unlisted_watch w;
    EXPECT_FALSE(see(w, "SELECT remain FROM first_table WHERE id = 1"));
    for (std::size_t i = 0; i < unlisted_watch::max_reads; ++i)
        EXPECT_FALSE(see(w, "SELECT n FROM t" + std::to_string(i) + " WHERE id = 1"));
    EXPECT_FALSE(see(w, "UPDATE first_table SET remain = 3 WHERE id = 1"));  // forgotten
    EXPECT_TRUE(see(w, "UPDATE t7 SET n = 3 WHERE id = 1"));
}

TEST(unlisted_watch, only_statements_that_may_start_a_shape_are_tokenised) {
    EXPECT_TRUE(may_watch("SELECT 1"));
    EXPECT_TRUE(may_watch("  /* app */ update s set n = 1"));
    EXPECT_TRUE(may_watch("-- c\nINSERT INTO t VALUES (1)"));
    EXPECT_TRUE(may_watch("replace into t values (1)"));
    EXPECT_FALSE(may_watch("SET autocommit = 1"));
    EXPECT_FALSE(may_watch("COMMIT"));
    EXPECT_FALSE(may_watch("/*!40101 UPDATE s SET n = 1 */"));
    EXPECT_FALSE(may_watch("SELECTED"));
    EXPECT_FALSE(may_watch(""));
}

}  // namespace
}  // namespace claimguard::engine
