// `claimguard lint RULES...`: checks rules files and prints every error as file:line:column.
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "rules/cli/read_rules.hpp"
#include "rules/cli/rules_cli.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules_cli {


int lint(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err) {
    rules::rule_set set;
    if (const int rc = detail::read_and_load(paths, "lint", err, set); rc != 0)
        return rc;
    out << "ok: " << set.stocks.size() << " stock rules, " << set.claims.size() << " claim rules (version "
        << set.version_hash << ")\n";
    // reserve works through an account of the sidecar's own, which the rules file cannot show.
    for (const auto& s : set.stocks)
        if (s.reserve)
            out << "note: rule " << s.name << " has reserve: the sidecar needs its own database account "
                << "(schema_check_user, with SELECT and UPDATE on "
                << (s.table.schema.empty() ? "" : s.table.schema + ".") << s.table.name
                << "); without it reserve is not served\n";
    return 0;
}

}  // namespace claimguard::rules_cli
