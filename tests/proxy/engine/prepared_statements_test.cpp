// The prepared statements of one backend connection: the client's a rule may concern (MariaDB's
// "last prepared" id, the named limit, the types the server has not seen), and the proxy's own
// (prepared once per SQL, the first by SQL closed past the limit), with exact bytes on the wire.
#include <gtest/gtest.h>

#include "proxy/engine/prepared_statements.hpp"
#include "proxy/protocol/command.hpp"
#include "tests/proxy/engine/engine_harness.hpp"
#include "tests/proxy/protocol/test_support.hpp"

namespace claimguard::engine {
namespace {

namespace proto = protocol;
using proto::test::to_hex;

const proto::value_type bigint{proto::field_type::longlong, false};

std::unique_ptr<prepared_statement> statement(std::uint16_t params) {
    auto ps = std::make_unique<prepared_statement>();
    ps->params = params;
    return ps;
}

// An execute of statement 1 binding 7 as BIGINT; `with_types`: the packet carries the types.
proto::stmt_execute execute_of_7(bool with_types) {
    proto::stmt_execute e;
    e.statement_id = 1;
    e.new_params_bound = with_types;
    e.param_types = {bigint};
    e.params = {std::int64_t{7}};
    return e;
}

// COM_STMT_EXECUTE of statement `id` binding 7 as BIGINT, types sent: command, id, no cursor,
// one iteration, NULL bitmap, new-params-bound, the type, the value.
std::string execute_payload_hex(std::string_view id_hex) {
    return "17" + std::string(id_hex) + "00" + "01000000" + "00" + "01" + "0800" + "0700000000000000";
}

TEST(prepared_statements, last_prepared_names_the_statement_just_prepared_tracked_or_not) {
    prepared_statements ps;
    ASSERT_TRUE(ps.add(5, statement(1)));
    auto* five = ps.find(5);
    ASSERT_NE(five, nullptr);
    EXPECT_EQ(ps.find(prepared_statements::last_prepared), five);
    EXPECT_EQ(ps.find(6), nullptr);
    ps.relayed(6);  // a prepare no rule concerns: an execute of "the last" is not ours
    EXPECT_EQ(ps.find(prepared_statements::last_prepared), nullptr);
    EXPECT_EQ(ps.find(5), five);
    ps.close(5);
    EXPECT_EQ(ps.find(5), nullptr);
    ASSERT_TRUE(ps.add(0, statement(0)));
    ps.clear();  // COM_RESET_CONNECTION: nothing is left, "the last" included
    EXPECT_EQ(ps.size(), 0u);
    EXPECT_EQ(ps.find(prepared_statements::last_prepared), nullptr);
}

TEST(prepared_statements, past_the_limit_a_prepare_is_not_kept_and_the_caller_refuses_it) {
    prepared_statements ps;
    for (std::uint32_t id = 1; id <= prepared_statements::max_tracked; ++id) ASSERT_TRUE(ps.add(id, statement(0)));
    EXPECT_FALSE(ps.add(99999, statement(0)));
    EXPECT_EQ(ps.size(), prepared_statements::max_tracked);
    EXPECT_EQ(ps.find(99999), nullptr);
    EXPECT_EQ(ps.find(prepared_statements::last_prepared), nullptr);  // the refused one, not tracked
    EXPECT_NE(ps.find(1), nullptr);                                   // none forgotten
}

TEST(prepared_statements, an_execute_without_types_the_server_never_saw_is_re_encoded_with_them) {
    auto ps = statement(1);
    // The first execute carries its types: it goes as it came, and the types are remembered.
    auto first = execute_of_7(true);
    ps->bind(first);
    EXPECT_EQ(ps->types, std::vector<proto::value_type>{bigint});
    EXPECT_TRUE(ps->frames_for_server(first, 0).empty());
    // ... but the proxy answered it itself (a refused take): the server has not seen them. The next
    // execute reuses them without sending them: it goes re-encoded, in the client's sequence ids.
    auto second = execute_of_7(false);
    ps->bind(second);
    EXPECT_EQ(ps->types, std::vector<proto::value_type>{bigint});
    EXPECT_EQ(to_hex(ps->frames_for_server(second, 0)), "16000000" + execute_payload_hex("01000000"));
    ps->reached_server(second, true);
    EXPECT_TRUE(ps->frames_for_server(second, 0).empty());
}

TEST(prepared_statements, an_execute_that_reached_the_server_with_types_settles_them) {
    auto ps = statement(1);
    ps->reached_server(execute_of_7(true), false);
    EXPECT_TRUE(ps->server_has_types);
    auto none = statement(0);  // no parameters: nothing to bind
    none->reached_server(proto::stmt_execute{}, false);
    EXPECT_TRUE(none->server_has_types);
    auto reused = statement(1);
    reused->reached_server(execute_of_7(false), false);  // as it came, without types: still unknown
    EXPECT_FALSE(reused->server_has_types);
}

TEST(prepared_statements, past_the_limit_the_prepare_is_closed_and_answered_with_the_servers_own_error) {
    EXPECT_EQ(to_hex(prepared_statements::close_frames(7)), "050000001907000000");
    const auto a = prepared_statements::too_many();
    EXPECT_EQ(a.type, rules::answer::kind::error);
    EXPECT_EQ(a.code, 1461);  // ER_MAX_PREPARED_STMT_COUNT_REACHED
    EXPECT_EQ(a.sql_state, "42000");
    EXPECT_EQ(a.message,
              "claimguard: this connection holds 4096 prepared statements on protected tables "
              "(max_tracked_statements); close some");
}

// A client's prepared statement, parsed and matched as at prepare time.
std::unique_ptr<prepared_statement> prepared(std::string sql, const test::rules_env& env) {
    auto ps = std::make_unique<prepared_statement>();
    ps->sql = std::make_unique<std::string>(std::move(sql));
    ps->statement.parsed = rules::sql::parse(*ps->sql, rules::sql::lexer_options{});
    ps->statement.facts = rules::match::match(ps->statement.parsed, *env.index);
    return ps;
}

TEST(prepared_statements, rows_the_engine_cannot_read_get_the_unmodeled_policy_of_the_tables_written) {
    const auto& env = test::env_for(test::variant_id::coupon);
    ASSERT_TRUE(env.error.empty()) << env.error;
    connection_state state;
    session_memory memory;
    struct why_case {
        unread_rows why;
        std::string_view reason;
    };
    const auto take = prepared("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ?", env);
    for (auto c :
         {why_case{unread_rows::large_execute, "large_execute"}, why_case{unread_rows::bulk_execute, "bulk_execute"},
          why_case{unread_rows::long_data_execute, "long_data_execute"}}) {
        SCOPED_TRACE(c.reason);
        rules::match::match_result facts;
        auto d = decide_unread_rows(*take, c.why, *env.rules, state, memory, facts);
        ASSERT_TRUE(d);
        EXPECT_TRUE(d->unmodeled);
        EXPECT_EQ(d->reason, c.reason);
        EXPECT_EQ(d->what, verdict::refuse);  // coupon.yaml: unmodeled: refuse
        // A bulk execute's refusal says what to send instead (a multi-row INSERT is modelled).
        if (c.why == unread_rows::bulk_execute) {
            EXPECT_NE(d->note.find("rewriteBatchedStatements=true"), std::string_view::npos) << d->note;
        }
    }
    // a statement on no protected table goes as it came
    const auto other = prepared("UPDATE audit_note SET seen = 1 WHERE id = ?", env);
    rules::match::match_result facts;
    EXPECT_FALSE(decide_unread_rows(*other, unread_rows::bulk_execute, *env.rules, state, memory, facts));
}

rules::match::rewritten_sql own_sql(std::string sql, std::vector<std::uint32_t> parameters) {
    rules::match::rewritten_sql s;
    s.sql = std::move(sql);
    for (auto p : parameters) s.parameters.push_back(p);
    return s;
}

TEST(own_statements, a_statement_without_parameters_is_a_query) {
    own_statements own;
    const std::vector<proto::binary_value> params = {std::int64_t{7}};
    const std::vector<proto::value_type> types = {bigint};
    auto step = own.start(own_sql("SELECT 1", {}), &params, &types);
    ASSERT_TRUE(step);
    EXPECT_EQ(step->command, proto::com::query);
    EXPECT_EQ(to_hex(step->frames), "0900000003" + to_hex(proto::test::bytes_of("SELECT 1")));
    // parameters but no values (a text statement's rewrite): a query as well
    step = own.start(own_sql("SELECT ?", {0}), nullptr, nullptr);
    ASSERT_TRUE(step);
    EXPECT_EQ(step->command, proto::com::query);
}

TEST(own_statements, prepared_once_per_sql_then_executed_with_the_clients_values) {
    own_statements own;
    const std::vector<proto::binary_value> params = {std::int64_t{1}, std::int64_t{7}};
    const std::vector<proto::value_type> types = {bigint, bigint};
    const auto sql = own_sql("DO ?", {1});
    auto step = own.start(sql, &params, &types);
    ASSERT_TRUE(step);
    EXPECT_EQ(step->command, proto::com::stmt_prepare);
    EXPECT_EQ(to_hex(step->frames), "0500000016" + to_hex(proto::test::bytes_of("DO ?")));
    auto next = own.prepared(sql, 9, params, types);
    EXPECT_TRUE(next.close.empty());
    ASSERT_TRUE(next.execute);
    EXPECT_EQ(next.execute->command, proto::com::stmt_execute);
    EXPECT_EQ(to_hex(next.execute->frames), "16000000" + execute_payload_hex("09000000"));
    step = own.start(sql, &params, &types);  // prepared already
    ASSERT_TRUE(step);
    EXPECT_EQ(step->command, proto::com::stmt_execute);
    EXPECT_EQ(step->frames, next.execute->frames);
}

TEST(own_statements, past_the_limit_the_first_by_sql_is_closed) {
    own_statements own;
    const std::vector<proto::binary_value> params = {std::int64_t{7}};
    const std::vector<proto::value_type> types = {bigint};
    for (std::uint32_t i = 0; i < own_statements::max_statements; ++i)
        ASSERT_TRUE(
            own.prepared(own_sql("DO ? + " + std::to_string(100 + i), {0}), i + 1, params, types).close.empty());
    auto next = own.prepared(own_sql("DO ? + 999", {0}), 500, params, types);
    EXPECT_EQ(to_hex(next.close), "050000001901000000");  // COM_STMT_CLOSE of "DO ? + 100", statement 1
    EXPECT_EQ(own.size(), own_statements::max_statements);
    EXPECT_EQ(own.start(own_sql("DO ? + 100", {0}), &params, &types)->command, proto::com::stmt_prepare);
    EXPECT_EQ(own.start(own_sql("DO ? + 999", {0}), &params, &types)->command, proto::com::stmt_execute);
    own.clear();  // COM_RESET_CONNECTION
    EXPECT_EQ(own.start(own_sql("DO ? + 999", {0}), &params, &types)->command, proto::com::stmt_prepare);
}

TEST(own_statements, a_value_the_client_did_not_bind_is_an_error_not_a_guess) {
    own_statements own;
    const std::vector<proto::binary_value> params = {std::int64_t{7}};
    const std::vector<proto::value_type> types = {bigint};
    auto next = own.prepared(own_sql("DO ?", {3}), 1, params, types);
    EXPECT_FALSE(next.execute);
}

}  // namespace
}  // namespace claimguard::engine
