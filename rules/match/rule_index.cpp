// Builds the pre-filter from every protected table name of a rules snapshot, and the names that
// reach those tables through database code.
#include "rules/match/rule_index.hpp"

#include <string>
#include <vector>

#include "rules/sql/text.hpp"

namespace claimguard::rules::match {
namespace {

[[nodiscard]] bool is_protected_table(const rule_set& rules, std::string_view name) {
    for (const auto& s : rules.stocks)
        if (sql::iequals(s.table.name, name)) return true;
    for (const auto& c : rules.claims)
        if (sql::iequals(c.table.name, name)) return true;
    return false;
}

[[nodiscard]] std::vector<code_route> make_routes(const rule_set& rules, const std::vector<code_object>& code) {
    std::vector<code_route> out;
    for (const auto& o : code) {
        code_route r;
        r.kind = o.kind;
        for (const auto& s : rules.stocks)
            if (s.name == o.rule) r.stock = &s;
        for (const auto& c : rules.claims)
            if (c.name == o.rule) r.claim = &c;
        if (r.stock == nullptr && r.claim == nullptr) continue;  // a rule of other rules
        const std::string& table = r.stock ? r.stock->table.name : r.claim->table.name;
        switch (o.kind) {
            case code_kind::procedure:
            case code_kind::function:
                r.name = o.name;
                r.reason = "it calls " + std::string(to_string(o.kind)) + " " + o.name + ", whose code reaches " +
                           table + " where claimguard cannot see it";
                break;
            case code_kind::view:
                r.name = o.name;
                r.reason = "it writes through view " + o.name + ", which reaches " + table;
                break;
            case code_kind::trigger:
                // A write of a protected table is the rules' own business: the rules decide it.
                if (is_protected_table(rules, o.table)) continue;
                r.name = o.table;
                r.reason = "it writes " + o.table + ", whose trigger " + o.name + " reaches " + table;
                break;
            case code_kind::event: continue;  // runs on the server's clock: no statement reaches it
        }
        out.push_back(std::move(r));
    }
    return out;
}

[[nodiscard]] std::vector<std::string> prefilter_names(const rule_set& rules, const std::vector<code_route>& routes) {
    std::vector<std::string> names;
    for (const auto& s : rules.stocks) names.push_back(s.table.name);
    for (const auto& c : rules.claims) names.push_back(c.table.name);
    for (const auto& r : routes) names.push_back(r.name);
    return names;
}

}  // namespace

rule_index::rule_index(const rule_set& rules, const std::vector<code_object>& database_code)
    : rules_(&rules), routes_(make_routes(rules, database_code)), prefilter_(prefilter_names(rules, routes_)) {}

const stock_rule* rule_index::stock_named(std::string_view name) const noexcept {
    for (const auto& s : rules_->stocks)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace claimguard::rules::match
