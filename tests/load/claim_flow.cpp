// The claim attempt: the incident's naive read-check-write-insert, or the post-mortem's hand fix.
#include "tests/load/claim_flow.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <thread>

namespace claimguard::load {

namespace {

constexpr unsigned er_dup_entry = 1062;
// Our own code for "the app found no stock row" (not a MySQL code).
constexpr unsigned no_stock_row = 0;

bool contains_ignoring_case(std::string_view text, std::string_view part) {
    if (part.empty())
        return true;
    const auto it = std::search(text.begin(), text.end(), part.begin(), part.end(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
    return it != text.end();
}

// The app's own work between two statements (a transaction holds its row locks meanwhile).
void app_work(const flow_options& options) {
    if (options.app_work.count() > 0)
        std::this_thread::sleep_for(options.app_work);
}

// Ends a transaction the attempt will not commit. A ROLLBACK that loses the connection only closes it.
void abandon(mysql_session& session, const flow_options& options) {
    if (!options.transaction || !session.connected())
        return;
    if (auto r = session.execute("ROLLBACK"); !r && r.error().connection_lost)
        session.disconnect();
}

attempt_result refused(mysql_session& session, const flow_options& options, answer_kind kind,
                       answer_reason reason) {
    abandon(session, options);
    return {kind, reason, std::nullopt, {}};
}

attempt_result failed(mysql_session& session, const flow_options& options, const sql_error& error,
                      const char* statement) {
    attempt_result result{answer_kind::error, answer_reason::none, error, statement};
    if (error.connection_lost) {
        session.disconnect();
        return result;
    }
    abandon(session, options);
    result = classify_error(error, options.answers);
    result.statement = statement;
    return result;
}

attempt_result claimed(mysql_session& session, const flow_options& options) {
    if (options.transaction) {
        app_work(options);
        if (auto r = session.execute("COMMIT"); !r)
            return failed(session, options, r.error(), "COMMIT");
    }
    return {answer_kind::claimed, answer_reason::none, std::nullopt, {}};
}

attempt_result naive_attempt(mysql_session& session, const flow_options& options, std::int64_t user) {
    auto read = session.read_stock(options.campaign);
    if (!read)
        return failed(session, options, read.error(), "SELECT");
    if (!read->has_value()) {
        abandon(session, options);
        return {answer_kind::error, answer_reason::none,
                sql_error(no_stock_row, "no coupon_stock row for campaign " + std::to_string(options.campaign), false),
                "SELECT"};
    }
    const stock_row row = **read;
    if (row.remain <= 0)
        return refused(session, options, answer_kind::sold_out, answer_reason::app_check);
    app_work(options);
    auto written = session.write_stock(options.campaign, row.remain - 1, row.version + 1);
    if (!written)
        return failed(session, options, written.error(), "UPDATE");
    if (*written == 0 && !options.ignore_affected_rows)
        return refused(session, options, answer_kind::sold_out, answer_reason::affected_rows);
    app_work(options);
    auto inserted = session.insert_order(user, options.campaign);
    if (!inserted)
        return failed(session, options, inserted.error(), "INSERT");
    if (*inserted == 0)
        return refused(session, options, answer_kind::sold_out, answer_reason::insert_no_row);
    return claimed(session, options);
}

attempt_result fixed_attempt(mysql_session& session, const flow_options& options, std::int64_t user) {
    auto decremented = session.decrement_guarded(options.campaign);
    if (!decremented)
        return failed(session, options, decremented.error(), "UPDATE");
    if (*decremented == 0)
        return refused(session, options, answer_kind::sold_out, answer_reason::affected_rows);
    app_work(options);
    auto inserted = session.insert_order(user, options.campaign);
    if (!inserted && inserted.error().code == er_dup_entry) {
        // The hand fix: a duplicate key is "already claimed", and the unit taken goes back.
        if (options.transaction)
            return refused(session, options, answer_kind::duplicate, answer_reason::duplicate_key);
        if (auto back = session.return_unit(options.campaign); !back)
            return failed(session, options, back.error(), "UPDATE (return unit)");
        return {answer_kind::duplicate, answer_reason::duplicate_key, std::nullopt, {}};
    }
    if (!inserted)
        return failed(session, options, inserted.error(), "INSERT");
    if (*inserted == 0)
        return refused(session, options, answer_kind::sold_out, answer_reason::insert_no_row);
    return claimed(session, options);
}

}  // namespace

attempt_result classify_error(const sql_error& error, const answer_rules& rules) {
    if (!error.connection_lost) {
        if (error.code == rules.sold_out_code && contains_ignoring_case(error.message, rules.sold_out_text))
            return {answer_kind::sold_out, answer_reason::server_answer, error, {}};
        if (error.code == rules.duplicate_code && contains_ignoring_case(error.message, rules.duplicate_text))
            return {answer_kind::duplicate, answer_reason::server_answer, error, {}};
    }
    return {answer_kind::error, answer_reason::none, error, {}};
}

attempt_result run_attempt(mysql_session& session, const flow_options& options, std::int64_t user) {
    if (options.transaction) {
        if (auto begun = session.execute("BEGIN"); !begun)
            return failed(session, options, begun.error(), "BEGIN");
        app_work(options);
    }
    return options.flow == flow_kind::naive ? naive_attempt(session, options, user)
                                            : fixed_attempt(session, options, user);
}

std::optional<flow_choice> parse_flow(std::string_view name) {
    if (name == "naive")
        return flow_choice{flow_kind::naive, false};
    if (name == "fixed")
        return flow_choice{flow_kind::fixed, false};
    if (name == "naive_tx")
        return flow_choice{flow_kind::naive, true};
    if (name == "fixed_tx")
        return flow_choice{flow_kind::fixed, true};
    return std::nullopt;
}

const char* to_string(answer_reason reason) {
    switch (reason) {
        case answer_reason::none: return "none";
        case answer_reason::app_check: return "app_check";
        case answer_reason::affected_rows: return "affected_rows";
        case answer_reason::server_answer: return "server_answer";
        case answer_reason::insert_no_row: return "insert_no_row";
        case answer_reason::duplicate_key: return "duplicate_key";
    }
    return "none";
}

}  // namespace claimguard::load
