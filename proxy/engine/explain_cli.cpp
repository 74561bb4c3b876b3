// `claimguard explain --rules R [--read VALUE] SQL`: reads the rules files, then the engine's dry run.
#include <charconv>
#include <cstdint>
#include <optional>

#include "explain.hpp"
#include "explain_cli.hpp"
#include "rules/cli/read_rules.hpp"
#include "rules/match/describe.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::engine {
int explain_command(const std::vector<std::string>& rules_paths, const std::optional<std::string>& read_value,
            const std::string& sql, std::ostream& out, std::ostream& err) {
    rules::match::explain_options options;
    if (read_value) {
        std::int64_t v = 0;
        const char* first = read_value->data();
        const char* last = first + read_value->size();
        const auto [end, ec] = std::from_chars(first, last, v);
        if (ec != std::errc{} || end != last) {
            err << "claimguard explain: --read takes the integer the session read before, not \"" << *read_value
                << "\"\n";
            return 2;
        }
        options.read_value = v;
    }
    rules::rule_set set;
    if (const int rc = rules_cli::detail::read_and_load(rules_paths, "explain", err, set); rc != 0) return rc;
    const rules::match::rule_index index(set);
    if (!explain(index, sql, options, out)) {
        err << "claimguard explain: the dry run is incomplete (see the error line above)\n";
        return 1;
    }
    return 0;
}

}  // namespace claimguard::engine
