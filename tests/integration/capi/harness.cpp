// Shared helpers for the libmariadb integration tests: fixture env, connections, transcripts.
#include "tests/integration/capi/harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace claimguard::integration {
namespace {

// Lines of context printed around the first difference of two transcripts.
constexpr std::size_t diff_context_lines = 4;
// Initial result buffer for binary-protocol columns; longer values are fetched with fetch_column.
constexpr std::size_t stmt_column_buffer_bytes = 64;

std::string escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += fmt::format("\\x{:02x}", c);
        }
    }
    return out;
}

std::string cstr(const char* s) { return s == nullptr ? std::string("<null>") : escape(s); }

// With CLAIMGUARD_TRANSCRIPT_DIR set, writes each transcript there for reading by a person.
void dump_transcript(const transcript& t, std::string_view target) {
    const char* dir = std::getenv("CLAIMGUARD_TRANSCRIPT_DIR");
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (dir == nullptr || *dir == '\0' || info == nullptr) {
        return;
    }
    std::string name = fmt::format("{}.{}.{}.txt", info->test_suite_name(), info->name(), target);
    std::replace(name.begin(), name.end(), '/', '_');
    std::ofstream out(std::string(dir) + "/" + name);
    for (const auto& line : t.lines()) {
        out << line << "\n";
    }
}

}  // namespace

const fixture_env& fixture_env::get() {
    static const fixture_env env = [] {
        fixture_env e;
        const char* dir = std::getenv("CLAIMGUARD_STATE_DIR");
        if (dir == nullptr || *dir == '\0') {
            throw std::runtime_error("CLAIMGUARD_STATE_DIR is not set (run through ctest)");
        }
        e.state_dir_ = dir;
        std::ifstream in(e.state_dir_ + "/env");
        if (!in) {
            throw std::runtime_error("cannot read " + e.state_dir_ + "/env: did integration_setup run?");
        }
        std::string line;
        while (std::getline(in, line)) {
            const auto eq = line.find('=');
            if (eq != std::string::npos) {
                e.values_.emplace(line.substr(0, eq), line.substr(eq + 1));
            }
        }
        return e;
    }();
    return env;
}

std::string fixture_env::at(std::string_view key) const {
    const auto it = values_.find(key);
    if (it == values_.end()) {
        throw std::runtime_error(fmt::format("{}/env has no {}", state_dir_, key));
    }
    return it->second;
}

unsigned fixture_env::port(std::string_view target) const {
    if (target == "direct") {
        return static_cast<unsigned>(std::stoul(at("MARIADB_PORT")));
    }
    if (target == "proxy1") {
        return static_cast<unsigned>(std::stoul(at("PROXY1_PORT")));
    }
    if (target == "proxy2") {
        return static_cast<unsigned>(std::stoul(at("PROXY2_PORT")));
    }
    throw std::runtime_error(fmt::format("unknown target {}", target));
}

std::string user_name(test_user u) {
    return fixture_env::get().at(u == test_user::native ? "NATIVE_USER" : "ED25519_USER");
}

std::string user_password(test_user u) {
    return fixture_env::get().at(u == test_user::native ? "NATIVE_PASSWORD" : "ED25519_PASSWORD");
}

connect_outcome try_connect(std::string_view target, const connect_options& options) {
    const auto& env = fixture_env::get();
    connect_outcome out;
    MYSQL* m = mysql_init(nullptr);
    if (m == nullptr) {
        throw std::runtime_error("mysql_init failed");
    }
    out.conn.reset(m);
    const unsigned protocol = MYSQL_PROTOCOL_TCP;
    mysql_options(m, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout_s);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &read_timeout_s);
    mysql_options(m, MYSQL_OPT_MAX_ALLOWED_PACKET, &client_max_allowed_packet);
    const unsigned local_infile = options.local_infile ? 1 : 0;
    mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &local_infile);
    if (options.compress) {
        mysql_options(m, MYSQL_OPT_COMPRESS, nullptr);
    }
    for (const auto& [key, value] : options.attributes) {
        mysql_optionsv(m, MYSQL_OPT_CONNECT_ATTR_ADD, key.c_str(), value.c_str());
    }
    std::string password = options.password_override.empty() ? user_password(options.user) : options.password_override;
    if (options.wrong_password) {
        password += "-wrong";
    }
    const std::string user = user_name(options.user);
    const std::string host = env.at("HOST");
    if (mysql_real_connect(m, host.c_str(), user.c_str(), password.c_str(),
                           options.database.empty() ? nullptr : options.database.c_str(), env.port(target),
                           nullptr, options.flags) == nullptr) {
        out.error = mysql_errno(m);
        out.sqlstate = mysql_sqlstate(m);
        out.message = mysql_error(m);
        out.conn.reset();
    }
    return out;
}

mysql_ptr connect(std::string_view target, const connect_options& options) {
    auto out = try_connect(target, options);
    if (!out.conn) {
        throw std::runtime_error(fmt::format("connect to {} (port {}) as {}: {} ({}) {}", target,
                                             fixture_env::get().port(target), user_name(options.user), out.error,
                                             out.sqlstate, out.message));
    }
    return std::move(out.conn);
}

void exec(MYSQL* m, std::string_view sql) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) {
        throw std::runtime_error(fmt::format("{}: {} ({})", sql.substr(0, 200), mysql_error(m), mysql_errno(m)));
    }
    for (;;) {
        if (MYSQL_RES* r = mysql_store_result(m); r != nullptr) {
            mysql_free_result(r);
        } else if (mysql_field_count(m) != 0) {
            throw std::runtime_error(fmt::format("{}: {}", sql.substr(0, 200), mysql_error(m)));
        }
        const int next = mysql_next_result(m);
        if (next > 0) {
            throw std::runtime_error(fmt::format("{}: {} ({})", sql.substr(0, 200), mysql_error(m), mysql_errno(m)));
        }
        if (next < 0) {
            return;
        }
    }
}

bool transcript::contains(std::string_view needle) const {
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

std::uint64_t fnv1a(std::span<const char> bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : bytes) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string describe_bytes(std::span<const char> bytes) {
    if (bytes.size() <= transcript_value_limit) {
        return fmt::format("'{}'", escape(std::string_view(bytes.data(), bytes.size())));
    }
    return fmt::format("<{} bytes fnv1a={:016x}>", bytes.size(), fnv1a(bytes));
}

void record_status(transcript& t, MYSQL* m, std::string_view what) {
    unsigned status = 0;
    mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status);
    t.add(fmt::format("{}: affected={} insert_id={} warnings={} status=0x{:04x} info={}", what,
                      static_cast<long long>(mysql_affected_rows(m)), mysql_insert_id(m), mysql_warning_count(m),
                      status, cstr(mysql_info(m))));
    for (int type = SESSION_TRACK_BEGIN; type <= SESSION_TRACK_END; ++type) {
        const char* data = nullptr;
        std::size_t length = 0;
        auto kind = static_cast<enum_session_state_type>(type);
        if (mysql_session_track_get_first(m, kind, &data, &length) != 0) {
            continue;
        }
        do {
            t.add(fmt::format("  session_track[{}]={}", type, describe_bytes({data, length})));
        } while (mysql_session_track_get_next(m, kind, &data, &length) == 0);
    }
}

void record_error(transcript& t, MYSQL* m, std::string_view what) {
    t.add(fmt::format("{}: ERR {} ({}) {}", what, mysql_errno(m), mysql_sqlstate(m), cstr(mysql_error(m))));
}

void record_fields(transcript& t, MYSQL_RES* metadata) {
    const unsigned n = mysql_num_fields(metadata);
    t.add(fmt::format("columns={}", n));
    const MYSQL_FIELD* fields = mysql_fetch_fields(metadata);
    for (unsigned i = 0; i < n; ++i) {
        const MYSQL_FIELD& f = fields[i];
        MARIADB_CONST_STRING type_name{nullptr, 0};
        MARIADB_CONST_STRING format_name{nullptr, 0};
        mariadb_field_attr(&type_name, &f, MARIADB_FIELD_ATTR_DATA_TYPE_NAME);
        mariadb_field_attr(&format_name, &f, MARIADB_FIELD_ATTR_FORMAT_NAME);
        t.add(fmt::format(
            "  field name={} org_name={} table={} org_table={} db={} catalog={} def={} type={} length={} "
            "max_length={} flags=0x{:x} decimals={} charsetnr={} data_type_name={} format={}",
            cstr(f.name), cstr(f.org_name), cstr(f.table), cstr(f.org_table), cstr(f.db), cstr(f.catalog),
            f.def == nullptr ? std::string("<null>") : describe_bytes({f.def, f.def_length}),
            static_cast<int>(f.type), f.length, f.max_length, f.flags, f.decimals, f.charsetnr,
            escape({type_name.str == nullptr ? "" : type_name.str, type_name.length}),
            escape({format_name.str == nullptr ? "" : format_name.str, format_name.length})));
    }
}

namespace {

void record_text_rows(transcript& t, MYSQL* m, MYSQL_RES* res) {
    const unsigned n = mysql_num_fields(res);
    std::size_t rows = 0;
    while (MYSQL_ROW row = mysql_fetch_row(res)) {
        const unsigned long* lengths = mysql_fetch_lengths(res);
        std::string line = fmt::format("  row {}:", rows++);
        for (unsigned i = 0; i < n; ++i) {
            line += row[i] == nullptr ? std::string(" NULL") : " " + describe_bytes({row[i], lengths[i]});
        }
        t.add(std::move(line));
    }
    t.add(fmt::format("  rows={}", rows));
    if (mysql_errno(m) != 0) {
        record_error(t, m, "  fetch");
    }
}

}  // namespace

void record_query(transcript& t, MYSQL* m, std::string_view sql, fetch_mode mode) {
    const std::string what = fmt::format("query {}", describe_bytes({sql.data(), sql.size()}));
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) {
        record_error(t, m, what);
        return;
    }
    for (int index = 0;; ++index) {
        const std::string part = fmt::format("{} result {}", what, index);
        result_ptr res(mode == fetch_mode::store ? mysql_store_result(m) : mysql_use_result(m));
        if (res) {
            t.add(part);
            record_fields(t, res.get());
            record_text_rows(t, m, res.get());
            res.reset();
            record_status(t, m, "  end");
        } else if (mysql_field_count(m) == 0) {
            record_status(t, m, part + " ok");
        } else {
            record_error(t, m, part);
        }
        const int next = mysql_next_result(m);
        if (next > 0) {
            record_error(t, m, part + " next");
            return;
        }
        if (next < 0) {
            return;
        }
    }
}

void record_stmt_error(transcript& t, MYSQL_STMT* s, std::string_view what) {
    t.add(fmt::format("{}: ERR {} ({}) {}", what, mysql_stmt_errno(s), mysql_stmt_sqlstate(s),
                      cstr(mysql_stmt_error(s))));
}

namespace {

void record_stmt_rows(transcript& t, MYSQL_STMT* s, unsigned columns) {
    std::vector<MYSQL_BIND> binds(columns);
    std::vector<std::vector<char>> buffers(columns, std::vector<char>(stmt_column_buffer_bytes));
    std::vector<unsigned long> lengths(columns);
    std::vector<my_bool> nulls(columns);
    std::vector<my_bool> errors(columns);
    for (unsigned i = 0; i < columns; ++i) {
        binds[i] = MYSQL_BIND{};
        binds[i].buffer_type = MYSQL_TYPE_STRING;
        binds[i].buffer = buffers[i].data();
        binds[i].buffer_length = buffers[i].size();
        binds[i].length = &lengths[i];
        binds[i].is_null = &nulls[i];
        binds[i].error = &errors[i];
    }
    if (mysql_stmt_bind_result(s, binds.data()) != 0) {
        record_stmt_error(t, s, "  bind_result");
        return;
    }
    std::size_t rows = 0;
    for (;;) {
        const int rc = mysql_stmt_fetch(s);
        if (rc == MYSQL_NO_DATA) {
            break;
        }
        if (rc == 1) {
            record_stmt_error(t, s, "  fetch");
            break;
        }
        std::string line = fmt::format("  row {}:", rows++);
        for (unsigned i = 0; i < columns; ++i) {
            if (nulls[i]) {
                line += " NULL";
                continue;
            }
            if (lengths[i] <= buffers[i].size()) {
                line += " " + describe_bytes({buffers[i].data(), lengths[i]});
                continue;
            }
            std::vector<char> whole(lengths[i]);
            MYSQL_BIND big{};
            big.buffer_type = MYSQL_TYPE_STRING;
            big.buffer = whole.data();
            big.buffer_length = whole.size();
            unsigned long got = 0;
            big.length = &got;
            if (mysql_stmt_fetch_column(s, &big, i, 0) != 0) {
                record_stmt_error(t, s, "  fetch_column");
                return;
            }
            line += " " + describe_bytes({whole.data(), got});
        }
        t.add(std::move(line));
    }
    t.add(fmt::format("  rows={}", rows));
}

}  // namespace

void record_stmt_results(transcript& t, MYSQL* m, MYSQL_STMT* s, bool buffered) {
    for (int index = 0;; ++index) {
        const std::string part = fmt::format("stmt result {}", index);
        result_ptr meta(mysql_stmt_result_metadata(s));
        if (meta) {
            t.add(part);
            record_fields(t, meta.get());
            if (buffered && mysql_stmt_store_result(s) != 0) {
                record_stmt_error(t, s, "  store");
            } else {
                record_stmt_rows(t, s, mysql_num_fields(meta.get()));
            }
            unsigned status = 0;
            mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status);
            t.add(fmt::format("  end: warnings={} status=0x{:04x}", mysql_warning_count(m), status));
        } else {
            unsigned status = 0;
            mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status);
            t.add(fmt::format("{} ok: affected={} insert_id={} warnings={} status=0x{:04x}", part,
                              static_cast<long long>(mysql_stmt_affected_rows(s)), mysql_stmt_insert_id(s),
                              mysql_warning_count(m), status));
        }
        mysql_stmt_free_result(s);
        if (!mysql_stmt_more_results(s)) {
            return;
        }
        const int next = mysql_stmt_next_result(s);
        if (next > 0) {
            record_stmt_error(t, s, part + " next");
            return;
        }
        if (next < 0) {
            return;
        }
    }
}

::testing::AssertionResult same_transcript(const transcript& direct, const transcript& proxied) {
    const auto& a = direct.lines();
    const auto& b = proxied.lines();
    const std::size_t common = std::min(a.size(), b.size());
    std::size_t first = 0;
    while (first < common && a[first] == b[first]) {
        ++first;
    }
    if (first == common && a.size() == b.size()) {
        return ::testing::AssertionSuccess();
    }
    auto failure = ::testing::AssertionFailure();
    failure << "transcripts differ at line " << first << " (direct " << a.size() << " lines, proxied " << b.size()
            << " lines)\n";
    const std::size_t from = first > diff_context_lines ? first - diff_context_lines : 0;
    for (std::size_t i = from; i < first; ++i) {
        failure << "    " << a[i] << "\n";
    }
    for (std::size_t i = first; i < std::min(a.size(), first + diff_context_lines); ++i) {
        failure << "  direct:  " << a[i] << "\n";
    }
    for (std::size_t i = first; i < std::min(b.size(), first + diff_context_lines); ++i) {
        failure << "  proxied: " << b[i] << "\n";
    }
    return failure;
}

void expect_transparent(std::string_view target, const scenario& run) {
    const auto& env = fixture_env::get();
    if (env.proxy_running()) {
        ASSERT_NE(env.port("direct"), env.port(target)) << "the fixture must put claimguard on " << target;
    }
    transcript direct;
    run(direct, "direct");
    ASSERT_FALSE(direct.lines().empty()) << "the scenario recorded nothing";
    transcript proxied;
    run(proxied, target);
    EXPECT_TRUE(same_transcript(direct, proxied)) << "target " << target;
    dump_transcript(direct, "direct");
    dump_transcript(proxied, target);
}

std::vector<std::string> proxy_targets() { return {"proxy1", "proxy2"}; }

}  // namespace claimguard::integration
