// `claimguard check`: is every claim rule backed by a UNIQUE index on the real database?
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "proxy/schema/inspect.hpp"

namespace CLI {
class App;
}

namespace claimguard::schema {

// Environment variables the password is taken from when --password is not given, in order.
inline constexpr const char* password_env_var = "CLAIMGUARD_CHECK_PASSWORD";
inline constexpr const char* mysql_password_env_var = "MYSQL_PWD";

struct check_options {
    std::vector<std::string> rules_files;
    std::string backend;  // host:port or [v6]:port
    std::string user;
    std::optional<std::string> password;  // nullopt: from the environment (see password_env_var)
    std::string database;                 // schema of rule tables named without one
    bool json = false;                    // the JSON report instead of text
    bool skip_duplicates = false;         // do not scan claim tables for duplicate rows
    std::chrono::milliseconds connect_timeout = default_connect_timeout;  // --connect-timeout 10s
    std::chrono::milliseconds read_timeout = default_read_timeout;        // --read-timeout 5m
    tls_options tls;
};

// Reads an environment variable (std::getenv in the binary; a table in tests).
using env_lookup = std::function<const char*(const char*)>;

// --password if given, else CLAIMGUARD_CHECK_PASSWORD, else MYSQL_PWD, else no password.
[[nodiscard]] std::string resolve_password(const std::optional<std::string>& flag, const env_lookup& env);

// Adds the `check` subcommand and its options to `app`, parsed into `options`.
CLI::App* add_check_command(CLI::App& app, check_options& options);

// Runs the check. Exit 0: every claim rule covered; 1: an index, table or column is missing;
// 2: usage, rules file or connection error (message on `err`). The report goes to `out`.
int run_check(const check_options& options, std::ostream& out, std::ostream& err);

// The same, with the environment read through `env` (tests).
int run_check(const check_options& options, std::ostream& out, std::ostream& err, const env_lookup& env);

// `claimguard suggest --backend ... --user ...`: a table's UNIQUE indexes on whole columns, read with
// the check's connection (made at the first table, kept for the others; a table named without a
// schema is looked for in options.database). Throws std::runtime_error when the server cannot be read.
[[nodiscard]] std::function<std::vector<std::pair<std::string, std::vector<std::string>>>(const std::string&)>
unique_index_lookup(const check_options& options, const env_lookup& env);

}  // namespace claimguard::schema
