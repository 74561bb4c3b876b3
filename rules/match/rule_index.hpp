// A rules snapshot prepared for the hot path: the pre-filter and rule lookups.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/match/database_code.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/prefilter.hpp"

namespace claimguard::rules::match {

// A name a statement can use to reach a rule's table through the database's own code: a
// routine to CALL (or a function to call), a view to write through, a table whose trigger
// writes the rule's table. Built from the schema check's code_objects.
struct code_route {
    code_kind kind = code_kind::procedure;
    std::string name;  // as a statement names it: the routine, the view, the trigger's table
    const stock_rule* stock = nullptr;
    const claim_rule* claim = nullptr;
    std::string reason;  // the unmodeled fact's sentence ("... through procedure claim_coupon ...")
};

// Views `rules`, which must outlive it (one per rules snapshot).
class rule_index {
public:
    explicit rule_index(const rule_set& rules, const std::vector<code_object>& database_code = {});

    [[nodiscard]] const rule_set& rules() const noexcept { return *rules_; }
    [[nodiscard]] const sql::prefilter& filter() const noexcept { return prefilter_; }
    // The stock rule named `name` (exact name, as claim rules refer to it).
    [[nodiscard]] const stock_rule* stock_named(std::string_view name) const noexcept;
    // The names that reach a rule through database code (empty without a schema check).
    [[nodiscard]] const std::vector<code_route>& code_routes() const noexcept { return routes_; }

private:
    const rule_set* rules_;
    std::vector<code_route> routes_;
    sql::prefilter prefilter_;
};

}  // namespace claimguard::rules::match
