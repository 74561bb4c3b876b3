// The hot-path pre-filter: decides without parsing that a statement cannot matter to any rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::rules::sql {

enum class prefilter_verdict : std::uint8_t {
    irrelevant,  // no rule can take an interest: forward without parsing
    session,     // transaction control, SET, USE, XA, EXECUTE, DEALLOCATE (or a leading versioned comment): parse it
    candidate,   // any other statement naming a protected table (perhaps: a name inside a string counts too)
};

// Built once per rules snapshot from the protected table names. classify() never allocates.
// Never a false "irrelevant": whenever parse() + match would find a fact, the verdict is
// session or candidate (false candidates are fine, the parser sorts them out).
class prefilter {
public:
    prefilter() = default;
    explicit prefilter(const std::vector<std::string>& table_names);

    [[nodiscard]] prefilter_verdict classify(std::string_view sql) const noexcept;
    // A protected name occurs in `sql` as a whole word (anywhere: also in a session statement, such as
    // one that starts with a versioned comment).
    [[nodiscard]] bool names_protected(std::string_view sql) const noexcept { return mentions_table(sql, 0); }

private:
    [[nodiscard]] bool mentions_table(std::string_view sql, std::size_t from) const noexcept;

    std::vector<std::string> names_;  // lower case
    bool always_candidate_ = false;  // a name its bytes cannot find (non-ASCII, quotes inside)
};

}  // namespace claimguard::rules::sql
