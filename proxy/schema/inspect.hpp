// The schema check's I/O: reads index metadata and counts duplicates over libmariadb (blocking).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include "proxy/schema/report.hpp"
#include "rules/model/rules.hpp"

// libmariadb's connection handle (MYSQL), kept out of this header.
struct st_mysql;

namespace claimguard::schema {

// Limits of the check's connection (each a named default the command line can change).
inline constexpr std::chrono::seconds default_connect_timeout{10};
// Counting duplicates scans the claim table: allow minutes on a large one.
inline constexpr std::chrono::seconds default_read_timeout{300};
inline constexpr std::chrono::seconds default_write_timeout{30};
// information_schema rows read per table (columns + index parts); MySQL allows 4096 columns
// and 64 indexes of 16 parts, so more than this is not a table.
inline constexpr std::size_t max_metadata_rows = 16384;
// A metadata value (a name, a number) longer than this is refused, not truncated.
inline constexpr std::size_t max_metadata_value_bytes = 1024;
// A routine's, trigger's, view's or event's text longer than this is refused, not truncated (a
// truncated text could hide the table it names).
inline constexpr std::size_t max_code_text_bytes = 1024 * 1024;

// The database code read from information_schema, and what the check's user may not read.
struct database_code_read {
    std::vector<code_source> sources;
    std::vector<std::string> hidden;  // "procedure shop.claim_coupon": listed, its text not shown to this user
};

struct tls_options {
    bool enabled = false;   // require TLS (the connection fails if the server does not offer it)
    bool verify = true;     // verify the server certificate and host name (issue 22: on by default)
    std::string ca_file;    // CA bundle (PEM); empty: the system's
    std::string ca_path;    // directory of CA certificates
    std::string cert_file;  // client certificate (PEM), for servers that require one
    std::string key_file;   // its private key
};

// How the check reaches the database. The password is never logged or printed.
struct connection_options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 3306;
    std::string user;
    std::string password;
    std::string database;  // empty: none; then every claim rule must name its table's schema
    std::chrono::seconds connect_timeout = default_connect_timeout;
    std::chrono::seconds read_timeout = default_read_timeout;
    std::chrono::seconds write_timeout = default_write_timeout;
    tls_options tls;
};

// A failure talking to the server: what was being done, and the server's or library's words.
struct db_error {
    unsigned code = 0;      // MySQL error number (e.g. 1045 access denied, 2003 cannot connect)
    std::string sql_state;  // 5 characters, empty when the client library failed
    std::string message;    // "connecting to 127.0.0.1:3306: Access denied for user ..."
};

// boost::system::result calls this (found by ADL) when .value() meets an error.
[[noreturn]] inline void throw_exception_from_error(const db_error& e, const boost::source_location&) {
    throw std::runtime_error(e.message);
}

template <class T>
using db_result = boost::system::result<T, db_error>;

// Whether to count the rows that would stop each missing index from being added. Counting
// scans the claim table; the CLI does it, the start-up check does not.
enum class duplicate_scan { skip, count };

// One blocking connection for the check (move-only; closed by the destructor).
class inspector {
public:
    [[nodiscard]] static db_result<inspector> connect(const connection_options& options);

    // information_schema.COLUMNS and STATISTICS for each table (schema already resolved).
    [[nodiscard]] db_result<schema_metadata> read_metadata(const std::vector<rules::table_name>& tables);

    // information_schema.ROUTINES, TRIGGERS, VIEWS and EVENTS of each schema.
    [[nodiscard]] db_result<database_code_read> read_database_code(const std::vector<std::string>& schemas);

    // Runs duplicate_count_query(index).
    [[nodiscard]] db_result<duplicate_count> count_duplicates(const rules::unique_index& index);

    // SHOW GLOBAL VARIABLES for timeout_variables.
    [[nodiscard]] db_result<server_timeouts> read_timeouts();

    // A statement of the sidecar's own (reserve's refills and give-backs), as text: its affected rows,
    // or for a query the first column of its first row (nullopt: no row, or NULL).
    struct outcome {
        std::uint64_t affected_rows = 0;
        std::optional<std::string> first_value;
    };
    [[nodiscard]] db_result<outcome> run(const std::string& sql);

    // The TLS cipher in use, or empty for a plain connection.
    [[nodiscard]] std::string tls_cipher() const;

private:
    struct closer {
        void operator()(::st_mysql* m) const noexcept;
    };
    explicit inspector(::st_mysql* m) : mysql_(m) {}
    std::unique_ptr<::st_mysql, closer> mysql_;
};

// The whole check: connect, read the rule tables, decide, and count duplicates if asked.
// Never throws; when the database cannot be reached or read, the report's `error` says why
// (and exit_code() is 2), so `serve` can refuse readiness or just warn.
[[nodiscard]] schema_report check_schema(const rules::rule_set& rules, const connection_options& options,
                                         duplicate_scan scan = duplicate_scan::skip);

}  // namespace claimguard::schema
