// An immutable rules snapshot (rule set + hot-path index) and the holder sessions read it from.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proxy/engine/key_collation.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

struct rules_snapshot {
    // `database_code`: what the schema check found reaching the rules' tables (empty: not looked).
    // `keys`: how the database compares each stock rule's key columns (empty: not looked; every key
    // byte for byte); the rules' stock_rule::key_compare is set from it.
    explicit rules_snapshot(rules::rule_set r, std::vector<rules::match::code_object> code = {},
                            std::vector<rule_key_compare> keys = {})
        : rules(with_key_compare(std::move(r), keys)),
          database_code(std::move(code)),
          key_compare(std::move(keys)),
          index(rules, database_code) {}
    rules_snapshot(const rules_snapshot&) = delete;
    rules_snapshot& operator=(const rules_snapshot&) = delete;

    const rules::rule_set rules;
    const std::vector<rules::match::code_object> database_code;
    const std::vector<rule_key_compare> key_compare;
    const rules::match::rule_index index;  // views `rules`
    std::vector<std::string> files;
};

// The rules files to load: `files` in order, then every *.yaml / *.yml directly in `dir`
// (sorted; hidden entries such as a ConfigMap's ..data are skipped, the symlinks into it followed).
[[nodiscard]] std::vector<std::string> rules_paths(const std::vector<std::string>& files, const std::string& dir);

// Reads and validates rules files. The result has rules only when every file was
// read and is valid; unreadable files become diagnostics too.
[[nodiscard]] rules::load_result load_rules_files(const std::vector<std::string>& paths);

// Where sessions take the current snapshot from. A command keeps the snapshot it
// started with (a shared_ptr), so a reload never changes rules under a running command.
// current() is an atomic shared_ptr load (a lock in libstdc++): the hot path reads through
// a rules_view instead, which re-reads it only when version() moved.
class rules_holder {
public:
    [[nodiscard]] std::shared_ptr<const rules_snapshot> current() const { return current_.load(); }
    // Publishes `next`, then bumps the version (release): whoever sees the new version loads
    // a snapshot at least that new.
    void replace(std::shared_ptr<const rules_snapshot> next) {
        current_.store(std::move(next));
        version_.fetch_add(1, std::memory_order_release);
    }
    // Publishes `next` only while `expected` is still current (the schema check's refreshed
    // snapshot must not undo a reload that came in meanwhile). False: something else was published.
    bool replace_if(const std::shared_ptr<const rules_snapshot>& expected, std::shared_ptr<const rules_snapshot> next) {
        auto want = expected;
        if (!current_.compare_exchange_strong(want, std::move(next))) return false;
        version_.fetch_add(1, std::memory_order_release);
        return true;
    }
    // How many replace() calls have completed.
    [[nodiscard]] std::uint64_t version() const { return version_.load(std::memory_order_acquire); }
    // Tells holders apart in a view (a holder made where an old one was gets a new id).
    [[nodiscard]] std::uint64_t id() const { return id_; }

private:
    static std::uint64_t next_id();

    std::atomic<std::shared_ptr<const rules_snapshot>> current_;
    std::atomic<std::uint64_t> version_{0};
    const std::uint64_t id_ = next_id();
};

// A cached copy of a holder's snapshot for one thread (not thread-safe itself): one acquire
// load per call while the rules are unchanged; the holder's lock only after a reload.
class rules_view {
public:
    [[nodiscard]] const std::shared_ptr<const rules_snapshot>& current(const rules_holder& holder) {
        const auto v = holder.version();
        if (v != seen_version_ || holder.id() != seen_holder_) [[unlikely]] {
            cached_ = holder.current();
            seen_version_ = v;
            seen_holder_ = holder.id();
        }
        return cached_;
    }

private:
    static constexpr std::uint64_t never = ~std::uint64_t{0};
    std::shared_ptr<const rules_snapshot> cached_;
    std::uint64_t seen_version_ = never;
    std::uint64_t seen_holder_ = never;
};

// The calling thread's view (one per I/O thread): what sessions read the rules through.
[[nodiscard]] const std::shared_ptr<const rules_snapshot>& current_on_this_thread(const rules_holder& holder);

}  // namespace claimguard::engine
