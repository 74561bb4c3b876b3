// An immutable rules snapshot (rule set + hot-path index) and the holder sessions read it from.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {

struct rules_snapshot {
    explicit rules_snapshot(rules::rule_set r) : rules(std::move(r)), index(rules) {}
    rules_snapshot(const rules_snapshot&) = delete;
    rules_snapshot& operator=(const rules_snapshot&) = delete;

    const rules::rule_set rules;
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
class rules_holder {
public:
    [[nodiscard]] std::shared_ptr<const rules_snapshot> current() const { return current_.load(); }
    void replace(std::shared_ptr<const rules_snapshot> next) { current_.store(std::move(next)); }

private:
    std::atomic<std::shared_ptr<const rules_snapshot>> current_;
};

}  // namespace claimguard::engine
