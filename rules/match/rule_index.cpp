// Builds the pre-filter from every protected table name of a rules snapshot.
#include "rules/match/rule_index.hpp"

#include <string>
#include <vector>

namespace claimguard::rules::match {
namespace {

[[nodiscard]] std::vector<std::string> protected_tables(const rule_set& rules) {
    std::vector<std::string> names;
    for (const auto& s : rules.stocks) names.push_back(s.table.name);
    for (const auto& c : rules.claims) names.push_back(c.table.name);
    return names;
}

}  // namespace

rule_index::rule_index(const rule_set& rules) : rules_(&rules), prefilter_(protected_tables(rules)) {}

const stock_rule* rule_index::stock_named(std::string_view name) const noexcept {
    for (const auto& s : rules_->stocks)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace claimguard::rules::match
