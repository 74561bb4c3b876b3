// spdlog with a JSON-lines formatter.
#include "logging.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace claimguard::session {

namespace {

// {"time":"2026-11-29T12:00:00.123Z","level":"info","msg":"..."}: one object per line.
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
        j["msg"] = std::string_view(msg.payload.data(), msg.payload.size());
        auto line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        dest.append(line.data(), line.data() + line.size());
        dest.push_back('\n');
    }
    [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};

}  // namespace

void setup_logging(const std::string& level, const std::string& format) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("claimguard"));
    spdlog::set_level(spdlog::level::from_str(level));
    if (format == "json") spdlog::set_formatter(std::make_unique<json_formatter>());
}

}  // namespace claimguard::session
