// String keys compared as the key column's collation compares them (issue 17): the canonicalizer
// table, collation names, and a take and a claim spelled differently pairing only where the
// database takes them for one row.
#include <gtest/gtest.h>

#include "proxy/engine/key_collation.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

using k = rules::key_comparison;

struct collation_case {
    const char* name;
    const char* data_type;
    std::optional<std::string_view> collation;
    k expected;
};

// Collation names as information_schema.COLUMNS gives them, MariaDB's and MySQL 8's.
TEST(key_collation, collations_by_name) {
    const collation_case cases[] = {
        {"mariadb_default", "varchar", "utf8mb4_general_ci", k::ci_pad},
        {"upper_case_type", "VARCHAR", "UTF8MB4_GENERAL_CI", k::ci_pad},
        {"char", "char", "utf8mb3_general_ci", k::ci_pad},
        {"text", "text", "utf8mb4_unicode_ci", k::ci_pad},
        {"unicode_520", "varchar", "utf8mb4_unicode_520_ci", k::ci_pad},
        {"latin1_default", "varchar", "latin1_swedish_ci", k::ci_pad},
        {"mariadb_uca1400", "varchar", "utf8mb4_uca1400_ai_ci", k::ci_pad},
        {"mysql8_default_no_pad", "varchar", "utf8mb4_0900_ai_ci", k::ci_nopad},
        {"mysql8_accent_sensitive", "varchar", "utf8mb4_0900_as_ci", k::ci_nopad},
        {"mariadb_nopad_ci", "varchar", "utf8mb4_general_nopad_ci", k::ci_nopad},
        {"mariadb_unicode_nopad", "varchar", "utf8mb4_unicode_520_nopad_ci", k::ci_nopad},
        {"mariadb_uca1400_nopad", "varchar", "utf8mb4_uca1400_nopad_ai_ci", k::ci_nopad},
        {"bin_is_pad_space", "varchar", "utf8mb4_bin", k::bytes_pad},
        {"latin1_bin", "varchar", "latin1_bin", k::bytes_pad},
        {"case_sensitive", "varchar", "latin1_general_cs", k::bytes_pad},
        {"mariadb_nopad_bin", "varchar", "utf8mb4_nopad_bin", k::bytes},
        {"mysql8_bin_no_pad", "varchar", "utf8mb4_0900_bin", k::bytes},
        {"mysql8_as_cs", "varchar", "utf8mb4_0900_as_cs", k::bytes},
        // Case-insensitive, but ASCII letters do not simply fold: I and i differ, "ch" is one letter.
        {"turkish_pad", "varchar", "utf8mb4_turkish_ci", k::bytes_pad},
        {"czech_pad", "varchar", "utf8mb4_czech_ci", k::bytes_pad},
        {"turkish_0900", "varchar", "utf8mb4_tr_0900_ai_ci", k::bytes},
        {"swedish_uca_not_folded", "varchar", "utf8mb4_swedish_ci", k::bytes_pad},
        {"binary_string", "varbinary", std::nullopt, k::bytes},
        {"blob", "blob", std::nullopt, k::bytes},
        {"integer", "int", std::nullopt, k::bytes},
        {"bigint", "bigint", std::nullopt, k::bytes},
        {"enum", "enum", "utf8mb4_general_ci", k::bytes},
        {"no_collation_read", "varchar", std::nullopt, k::unknown},
        {"type_not_read", "", std::nullopt, k::unknown},
        {"not_a_collation", "varchar", "whatever", k::unknown},
        {"future_suffix", "varchar", "utf8mb4_ja_0900_as_cs_ks", k::unknown},
    };
    for (const auto& c : cases)
        EXPECT_EQ(classify_collation(c.data_type, c.collation), c.expected)
            << c.name << ": got " << to_string(classify_collation(c.data_type, c.collation));
}

struct value_case {
    const char* name;
    k compare;
    std::string value;
    std::string expected;
    bool kept_as_written;
};

// The canonical form: two spellings share it only when the database takes them for one value.
TEST(key_collation, canonical_values) {
    const value_case cases[] = {
        // utf8mb4_general_ci, utf8mb4_unicode_ci: case-insensitive, PAD SPACE.
        {"ci_case", k::ci_pad, "SALE-2026", "sale-2026", false},
        {"ci_trailing_spaces", k::ci_pad, "SALE-2026  ", "sale-2026", false},
        {"ci_leading_space_kept", k::ci_pad, " sale-2026", " sale-2026", false},
        {"ci_tab_kept", k::ci_pad, "sale-2026\t", "sale-2026\t", false},
        {"ci_inner_space_kept", k::ci_pad, "SALE 2026", "sale 2026", false},
        {"ci_number", k::ci_pad, "77", "77", false},
        {"ci_empty", k::ci_pad, "", "", false},
        {"ci_only_spaces", k::ci_pad, "   ", "", false},
        // Non-ASCII (UTF-8 "CAFÉ", a gbk character whose second byte is 'A'): not folded.
        {"ci_non_ascii_kept", k::ci_pad, "CAF\xc3\x89", "CAF\xc3\x89", true},
        {"ci_non_ascii_pad", k::ci_pad, "Caf\xc3\xa9 ", "Caf\xc3\xa9", true},
        {"ci_gbk_trail_byte", k::ci_pad, "\x81\x41X", "\x81\x41X", true},
        // utf8mb4_0900_ai_ci: case-insensitive, NO PAD (trailing spaces significant).
        {"nopad_case", k::ci_nopad, "SALE-2026", "sale-2026", false},
        {"nopad_trailing_space_kept", k::ci_nopad, "SALE-2026 ", "sale-2026 ", false},
        {"nopad_non_ascii", k::ci_nopad, "\xc3\x89T\xc3\x89", "\xc3\x89T\xc3\x89", true},
        // utf8mb4_bin: case-sensitive, PAD SPACE.
        {"bin_case_kept", k::bytes_pad, "SALE-2026", "SALE-2026", false},
        {"bin_trailing_spaces", k::bytes_pad, "SALE-2026 ", "SALE-2026", false},
        {"bin_non_ascii_pad", k::bytes_pad, "\xc3\x89 ", "\xc3\x89", false},
        // Binary strings, NO PAD _bin, numbers, unknown: bytes.
        {"bytes", k::bytes, "SALE-2026 ", "SALE-2026 ", false},
        {"unknown", k::unknown, "SALE-2026 ", "SALE-2026 ", false},
        {"unknown_nul", k::unknown, std::string("a\0", 2), std::string("a\0", 2), false},
    };
    for (const auto& c : cases) {
        const auto got = canonical_key_value(c.value, c.compare);
        EXPECT_EQ(got.value, c.expected) << c.name;
        EXPECT_EQ(got.kept_as_written, c.kept_as_written) << c.name;
    }
}

// A folded value holds ASCII bytes only and a value kept as written holds a byte >= 0x80: under one
// comparison the two never meet, so "CAFÉ" and "café" stay two keys (the database may take them for
// one row: a claim then finds no take and is refused, never over-issued).
TEST(key_collation, kept_values_never_meet_folded_ones) {
    for (const auto compare : {k::ci_pad, k::ci_nopad}) {
        const auto upper = canonical_key_value("CAF\xc3\x89", compare);
        const auto lower = canonical_key_value("caf\xc3\xa9", compare);
        const auto ascii = canonical_key_value("CAFE", compare);
        EXPECT_NE(upper.value, lower.value);
        EXPECT_NE(upper.value, ascii.value);
        EXPECT_NE(lower.value, ascii.value);
    }
}

TEST(key_collation, canonicalize_key_follows_the_rule) {
    rules::stock_rule rule;
    rule.key_columns = {"shop", "campaign_code"};
    key_tuple key{"Shop-1 ", "SALE-2026 ", "appended by someone else"};
    EXPECT_EQ(canonicalize_key(key, rule), 0u);  // no key_compare: bytes
    EXPECT_EQ(key, (key_tuple{"Shop-1 ", "SALE-2026 ", "appended by someone else"}));
    rule.key_compare = {k::bytes_pad, k::ci_pad};
    key.push_back("\xc3\x89");
    key[1] = "SALE-2026 ";
    EXPECT_EQ(canonicalize_key(key, rule), 0u);
    EXPECT_EQ(key, (key_tuple{"Shop-1", "sale-2026", "appended by someone else", "\xc3\x89"}));
    key_tuple accented{"x", "\xc3\x89 "};
    EXPECT_EQ(canonicalize_key(accented, rule), 1u);
    EXPECT_EQ(accented[1], "\xc3\x89");
}

TEST(key_collation, with_key_compare_matches_rules_by_name_and_size) {
    rules::rule_set set;
    set.stocks.resize(2);
    set.stocks[0].name = "a";
    set.stocks[0].key_columns = {"code"};
    set.stocks[1].name = "b";
    set.stocks[1].key_columns = {"code"};
    set.stocks[1].key_compare = {k::ci_pad};  // from an older check: replaced
    const auto out = with_key_compare(set, {{"a", {k::ci_nopad}}, {"b", {k::ci_pad, k::ci_pad}}});
    EXPECT_EQ(out.stocks[0].key_compare, std::vector<k>{k::ci_nopad});
    EXPECT_TRUE(out.stocks[1].key_compare.empty());  // two comparisons for one key column: not trusted
}

const std::string take_sql = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'sale-2026'";

// The issue 17 row: a take on 'sale-2026', the claim on 'SALE-2026 '. Under utf8mb4_general_ci they
// are one stock row: the claim uses the take (before: the claim found no take, "sold out").
TEST(key_collation, take_backs_a_claim_spelled_otherwise_under_ci) {
    take_ledger ledger;
    session a(variant_id::keys_ci, &ledger, 1), b(variant_id::keys_ci, &ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    auto take = a.exec(take_sql, {ok_rows(1)});
    ASSERT_EQ(take.d.what, verdict::take) << take.d.note;
    EXPECT_TRUE(take.has(event::took));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"sale-2026"}), 1u);
    auto claim = b.exec(b.claim_sql("9", "'SALE-2026 '"), {ok_rows(1)});
    ASSERT_EQ(claim.d.what, verdict::claim) << claim.d.note;
    EXPECT_EQ(claim.d.key, key_tuple{"sale-2026"});
    EXPECT_TRUE(claim.has(event::claim_inserted));
    EXPECT_FALSE(claim.has(event::blocked));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"sale-2026"}), 0u);
    // The SQL sent keeps the app's own literal (never the canonical form).
    EXPECT_EQ(claim.sent(), std::vector<std::string>{"<statement>"});
}

// Under utf8mb4_bin 'sale-2026' and 'SALE-2026' are two rows: the take of one never backs a claim on
// the other (that would be an over-issue); trailing spaces still do not matter (PAD SPACE).
TEST(key_collation, take_does_not_back_another_row_under_bin) {
    take_ledger ledger;
    session a(variant_id::keys_bin, &ledger, 1), b(variant_id::keys_bin, &ledger, 2),
        c(variant_id::keys_bin, &ledger, 3);
    ASSERT_TRUE(a.ready()) << a.error();
    auto take = a.exec(take_sql, {ok_rows(1)});
    EXPECT_TRUE(take.has(event::took));
    auto wrong_row = b.exec(b.claim_sql("9", "'SALE-2026 '"), {});
    EXPECT_TRUE(wrong_row.has(event::blocked));
    EXPECT_TRUE(wrong_row.sent().empty());
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"sale-2026"}), 1u);
    auto same_row = c.exec(c.claim_sql("10", "'sale-2026 '"), {ok_rows(1)});
    EXPECT_TRUE(same_row.has(event::claim_inserted));
    EXPECT_EQ(ledger.waiting_takes("coupon_stock", {"sale-2026"}), 0u);
}

// Without the schema check (no schema_check_user) keys stay byte for byte, as before: the safe way.
TEST(key_collation, unknown_collation_keeps_bytes) {
    take_ledger ledger;
    session a(variant_id::coupon, &ledger, 1), b(variant_id::coupon, &ledger, 2);
    ASSERT_TRUE(a.ready()) << a.error();
    EXPECT_TRUE(a.exec(take_sql, {ok_rows(1)}).has(event::took));
    EXPECT_TRUE(b.exec(b.claim_sql("9", "'SALE-2026'"), {}).has(event::blocked));
    EXPECT_TRUE(b.exec(b.claim_sql("9", "'sale-2026 '"), {}).has(event::blocked));
}

// Reads, relative changes and the transaction's own memory use the same canonical key: a read of
// 'SALE-2026' is evidence for a write of 'sale-2026' on the same connection under ci.
TEST(key_collation, read_and_write_share_the_key_under_ci) {
    session a(variant_id::keys_ci);
    ASSERT_TRUE(a.ready()) << a.error();
    auto read = a.exec("SELECT remain FROM coupon_stock WHERE campaign_id = 'SALE-2026'", {counter_row(100)});
    ASSERT_EQ(read.d.what, verdict::remember_read);
    EXPECT_EQ(read.d.key, key_tuple{"sale-2026"});
    const auto d = a.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 'Sale-2026  '");
    EXPECT_EQ(d.key, key_tuple{"sale-2026"});
}

}  // namespace
}  // namespace claimguard::engine::test
