// Reading rules files into a validated rule set.
#include "rules_snapshot.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rules/model/limits.hpp"

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

rules::load_result load_rules_files(const std::vector<std::string>& paths) {
    std::vector<rules::rules_source> sources;
    rules::load_result failed;
    for (const auto& path : paths) {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            failed.errors.push_back({{path, 0, 0}, "cannot read the rules file"});
            continue;
        }
        std::string text;
        text.resize(rules::max_rules_file_bytes + 1);  // one byte past the limit: the loader reports it
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        text.resize(static_cast<std::size_t>(in.gcount()));
        sources.push_back({path, std::move(text)});
    }
    if (!failed.errors.empty()) return failed;
    return rules::load_rules(sources);
}

}  // namespace claimguard::engine
