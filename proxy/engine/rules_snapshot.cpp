// Reading rules files into a validated rule set.
#include "rules_snapshot.hpp"

#include <fstream>
#include <sstream>

#include "rules/model/limits.hpp"

namespace claimguard::engine {

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
