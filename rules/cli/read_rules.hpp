// Reading rules files for the CLI commands and the sidecar: the file I/O in front of the
// pure loader (rules::load_rules).
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "rules/model/rules.hpp"

namespace claimguard::rules_cli {

struct read_result {
    std::vector<rules::rules_source> sources;
    std::vector<rules::diagnostic> unreadable;  // "cannot read FILE: reason", line 0
};

// Each path as given, or for a directory the *.yaml/*.yml files in it (sorted, hidden entries such
// as a ConfigMap's ..data skipped). A directory that cannot be listed or holds none is a problem.
[[nodiscard]] std::vector<std::string> expand_rules_paths(const std::vector<std::string>& paths,
                                                          std::vector<rules::diagnostic>& problems);

// Reads each file (directories expanded as above), at most max_rules_file_bytes + 1 bytes (so the loader can say it is
// too large).
[[nodiscard]] read_result read_rules_files(const std::vector<std::string>& paths);

namespace detail {
// lint, ddl and explain: reads every file, then loads them as one rule set. Returns 2 after
// printing why a file cannot be read, 1 after printing the rules' errors, 0 with `out` set.
int read_and_load(const std::vector<std::string>& paths, std::string_view command, std::ostream& err,
                  rules::rule_set& out);
}  // namespace detail

}  // namespace claimguard::rules_cli
