// Scaffold: replaced by the rules library's real `claimguard explain`.
#include "rules_cli.hpp"
namespace claimguard::rules_cli {
int explain(const std::vector<std::string>&, const std::optional<std::string>&, const std::string&,
            std::ostream&, std::ostream& err) {
    err << "claimguard explain: not built yet\n";
    return 2;
}
}  // namespace claimguard::rules_cli
