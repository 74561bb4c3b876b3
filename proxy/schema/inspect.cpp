// The schema check's I/O over libmariadb: connect, read information_schema, count duplicates.
#include "proxy/schema/inspect.hpp"

#include <mysql.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace claimguard::schema {
namespace {

// Shown in SHOW PROCESSLIST / performance_schema.session_connect_attrs, so a DBA knows who asks.
constexpr const char* program_name = "claimguard-check";
// utf8mb4: identifiers round-trip whatever characters they hold.
constexpr const char* connection_charset = "utf8mb4";

// Values are parameters of prepared statements; only backtick-quoted identifiers are ever
// part of the SQL text.
constexpr const char* columns_sql =
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, IS_NULLABLE, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME "
    "FROM information_schema.COLUMNS "
    "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION";
constexpr const char* statistics_sql =
    "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART "
    "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX";

// The database code of one schema (issue 17): each query gives schema, name, the trigger's
// table (or NULL) and the text; ROUTINE_TYPE tells procedures from functions.
constexpr const char* routines_sql =
    "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION FROM information_schema.ROUTINES "
    "WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_NAME";
constexpr const char* triggers_sql =
    "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS "
    "WHERE TRIGGER_SCHEMA = ? ORDER BY TRIGGER_NAME";
constexpr const char* views_sql =
    "SELECT TABLE_SCHEMA, TABLE_NAME, NULL, VIEW_DEFINITION FROM information_schema.VIEWS "
    "WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME";
constexpr const char* events_sql =
    "SELECT EVENT_SCHEMA, EVENT_NAME, NULL, EVENT_DEFINITION FROM information_schema.EVENTS "
    "WHERE EVENT_SCHEMA = ? ORDER BY EVENT_NAME";

using row = std::vector<std::optional<std::string>>;

// libmariadb must be initialised once per process before threads use it.
void library_init() {
    static std::once_flag once;
    std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

db_error connection_error(MYSQL* m, const std::string& doing) {
    return {mysql_errno(m), mysql_sqlstate(m), doing + ": " + mysql_error(m)};
}

db_error statement_error(MYSQL_STMT* s, const std::string& doing) {
    return {mysql_stmt_errno(s), mysql_stmt_sqlstate(s), doing + ": " + mysql_stmt_error(s)};
}

struct stmt_closer {
    void operator()(MYSQL_STMT* s) const noexcept { mysql_stmt_close(s); }
};

// Runs `sql` as a prepared statement with string parameters; every result column comes back as
// text (NULL as nullopt). At most max_metadata_rows rows, values at most max_metadata_value_bytes.
db_result<std::vector<row>> query(MYSQL* m, std::string_view sql, const std::vector<std::string>& params,
                                  const std::string& doing, std::size_t max_value_bytes = max_metadata_value_bytes) {
    std::unique_ptr<MYSQL_STMT, stmt_closer> stmt(mysql_stmt_init(m));
    if (!stmt) return connection_error(m, doing);
    if (mysql_stmt_prepare(stmt.get(), sql.data(), sql.size()) != 0) return statement_error(stmt.get(), doing);

    std::vector<MYSQL_BIND> in(params.size());
    std::vector<unsigned long> in_lengths(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
        in_lengths[i] = params[i].size();
        in[i].buffer_type = MYSQL_TYPE_STRING;
        in[i].buffer = const_cast<char*>(params[i].data());  // read only: the API is not const-correct
        in[i].buffer_length = params[i].size();
        in[i].length = &in_lengths[i];
    }
    if (!in.empty() && mysql_stmt_bind_param(stmt.get(), in.data()) != 0) return statement_error(stmt.get(), doing);
    if (mysql_stmt_execute(stmt.get()) != 0) return statement_error(stmt.get(), doing);

    const auto n = mysql_stmt_field_count(stmt.get());
    std::vector<MYSQL_BIND> out(n);
    std::vector<std::string> buffers(n, std::string(max_value_bytes, '\0'));
    std::vector<unsigned long> lengths(n);
    std::vector<my_bool> nulls(n), truncated(n);
    for (unsigned i = 0; i < n; ++i) {
        out[i].buffer_type = MYSQL_TYPE_STRING;
        out[i].buffer = buffers[i].data();
        out[i].buffer_length = buffers[i].size();
        out[i].length = &lengths[i];
        out[i].is_null = &nulls[i];
        out[i].error = &truncated[i];
    }
    if (n > 0 && mysql_stmt_bind_result(stmt.get(), out.data()) != 0) return statement_error(stmt.get(), doing);

    std::vector<row> rows;
    for (;;) {
        const int rc = mysql_stmt_fetch(stmt.get());
        if (rc == MYSQL_NO_DATA) break;
        if (rc == 1) return statement_error(stmt.get(), doing);
        if (rc == MYSQL_DATA_TRUNCATED)
            return db_error{0, "", doing + ": a value is longer than " + std::to_string(max_value_bytes) + " bytes"};
        if (rows.size() == max_metadata_rows)
            return db_error{0, "", doing + ": more than " + std::to_string(max_metadata_rows) + " rows"};
        row r(n);
        for (unsigned i = 0; i < n; ++i)
            if (!nulls[i]) r[i] = buffers[i].substr(0, lengths[i]);
        rows.push_back(std::move(r));
    }
    return rows;
}

std::optional<std::uint64_t> to_uint(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::uint64_t v = 0;
    const auto* end = text->data() + text->size();
    const auto [ptr, ec] = std::from_chars(text->data(), end, v);
    if (ec != std::errc{} || ptr != end) return std::nullopt;
    return v;
}

table_info& table_for(schema_metadata& md, const std::string& schema, const std::string& name) {
    for (auto& t : md.tables)
        if (t.schema == schema && t.name == name) return t;
    md.tables.push_back({schema, name, {}, {}});
    return md.tables.back();
}

std::string where(const rules::table_name& t) { return "reading " + t.schema + "." + t.name; }

}  // namespace

void inspector::closer::operator()(MYSQL* m) const noexcept { mysql_close(m); }

db_result<inspector> inspector::connect(const connection_options& o) {
    library_init();
    MYSQL* m = mysql_init(nullptr);
    if (m == nullptr) return db_error{0, "", "connecting: out of memory"};
    inspector owner(m);                            // closes `m` on every path below
    const unsigned protocol = MYSQL_PROTOCOL_TCP;  // "localhost" must not mean the local socket
    const unsigned connect_s = static_cast<unsigned>(o.connect_timeout.count());
    const unsigned read_s = static_cast<unsigned>(o.read_timeout.count());
    const unsigned write_s = static_cast<unsigned>(o.write_timeout.count());
    const unsigned no_local_infile = 0;
    mysql_optionsv(m, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &read_s);
    mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &write_s);
    mysql_optionsv(m, MYSQL_OPT_LOCAL_INFILE, &no_local_infile);
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, connection_charset);
    mysql_optionsv(m, MYSQL_OPT_CONNECT_ATTR_ADD, "program_name", program_name);
    if (o.tls.enabled) {
        const my_bool enforce = 1;
        const my_bool verify = o.tls.verify ? 1 : 0;
        mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &enforce);
        mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
        const std::pair<mysql_option, const std::string*> files[] = {{MYSQL_OPT_SSL_CA, &o.tls.ca_file},
                                                                     {MYSQL_OPT_SSL_CAPATH, &o.tls.ca_path},
                                                                     {MYSQL_OPT_SSL_CERT, &o.tls.cert_file},
                                                                     {MYSQL_OPT_SSL_KEY, &o.tls.key_file}};
        for (const auto& [option, value] : files)
            if (!value->empty()) mysql_optionsv(m, option, value->c_str());
    }
    const char* database = o.database.empty() ? nullptr : o.database.c_str();
    if (mysql_real_connect(m, o.host.c_str(), o.user.c_str(), o.password.c_str(), database, o.port, nullptr, 0) ==
        nullptr)
        return connection_error(m, "connecting to " + o.host + ":" + std::to_string(o.port) + " as " + o.user);
    return owner;
}

db_result<server_timeouts> inspector::read_timeouts() {
    std::string sql = "SHOW GLOBAL VARIABLES WHERE Variable_name IN (";
    for (std::size_t i = 0; i < std::size(timeout_variables); ++i)
        sql += (i ? ", '" : "'") + std::string(timeout_variables[i]) + "'";  // constants, never user input
    sql += ")";
    auto rows = query(mysql_.get(), sql, {}, "reading the server's timeouts");
    if (!rows) return rows.error();
    server_timeouts t;
    for (const auto& r : *rows)
        if (r.size() == 2 && r[0] && r[1]) (void)set_timeout(t, *r[0], *r[1]);
    return t;
}

db_result<inspector::outcome> inspector::run(const std::string& sql) {
    MYSQL* m = mysql_.get();
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) return connection_error(m, "running a statement");
    outcome out;
    MYSQL_RES* res = mysql_store_result(m);
    if (res == nullptr) {
        if (mysql_field_count(m) != 0) return connection_error(m, "reading a result");
        out.affected_rows = mysql_affected_rows(m);
        return out;
    }
    if (MYSQL_ROW row = mysql_fetch_row(res); row != nullptr && mysql_num_fields(res) > 0 && row[0] != nullptr) {
        const unsigned long* lengths = mysql_fetch_lengths(res);
        out.first_value = std::string(row[0], lengths ? lengths[0] : std::strlen(row[0]));
    }
    mysql_free_result(res);
    return out;
}

std::string inspector::tls_cipher() const {
    const char* c = mysql_get_ssl_cipher(mysql_.get());
    return c == nullptr ? std::string() : std::string(c);
}

db_result<schema_metadata> inspector::read_metadata(const std::vector<rules::table_name>& tables) {
    schema_metadata md;
    for (const auto& t : tables) {
        const std::vector<std::string> params{t.schema, t.name};
        auto columns = query(mysql_.get(), columns_sql, params, where(t) + " from information_schema.COLUMNS");
        if (!columns) return columns.error();
        for (const auto& r : *columns) {
            if (!r[0] || !r[1] || !r[2]) continue;
            table_for(md, *r[0], *r[1])
                .columns.push_back(
                    {*r[2], r[3].value_or("") == "YES", r[4].value_or(""), r[5].value_or(""), r[6].value_or("")});
        }
        auto parts = query(mysql_.get(), statistics_sql, params, where(t) + " from information_schema.STATISTICS");
        if (!parts) return parts.error();
        for (const auto& r : *parts) {
            if (!r[0] || !r[1] || !r[2]) continue;
            auto& table = table_for(md, *r[0], *r[1]);
            auto it = std::find_if(table.indexes.begin(), table.indexes.end(),
                                   [&](const index_info& i) { return i.name == *r[2]; });
            if (it == table.indexes.end()) {
                table.indexes.push_back({*r[2], to_uint(r[3]).value_or(1) == 0, {}, false, false});
                it = std::prev(table.indexes.end());
            }
            // Rows come in SEQ_IN_INDEX order; a NULL COLUMN_NAME is an expression key part.
            if (r[5])
                it->columns.push_back(*r[5]);
            else
                it->expression = true;
            if (r[6]) it->prefix = true;
        }
    }
    return md;
}

db_result<database_code_read> inspector::read_database_code(const std::vector<std::string>& schemas) {
    using rules::match::code_kind;
    database_code_read out;
    struct source_query {
        const char* sql;
        const char* table;
        code_kind kind;  // routines: by ROUTINE_TYPE
    };
    constexpr source_query queries[] = {{routines_sql, "ROUTINES", code_kind::procedure},
                                        {triggers_sql, "TRIGGERS", code_kind::trigger},
                                        {views_sql, "VIEWS", code_kind::view},
                                        {events_sql, "EVENTS", code_kind::event}};
    for (const auto& schema : schemas) {
        for (const auto& q : queries) {
            auto rows = query(mysql_.get(), q.sql, {schema},
                              "reading " + schema + "'s code from information_schema." + q.table, max_code_text_bytes);
            if (!rows) return rows.error();
            for (const auto& r : *rows) {
                if (!r[0] || !r[1]) continue;
                code_source src;
                src.kind = q.kind;
                if (q.kind == code_kind::procedure && r[2] && *r[2] == "FUNCTION") src.kind = code_kind::function;
                src.schema = *r[0];
                src.name = *r[1];
                if (q.kind == code_kind::trigger) src.table = r[2].value_or("");
                // Hidden from this user: a routine's text is NULL, a view's empty (SHOW VIEW missing).
                if (!r[3] || r[3]->empty()) {
                    out.hidden.push_back(std::string(rules::match::to_string(src.kind)) + " " + src.schema + "." +
                                         src.name);
                    continue;
                }
                src.body = *r[3];
                out.sources.push_back(std::move(src));
            }
        }
    }
    return out;
}

db_result<duplicate_count> inspector::count_duplicates(const rules::unique_index& index) {
    const auto doing = "counting duplicates in " + index.table.schema + "." + index.table.name;
    auto rows = query(mysql_.get(), duplicate_count_query(index), {}, doing);
    if (!rows) return rows.error();
    if (rows->size() != 1 || rows->front().size() != 2) return db_error{0, "", doing + ": unexpected result shape"};
    const auto keys = to_uint(rows->front()[0]);
    const auto surplus = to_uint(rows->front()[1]);
    if (!keys || !surplus) return db_error{0, "", doing + ": the counts are not numbers"};
    return duplicate_count{*keys, *surplus};
}

schema_report check_schema(const rules::rule_set& rules, const connection_options& options, duplicate_scan scan) {
    schema_report report;
    report.server = options.host + ":" + std::to_string(options.port);
    report.database = options.database;
    if (rules.claims.empty() && rules.stocks.empty()) return report;
    if (const auto unnamed = rules_without_schema(rules, options.database); !unnamed.empty()) {
        report.error = "rule '" + unnamed.front() +
                       "' names its table without a schema and no database was given: pass the application's "
                       "database";
        return report;
    }
    auto conn = inspector::connect(options);
    if (!conn) {
        report.error = conn.error().message;
        return report;
    }
    auto md = conn->read_metadata(tables_to_inspect(rules, options.database));
    if (!md) {
        report.error = md.error().message;
        return report;
    }
    auto built = build_report(rules, *md, options.database);
    built.server = std::move(report.server);
    built.tls_cipher = conn->tls_cipher();
    if (auto code = conn->read_database_code(schemas_to_inspect(rules, options.database))) {
        built.database_code = find_database_code(rules, code->sources);
        if (!code->hidden.empty()) {
            built.database_code_error = "the check's user cannot see the text of ";
            for (std::size_t i = 0; i < code->hidden.size(); ++i)
                built.database_code_error += (i ? ", " : "") + code->hidden[i];
            built.database_code_error += " (grant it the privileges docs/OPERATIONS.md lists)";
        }
        check_trigger_rules(rules, built);
    } else {
        built.database_code_error = code.error().message;
    }
    if (auto t = conn->read_timeouts())
        built.timeouts = *t;
    else
        built.timeouts_error = t.error().message;
    if (scan == duplicate_scan::count) {
        for (auto& c : built.checks) {
            if (c.status != index_status::missing) continue;
            auto n = conn->count_duplicates(c.required);
            if (n)
                c.duplicates = *n;
            else
                c.duplicates_error = n.error().message;
        }
    }
    return built;
}

}  // namespace claimguard::schema
