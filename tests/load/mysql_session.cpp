// The load tool's connection: libmariadb's C API, text queries (mysql_query) or prepared statements (mysql_stmt_*).
#include "tests/load/mysql_session.hpp"

#include <mysql.h>

#include <array>
#include <charconv>
#include <span>
#include <string>

namespace claimguard::load {

namespace {

constexpr unsigned first_client_error = 2000;
constexpr unsigned last_client_error = 2999;
constexpr unsigned er_server_shutdown = 1053;
constexpr unsigned er_connection_killed = 1927;
// Our own code for "the server answered something the app cannot read" (not a MySQL code).
constexpr unsigned unreadable_answer = 0;
constexpr std::size_t max_params = 3;
constexpr std::size_t max_columns = 2;

enum class stmt_id : std::size_t { read, write, decrement, give_back, insert, count };

std::string read_sql(bool version) {
    return version ? "SELECT remain, version FROM coupon_stock WHERE campaign_id = ?"
                   : "SELECT remain FROM coupon_stock WHERE campaign_id = ?";
}

std::string write_sql(bool version) {
    return version ? "UPDATE coupon_stock SET remain = ?, version = ? WHERE campaign_id = ?"
                   : "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?";
}

const std::string decrement_sql = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = ? AND remain > 0";
const std::string give_back_sql = "UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = ?";
const std::string insert_sql =
    "INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())";

// The same statement with each '?' replaced by an integer literal, as the legacy app builds its SQL.
std::string with_literals(const std::string& sql, std::span<const std::int64_t> values) {
    std::string out;
    std::size_t next = 0;
    for (const char c : sql) {
        if (c == '?' && next < values.size())
            out += std::to_string(values[next++]);
        else
            out += c;
    }
    return out;
}

std::optional<std::int64_t> parse_integer(const char* text, unsigned long length) {
    if (text == nullptr)
        return std::nullopt;
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text, text + length, value);
    if (ec != std::errc{} || end != text + length)
        return std::nullopt;
    return value;
}

}  // namespace

bool breaks_connection(unsigned code) {
    return (code >= first_client_error && code <= last_client_error) || code == er_server_shutdown ||
           code == er_connection_killed;
}

struct mysql_session::prepared_set {
    struct entry {
        MYSQL_STMT* stmt = nullptr;
        std::size_t param_count = 0;
        std::size_t column_count = 0;
        std::array<long long, max_params> params{};
        std::array<MYSQL_BIND, max_params> param_binds{};
        std::array<long long, max_columns> columns{};
        std::array<MYSQL_BIND, max_columns> column_binds{};
        std::array<my_bool, max_columns> column_null{};
    };
    std::array<entry, static_cast<std::size_t>(stmt_id::count)> entries{};

    prepared_set() = default;
    prepared_set(const prepared_set&) = delete;
    prepared_set& operator=(const prepared_set&) = delete;
    ~prepared_set() {
        for (auto& e : entries)
            if (e.stmt != nullptr)
                mysql_stmt_close(e.stmt);
    }
};

mysql_session::mysql_session(connect_options options) : options_(std::move(options)) {}

mysql_session::~mysql_session() { disconnect(); }

void mysql_session::disconnect() {
    prepared_.reset();  // statements before the connection they belong to
    if (mysql_ != nullptr) {
        mysql_close(mysql_);
        mysql_ = nullptr;
    }
}

sql_error mysql_session::last_error(bool statement_error, const void* stmt) const {
    unsigned code = 0;
    std::string message;
    if (statement_error) {
        auto* s = static_cast<MYSQL_STMT*>(const_cast<void*>(stmt));
        code = mysql_stmt_errno(s);
        message = mysql_stmt_error(s);
    } else {
        code = mysql_errno(mysql_);
        message = mysql_error(mysql_);
    }
    return sql_error(code, message, breaks_connection(code));
}

sql_result<void> mysql_session::connect() {
    disconnect();
    mysql_ = mysql_init(nullptr);
    if (mysql_ == nullptr)
        return sql_error(first_client_error, "mysql_init failed (out of memory)", true);
    const unsigned timeout = static_cast<unsigned>(options_.io_timeout.count());
    mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(mysql_, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    const unsigned long flags = options_.found_rows ? CLIENT_FOUND_ROWS : 0;
    if (mysql_real_connect(mysql_, options_.to.host.c_str(), options_.user.c_str(), options_.password.c_str(),
                           options_.database.c_str(), options_.to.port, nullptr, flags) == nullptr) {
        auto error = last_error(false, nullptr);
        error.connection_lost = true;
        disconnect();
        return error;
    }
    prepared_ = std::make_unique<prepared_set>();
    return {};
}

sql_result<void> mysql_session::execute(std::string_view sql) {
    if (mysql_real_query(mysql_, sql.data(), static_cast<unsigned long>(sql.size())) != 0)
        return last_error(false, nullptr);
    // BEGIN/COMMIT/ROLLBACK return no rows; drain whatever came anyway so the connection stays in sync.
    if (MYSQL_RES* res = mysql_store_result(mysql_); res != nullptr)
        mysql_free_result(res);
    return {};
}

sql_result<std::uint64_t> mysql_session::run_dml_text(const std::string& sql) {
    if (mysql_real_query(mysql_, sql.data(), static_cast<unsigned long>(sql.size())) != 0)
        return last_error(false, nullptr);
    if (MYSQL_RES* res = mysql_store_result(mysql_); res != nullptr) {
        mysql_free_result(res);
        return sql_error(unreadable_answer, "a result set where an OK was expected: " + sql, false);
    }
    return static_cast<std::uint64_t>(mysql_affected_rows(mysql_));
}

namespace {

// Prepares (once per connection) and binds the parameter and result buffers of one statement.
template <class Entry>
bool prepare_entry(MYSQL* mysql, Entry& e, const std::string& sql, std::size_t params, std::size_t columns) {
    if (e.stmt != nullptr)
        return true;
    e.stmt = mysql_stmt_init(mysql);
    if (e.stmt == nullptr)
        return false;
    if (mysql_stmt_prepare(e.stmt, sql.data(), static_cast<unsigned long>(sql.size())) != 0)
        return false;
    e.param_count = params;
    e.column_count = columns;
    for (std::size_t i = 0; i < params; ++i) {
        e.param_binds[i] = MYSQL_BIND{};
        e.param_binds[i].buffer_type = MYSQL_TYPE_LONGLONG;
        e.param_binds[i].buffer = &e.params[i];
    }
    // Bound once: later executions send no types (new_params_bound = 0), as C apps that reuse statements do.
    if (params > 0 && mysql_stmt_bind_param(e.stmt, e.param_binds.data()) != 0)
        return false;
    for (std::size_t i = 0; i < columns; ++i) {
        e.column_binds[i] = MYSQL_BIND{};
        e.column_binds[i].buffer_type = MYSQL_TYPE_LONGLONG;
        e.column_binds[i].buffer = &e.columns[i];
        e.column_binds[i].is_null = &e.column_null[i];
    }
    return true;
}

}  // namespace

sql_result<std::optional<stock_row>> mysql_session::read_stock(std::int64_t campaign) {
    const std::size_t columns = options_.version_column ? 2 : 1;
    const std::string sql = read_sql(options_.version_column);
    const std::array<std::int64_t, 1> params{campaign};
    if (options_.protocol == wire_protocol::text) {
        const std::string text = with_literals(sql, params);
        if (mysql_real_query(mysql_, text.data(), static_cast<unsigned long>(text.size())) != 0)
            return last_error(false, nullptr);
        MYSQL_RES* res = mysql_store_result(mysql_);
        if (res == nullptr)
            return mysql_errno(mysql_) != 0 ? last_error(false, nullptr)
                                            : sql_error(unreadable_answer, "no result set for: " + text, false);
        std::optional<stock_row> row;
        bool readable = mysql_num_fields(res) == columns;
        if (readable) {
            if (MYSQL_ROW r = mysql_fetch_row(res); r != nullptr) {
                const unsigned long* lengths = mysql_fetch_lengths(res);
                const auto remain = parse_integer(r[0], lengths[0]);
                const auto version = columns > 1 ? parse_integer(r[1], lengths[1]) : std::optional<std::int64_t>{0};
                readable = remain.has_value() && version.has_value();
                if (readable)
                    row = stock_row{*remain, *version};
            }
        }
        mysql_free_result(res);
        if (!readable)
            return sql_error(unreadable_answer, "unreadable coupon_stock row for: " + text, false);
        return row;
    }
    auto& e = prepared_->entries[static_cast<std::size_t>(stmt_id::read)];
    if (!prepare_entry(mysql_, e, sql, 1, columns))
        return e.stmt != nullptr ? last_error(true, e.stmt) : last_error(false, nullptr);
    e.params[0] = campaign;
    if (mysql_stmt_execute(e.stmt) != 0)
        return last_error(true, e.stmt);
    if (mysql_stmt_field_count(e.stmt) != columns)
        return sql_error(unreadable_answer, "the prepared SELECT returned an unexpected column count", false);
    if (mysql_stmt_bind_result(e.stmt, e.column_binds.data()) != 0)
        return last_error(true, e.stmt);
    std::optional<stock_row> row;
    const int rc = mysql_stmt_fetch(e.stmt);
    if (rc == 1)
        return last_error(true, e.stmt);
    if (rc == 0 || rc == MYSQL_DATA_TRUNCATED) {
        if (e.column_null[0] || (columns > 1 && e.column_null[1])) {
            mysql_stmt_free_result(e.stmt);
            return sql_error(unreadable_answer, "NULL in coupon_stock", false);
        }
        row = stock_row{e.columns[0], columns > 1 ? e.columns[1] : 0};
        while (mysql_stmt_fetch(e.stmt) == 0) {
        }
    }
    if (mysql_stmt_errno(e.stmt) != 0)
        return last_error(true, e.stmt);
    mysql_stmt_free_result(e.stmt);
    return row;
}

sql_result<std::uint64_t> mysql_session::run_dml(std::size_t slot, const std::string& sql,
                                                 std::span<const std::int64_t> values) {
    if (options_.protocol == wire_protocol::text)
        return run_dml_text(with_literals(sql, values));
    auto& e = prepared_->entries[slot];
    if (!prepare_entry(mysql_, e, sql, values.size(), 0))
        return e.stmt != nullptr ? last_error(true, e.stmt) : last_error(false, nullptr);
    for (std::size_t i = 0; i < values.size(); ++i)
        e.params[i] = values[i];
    if (mysql_stmt_execute(e.stmt) != 0)
        return last_error(true, e.stmt);
    return static_cast<std::uint64_t>(mysql_stmt_affected_rows(e.stmt));
}

namespace {

constexpr std::size_t slot(stmt_id id) { return static_cast<std::size_t>(id); }

}  // namespace

sql_result<std::uint64_t> mysql_session::write_stock(std::int64_t campaign, std::int64_t remain,
                                                     std::int64_t version) {
    const std::string sql = write_sql(options_.version_column);
    if (options_.version_column)
        return run_dml(slot(stmt_id::write), sql, std::array<std::int64_t, 3>{remain, version, campaign});
    return run_dml(slot(stmt_id::write), sql, std::array<std::int64_t, 2>{remain, campaign});
}

sql_result<std::uint64_t> mysql_session::decrement_guarded(std::int64_t campaign) {
    return run_dml(slot(stmt_id::decrement), decrement_sql, std::array<std::int64_t, 1>{campaign});
}

sql_result<std::uint64_t> mysql_session::return_unit(std::int64_t campaign) {
    return run_dml(slot(stmt_id::give_back), give_back_sql, std::array<std::int64_t, 1>{campaign});
}

sql_result<std::uint64_t> mysql_session::insert_order(std::int64_t user, std::int64_t campaign) {
    return run_dml(slot(stmt_id::insert), insert_sql, std::array<std::int64_t, 2>{user, campaign});
}

}  // namespace claimguard::load
