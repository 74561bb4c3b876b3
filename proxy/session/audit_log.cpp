// JSON-lines audit log writer and statement digests.
#include "audit_log.hpp"

#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace claimguard::session {

namespace sql = rules::sql;

audit_log::audit_log(const std::string& path) {
    if (path == "off") return;
    if (path.empty() || path == "-") {
        file_ = stderr;
        return;
    }
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) throw std::runtime_error("cannot open the audit log " + path);
    owned_ = true;
}

audit_log::~audit_log() {
    if (owned_) std::fclose(file_);
}

void audit_log::write(const audit_event& e) {
    if (!file_) return;
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    nlohmann::json j;
    j["time"] = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                            tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
    j["session"] = e.session;
    j["client"] = e.client;
    j["user"] = e.user;
    j["rule"] = e.rule;
    j["action"] = e.action;
    auto& keys = j["keys"] = nlohmann::json::object();
    for (const auto& [k, v] : e.keys) keys[k] = v;
    j["digest"] = e.digest;
    if (!e.note.empty()) j["note"] = e.note;
    // Values come from SQL text and may hold any bytes: never fail on invalid UTF-8.
    auto line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::lock_guard lock(mutex_);
    std::fputs(line.c_str(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
}

std::string statement_digest(const sql::parsed_statement& st) {
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&](std::string_view s) {
        for (unsigned char c : s) {
            h ^= static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
            h *= 1099511628211ull;
        }
        h ^= ' ';
        h *= 1099511628211ull;
    };
    for (const auto& t : st.tokens) {
        switch (t.kind) {
        case sql::token_kind::string:
        case sql::token_kind::hex_string:
        case sql::token_kind::hex_number:
        case sql::token_kind::bit_string:
        case sql::token_kind::bit_number:
        case sql::token_kind::integer:
        case sql::token_kind::decimal:
        case sql::token_kind::real:
        case sql::token_kind::placeholder:
            mix("?");
            break;
        default:
            mix(t.text(st.sql));
        }
    }
    return fmt::format("{:016x}", h);
}

}  // namespace claimguard::session
