// The read cache's view of a counter read: its shape (protocol, charset, database, the statement
// with its keys as ?), why only the server may answer it, and the server's reply as a template
// (real MariaDB replies, tests/proxy/protocol captures).
#include <gtest/gtest.h>

#include "proxy/engine/read_shape.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/command.hpp"
#include "tests/proxy/engine/engine_harness.hpp"
#include "tests/proxy/protocol/captures_read_cache.hpp"
#include "tests/proxy/protocol/test_support.hpp"

namespace claimguard::engine::test {
namespace {

namespace proto = protocol;

// coupon.yaml with read_cache on coupon_stock, in `mode`.
std::unique_ptr<rules_env> read_cache_env(std::string_view mode) {
    auto e = std::make_unique<rules_env>();
    auto text = read_coupon_yaml();
    if (!replace_once(text, "    units: 1 ", "    read_cache: 10s\n    units: 1 ") ||
        !replace_once(text, "default_mode: enforce", "default_mode: " + std::string(mode))) {
        e->error = "coupon.yaml changed: cannot add read_cache";
        return e;
    }
    return env_of_text(text);
}

const rules_env& enforce_env() {
    static auto env = read_cache_env("enforce");
    return *env;
}

const std::string read_sql = "SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = 7";

// One statement decided under `env`.
struct decided {
    decided(const rules_env& env, std::string sql, const value_resolver& values = resolve_literal)
        : st(std::move(sql), *env.index) {
        session_memory memory;
        d = decide(st.facts(), *env.rules, values, memory);
    }
    statement st;
    decision d;
};

// A text read on a connection with CLIENT_DEPRECATE_EOF, charset 33, database shop, autocommit.
read_origin text_read(const rules_env& env) {
    read_origin o;
    o.command = proto::com::query;
    o.caps = proto::cap::protocol_41 | proto::cap::deprecate_eof;
    o.charset = 33;
    o.database = "shop";
    o.status = proto::status::autocommit;
    o.rules = &*env.rules;
    return o;
}

TEST(read_shape, a_text_read_is_kept_under_its_protocol_charset_database_and_statement_with_keys_as_marks) {
    ASSERT_TRUE(enforce_env().error.empty()) << enforce_env().error;
    decided r(enforce_env(), read_sql);
    ASSERT_EQ(r.d.what, verdict::remember_read);
    auto read = cached_read_of(r.d, r.st.parsed(), text_read(enforce_env()));
    ASSERT_TRUE(read);
    EXPECT_EQ(read->shape, "TE-33\nshop\nSELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = ?");
    EXPECT_FALSE(read->situation.observe);
    EXPECT_TRUE(read->situation.autocommit_or_transaction);
    EXPECT_FALSE(read->situation.cursor);
}

TEST(read_shape, reads_of_other_keys_share_a_shape_other_databases_and_extended_metadata_do_not) {
    decided seven(enforce_env(), read_sql);
    decided eight(enforce_env(), "SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = '8'");
    auto o = text_read(enforce_env());
    EXPECT_EQ(cached_read_of(seven.d, seven.st.parsed(), o)->shape,
              cached_read_of(eight.d, eight.st.parsed(), o)->shape);
    auto other = o;
    other.database = "shop2";
    EXPECT_NE(cached_read_of(seven.d, seven.st.parsed(), o)->shape,
              cached_read_of(seven.d, seven.st.parsed(), other)->shape);
    other = o;
    other.caps = proto::cap::protocol_41;
    other.mariadb_caps = proto::mariadb_cap::extended_metadata;
    EXPECT_EQ(cached_read_of(seven.d, seven.st.parsed(), other)->shape.substr(0, 6), "T-X33\n");
}

TEST(read_shape, an_execute_says_binary_and_whether_it_asks_for_a_cursor) {
    decided r(enforce_env(), "SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = ?",
              bound_integers({7}));
    ASSERT_EQ(r.d.what, verdict::remember_read);
    auto o = text_read(enforce_env());
    o.command = proto::com::stmt_execute;
    // COM_STMT_EXECUTE: command, statement id, flags (the cursor type), iteration count
    const auto no_cursor = proto::test::hex("17010000000001000000");
    const auto read_only_cursor = proto::test::hex("17010000000101000000");
    o.payload = no_cursor;
    auto read = cached_read_of(r.d, r.st.parsed(), o);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->shape, "BE-33\nshop\nSELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = ?");
    EXPECT_FALSE(read->situation.cursor);
    o.payload = read_only_cursor;
    EXPECT_TRUE(cached_read_of(r.d, r.st.parsed(), o)->situation.cursor);
    o.payload = proto::bytes_view(no_cursor).first(5);  // no flags byte: never answered from the cache
    EXPECT_TRUE(cached_read_of(r.d, r.st.parsed(), o)->situation.cursor);
}

TEST(read_shape, autocommit_off_outside_a_transaction_and_observe_mode_are_said) {
    decided r(enforce_env(), read_sql);
    auto o = text_read(enforce_env());
    o.status = 0;
    EXPECT_FALSE(cached_read_of(r.d, r.st.parsed(), o)->situation.autocommit_or_transaction);
    o.status = proto::status::in_trans;
    EXPECT_TRUE(cached_read_of(r.d, r.st.parsed(), o)->situation.autocommit_or_transaction);

    static auto observe = read_cache_env("observe");
    ASSERT_TRUE(observe->error.empty()) << observe->error;
    decided o_read(*observe, read_sql);
    auto read = cached_read_of(o_read.d, o_read.st.parsed(), text_read(*observe));
    ASSERT_TRUE(read);
    EXPECT_TRUE(read->situation.observe);
}

TEST(read_shape, no_cacheable_read_no_shape) {
    auto o = text_read(enforce_env());
    decided take(enforce_env(), "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1");
    EXPECT_FALSE(cached_read_of(take.d, take.st.parsed(), o));
    decided read(enforce_env(), read_sql);
    auto no_rules = o;
    no_rules.rules = nullptr;
    EXPECT_FALSE(cached_read_of(read.d, read.st.parsed(), no_rules));
    // the example's rule has no read_cache
    decided plain(env_for(variant_id::coupon), read_sql);
    ASSERT_EQ(plain.d.what, verdict::remember_read);
    EXPECT_FALSE(cached_read_of(plain.d, plain.st.parsed(), o));
}

TEST(read_shape, the_servers_reply_is_a_template_unless_an_error_or_no_counter_read) {
    decided r(enforce_env(), read_sql);
    const auto text = proto::test::hex(proto::test::read_cache::text_eof_5);
    auto kept = read_template(r.d, text, false, proto::cap::protocol_41, 0, false);
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->value, 5);
    EXPECT_FALSE(kept->binary);
    const auto binary = proto::test::hex(proto::test::read_cache::binary_eof_4);
    kept = read_template(r.d, binary, false, proto::cap::protocol_41, 0, true);
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->value, 4);
    EXPECT_TRUE(kept->binary);

    EXPECT_FALSE(read_template(r.d, text, true, proto::cap::protocol_41, 0, false));  // the exchange said ERR
    const auto ok = proto::test::hex("0700000100000002000000");
    EXPECT_FALSE(read_template(r.d, ok, false, proto::cap::protocol_41, 0, false));  // an OK is no template
    decided take(enforce_env(), "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1");
    EXPECT_FALSE(read_template(take.d, text, false, proto::cap::protocol_41, 0, false));
}

TEST(read_shape, the_counter_is_first_in_the_proxys_own_reply_else_where_the_clients_read_says) {
    decided r(enforce_env(), read_sql);
    auto c = counter_column(r.d, false, true);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->position, 1u);  // campaign_id, remain, version
    EXPECT_TRUE(c->binary);
    c = counter_column(r.d, true, false);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->position, 0u);
    EXPECT_TRUE(c->label.empty());
    EXPECT_FALSE(c->binary);
    decided take(enforce_env(), "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1");
    EXPECT_FALSE(counter_column(take.d, false, false));
}

}  // namespace
}  // namespace claimguard::engine::test
