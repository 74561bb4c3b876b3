// The audit log: one JSON line per intervention (rewrite, refusal, duplicate, compensation,
// observe-mode would-rewrite). Only values of columns the rules name are ever written.
//
// Sessions never wait for the disk or for whoever reads standard error: write() formats the
// line and queues it; one writer thread appends the queue in batches. When the queue holds
// max_pending_bytes (the reader is stuck), further lines are dropped and counted, because a
// stalled log pipe must not stall every session on the I/O threads.
//
// The writer is woken only by the first line of a batch (or a full batch), then lingers a little
// to collect more: under load one futex wake, one thread switch and one write(2) serve many lines
// instead of one each (profiled: those per-line wake-ups were most of the claim path's CPU).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "rules/sql/statement.hpp"

namespace claimguard::session {

struct audit_event {
    std::uint64_t session = 0;
    std::string_view client;
    std::string_view user;
    std::string_view rule;
    std::string_view action;  // rewritten, exhausted, blocked, duplicate-redis, duplicate-db, compensated, would-rewrite, ...
    std::vector<std::pair<std::string, std::string>> keys;  // rule column -> value
    std::string_view digest;
    std::string_view statement;      // normalized: literals as ?, comments dropped (normalized_statement)
    std::string_view note;
    std::string_view rules_version;  // the rules the command was handled under
    std::string_view host;           // this sidecar (its host name: the pod's name in Kubernetes)
    std::string_view database;       // the session's current database, when known
    std::uint32_t backend_thread = 0;  // the database's id of the session's connection (0: none)
};

// One audit line as JSON (no newline). Values may hold any bytes: invalid UTF-8 is replaced.
[[nodiscard]] std::string audit_line(const audit_event& e);
// The line with what the client got for the statement: "answer": "ok" (an OK or rows), or the ERR
// code it was sent (the sidecar's own, or the database's it relayed). A line is made when the
// engine acts and the answer comes after it, so the session keeps a command's lines to its end.
[[nodiscard]] std::string with_answer(std::string line, std::uint16_t error);

class audit_log {
public:
    static constexpr std::size_t default_max_pending_bytes = 4 * 1024 * 1024;
    // How long the writer waits for more lines after the first of a batch; a line reaches the
    // file at most about this late (and at shutdown, always).
    static constexpr std::chrono::milliseconds batch_linger{20};
    // A batch this large is written at once, without waiting for the linger to end.
    static constexpr std::size_t batch_wake_bytes = 64 * 1024;

    // "-" or "": standard output (the text log stays on standard error); "off": nothing; else a
    // file opened for appending, reopened by reopen() (logrotate's postrotate: SIGUSR1).
    // `on_drop` is called (on the caller's thread) for every line dropped because the queue was full.
    explicit audit_log(const std::string& path, std::size_t max_pending_bytes = default_max_pending_bytes,
                       std::function<void()> on_drop = {});
    // Writes what is queued, then closes.
    ~audit_log();
    audit_log(const audit_log&) = delete;
    audit_log& operator=(const audit_log&) = delete;

    void write(const audit_event& e);
    // A line made by audit_line() (with_answer()), without its newline.
    void write_line(std::string line);
    // Reopens the file by its path before the next batch (after logrotate moved it away); a file
    // that cannot be opened then keeps the old one and says so on standard error. Thread-safe.
    void reopen();
    [[nodiscard]] bool enabled() const { return enabled_; }
    // This host's name (gethostname), for the lines' "host".
    [[nodiscard]] const std::string& host() const { return host_; }
    [[nodiscard]] std::uint64_t dropped() const;
    // Batches written so far (each one write to the file).
    [[nodiscard]] std::uint64_t batches() const;

private:
    void run_writer();

    std::FILE* file_ = nullptr;  // changed by the writer thread only (after construction)
    bool enabled_ = false;
    bool owned_ = false;
    std::string path_;
    std::string host_;
    bool reopen_ = false;  // guarded by mutex_
    const std::size_t max_pending_bytes_;
    std::function<void()> on_drop_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::string pending_;  // whole lines, each ending in '\n'
    bool stopping_ = false;
    std::uint64_t dropped_ = 0;
    std::uint64_t batches_ = 0;
    std::thread writer_;  // last: started once everything above exists
};

// A statement's digest: hex FNV-1a of its significant tokens with every literal
// replaced by "?" (so the same shape with other values has the same digest).
std::string statement_digest(const rules::sql::parsed_statement& st);

// The statement as the audit log shows it: its tokens as written, every literal and placeholder
// replaced by "?", comments dropped, each run of white space one space; cut at max_bytes (then
// ending in "..."). Never a value: what the app sent stays out of the log, as its password does.
inline constexpr std::size_t max_audit_statement_bytes = 1024;
[[nodiscard]] std::string normalized_statement(const rules::sql::parsed_statement& st,
                                               std::size_t max_bytes = max_audit_statement_bytes);

}  // namespace claimguard::session
