// `claimguard lint RULES...`: checks rules files and prints every error as file:line:column.
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "rules/cli/rules_cli.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules_cli {
namespace detail {

// Shared by lint and ddl (declared again in ddl.cpp): reads every file, then loads them as one
// rule set. Returns 2 after printing why a file cannot be read, 1 after printing the rules'
// errors, 0 with `out` set.
int read_and_load(const std::vector<std::string>& paths, std::string_view command, std::ostream& err,
                  rules::rule_set& out) {
    if (paths.empty()) {
        err << "claimguard " << command << ": no rules files given (usage: claimguard " << command
            << " RULES.yaml...)\n";
        return 2;
    }
    std::vector<rules::rules_source> sources;
    bool unreadable = false;
    for (const auto& path : paths) {
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) {
            err << "claimguard " << command << ": cannot read " << path << ": it is a directory\n";
            unreadable = true;
            continue;
        }
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            err << "claimguard " << command << ": cannot read " << path << ": "
                << std::generic_category().message(errno) << "\n";
            unreadable = true;
            continue;
        }
        // Read one byte past the limit so the loader can say the file is too large.
        std::string text;
        text.resize(rules::max_rules_file_bytes + 1);
        in.read(text.data(), static_cast<std::streamsize>(text.size()));
        if (in.bad()) {
            err << "claimguard " << command << ": cannot read " << path << ": read error\n";
            unreadable = true;
            continue;
        }
        text.resize(static_cast<std::size_t>(in.gcount()));
        sources.push_back({path, std::move(text)});
    }
    if (unreadable)
        return 2;
    auto loaded = rules::load_rules(sources);
    for (const auto& e : loaded.errors)
        err << rules::format_diagnostic(e) << "\n";
    if (!loaded.rules)
        return 1;
    out = std::move(*loaded.rules);
    return 0;
}

}  // namespace detail

int lint(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err) {
    rules::rule_set set;
    if (const int rc = detail::read_and_load(paths, "lint", err, set); rc != 0)
        return rc;
    out << "ok: " << set.stocks.size() << " stock rules, " << set.claims.size() << " claim rules (version "
        << set.version_hash << ")\n";
    return 0;
}

}  // namespace claimguard::rules_cli
