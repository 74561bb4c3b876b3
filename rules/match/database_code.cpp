// Names and the whole-identifier search shared by the schema check and the matcher.
#include "rules/match/database_code.hpp"

#include "rules/sql/text.hpp"

namespace claimguard::rules::match {

std::string_view to_string(code_kind k) noexcept {
    switch (k) {
        case code_kind::procedure: return "procedure";
        case code_kind::function: return "function";
        case code_kind::view: return "view";
        case code_kind::trigger: return "trigger";
        case code_kind::event: return "event";
    }
    return "routine";
}

std::string_view fact_code(code_kind k) noexcept {
    switch (k) {
        case code_kind::procedure:
        case code_kind::function: return "routine";
        case code_kind::view: return "view";
        case code_kind::trigger: return "trigger";
        case code_kind::event: return "event";
    }
    return "routine";
}

bool names_identifier(std::string_view text, std::string_view name) noexcept {
    if (name.empty() || text.size() < name.size()) return false;
    for (std::size_t i = 0; i + name.size() <= text.size(); ++i) {
        if (i > 0 && sql::is_ident_byte(text[i - 1])) continue;
        if (sql::iequals(text.substr(i, name.size()), name) &&
            (i + name.size() == text.size() || !sql::is_ident_byte(text[i + name.size()])))
            return true;
    }
    return false;
}

}  // namespace claimguard::rules::match
