// Shared helpers for the libmariadb integration tests: fixture env, connections, transcripts.
#pragma once

#include <mysql.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace claimguard::integration {

// The size of the big BLOB round trips: larger than one 16 MiB wire packet on purpose.
inline constexpr std::size_t big_blob_bytes = 20u * 1024u * 1024u;
// Values longer than this are written to a transcript as length + FNV-1a hash, not verbatim.
inline constexpr std::size_t transcript_value_limit = 256;
// Client-side packet limit: above big_blob_bytes as text hex (2x) plus SQL around it.
inline constexpr unsigned long client_max_allowed_packet = 64ul * 1024ul * 1024ul;
inline constexpr unsigned connect_timeout_s = 10;
inline constexpr unsigned read_timeout_s = 60;

// Key/values of STATE_DIR/env written by tests/integration/servers.py.
class fixture_env {
public:
    static const fixture_env& get();

    [[nodiscard]] std::string at(std::string_view key) const;
    // "direct" is MariaDB itself; "proxy1" claimguard in front of it; "proxy2" claimguard in front of proxy1.
    [[nodiscard]] unsigned port(std::string_view target) const;
    [[nodiscard]] bool proxy_running() const { return at("PROXY_MODE") == "claimguard"; }
    [[nodiscard]] const std::string& state_dir() const { return state_dir_; }

private:
    std::string state_dir_;
    std::map<std::string, std::string, std::less<>> values_;
};

struct mysql_closer {
    void operator()(MYSQL* m) const { mysql_close(m); }
};
struct stmt_closer {
    void operator()(MYSQL_STMT* s) const { mysql_stmt_close(s); }
};
struct result_freer {
    void operator()(MYSQL_RES* r) const { mysql_free_result(r); }
};
using mysql_ptr = std::unique_ptr<MYSQL, mysql_closer>;
using stmt_ptr = std::unique_ptr<MYSQL_STMT, stmt_closer>;
using result_ptr = std::unique_ptr<MYSQL_RES, result_freer>;

enum class test_user { native, ed25519 };

struct connect_options {
    test_user user = test_user::native;
    std::string password_override{};  // non-empty: use instead of the fixture's password
    bool wrong_password = false;
    std::string database = "cgtest";  // empty: connect without a database
    unsigned long flags = CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS;
    bool local_infile = false;
    bool compress = false;  // MYSQL_OPT_COMPRESS: ask for the compressed protocol
    std::vector<std::pair<std::string, std::string>> attributes{};
};

struct connect_outcome {
    mysql_ptr conn;  // null on failure
    unsigned error = 0;
    std::string sqlstate;
    std::string message;
};

[[nodiscard]] std::string user_name(test_user u);
[[nodiscard]] std::string user_password(test_user u);
[[nodiscard]] connect_outcome try_connect(std::string_view target, const connect_options& options = {});
// Connects or throws std::runtime_error naming the target and the server's error.
[[nodiscard]] mysql_ptr connect(std::string_view target, const connect_options& options = {});
// Runs SQL that must succeed (set-up statements), discarding any results; throws on error.
void exec(MYSQL* m, std::string_view sql);

// Everything a client saw, one line per observation, to compare direct and proxied runs.
class transcript {
public:
    void add(std::string line) { lines_.push_back(std::move(line)); }
    [[nodiscard]] const std::vector<std::string>& lines() const { return lines_; }
    [[nodiscard]] bool contains(std::string_view needle) const;

private:
    std::vector<std::string> lines_;
};

// Printable form of a value: verbatim (escaped) when short, length + hash when long.
[[nodiscard]] std::string describe_bytes(std::span<const char> bytes);
[[nodiscard]] std::uint64_t fnv1a(std::span<const char> bytes);

// OK-side state after a statement: affected rows, insert id, warnings, status flags, info, session tracking.
void record_status(transcript& t, MYSQL* m, std::string_view what);
void record_error(transcript& t, MYSQL* m, std::string_view what);
void record_fields(transcript& t, MYSQL_RES* metadata);
// Sends one COM_QUERY and records every result (metadata, rows, OK, ERR) until the last one.
enum class fetch_mode { store, use };
void record_query(transcript& t, MYSQL* m, std::string_view sql, fetch_mode mode = fetch_mode::store);

// Binary protocol: after mysql_stmt_execute, records metadata, rows (as strings), OK/ERR and further results.
void record_stmt_results(transcript& t, MYSQL* m, MYSQL_STMT* s, bool buffered = true);
void record_stmt_error(transcript& t, MYSQL_STMT* s, std::string_view what);

// Compares two transcripts, reporting the first differing line with context.
[[nodiscard]] ::testing::AssertionResult same_transcript(const transcript& direct, const transcript& proxied);

using scenario = std::function<void(transcript&, std::string_view target)>;
// Runs the scenario against MariaDB directly and through `target`, and expects identical transcripts.
void expect_transparent(std::string_view target, const scenario& run);

// The proxies every transparency test runs through.
[[nodiscard]] std::vector<std::string> proxy_targets();

struct target_name {
    std::string operator()(const ::testing::TestParamInfo<std::string>& info) const { return info.param; }
};

}  // namespace claimguard::integration
