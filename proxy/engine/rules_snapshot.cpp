// Reading rules files into a validated rule set.
#include "rules_snapshot.hpp"

#include <algorithm>
#include <filesystem>

#include "rules/cli/read_rules.hpp"

namespace claimguard::engine {

std::vector<std::string> rules_paths(const std::vector<std::string>& files, const std::string& dir) {
    std::vector<std::string> out = files;
    if (dir.empty()) return out;
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        auto name = entry.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        auto ext = entry.path().extension().string();
        if (ext != ".yaml" && ext != ".yml") continue;
        if (!std::filesystem::is_regular_file(entry.path(), ec)) continue;  // follows the ..data symlinks
        found.push_back(entry.path().string());
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
    return out;
}

std::uint64_t rules_holder::next_id() {
    static std::atomic<std::uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed);
}

const std::shared_ptr<const rules_snapshot>& current_on_this_thread(const rules_holder& holder) {
    thread_local rules_view view;
    return view.current(holder);
}

rules::load_result load_rules_files(const std::vector<std::string>& paths) {
    auto read = rules_cli::read_rules_files(paths);
    if (!read.unreadable.empty()) {
        rules::load_result failed;
        failed.errors = std::move(read.unreadable);
        return failed;
    }
    return rules::load_rules(read.sources);
}

}  // namespace claimguard::engine
