// One claim attempt as the incident's app makes it (naive) or as the post-mortem fixed it by hand (fixed).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tests/load/mysql_session.hpp"

namespace claimguard::load {

enum class flow_kind {
    naive,  // SELECT remain; app checks remain > 0; UPDATE SET remain = <literal>; INSERT
    fixed,  // UPDATE ... SET remain = remain - 1 ... AND remain > 0; branch on affected rows; INSERT
};

// How the app reads an ERR: which code and message text mean "sold out" and "already claimed".
struct answer_rules {
    unsigned sold_out_code = 1644;
    std::string sold_out_text = "sold out";
    unsigned duplicate_code = 1644;
    std::string duplicate_text = "already claimed";
};

struct flow_options {
    flow_kind flow = flow_kind::naive;
    std::int64_t campaign = 1;
    bool transaction = false;           // BEGIN ... COMMIT, ROLLBACK on any error
    bool ignore_affected_rows = false;  // the naive app inserts whatever the UPDATE's affected rows
    bool version_column = false;        // the naive app also writes version = <version + 1>
    // The app's own work, slept between two statements of an attempt (a transaction keeps its locks meanwhile).
    std::chrono::microseconds app_work{0};
    answer_rules answers;
};

// A --flow name: naive, fixed, or naive_tx / fixed_tx (the same statements inside BEGIN ... COMMIT).
struct flow_choice {
    flow_kind flow = flow_kind::naive;
    bool transaction = false;
};

// nullopt for an unknown name (pure).
[[nodiscard]] std::optional<flow_choice> parse_flow(std::string_view name);

enum class answer_kind { claimed, sold_out, duplicate, error };

// Why the app concluded "sold out" or "already claimed": the counters that tell the paths apart.
enum class answer_reason {
    none,
    app_check,      // the app's own remain <= 0 check after the SELECT
    affected_rows,  // the UPDATE changed no row
    server_answer,  // an ERR the answer rules classify (from claimguard, or a trigger)
    insert_no_row,  // the INSERT returned OK with 0 rows (a refusal answered as OK)
    duplicate_key,  // ERR 1062 handled by the fixed flow
};

struct attempt_result {
    answer_kind kind = answer_kind::error;
    answer_reason reason = answer_reason::none;
    std::optional<sql_error> error;  // set for answer_kind::error, and for answers that came as an ERR
    std::string statement;           // which statement got the error: connect, BEGIN, SELECT, UPDATE, INSERT, COMMIT
};

// Classifies an ERR by code and message text (pure).
[[nodiscard]] attempt_result classify_error(const sql_error& error, const answer_rules& rules);

// Runs one attempt for `user` on a connected session. A lost connection leaves the session disconnected.
[[nodiscard]] attempt_result run_attempt(mysql_session& session, const flow_options& options, std::int64_t user);

[[nodiscard]] const char* to_string(answer_reason reason);

}  // namespace claimguard::load
