// A rules snapshot prepared for the hot path: the pre-filter and rule lookups.
#pragma once

#include <string_view>

#include "rules/model/rules.hpp"
#include "rules/sql/prefilter.hpp"

namespace claimguard::rules::match {

// Views `rules`, which must outlive it (one per rules snapshot).
class rule_index {
public:
    explicit rule_index(const rule_set& rules);

    [[nodiscard]] const rule_set& rules() const noexcept { return *rules_; }
    [[nodiscard]] const sql::prefilter& filter() const noexcept { return prefilter_; }
    // The stock rule named `name` (exact name, as claim rules refer to it).
    [[nodiscard]] const stock_rule* stock_named(std::string_view name) const noexcept;

private:
    const rule_set* rules_;
    sql::prefilter prefilter_;
};

}  // namespace claimguard::rules::match
