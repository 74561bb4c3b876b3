// Redis key templates such as "lock:coupon:{user_id}:{campaign_id}": parsing and expansion.
#include "rules/model/key_template.hpp"

namespace claimguard::rules {

parsed_key_template parse_key_template(std::string_view t) {
    parsed_key_template out;
    std::string literal;
    const auto flush = [&] {
        if (!literal.empty())
            out.parts.push_back({template_part::kind::literal, std::move(literal)});
        literal.clear();
    };
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if ((c == '{' || c == '}') && i + 1 < t.size() && t[i + 1] == c) {
            literal += c;
            ++i;
            continue;
        }
        if (c == '}') {
            out.error = "has a '}' that closes no '{' (write '}}' for a literal brace)";
            out.error_offset = i;
            return out;
        }
        if (c != '{') {
            literal += c;
            continue;
        }
        const auto close = t.find('}', i + 1);
        if (close == std::string_view::npos) {
            out.error = "has a '{' that is never closed";
            out.error_offset = i;
            return out;
        }
        const auto column = t.substr(i + 1, close - i - 1);
        if (column.empty()) {
            out.error = "has an empty placeholder '{}'; put a column name between the braces";
            out.error_offset = i;
            return out;
        }
        if (column.find('{') != std::string_view::npos) {
            out.error = "has a '{' inside a placeholder";
            out.error_offset = i + 1 + column.find('{');
            return out;
        }
        flush();
        out.parts.push_back({template_part::kind::column, std::string(column)});
        i = close;
    }
    flush();
    return out;
}

}  // namespace claimguard::rules
