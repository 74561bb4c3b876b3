// The server timeouts that bound how long a transaction the server no longer hears from (an orphan
// of a lost link) keeps its row locks, and what we recommend. Pure: values in, advice out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::schema {

// Recommended ceilings (docs/OPERATIONS.md, "the sale stalls, every claim times out").
// An idle write transaction is ended after this: above the longest pause an app makes inside a
// write transaction, far below the minutes that stop a sale.
inline constexpr double recommended_idle_write_transaction_timeout_s = 30;
// Above this, an idle transaction the server no longer hears from is a stalled sale, not a pause.
inline constexpr double max_orphan_lock_s = 60;
// wait_timeout above this (MariaDB's and MySQL's default is 28800) leaves orphans alone for hours
// when nothing shorter is set.
inline constexpr double long_wait_timeout_s = 3600;

// GLOBAL values in seconds, as new connections get them. nullopt: the server has no such variable
// (MySQL has no idle_*_transaction_timeout) or did not say.
struct server_timeouts {
    std::optional<double> wait_timeout;
    std::optional<double> idle_transaction_timeout;        // MariaDB 10.3+; 0 = off
    std::optional<double> idle_write_transaction_timeout;  // MariaDB 10.3+; 0 = off
    std::optional<double> innodb_lock_wait_timeout;
};

// The variable names read (SHOW GLOBAL VARIABLES), in report order.
inline constexpr std::string_view timeout_variables[] = {"idle_write_transaction_timeout", "idle_transaction_timeout",
                                                         "wait_timeout", "innodb_lock_wait_timeout"};

// Sets the field `name` names (unknown names are ignored); false when `value` is not a number.
bool set_timeout(server_timeouts& t, std::string_view name, std::string_view value);

// How long an orphaned write transaction keeps its locks on this server at most, in seconds: the
// smallest of the idle timeouts that are on and wait_timeout. nullopt: nothing bounds it.
[[nodiscard]] std::optional<double> orphan_lock_bound_s(const server_timeouts& t);

struct timeout_advice {
    std::string variable;
    std::optional<double> value;  // nullopt: not on this server
    bool ok = true;               // false: we recommend a change
    std::string advice;           // one sentence a DBA reads
};

// One line per variable of timeout_variables, in that order.
[[nodiscard]] std::vector<timeout_advice> advise_timeouts(const server_timeouts& t);

// The advice as report lines ("idle_write_transaction_timeout = 0 (off): RECOMMENDED ..."), then the
// bound on an orphan's locks.
[[nodiscard]] std::vector<std::string> timeout_lines(const server_timeouts& t);

}  // namespace claimguard::schema
