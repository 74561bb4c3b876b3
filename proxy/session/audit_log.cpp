// JSON-lines audit log writer and statement digests.
#include "audit_log.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace claimguard::session {

namespace sql = rules::sql;

audit_log::audit_log(const std::string& path, std::size_t max_pending_bytes, std::function<void()> on_drop)
    : max_pending_bytes_(max_pending_bytes), on_drop_(std::move(on_drop)) {
    if (path == "off") return;
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) host_ = name;
    if (path.empty() || path == "-") {
        file_ = stdout;  // its own stream: the text log is on standard error
    } else {
        file_ = std::fopen(path.c_str(), "a");
        if (!file_) throw std::runtime_error("cannot open the audit log " + path);
        owned_ = true;
        path_ = path;
    }
    enabled_ = true;
    writer_ = std::thread([this] { run_writer(); });
}

audit_log::~audit_log() {
    if (writer_.joinable()) {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_one();
        writer_.join();
    }
    if (owned_) std::fclose(file_);
}

std::string audit_line(const audit_event& e) {
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
    if (!e.statement.empty()) j["statement"] = e.statement;
    if (!e.note.empty()) j["note"] = e.note;
    if (!e.rules_version.empty()) j["rules_version"] = e.rules_version;
    if (!e.host.empty()) j["host"] = e.host;
    if (!e.database.empty()) j["database"] = e.database;
    if (e.backend_thread != 0) j["backend_thread"] = e.backend_thread;
    // Values come from SQL text and may hold any bytes: never fail on invalid UTF-8.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string with_answer(std::string line, std::uint16_t error) {
    // The line is one JSON object: the field goes before its closing brace.
    if (line.empty() || line.back() != '}') return line;
    line.pop_back();
    line += error == 0 ? std::string(",\"answer\":\"ok\"}") : fmt::format(",\"answer\":{}}}", error);
    return line;
}

void audit_log::write(const audit_event& e) {
    if (!file_) return;
    write_line(audit_line(e));
}

void audit_log::write_line(std::string line) {
    if (!file_) return;
    line += '\n';
    bool dropped = false;
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        if (pending_.size() + line.size() > max_pending_bytes_) {
            ++dropped_;
            dropped = true;
        } else {
            // Only the first line of a batch and the one that fills it wake the writer: the
            // lines between find it lingering (no futex wake, no thread switch per line).
            const bool fills = pending_.size() < batch_wake_bytes && pending_.size() + line.size() >= batch_wake_bytes;
            wake = pending_.empty() || fills;
            pending_ += line;
        }
    }
    if (dropped) {
        if (on_drop_) on_drop_();
        return;
    }
    if (wake) wake_.notify_one();
}

void audit_log::reopen() {
    if (!owned_) return;
    {
        std::lock_guard lock(mutex_);
        reopen_ = true;
    }
    wake_.notify_one();
}

std::uint64_t audit_log::batches() const {
    std::lock_guard lock(mutex_);
    return batches_;
}

std::uint64_t audit_log::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

void audit_log::run_writer() {
    std::string batch;
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || reopen_ || !pending_.empty(); });
        if (reopen_) {
            reopen_ = false;
            lock.unlock();
            // The old file (renamed by logrotate) gets nothing more; a new one by the same name is
            // created. If that fails the old one stays: lines are never lost to a failed reopen.
            if (std::FILE* fresh = std::fopen(path_.c_str(), "a")) {
                std::fclose(file_);
                file_ = fresh;
            } else {
                std::fprintf(stderr, "claimguard: cannot reopen the audit log %s; still writing the old file\n",
                             path_.c_str());
            }
            lock.lock();
            continue;
        }
        if (pending_.empty() && stopping_) return;
        // Linger for more lines of this batch (not at shutdown, not when the batch is full).
        wake_.wait_for(lock, batch_linger, [&] { return stopping_ || pending_.size() >= batch_wake_bytes; });
        ++batches_;
        batch.clear();
        batch.swap(pending_);  // sessions queue into the (empty) other buffer meanwhile
        lock.unlock();
        std::fwrite(batch.data(), 1, batch.size(), file_);
        std::fflush(file_);
        lock.lock();
    }
}

namespace {

// A value the app sent (a literal or a placeholder): the digest and the audit log show "?".
bool shown_as_placeholder(sql::token_kind kind) {
    switch (kind) {
        case sql::token_kind::string:
        case sql::token_kind::hex_string:
        case sql::token_kind::hex_number:
        case sql::token_kind::bit_string:
        case sql::token_kind::bit_number:
        case sql::token_kind::integer:
        case sql::token_kind::decimal:
        case sql::token_kind::real:
        case sql::token_kind::placeholder: return true;
        default: return false;
    }
}

}  // namespace

std::string normalized_statement(const sql::parsed_statement& st, std::size_t max_bytes) {
    std::string out;
    std::size_t previous_end = std::string_view::npos;
    for (const auto& t : st.tokens) {
        const auto text = shown_as_placeholder(t.kind) ? std::string_view("?") : t.text(st.sql);
        // Tokens that touched in the text touch here; a gap (space, comment) becomes one space.
        const bool gap = previous_end != std::string_view::npos && t.offset > previous_end;
        if (out.size() + (gap ? 1 : 0) + text.size() > max_bytes) {
            out += "...";
            return out;
        }
        if (gap) out += ' ';
        out += text;
        previous_end = t.end_offset();
    }
    return out;
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
    for (const auto& t : st.tokens) mix(shown_as_placeholder(t.kind) ? std::string_view("?") : t.text(st.sql));
    return fmt::format("{:016x}", h);
}

}  // namespace claimguard::session
