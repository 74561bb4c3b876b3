// spdlog with a JSON-lines formatter.
#include "logging.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace claimguard::session {

namespace {

bool is_token_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

// The word after `key ` (at `from`, or at the start / after a space), as far as is_token_char goes.
std::string_view word_after(std::string_view msg, std::string_view key, std::size_t from = 0) {
    for (auto at = msg.find(key, from); at != std::string_view::npos; at = msg.find(key, at + 1)) {
        if (at != 0 && msg[at - 1] != ' ' && msg[at - 1] != '(') continue;
        auto begin = at + key.size();
        auto end = begin;
        while (end < msg.size() && is_token_char(msg[end])) ++end;
        if (end > begin) return msg.substr(begin, end - begin);
    }
    return {};
}

// {"time":"2026-11-29T12:00:00.123Z","level":"info","msg":"...", <structured_fields>}: one object per line.
class json_formatter final : public spdlog::formatter {
public:
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        auto t = std::chrono::system_clock::to_time_t(msg.time);
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() % 1000;
        std::tm tm{};
        gmtime_r(&t, &tm);
        nlohmann::json j;
        j["time"] = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
        auto level = spdlog::level::to_string_view(msg.level);
        j["level"] = std::string_view(level.data(), level.size());
        const std::string_view text(msg.payload.data(), msg.payload.size());
        j["msg"] = text;
        j.update(structured_fields(text));
        auto line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        dest.append(line.data(), line.data() + line.size());
        dest.push_back('\n');
    }
    [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};

}  // namespace

nlohmann::json structured_fields(std::string_view msg) {
    nlohmann::json f = nlohmann::json::object();
    const auto starts = [&](std::string_view p) { return msg.starts_with(p); };
    if (starts("session ") || starts("orphaned transaction of session "))
        f["component"] = "session";
    else if (starts("schema check"))
        f["component"] = "schema_check";
    else if (starts("redis guard"))
        f["component"] = "redis";
    else if (starts("inject: "))
        f["component"] = "inject";
    else if (starts("rules "))
        f["component"] = "rules";
    else if (starts("shutting down") || starts("second shutdown") || starts("all sessions closed"))
        f["component"] = "shutdown";

    if (const auto id = word_after(msg, "session "); !id.empty()) {
        std::uint64_t n = 0;
        bool digits = true;
        for (char c : id) {
            if (c < '0' || c > '9')
                digits = false;
            else
                n = n * 10 + static_cast<std::uint64_t>(c - '0');
        }
        if (digits) {
            f["session"] = n;
            // "session 12 from 10.0.0.7:51234: ..." (IPv6 peers are bracketed; unix peers "unix:/path").
            const std::string lead = "session " + std::string(id) + " from ";
            if (const auto at = msg.find(lead); at != std::string_view::npos && (at == 0 || msg[at - 1] == ' ')) {
                const auto begin = at + lead.size();
                const auto end = msg.find(": ", begin);
                if (end != std::string_view::npos) f["peer"] = msg.substr(begin, end - begin);
            }
        }
    }
    if (const auto rule = word_after(msg, "rule "); !rule.empty()) f["rule"] = rule;
    if (const auto version = word_after(msg, "version "); !version.empty()) f["version"] = version;
    if (starts("inject: ")) {
        // "inject: <ns>/<pod>: <reason>"
        const auto begin = std::string_view("inject: ").size();
        const auto end = msg.find(": ", begin);
        if (end != std::string_view::npos && msg.substr(begin, end - begin).find('/') != std::string_view::npos) {
            f["pod"] = msg.substr(begin, end - begin);
            const auto rest = msg.substr(end + 2);
            if (rest.starts_with("not injected"))
                f["action"] = "not_injected";
            else if (rest.starts_with("skipped"))
                f["action"] = "skipped";
            else if (rest.starts_with("injected"))
                f["action"] = "injected";
        }
    }
    return f;
}

void setup_logging(const std::string& level, const std::string& format) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("claimguard"));
    spdlog::set_level(spdlog::level::from_str(level));
    if (format == "json") spdlog::set_formatter(std::make_unique<json_formatter>());
}

}  // namespace claimguard::session
