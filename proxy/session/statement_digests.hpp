// What the sidecar saw on the protected tables, by statement shape: for a DBA learning an app in
// observe mode (GET /digests on the admin endpoint), like performance_schema's digest summary but
// only for statements a rule acted on (or would have, in observe). Thread-safe (one mutex; only
// audited statements reach it, never the relay's hot path).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace claimguard::session {

// At most this many shapes are kept; a new shape beyond it is counted in `dropped` only.
inline constexpr std::size_t max_statement_digests = 2048;

class statement_digests {
public:
    explicit statement_digests(std::size_t capacity = max_statement_digests) : capacity_(capacity) {}

    // One audited statement: `action` as audited (`would-<action>` in observe mode: counted as
    // <action>, observed). `statement` is the normalized text (audit_log.hpp).
    void record(std::string_view rule, std::string_view digest, std::string_view statement, std::string_view action,
                std::chrono::system_clock::time_point at = std::chrono::system_clock::now());

    // A statement on a table no rule names (watch_unlisted_tables, engine/unlisted_watch.hpp): filed
    // under the pseudo-rule `unlisted:<table>` with its notes (the evidence `suggest --digests` reads),
    // for at most `max_tables` such tables; a statement of one more is only counted
    // (unlisted_dropped) and false returned. The shape cap applies as well.
    bool record_unlisted(std::string_view table, std::string_view digest, std::string_view statement,
                         std::string_view action, const std::vector<std::string>& notes, std::size_t max_tables,
                         std::chrono::system_clock::time_point at = std::chrono::system_clock::now());

    // Every shape, most seen first, as JSON: {"shapes": [{rule, digest, statement, count, first_seen,
    // last_seen, actions: {<action>: {enforced, observed}}, notes: {<note>: count} (unlisted only)}],
    // "dropped": N, "unlisted_dropped": N}.
    [[nodiscard]] std::string json() const;
    // The same as a text table.
    [[nodiscard]] std::string text() const;
    [[nodiscard]] std::size_t size() const;

private:
    struct counts {
        std::uint64_t enforced = 0;
        std::uint64_t observed = 0;
    };
    struct shape {
        std::string statement;
        std::uint64_t count = 0;
        std::chrono::system_clock::time_point first_seen;
        std::chrono::system_clock::time_point last_seen;
        std::map<std::string, counts, std::less<>> actions;
        std::map<std::string, std::uint64_t, std::less<>> notes;
    };
    // record(), the mutex held: the shape counted (nullptr: beyond the cap).
    shape* record_locked(std::string_view rule, std::string_view digest, std::string_view statement,
                         std::string_view action, std::chrono::system_clock::time_point at);
    // The shape of (rule, digest), new if there is room (nullptr otherwise); the mutex held.
    shape* shape_of(std::string_view rule, std::string_view digest, std::string_view statement,
                    std::chrono::system_clock::time_point at);
    using key = std::tuple<std::string, std::string>;  // rule, digest

    const std::size_t capacity_;
    mutable std::mutex mutex_;
    std::map<key, shape, std::less<>> shapes_;
    std::uint64_t dropped_ = 0;
    std::set<std::string, std::less<>> unlisted_tables_;
    std::uint64_t unlisted_dropped_ = 0;
};

}  // namespace claimguard::session
