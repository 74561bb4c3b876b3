// connection_state: the front of the statement pipeline without a socket. What a connection's
// statements set up for the next ones (ANSI_QUOTES, the client character set, USE, SQL-level
// PREPARE / DEALLOCATE and its limit), the claim table's columns it asks for (the exact query,
// the reply read back, the limit on tables it remembers), and what passes untouched (trusted
// users, statements the pre-filter rules out).
#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proxy/engine/bound_values.hpp"
#include "proxy/engine/connection_state.hpp"
#include "proxy/engine/trusted_writes.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/column.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/text_row.hpp"
#include "tests/proxy/engine/engine_harness.hpp"

namespace claimguard::engine::test {
namespace {

namespace proto = protocol;
using rec = recognition;

// coupon.yaml with a trusted restock user.
const rules_env& trusted_env() {
    static std::unique_ptr<rules_env> env = [] {
        return env_of_text("trusted_users: [stock_admin]\n" + read_coupon_yaml());
    }();
    return *env;
}

// One client connection's front, the engine state it changes, and the statements it recognised
// (kept: the facts view their text, the decisions the facts).
class front {
public:
    explicit front(const rules_env& env) : env_(env) {}

    [[nodiscard]] bool ready() const { return env_.error.empty(); }
    [[nodiscard]] const std::string& error() const { return env_.error; }

    [[nodiscard]] statement_inputs inputs(std::string_view user = "app", std::uint16_t status = autocommit) {
        return {*env_.rules, *env_.index, user, status, memory, transaction};
    }

    // COM_QUERY: what the front said; the statement is last().
    rec query(std::string sql, std::string_view user = "app", std::uint16_t status = autocommit) {
        memory.next_command();
        auto& s = add(std::move(sql));
        return state.recognise_query(s.text, inputs(user, status), s.statement);
    }
    // COM_STMT_PREPARE, screened first as the session screens it.
    rec prepare(std::string sql, std::string_view user = "app") {
        auto& s = add(std::move(sql));
        if (connection_state::passes_untouched(s.text, inputs(user), false)) return rec::forward;
        return state.recognise_prepare(s.text, inputs(user), s.statement);
    }
    // The lookup's reply for the last statement: the column names as rows (null: no reply that reads).
    rec columns(const std::vector<std::string>* names) {
        if (!names) return state.columns_arrived(nullptr, inputs(), last());
        reply_ = column_reply(*names);
        const proto::reply_view view(reply_, proto::cap::protocol_41, 0);
        return state.columns_arrived(&view, inputs(), last());
    }
    // The answer to the sql_mode question for the last statement: a one-row result (null: none that reads).
    rec sql_mode(const std::string* value) {
        if (!value) return state.sql_mode_arrived(nullptr, inputs(), last());
        reply_ = column_reply({*value});
        const proto::reply_view view(reply_, proto::cap::protocol_41, 0);
        return state.sql_mode_arrived(&view, inputs(), last());
    }
    // A statement that needs no lookup (it fails the test when one is asked).
    rec run(std::string sql) {
        auto r = query(std::move(sql));
        EXPECT_NE(r, rec::needs_columns) << statements_.back()->text;
        return r;
    }

    [[nodiscard]] recognised_statement& last() { return statements_.back()->statement; }

    // A one-column text result set, as information_schema answers the lookup.
    static std::vector<proto::byte_buffer> column_reply(const std::vector<std::string>& names) {
        std::vector<proto::byte_buffer> payloads;
        proto::byte_buffer b;
        proto::serialize_column_count(1, b);
        payloads.push_back(b);
        proto::column_definition c;
        c.schema = "information_schema";
        c.table = c.org_table = "COLUMNS";
        c.name = c.org_name = "COLUMN_NAME";
        c.charset = 45;
        c.type = proto::field_type::var_string;
        b.clear();
        proto::serialize(c, 0, b);
        payloads.push_back(b);
        b.clear();
        proto::serialize(proto::eof_packet{0, autocommit}, b);
        payloads.push_back(b);
        for (const auto& n : names) {
            const std::vector<proto::text_value> row{std::string_view(n)};
            b.clear();
            proto::serialize_text_row(row, b);
            payloads.push_back(b);
        }
        b.clear();
        proto::serialize(proto::eof_packet{0, autocommit}, b);
        payloads.push_back(b);
        return payloads;
    }

    connection_state state;
    session_memory memory;
    transaction_tracker transaction;

private:
    struct kept {
        explicit kept(std::string t) : text(std::move(t)) {}
        std::string text;
        recognised_statement statement;
    };
    kept& add(std::string sql) {
        statements_.push_back(std::make_unique<kept>(std::move(sql)));
        return *statements_.back();
    }

    const rules_env& env_;
    std::deque<std::unique_ptr<kept>> statements_;
    std::vector<proto::byte_buffer> reply_;
};

const std::vector<std::string> order_columns{"id", "user_id", "campaign_id", "created_at"};
constexpr std::string_view order_lookup =
    "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = "
    "CONVERT(0x636F75706F6E5F6F72646572 USING utf8mb4) ORDER BY ORDINAL_POSITION";

// ---- what statements set up for the next ones ---------------------------------------------------

struct session_change_case {
    const char* name;
    std::vector<std::string> statements;  // each recognised in order on one connection
    bool ansi_quotes;
    rules::sql::charset charset;
    std::string database;
};

const session_change_case session_change_cases[] = {
    {"nothing_set", {}, false, rules::sql::charset::single_byte, ""},
    {"ansi_quotes_via_set_sql_mode", {"SET sql_mode = 'ANSI_QUOTES'"}, true, rules::sql::charset::single_byte, ""},
    {"ansi_quotes_among_other_modes",
     {"SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ANSI_QUOTES,NO_ZERO_DATE'"},
     true,
     rules::sql::charset::single_byte,
     ""},
    {"ansi_quotes_set_then_cleared",
     {"SET sql_mode = 'ANSI_QUOTES'", "SET sql_mode = 'STRICT_TRANS_TABLES'"},
     false,
     rules::sql::charset::single_byte,
     ""},
    {"charset_via_set_names", {"SET NAMES gbk"}, false, rules::sql::charset::gbk, ""},
    {"charset_via_character_set_client", {"SET character_set_client = sjis"}, false, rules::sql::charset::sjis, ""},
    {"charset_back_to_utf8mb4", {"SET NAMES big5", "SET NAMES utf8mb4"}, false, rules::sql::charset::single_byte, ""},
    {"use_database", {"USE shop"}, false, rules::sql::charset::single_byte, "shop"},
    {"use_quoted_database", {"USE `my shop`"}, false, rules::sql::charset::single_byte, "my shop"},
    {"use_twice", {"USE shop", "USE shop_eu"}, false, rules::sql::charset::single_byte, "shop_eu"},
    {"all_three",
     {"SET NAMES gbk", "SET sql_mode = 'ANSI_QUOTES'", "USE shop"},
     true,
     rules::sql::charset::gbk,
     "shop"},
};

class session_changes : public ::testing::TestWithParam<session_change_case> {};

TEST_P(session_changes, learned_for_the_next_statement) {
    const auto& c = GetParam();
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    for (const auto& sql : c.statements) EXPECT_EQ(f.run(sql), rec::decided) << sql;
    EXPECT_EQ(f.state.lexer().ansi_quotes, c.ansi_quotes);
    EXPECT_EQ(f.state.lexer().client_charset, c.charset);
    EXPECT_EQ(f.state.database(), c.database);
    // The next statement is read so, and decided in that database.
    EXPECT_EQ(f.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7"), rec::decided);
    EXPECT_EQ(f.last().parsed.options.ansi_quotes, c.ansi_quotes);
    EXPECT_EQ(f.last().parsed.options.client_charset, c.charset);
    EXPECT_EQ(f.memory.database, c.database);
    EXPECT_EQ(f.last().decided.what, verdict::take);
}

INSTANTIATE_TEST_SUITE_P(connection_state, session_changes, ::testing::ValuesIn(session_change_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// ANSI_QUOTES changes what the statement is: "coupon_stock" is a table, not a string.
TEST(connection_state, ansi_quotes_makes_a_double_quoted_name_the_table) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    const std::string sql = "UPDATE \"coupon_stock\" SET remain = remain - 1 WHERE campaign_id = 7";
    EXPECT_EQ(f.run(sql), rec::decided);
    EXPECT_NE(f.last().decided.what, verdict::take);
    EXPECT_EQ(f.run("SET sql_mode = 'ANSI_QUOTES'"), rec::decided);
    EXPECT_EQ(f.run(sql), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::take);
}

// NO_BACKSLASH_ESCAPES comes from the server's status flags of the command, not from the SQL.
TEST(connection_state, no_backslash_escapes_from_the_status_flags) {
    connection_state s;
    EXPECT_FALSE(s.lexer_options(autocommit).no_backslash_escapes);
    EXPECT_TRUE(s.lexer_options(autocommit | proto::status::no_backslash_escapes).no_backslash_escapes);
    s.server_greeted(true, 100507);
    s.logged_in("shop", rules::sql::charset::gbk);
    const auto o = s.lexer_options(autocommit);
    EXPECT_TRUE(o.mariadb);
    EXPECT_EQ(o.server_version, 100507u);
    EXPECT_EQ(o.client_charset, rules::sql::charset::gbk);
    EXPECT_EQ(s.database(), "shop");
    s.use_database("shop_eu");  // COM_INIT_DB
    EXPECT_EQ(s.database(), "shop_eu");
}

// ---- the session's sql_mode, asked of the server ----------------------------------------------------

// The decision's unmodeled metric label ("" when none).
std::string_view unmodeled_code(const recognised_statement& rs) {
    return rs.decided.unmodeled ? rs.decided.reason : std::string_view{};
}

constexpr const char* p11_update = R"(UPDATE "coupon_stock" SET "remain" = 99 WHERE "campaign_id" = 7)";

// P11: SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'), then the double-quoted UPDATE was
// refused: the lexer kept the old ANSI_QUOTES and read "coupon_stock" as a string. Now the mode is
// asked of the server before the UPDATE, and the UPDATE is the take it is.
TEST(connection_state, p11_sql_mode_set_by_concat_is_asked_then_the_update_is_a_take) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    EXPECT_TRUE(f.state.sql_mode_known());
    EXPECT_EQ(f.run("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"), rec::decided);
    f.state.command_ended(false);
    EXPECT_FALSE(f.state.sql_mode_known());
    ASSERT_EQ(f.query(p11_update), rec::needs_sql_mode);
    const std::string answer = "STRICT_TRANS_TABLES,ANSI_QUOTES";
    ASSERT_EQ(f.sql_mode(&answer), rec::decided);
    EXPECT_TRUE(f.state.sql_mode_known());
    EXPECT_TRUE(f.last().parsed.options.ansi_quotes);
    EXPECT_EQ(f.last().decided.what, verdict::take);
    // Known now: the next one is not asked again.
    EXPECT_EQ(f.run(p11_update), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::take);
}

// After the handshake the mode is the server's (its default, or init_connect's): asked once, and only
// when a statement naming a protected table has a `"`.
TEST(connection_state, server_default_asked_once_and_only_when_a_statement_needs_it) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    EXPECT_EQ(f.run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7"), rec::decided);  // no `"`
    EXPECT_EQ(f.last().decided.what, verdict::take);
    EXPECT_EQ(f.run(R"(UPDATE other_table SET x = "a" WHERE id = 1)"), rec::forward);  // not protected
    EXPECT_FALSE(f.state.sql_mode_known());
    ASSERT_EQ(f.query(p11_update), rec::needs_sql_mode);
    const std::string ansi = "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI";
    ASSERT_EQ(f.sql_mode(&ansi), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::take);
    EXPECT_EQ(f.run(p11_update), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::take);
}

// Without ANSI_QUOTES from the server, "coupon_stock" is a string (the server refuses that UPDATE as
// a syntax error): read as the server reads it, not ours, with the rule's policy.
TEST(connection_state, server_default_without_ansi_quotes_reads_a_string) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    ASSERT_EQ(f.query(p11_update), rec::needs_sql_mode);
    const std::string plain = "STRICT_TRANS_TABLES";
    ASSERT_EQ(f.sql_mode(&plain), rec::decided);
    EXPECT_FALSE(f.last().parsed.options.ansi_quotes);
    EXPECT_EQ(f.last().decided.what, verdict::refuse);
    EXPECT_NE(unmodeled_code(f.last()), "sql_mode_unknown");
}

// Session statements with a `"` are asked too: one that starts with a versioned comment, and USE,
// whose "shop" is a database only with ANSI_QUOTES.
TEST(connection_state, session_statements_with_a_double_quote_are_asked) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    ASSERT_EQ(f.query(R"(/*!40101 UPDATE coupon_stock SET remain = 99 WHERE campaign_id = "campaign_id" */)"),
              rec::needs_sql_mode);
    ASSERT_EQ(f.query(R"(USE "shop")"), rec::needs_sql_mode);
    const std::string ansi = "ANSI_QUOTES";
    EXPECT_EQ(f.sql_mode(&ansi), rec::decided);
    EXPECT_EQ(f.state.database(), "shop");
}

// No answer: a statement that reads differently with ANSI_QUOTES is not decided on a guess (a guess of
// "a string" would read WHERE campaign_id = "campaign_id" as key 'campaign_id', where the server sees
// the column compared with itself: every row). One that reads the same either way is decided.
TEST(connection_state, no_answer_refuses_only_what_reads_differently) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    // The question goes unanswered each time (ERR): the statement is read without the answer.
    auto unanswered = [&](std::string sql) {
        const auto r = f.query(std::move(sql));
        return r == rec::needs_sql_mode ? f.sql_mode(nullptr) : r;
    };
    const std::string tautology = R"(UPDATE coupon_stock SET remain = 99 WHERE campaign_id = "campaign_id")";
    ASSERT_EQ(f.query(tautology), rec::needs_sql_mode);
    ASSERT_EQ(f.sql_mode(nullptr), rec::decided);
    EXPECT_FALSE(f.state.sql_mode_known());
    EXPECT_EQ(f.last().decided.what, verdict::refuse);
    EXPECT_EQ(unmodeled_code(f.last()), "sql_mode_unknown");
    // Asked again for the next statement that needs it; unanswered, refused again.
    ASSERT_EQ(f.query(tautology), rec::needs_sql_mode);
    ASSERT_EQ(f.sql_mode(nullptr), rec::decided);
    EXPECT_EQ(unmodeled_code(f.last()), "sql_mode_unknown");
    // A `"` inside a '...' string reads the same in both modes.
    EXPECT_EQ(unanswered(R"(UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND 'say "hi"' = 'say "hi"')"),
              rec::decided);
    EXPECT_NE(unmodeled_code(f.last()), "sql_mode_unknown");
    // A read is forwarded either way (claimguard's promise never rests on reads).
    EXPECT_EQ(unanswered(R"(SELECT "remain" FROM coupon_stock WHERE campaign_id = 7)"), rec::forward);
    // USE "shop" changed the database, or failed: not known any more (every rule's schema matches).
    EXPECT_EQ(f.run("USE shop_eu"), rec::decided);
    EXPECT_EQ(f.state.database(), "shop_eu");
    (void)unanswered(R"(USE "shop")");
    EXPECT_EQ(f.state.database(), "");
    // SET NAMES "gbk" names gbk either way: not even asked.
    EXPECT_EQ(f.run(R"(SET NAMES "gbk")"), rec::decided);
    EXPECT_EQ(f.state.lexer().client_charset, rules::sql::charset::gbk);
    // An answer at last.
    ASSERT_EQ(f.query(p11_update), rec::needs_sql_mode);
    const std::string ansi = "ANSI_QUOTES";
    ASSERT_EQ(f.sql_mode(&ansi), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::take);
}

// XA PREPARE "x1" (the question would fail in XA's IDLE state) and SET NAMES "gbk" mean the same in
// both modes, and do not matter to the rules: not asked.
TEST(connection_state, session_statements_that_read_the_same_are_not_asked) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    EXPECT_NE(f.query(R"(XA END "x1")"), rec::needs_sql_mode);
    EXPECT_NE(f.query(R"(XA PREPARE "x1")"), rec::needs_sql_mode);
    EXPECT_NE(f.query(R"(SET NAMES "utf8mb4")"), rec::needs_sql_mode);
    EXPECT_NE(f.query(R"(SET @note = "x")"), rec::needs_sql_mode);
    EXPECT_FALSE(f.state.sql_mode_known());
}

struct mode_change_case {
    const char* name;
    const char* sql;
    bool known_after;
};

// What each statement leaves: a literal SET is learned; anything else that may change the session's
// sql_mode makes it asked again; a CALL does not (a routine runs with its own sql_mode and gives the
// caller's back on exit).
const mode_change_case mode_change_cases[] = {
    {"literal", "SET sql_mode = 'ANSI_QUOTES'", true},
    {"literal_at_at_colon_equals", "SET @@sql_mode := 'ANSI_QUOTES'", true},
    {"literal_in_multi_assignment", "SET autocommit = 1, @@session.sql_mode = 'ANSI'", true},
    {"concat", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')", false},
    {"replace", "SET sql_mode = REPLACE(@@sql_mode, 'ANSI_QUOTES', '')", false},
    {"user_variable", "SET @@sql_mode := @saved_mode", false},
    {"default", "SET sql_mode = DEFAULT", false},
    {"upper_case_name_at_the_end", "SET SESSION SQL_MODE=@@GLOBAL.SQL_MODE", false},
    {"concat_in_multi_assignment", "SET autocommit = 1, sql_mode = CONCAT(@@sql_mode, ',ANSI')", false},
    {"subquery_not_read", "SET sql_mode = (SELECT 'ANSI_QUOTES')", false},
    {"set_statement_for", "SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR SELECT 1", false},
    {"execute", "EXECUTE set_mode", false},
    {"execute_immediate", "EXECUTE IMMEDIATE 'SET sql_mode = ''ANSI_QUOTES'''", false},
    {"several_statements", "SET sql_mode = 'ANSI_QUOTES'; SELECT 1", false},
    {"global", "SET GLOBAL sql_mode = 'ANSI_QUOTES'", false},
    {"call", "CALL refill(7)", true},
    {"other_variable", "SET autocommit = 0", true},
};

class mode_changes : public ::testing::TestWithParam<mode_change_case> {};

TEST_P(mode_changes, known_or_asked_again) {
    const auto& c = GetParam();
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    (void)f.query(c.sql);
    f.state.command_ended(false);
    EXPECT_EQ(f.state.sql_mode_known(), c.known_after);
    EXPECT_EQ(f.query(p11_update), c.known_after ? rec::decided : rec::needs_sql_mode);
}

INSTANTIATE_TEST_SUITE_P(connection_state, mode_changes, ::testing::ValuesIn(mode_change_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// A literal SET the server refuses (ERR 1231) leaves the mode as it was: asked again.
TEST(connection_state, literal_set_the_server_refuses_is_asked_again) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    EXPECT_EQ(f.run("SET sql_mode = 'ANSI_QUOTES,NO_SUCH_MODE'"), rec::decided);
    EXPECT_TRUE(f.state.lexer().ansi_quotes);
    f.state.command_ended(true);
    EXPECT_FALSE(f.state.sql_mode_known());
    EXPECT_EQ(f.query(p11_update), rec::needs_sql_mode);
    // A later command's failure says nothing about the mode.
    const std::string plain = "";
    ASSERT_EQ(f.sql_mode(&plain), rec::decided);
    f.state.command_ended(true);
    EXPECT_TRUE(f.state.sql_mode_known());
}

// COM_STMT_PREPARE: the server prepares with the mode in force, so it is asked first.
TEST(connection_state, prepare_asks_the_sql_mode_first) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    f.state.forget_sql_mode();
    ASSERT_EQ(f.prepare(R"(UPDATE "coupon_stock" SET "remain" = ? WHERE "campaign_id" = ?)"), rec::needs_sql_mode);
    const std::string ansi = "ANSI_QUOTES";
    EXPECT_EQ(f.sql_mode(&ansi), rec::keep_prepared);
    EXPECT_TRUE(f.last().parsed.options.ansi_quotes);
    EXPECT_TRUE(f.last().parsed.ours());
}

// A prepared SET of sql_mode changes the mode at each execute, not at the prepare: a `?` value, or one
// the parser does not read (kept without facts so that its executes are seen).
TEST(connection_state, prepared_set_of_sql_mode_makes_each_execute_ask_again) {
    for (const char* sql : {"SET sql_mode = ?", "SET sql_mode = (SELECT 'ANSI_QUOTES')"}) {
        front f(env_for(variant_id::coupon));
        ASSERT_TRUE(f.ready()) << f.error();
        ASSERT_EQ(f.prepare(sql), rec::keep_prepared) << sql;
        EXPECT_TRUE(f.state.sql_mode_known()) << sql;  // preparing it changes nothing
        auto& ps = f.last();
        (void)f.state.decide_statement(ps.parsed, ps.facts, *env_for(variant_id::coupon).rules, resolve_literal,
                                       f.memory, f.transaction);
        EXPECT_FALSE(f.state.sql_mode_known()) << sql;
    }
}

// PIPES_AS_CONCAT needs no lexer flag: `||` is never read as part of a value or a guard, so the
// decision is the same whether it means OR or concatenation.
TEST(connection_state, pipes_never_part_of_a_value_or_guard) {
    for (const char* mode : {"SET sql_mode = ''", "SET sql_mode = 'PIPES_AS_CONCAT'", "SET sql_mode = 'ANSI'"}) {
        front f(env_for(variant_id::coupon));
        ASSERT_TRUE(f.ready()) << f.error();
        EXPECT_EQ(f.run(mode), rec::decided);
        // OR, or a key of '71': not a key equality either way.
        EXPECT_EQ(f.run("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 || 1"), rec::decided) << mode;
        EXPECT_EQ(f.last().decided.what, verdict::refuse) << mode;
        // A guard `remain >= 1 || 1` is no guard in either mode.
        EXPECT_EQ(f.run("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7 AND remain >= 1 || 1"),
                  rec::decided);
        EXPECT_EQ(f.last().decided.what, verdict::refuse) << mode;
        // `remain - 1 || 0` is an expression (a write of the counter: the rule's units), never `remain - 1`.
        EXPECT_EQ(f.run("UPDATE coupon_stock SET remain = remain - 1 || 0 WHERE campaign_id = 7"), rec::decided);
        ASSERT_FALSE(f.last().facts.facts.empty());
        EXPECT_TRUE(std::holds_alternative<rules::match::counter_write>(f.last().facts.facts.front())) << mode;
    }
}

// ---- SQL-level PREPARE / DEALLOCATE ---------------------------------------------------------------------

constexpr const char* prepare_write = "PREPARE s1 FROM 'UPDATE coupon_stock SET remain = 5 WHERE campaign_id = 1'";

struct sql_prepared_case {
    const char* name;
    variant_id rules;
    std::vector<std::string> statements;
    const char* asked;                 // the name looked up afterwards
    std::vector<std::string> reached;  // empty: not tracked
    // The transaction holds a deferred take when the last statement comes: every statement is
    // looked at then, one without facts too.
    bool deferred_pending = false;
};

const sql_prepared_case sql_prepared_cases[] = {
    {"prepare_forwarded_is_tracked", variant_id::forward_unmodeled, {prepare_write}, "s1", {"coupon_stock"}},
    {"prepare_in_observe_is_tracked", variant_id::observe, {prepare_write}, "s1", {"coupon_stock"}},
    {"prepare_refused_is_not_tracked", variant_id::coupon, {prepare_write}, "s1", {}},
    {"prepare_of_an_unprotected_table_is_not_tracked",
     variant_id::forward_unmodeled,
     {"PREPARE s2 FROM 'UPDATE other SET x = 1'"},
     "s2",
     {}},
    {"name_without_case",
     variant_id::forward_unmodeled,
     {"PREPARE S1 FROM 'UPDATE coupon_stock SET remain = 5'"},
     "s1",
     {"coupon_stock"}},
    // A DEALLOCATE (no protected name: the pre-filter passes it) or a PREPARE of a read (no facts)
    // still ends what the name reached; before, the name stayed tracked and an EXECUTE of the new
    // statement got the old one's policy (refused under unmodeled: refuse).
    {"deallocate_forgets", variant_id::forward_unmodeled, {prepare_write, "DEALLOCATE PREPARE s1"}, "s1", {}},
    {"deallocate_of_another_name_forgets_nothing",
     variant_id::forward_unmodeled,
     {prepare_write, "DEALLOCATE PREPARE s2"},
     "s1",
     {"coupon_stock"}},
    {"prepare_again_of_a_read_replaces",
     variant_id::forward_unmodeled,
     {prepare_write, "PREPARE s1 FROM 'SELECT 1 FROM coupon_stock'"},
     "s1",
     {}},
    {"prepare_again_of_another_table_replaces",
     variant_id::forward_unmodeled,
     {prepare_write, "PREPARE s1 FROM 'SELECT 1'"},
     "s1",
     {}},
    {"deallocate_forgets_when_looked_at",
     variant_id::forward_unmodeled,
     {prepare_write, "DEALLOCATE PREPARE s1"},
     "s1",
     {},
     true},
    {"drop_prepare_forgets_when_looked_at",
     variant_id::forward_unmodeled,
     {prepare_write, "DROP PREPARE s1"},
     "s1",
     {},
     true},
    {"prepare_again_of_a_read_replaces_when_looked_at",
     variant_id::forward_unmodeled,
     {prepare_write, "PREPARE s1 FROM 'SELECT 1 FROM coupon_stock'"},
     "s1",
     {},
     true},
    {"prepare_again_of_a_claim_replaces",
     variant_id::forward_unmodeled,
     {prepare_write, "PREPARE s1 FROM 'INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)'"},
     "s1",
     {"coupon_order"}},
    {"execute_keeps_it", variant_id::forward_unmodeled, {prepare_write, "EXECUTE s1"}, "s1", {"coupon_stock"}},
};

class sql_prepared : public ::testing::TestWithParam<sql_prepared_case> {};

TEST_P(sql_prepared, names_reaching_protected_tables) {
    const auto& c = GetParam();
    front f(env_for(c.rules));
    ASSERT_TRUE(f.ready()) << f.error();
    for (std::size_t i = 0; i < c.statements.size(); ++i) {
        if (c.deferred_pending && i + 1 == c.statements.size()) {
            deferred_take take;
            take.rule = take.table = "coupon_stock";
            f.memory.deferred.push_back(take);
        }
        (void)f.run(c.statements[i]);
    }
    const auto* reached = f.state.sql_prepared(c.asked);
    if (c.reached.empty()) {
        EXPECT_EQ(reached, nullptr);
    } else {
        ASSERT_NE(reached, nullptr);
        EXPECT_EQ(*reached, c.reached);
    }
}

INSTANTIATE_TEST_SUITE_P(connection_state, sql_prepared, ::testing::ValuesIn(sql_prepared_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// EXECUTE of a tracked name gets the policy of the rules its PREPARE reached.
TEST(connection_state, execute_of_a_tracked_name_is_unmodeled) {
    front f(env_for(variant_id::forward_unmodeled));
    ASSERT_TRUE(f.ready()) << f.error();
    (void)f.run(prepare_write);
    EXPECT_EQ(f.run("EXECUTE s1"), rec::decided);
    EXPECT_TRUE(f.last().decided.unmodeled);
    EXPECT_EQ(f.last().decided.stock->name, "coupon_stock");
}

// The session's shortcut (no recognised_statement for what the pre-filter passes) says what
// recognise_query() would: forward a statement no rule names, unless a tracked SQL-level prepared
// name may end with it; never a statement naming a protected table, nor one after deferred takes.
TEST(connection_state, query_passes_untouched_as_recognise_query_forwards) {
    front f(env_for(variant_id::forward_unmodeled));
    ASSERT_TRUE(f.ready()) << f.error();
    const std::vector<std::string> statements{"SELECT 1",
                                              "DEALLOCATE PREPARE s1",
                                              "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
                                              "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 7",
                                              "PREPARE s1 FROM 'SELECT 1'"};
    // Whenever the shortcut says untouched, recognise_query (on a copy of the state) forwards too.
    const auto agree = [&](const char* when) {
        for (const auto& sql : statements) {
            if (!f.state.query_passes_untouched(sql, f.inputs())) continue;
            connection_state copy = f.state;
            recognised_statement rs;
            EXPECT_EQ(copy.recognise_query(sql, f.inputs(), rs), rec::forward) << when << ": " << sql;
        }
    };
    EXPECT_TRUE(f.state.query_passes_untouched("SELECT 1", f.inputs()));
    EXPECT_FALSE(f.state.query_passes_untouched(statements[3], f.inputs()));
    agree("fresh");
    (void)f.run(prepare_write);  // a tracked name: a DEALLOCATE or PREPARE may end it
    EXPECT_FALSE(f.state.query_passes_untouched("SELECT 1", f.inputs()));
    agree("a tracked name");
    connection_state fresh;
    f.memory.deferred.push_back({"coupon_stock", "coupon_stock", {"7"}, {"campaign_id"}, 1, "UPDATE ...", {}});
    EXPECT_FALSE(fresh.query_passes_untouched("SELECT 1", f.inputs())) << "deferred takes pending";
}

// Past max_sql_prepared names the first in the map goes (the server refuses that many anyway).
TEST(connection_state, sql_prepared_limit) {
    front f(env_for(variant_id::forward_unmodeled));
    ASSERT_TRUE(f.ready()) << f.error();
    auto prepare = [&](std::size_t i) {
        char name[16];
        std::snprintf(name, sizeof name, "p%06zu", i);
        (void)f.run("PREPARE " + std::string(name) + " FROM 'UPDATE coupon_stock SET remain = 5'");
        return std::string(name);
    };
    for (std::size_t i = 0; i < connection_state::max_sql_prepared; ++i) {
        prepare(i);
        ASSERT_FALSE(f.last().sql_prepared_full) << i;
    }
    EXPECT_EQ(f.state.sql_prepared_count(), connection_state::max_sql_prepared);
    const auto newest = prepare(connection_state::max_sql_prepared);
    EXPECT_TRUE(f.last().sql_prepared_full);
    EXPECT_EQ(f.state.sql_prepared_count(), connection_state::max_sql_prepared);
    EXPECT_EQ(f.state.sql_prepared("p000000"), nullptr);
    EXPECT_NE(f.state.sql_prepared("p000001"), nullptr);
    EXPECT_NE(f.state.sql_prepared(newest), nullptr);
    // A name replaced is no new one.
    prepare(1);
    EXPECT_FALSE(f.last().sql_prepared_full);
    // COM_RESET_CONNECTION: the server dropped them all.
    f.state.reset();
    EXPECT_EQ(f.state.sql_prepared_count(), 0u);
}

// ---- a claim table's columns ------------------------------------------------------------------------------

rules::claim_rule r_shop() {
    rules::claim_rule r;
    r.table.name = "coupon_order";
    r.table.schema = "shop";
    return r;
}

TEST(connection_state, columns_query_is_hex_literals) {
    rules::claim_rule r;
    r.table.name = "coupon_order";
    EXPECT_EQ(connection_state::columns_query(r).sql, order_lookup);
    EXPECT_TRUE(connection_state::columns_query(r).parameters.empty());
    r.table.schema = "shop";
    EXPECT_EQ(connection_state::columns_query(r).sql,
              "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = CONVERT(0x73686F70 USING "
              "utf8mb4) AND TABLE_NAME = CONVERT(0x636F75706F6E5F6F72646572 USING utf8mb4) ORDER BY "
              "ORDINAL_POSITION");
    r.table.name = "o'rder";  // never spliced as text
    EXPECT_EQ(connection_state::columns_query(r).sql.find('\''), std::string::npos);
    // The statement's qualifier names the table's database, unquoted, whatever the rule says.
    rules::claim_rule u;
    u.table.name = "coupon_order";
    EXPECT_EQ(connection_state::columns_query(u, "`shop`").sql, connection_state::columns_query(r_shop()).sql);
    EXPECT_EQ(connection_state::columns_query(u, "shop").sql, connection_state::columns_query(r_shop()).sql);
}

struct column_names_case {
    const char* name;
    std::optional<std::vector<std::string>> rows;  // nullopt: no reply that reads
    std::vector<std::string> names;
};

const column_names_case column_names_cases[] = {
    {"four_columns", order_columns, order_columns},
    {"no_rows", std::vector<std::string>{}, {}},
    {"no_reply", std::nullopt, {}},
};

class column_names : public ::testing::TestWithParam<column_names_case> {};

TEST_P(column_names, read_from_the_reply) {
    const auto& c = GetParam();
    if (!c.rows) {
        EXPECT_EQ(connection_state::column_names(nullptr), c.names);
        return;
    }
    const auto payloads = front::column_reply(*c.rows);
    const proto::reply_view view(payloads, proto::cap::protocol_41, 0);
    EXPECT_EQ(connection_state::column_names(&view), c.names);
}

INSTANTIATE_TEST_SUITE_P(connection_state, column_names, ::testing::ValuesIn(column_names_cases),
                         [](const auto& info) { return std::string(info.param.name); });

constexpr const char* claim_without_columns = "INSERT INTO coupon_order VALUES (NULL, 42, 7, NOW())";

bool has_claim(const match::match_result& facts, bool columns_known) {
    for (const auto& f : facts.facts)
        if (const auto* ci = std::get_if<match::claim_insert>(&f)) return ci->columns_known == columns_known;
    return false;
}

// A claim INSERT without a column list: the columns are asked once, then the insert is a claim.
TEST(connection_state, claim_insert_without_columns_needs_them_then_matches) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    ASSERT_EQ(f.query(claim_without_columns), rec::needs_columns);
    ASSERT_TRUE(f.last().lookup);
    EXPECT_EQ(f.last().lookup->sql.sql, order_lookup);
    EXPECT_TRUE(has_claim(f.last().facts, false));
    EXPECT_EQ(f.columns(&order_columns), rec::decided);
    EXPECT_FALSE(f.last().lookup);
    EXPECT_TRUE(has_claim(f.last().facts, true));
    EXPECT_EQ(f.last().decided.what, verdict::claim);
    EXPECT_EQ(f.last().decided.claim->name, "coupon_order");
    EXPECT_EQ(f.last().decided.idempotency, (key_tuple{"42", "7"}));
    EXPECT_EQ(f.state.known_tables(), 1u);
    // Known now: the next one matches at once.
    EXPECT_EQ(f.run("INSERT INTO coupon_order VALUES (NULL, 43, 7, NOW())"), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::claim);
    // Another database is another table: asked again; a reset forgets them all.
    (void)f.run("USE shop_eu");
    EXPECT_EQ(f.query(claim_without_columns), rec::needs_columns);
    EXPECT_EQ(f.columns(&order_columns), rec::decided);
    EXPECT_EQ(f.state.known_tables(), 2u);
    f.state.reset();
    EXPECT_EQ(f.state.known_tables(), 0u);
    EXPECT_EQ(f.query(claim_without_columns), rec::needs_columns);
}

// A claim INSERT without a column list that names the table's database (`INSERT INTO shop.coupon_order
// VALUES (...)`) from a session in another database: the columns are asked of that database, not of the
// session's (which has no such table: the lookup found nothing, and the claim of a correct app was refused).
// Once known, the same table is known from any database.
TEST(connection_state, qualified_claim_insert_without_columns_asks_the_tables_database) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    (void)f.run("USE other");
    ASSERT_EQ(f.query("INSERT INTO shop.coupon_order VALUES (NULL, 42, 7, NOW())"), rec::needs_columns);
    ASSERT_TRUE(f.last().lookup);
    EXPECT_EQ(f.last().lookup->sql.sql, connection_state::columns_query(r_shop()).sql);
    EXPECT_EQ(f.columns(&order_columns), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::claim);
    EXPECT_EQ(f.last().decided.idempotency, (key_tuple{"42", "7"}));
    (void)f.run("USE another");
    EXPECT_EQ(f.run("INSERT INTO `shop`.coupon_order VALUES (NULL, 43, 7, NOW())"), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::claim);
    EXPECT_EQ(f.state.known_tables(), 1u);
    // The unqualified table is the session's database's: asked of it.
    ASSERT_EQ(f.query(claim_without_columns), rec::needs_columns);
    EXPECT_EQ(f.last().lookup->sql.sql, order_lookup);
}

// The lookup found nothing (no reply that reads, or no rows): the insert stays unmodeled, and the
// table is not asked again on this connection.
TEST(connection_state, columns_not_found_stay_unmodeled) {
    for (const bool readable : {false, true}) {
        SCOPED_TRACE(readable ? "no rows" : "no reply");
        front f(env_for(variant_id::coupon));
        ASSERT_TRUE(f.ready()) << f.error();
        const std::vector<std::string> none;
        ASSERT_EQ(f.query(claim_without_columns), rec::needs_columns);
        EXPECT_EQ(f.columns(readable ? &none : nullptr), rec::decided);
        EXPECT_EQ(f.last().decided.what, verdict::refuse);
        EXPECT_TRUE(f.last().decided.unmodeled);
        EXPECT_EQ(f.run(claim_without_columns), rec::decided);
        EXPECT_EQ(f.last().decided.what, verdict::refuse);
    }
}

// A column count that is not the row's: unmodeled as well.
TEST(connection_state, columns_of_another_width_stay_unmodeled) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    const std::vector<std::string> three{"id", "user_id", "campaign_id"};
    ASSERT_EQ(f.query(claim_without_columns), rec::needs_columns);
    EXPECT_EQ(f.columns(&three), rec::decided);
    EXPECT_EQ(f.last().decided.what, verdict::refuse);
}

// COM_STMT_PREPARE asks for the columns too, and keeps what it matched for the executes.
TEST(connection_state, prepare_without_columns_needs_them_then_keeps) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    ASSERT_EQ(f.prepare("INSERT INTO coupon_order VALUES (NULL, ?, ?, NOW())"), rec::needs_columns);
    EXPECT_EQ(f.last().lookup->sql.sql, order_lookup);
    EXPECT_EQ(f.columns(&order_columns), rec::keep_prepared);
    EXPECT_TRUE(has_claim(f.last().facts, true));
    // Executed with bound values: the same claim decision as the text protocol's.
    auto d = f.state.decide_statement(f.last().parsed, f.last().facts, *env_for(variant_id::coupon).rules,
                                      bound_integers({42, 7}), f.memory, f.transaction);
    EXPECT_EQ(d.what, verdict::claim);
    EXPECT_EQ(d.idempotency, (key_tuple{"42", "7"}));
}

// Past max_known_tables (rule and database) the first in the map goes and is asked again.
TEST(connection_state, known_tables_limit) {
    front f(env_for(variant_id::coupon));
    ASSERT_TRUE(f.ready()) << f.error();
    auto database = [](std::size_t i) {
        char name[16];
        std::snprintf(name, sizeof name, "d%03zu", i);
        return std::string(name);
    };
    for (std::size_t i = 0; i <= connection_state::max_known_tables; ++i) {
        (void)f.run("USE " + database(i));
        ASSERT_EQ(f.query(claim_without_columns), rec::needs_columns) << i;
        ASSERT_EQ(f.columns(&order_columns), rec::decided) << i;
        EXPECT_LE(f.state.known_tables(), connection_state::max_known_tables);
    }
    EXPECT_EQ(f.state.known_tables(), connection_state::max_known_tables);
    (void)f.run("USE " + database(connection_state::max_known_tables));
    EXPECT_EQ(f.run(claim_without_columns), rec::decided);
    (void)f.run("USE " + database(1));
    EXPECT_EQ(f.run(claim_without_columns), rec::decided);
    (void)f.run("USE " + database(0));
    EXPECT_EQ(f.query(claim_without_columns), rec::needs_columns);
}

// ---- what passes untouched --------------------------------------------------------------------------------

struct untouched_case {
    const char* name;
    std::string user;
    std::string sql;
    bool deferred_pending;  // the transaction holds a deferred take (defer_decrement)
    rec query;              // COM_QUERY
    rec prepare;            // COM_STMT_PREPARE
};

const untouched_case untouched_cases[] = {
    // A trusted user's write of a stock table is followed (issue 21: audited, counted, the read cache
    // told); sent unchanged all the same (trusted_writes below).
    {"trusted_user_write_of_stock_is_followed", "stock_admin",
     "UPDATE coupon_stock SET remain = 100 WHERE campaign_id = 7", false, rec::decided, rec::keep_prepared},
    {"trusted_user_forwards_a_claim", "stock_admin", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 7)",
     false, rec::forward, rec::forward},
    // A trusted user's read costs what it did: not even parsed.
    {"trusted_user_read_is_untouched", "stock_admin", "SELECT remain FROM coupon_stock WHERE campaign_id = 7", false,
     rec::forward, rec::forward},
    {"trusted_user_forwards_with_deferred_takes", "stock_admin", "CREATE TABLE t (a INT)", true, rec::forward,
     rec::forward},
    {"app_user_write_is_decided", "app", "UPDATE coupon_stock SET remain = 100 WHERE campaign_id = 7", false,
     rec::decided, rec::keep_prepared},
    {"prefilter_irrelevant_forwards", "app", "SELECT * FROM orders WHERE id = 1", false, rec::forward, rec::forward},
    {"prefilter_irrelevant_ddl_forwards", "app", "CREATE TABLE t (a INT)", false, rec::forward, rec::forward},
    // A DDL commits implicitly: with deferred takes pending every statement is looked at (a
    // prepare is not: its execute is).
    {"deferred_takes_pending_look_at_everything", "app", "CREATE TABLE t (a INT)", true, rec::decided, rec::forward},
    {"session_statement_without_facts_forwards", "app", "SET @a = 1", false, rec::forward, rec::forward},
};

class untouched : public ::testing::TestWithParam<untouched_case> {};

TEST_P(untouched, by_the_front) {
    const auto& c = GetParam();
    front f(trusted_env());
    ASSERT_TRUE(f.ready()) << f.error();
    if (c.deferred_pending) {
        deferred_take take;
        take.rule = take.table = "coupon_stock";
        f.memory.deferred.push_back(take);
    }
    EXPECT_EQ(f.query(c.sql, c.user), c.query);
    // (A trusted user's INSERT is read to see whether it writes a stock table.)
    if (c.query == rec::forward && c.sql.rfind("INSERT", 0) != 0) {
        EXPECT_TRUE(f.last().parsed.sql.empty() || f.last().facts.facts.empty()) << "forwarded after a match";
    }
    EXPECT_EQ(f.prepare(c.sql, c.user), c.prepare);
}

INSTANTIATE_TEST_SUITE_P(connection_state, untouched, ::testing::ValuesIn(untouched_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- a trusted user's writes (issue 21) -------------------------------------------------------------

struct trusted_case {
    const char* name;
    std::string sql;
    bool followed;                 // decided as a trusted write of coupon_stock
    std::vector<std::string> key;  // the key it pins (empty: every key of the rule)
};

const trusted_case trusted_cases[] = {
    {"relative_restock_pins_its_key", "UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 7", true, {"7"}},
    {"absolute_restock_pins_its_key", "update coupon_stock set remain = 20 where campaign_id = '7'", true, {"7"}},
    {"restock_of_every_row", "UPDATE coupon_stock SET remain = remain + 5", true, {}},
    {"other_column", "UPDATE coupon_stock SET version = 0 WHERE campaign_id = 7", true, {}},
    {"new_stock_row", "INSERT INTO coupon_stock (campaign_id, remain) VALUES (8, 5)", true, {}},
    {"replace", "REPLACE INTO coupon_stock VALUES (7, 5, 0)", true, {}},
    {"delete", "DELETE FROM coupon_stock WHERE campaign_id = 7", true, {}},
    {"load_data", "LOAD DATA INFILE '/tmp/stock.csv' INTO TABLE coupon_stock", true, {}},
    {"claim_row_is_not_stock", "DELETE FROM coupon_order WHERE user_id = 1", false, {}},
    {"read_with_a_join_writes_nothing",
     "SELECT s.remain FROM coupon_stock s JOIN coupon_order o ON o.campaign_id = s.campaign_id",
     false,
     {}},
};

class trusted_writes : public ::testing::TestWithParam<trusted_case> {};

TEST_P(trusted_writes, are_forwarded_unchanged_and_followed) {
    const auto& c = GetParam();
    front f(trusted_env());
    ASSERT_TRUE(f.ready()) << f.error();
    const auto r = f.query(c.sql, "stock_admin");
    if (!c.followed) {
        EXPECT_EQ(r, rec::forward);
        return;
    }
    ASSERT_EQ(r, rec::decided);
    const auto& d = f.last().decided;
    EXPECT_TRUE(d.trusted_write);
    EXPECT_EQ(d.what, verdict::forward) << "never a take, a refusal or a rewrite";
    EXPECT_FALSE(d.unmodeled);
    ASSERT_NE(d.stock, nullptr);
    EXPECT_EQ(d.stock->name, "coupon_stock");
    EXPECT_EQ(d.key, c.key);
    // The same statement from the app is not a trusted write.
    front app(trusted_env());
    if (app.query(c.sql, "app") == rec::decided) {
        EXPECT_FALSE(app.last().decided.trusted_write);
    }
}

INSTANTIATE_TEST_SUITE_P(connection_state, trusted_writes, ::testing::ValuesIn(trusted_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// A prepared restock: kept at prepare time, its key known at the execute (the bound value).
TEST(connection_state, trusted_prepared_restock_pins_the_bound_key) {
    front f(trusted_env());
    ASSERT_TRUE(f.ready()) << f.error();
    ASSERT_EQ(f.prepare("UPDATE coupon_stock SET remain = remain + ? WHERE campaign_id = ?", "stock_admin"),
              rec::keep_prepared);
    const auto& st = f.last();
    const std::vector<protocol::binary_value> values{std::int64_t{5}, std::int64_t{9}};
    auto d = f.state.decide_trusted(st.parsed, st.facts, *trusted_env().index, bound_resolver(values), f.memory);
    EXPECT_TRUE(d.trusted_write);
    EXPECT_EQ(d.key, key_tuple{"9"});
}

// A restock prepared in SQL (PREPARE ... FROM '...'; EXECUTE): each EXECUTE is the trusted write, of
// every key of the rule (the values of USING are not read); the PREPARE itself writes nothing.
TEST(connection_state, trusted_sql_prepare_then_execute_is_a_trusted_write) {
    front f(trusted_env());
    ASSERT_TRUE(f.ready()) << f.error();
    const std::string admin = "stock_admin";
    EXPECT_EQ(f.query("PREPARE s FROM 'UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 7'", admin),
              rec::forward);
    for (const std::string execute : {"EXECUTE s", "execute S"}) {
        ASSERT_EQ(f.query(execute, admin), rec::decided) << execute;
        const auto& d = f.last().decided;
        EXPECT_TRUE(d.trusted_write);
        EXPECT_EQ(d.what, verdict::forward) << "never a take, a refusal or a rewrite";
        ASSERT_NE(d.stock, nullptr);
        EXPECT_EQ(d.stock->name, "coupon_stock");
        EXPECT_TRUE(d.key.empty());
    }
    EXPECT_EQ(f.query("EXECUTE other", admin), rec::forward);
    // The app's EXECUTE of a name it never prepared is not a trusted write.
    front app(trusted_env());
    EXPECT_EQ(app.query("EXECUTE s", "app"), rec::forward);
    // A read prepared under the same name replaces it; DEALLOCATE forgets it.
    EXPECT_EQ(f.query("PREPARE s FROM 'SELECT remain FROM coupon_stock WHERE campaign_id = 7'", admin), rec::forward);
    EXPECT_EQ(f.query("EXECUTE s", admin), rec::forward);
    EXPECT_EQ(f.query("PREPARE t FROM 'UPDATE coupon_stock SET remain = 9 WHERE campaign_id = 7'", admin),
              rec::forward);
    EXPECT_EQ(f.query("DEALLOCATE PREPARE t", admin), rec::forward);
    EXPECT_EQ(f.query("EXECUTE t", admin), rec::forward);
    // A claim table's write prepared in SQL is not a stock write.
    EXPECT_EQ(f.query("PREPARE c FROM 'DELETE FROM coupon_order WHERE user_id = 1'", admin), rec::forward);
    EXPECT_EQ(f.query("EXECUTE c", admin), rec::forward);
}

// Several statements in one query: not screened out as a read, so the session splits it and each
// statement is recognised (a restock after a SELECT is followed).
TEST(connection_state, trusted_several_statements_are_looked_at) {
    front f(trusted_env());
    ASSERT_TRUE(f.ready()) << f.error();
    EXPECT_TRUE(f.state.query_passes_untouched("SELECT remain FROM coupon_stock WHERE campaign_id = 7",
                                               f.inputs("stock_admin")));
    EXPECT_FALSE(f.state.query_passes_untouched(
        "SELECT 1; UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 7", f.inputs("stock_admin")));
    EXPECT_TRUE(f.state.query_passes_untouched("SELECT 1; SELECT 2", f.inputs("stock_admin")))
        << "names no protected table";
}

// After its OK: the read cache forgets the key (or every key of the rule), the gate hears the key
// is available again: a sold-out key sells again at once, not after the TTL or the re-check.
TEST(connection_state, trusted_write_followed_by_the_read_cache_and_the_gate) {
    using namespace std::chrono_literals;
    auto text = read_coupon_yaml();
    const std::string floor = "    floor: 0";
    const auto at = text.find(floor);
    ASSERT_NE(at, std::string::npos);
    text.insert(at + floor.size(), "\n    read_cache: 10s\n    admission: {max_in_flight: 1, queue_timeout: 2s}");
    const auto env = env_of_text("trusted_users: [stock_admin]\n" + text);
    ASSERT_TRUE(env->error.empty()) << env->error;
    front f(*env);
    const auto& rule = env->rules->stocks.front();
    ASSERT_TRUE(rule.read_cache && rule.admission);
    read_cache cache;
    admission_gate gate;
    const key_tuple k7{"7"}, k8{"8"};
    const auto now = read_cache::clock::now();
    const auto sell_out = [&] {
        for (const auto& k : {k7, k8}) {
            cache.on_exhausted(rule.name, k, 0, now);
            gate.note_sold_out(rule.name, k, 1, now);
        }
    };
    // (What the read cache does is read_cache_test's and it_read_cache's: its answers need a reply template.)
    const auto sold_out = [&](const key_tuple& k) {
        return gate.enter(rule.name, k, *rule.admission, 1, {}, now).what == admission::sold_out;
    };
    sell_out();
    ASSERT_EQ(f.query("UPDATE coupon_stock SET remain = remain + 5 WHERE campaign_id = 7", "stock_admin"),
              rec::decided);
    follow_trusted_write(f.last().decided, &cache, &gate);
    EXPECT_FALSE(sold_out(k7)) << "the restocked key";
    EXPECT_TRUE(sold_out(k8)) << "another key";
    sell_out();
    ASSERT_EQ(f.query("UPDATE coupon_stock SET remain = remain + 5", "stock_admin"), rec::decided);
    follow_trusted_write(f.last().decided, &cache, &gate);
    EXPECT_FALSE(sold_out(k8)) << "every key of the rule";
    // The app's own statements are never followed as a trusted write.
    decision app;
    app.stock = &rule;
    app.key = k8;
    sell_out();
    follow_trusted_write(app, &cache, &gate);
    EXPECT_TRUE(sold_out(k8));
}

// A prepare of a statement the rules do not model gets its policy at once: refused under
// `unmodeled: refuse`, kept under `forward` (counted at each execute).
TEST(connection_state, prepare_of_an_unmodeled_statement) {
    const std::string sql = "DELETE FROM coupon_stock WHERE campaign_id = 7";
    front refuse(env_for(variant_id::coupon));
    ASSERT_TRUE(refuse.ready()) << refuse.error();
    EXPECT_EQ(refuse.prepare(sql), rec::decided);
    EXPECT_EQ(refuse.last().decided.what, verdict::refuse);
    front forward(env_for(variant_id::forward_unmodeled));
    EXPECT_EQ(forward.prepare(sql), rec::keep_prepared);
}

}  // namespace
}  // namespace claimguard::engine::test
