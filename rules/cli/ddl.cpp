// `claimguard ddl RULES...`: prints the UNIQUE indexes that back each claim rule, commented for a DBA.
#include <string_view>

#include "rules/cli/read_rules.hpp"
#include "rules/cli/rules_cli.hpp"
#include "rules/model/ddl.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules_cli {
int ddl(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err) {
    rules::rule_set set;
    if (const int rc = detail::read_and_load(paths, "ddl", err, set); rc != 0)
        return rc;
    out << rules::render_ddl(set);
    return 0;
}

}  // namespace claimguard::rules_cli
