// Rules files from disk into rules::rules_source values.
#include "rules/cli/read_rules.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "rules/model/limits.hpp"

namespace claimguard::rules_cli {

namespace {

// A directory stands for the *.yaml and *.yml files in it, sorted by name; hidden entries (a
// ConfigMap mount's ..data and ..2024_01_01 directories, editors' .swp files) are skipped.
bool rules_file_name(const std::filesystem::path& p) {
    const auto name = p.filename().string();
    const auto ext = p.extension().string();
    return !name.empty() && name[0] != '.' && (ext == ".yaml" || ext == ".yml");
}

}  // namespace

std::vector<std::string> expand_rules_paths(const std::vector<std::string>& paths,
                                            std::vector<rules::diagnostic>& problems) {
    std::vector<std::string> files;
    for (const auto& path : paths) {
        std::error_code ec;
        if (!std::filesystem::is_directory(path, ec)) {
            files.push_back(path);
            continue;
        }
        std::vector<std::string> found;
        for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
            std::error_code type_ec;
            if (rules_file_name(it->path()) && it->is_regular_file(type_ec)) found.push_back(it->path().string());
        }
        if (ec) {
            problems.push_back({{path, 0, 0}, "cannot read the directory " + path + ": " + ec.message()});
            continue;
        }
        if (found.empty()) {
            problems.push_back({{path, 0, 0}, "no rules files (*.yaml, *.yml) in the directory " + path});
            continue;
        }
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

read_result read_rules_files(const std::vector<std::string>& given) {
    read_result r;
    const auto paths = expand_rules_paths(given, r.unreadable);
    for (const auto& path : paths) {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            r.unreadable.push_back({{path, 0, 0}, "cannot read " + path + ": " + std::strerror(errno)});
            continue;
        }
        std::string text;
        text.resize(rules::max_rules_file_bytes + 1);
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        if (in.bad()) {
            r.unreadable.push_back({{path, 0, 0}, "cannot read " + path + ": read error"});
            continue;
        }
        text.resize(static_cast<std::size_t>(in.gcount()));
        r.sources.push_back({path, std::move(text)});
    }
    return r;
}

namespace detail {

int read_and_load(const std::vector<std::string>& paths, std::string_view command, std::ostream& err,
                  rules::rule_set& out) {
    if (paths.empty()) {
        err << "claimguard " << command << ": no rules files given (usage: claimguard " << command
            << " RULES.yaml...)\n";
        return 2;
    }
    auto read = read_rules_files(paths);
    for (const auto& u : read.unreadable) err << "claimguard " << command << ": " << u.message << "\n";
    if (!read.unreadable.empty()) return 2;
    auto loaded = rules::load_rules(read.sources);
    for (const auto& e : loaded.errors) err << rules::format_diagnostic(e) << "\n";
    for (const auto& w : loaded.warnings) err << rules::format_warning(w) << "\n";
    if (!loaded.rules) return 1;
    out = std::move(*loaded.rules);
    return 0;
}

}  // namespace detail
}  // namespace claimguard::rules_cli
