// One client connection of the load tool: the incident's statements as text queries or prepared statements.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <boost/system/result.hpp>

typedef struct st_mysql MYSQL;

namespace claimguard::load {

// An ERR answer, or a client-side failure (libmariadb codes 2000-2999).
struct sql_error {
    sql_error() = default;
    sql_error(unsigned error_code, std::string error_message, bool lost)
        : code(error_code), message(std::move(error_message)), connection_lost(lost) {}
    unsigned code = 0;
    std::string message;
    bool connection_lost = false;  // the connection is unusable: reconnect before the next attempt
};

template <class T>
using sql_result = boost::system::result<T, sql_error>;

struct stock_row {
    std::int64_t remain = 0;
    std::int64_t version = 0;  // 0 unless the session reads the version column
};

enum class wire_protocol { text, prepared };

struct target {
    std::string host;
    unsigned port = 0;
};

struct connect_options {
    target to;
    std::string user;
    std::string password;
    std::string database;
    wire_protocol protocol = wire_protocol::text;
    bool found_rows = false;      // CLIENT_FOUND_ROWS, as JDBC drivers send it
    bool version_column = false;  // read and write coupon_stock.version too
    std::chrono::seconds io_timeout{30};
};

// Not thread-safe: one session per thread, like one pooled connection per request.
class mysql_session {
public:
    explicit mysql_session(connect_options options);
    ~mysql_session();
    mysql_session(const mysql_session&) = delete;
    mysql_session& operator=(const mysql_session&) = delete;

    // Opens the connection (closing a previous one); prepared statements are prepared on first use.
    [[nodiscard]] sql_result<void> connect();
    void disconnect();
    [[nodiscard]] bool connected() const { return mysql_ != nullptr; }

    // SELECT remain[, version] FROM coupon_stock WHERE campaign_id = K; nullopt when no row.
    [[nodiscard]] sql_result<std::optional<stock_row>> read_stock(std::int64_t campaign);
    // UPDATE coupon_stock SET remain = R[, version = V] WHERE campaign_id = K (R and V as literals); affected rows.
    [[nodiscard]] sql_result<std::uint64_t> write_stock(std::int64_t campaign, std::int64_t remain,
                                                        std::int64_t version);
    // UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = K AND remain > 0 (the post-mortem fix).
    [[nodiscard]] sql_result<std::uint64_t> decrement_guarded(std::int64_t campaign);
    // UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = K (the fix's duplicate-key compensation).
    [[nodiscard]] sql_result<std::uint64_t> return_unit(std::int64_t campaign);
    // INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (U, K, NOW()); affected rows.
    [[nodiscard]] sql_result<std::uint64_t> insert_order(std::int64_t user, std::int64_t campaign);
    // BEGIN, COMMIT, ROLLBACK: always text, as drivers send them.
    [[nodiscard]] sql_result<void> execute(std::string_view sql);

private:
    struct prepared_set;

    sql_error last_error(bool statement_error, const void* stmt) const;
    sql_result<std::uint64_t> run_dml_text(const std::string& sql);
    sql_result<std::uint64_t> run_dml(std::size_t slot, const std::string& sql, std::span<const std::int64_t> values);

    connect_options options_;
    MYSQL* mysql_ = nullptr;
    std::unique_ptr<prepared_set> prepared_;
};

// True for errors after which the connection cannot be used again.
[[nodiscard]] bool breaks_connection(unsigned code);

}  // namespace claimguard::load
