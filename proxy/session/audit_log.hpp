// The audit log: one JSON line per intervention (rewrite, refusal, duplicate, compensation,
// observe-mode would-rewrite). Only values of columns the rules name are ever written.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
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
    std::string_view note;
};

class audit_log {
public:
    // "-" or "": standard error; "off": nothing; else a file opened for appending.
    explicit audit_log(const std::string& path);
    ~audit_log();
    audit_log(const audit_log&) = delete;
    audit_log& operator=(const audit_log&) = delete;

    void write(const audit_event& e);
    [[nodiscard]] bool enabled() const { return file_ != nullptr; }

private:
    std::mutex mutex_;
    std::FILE* file_ = nullptr;
    bool owned_ = false;
};

// A statement's digest: hex FNV-1a of its significant tokens with every literal
// replaced by "?" (so the same shape with other values has the same digest).
std::string statement_digest(const rules::sql::parsed_statement& st);

}  // namespace claimguard::session
