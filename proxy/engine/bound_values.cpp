// Bound COM_STMT_EXECUTE values as the decision compares them.
#include "bound_values.hpp"

#include <charconv>
#include <cstdint>
#include <string>

#include "rules/sql/values.hpp"

namespace claimguard::engine {

namespace {

std::optional<std::int64_t> to_int(std::string_view text) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

}  // namespace

std::optional<resolved_value> resolve_bound(const protocol::binary_value& v) {
    resolved_value out;
    if (auto* i = std::get_if<std::int64_t>(&v)) {
        out.integer = *i;
        out.canonical = std::to_string(*i);
        return out;
    }
    if (auto* u = std::get_if<std::uint64_t>(&v)) {
        if (*u <= static_cast<std::uint64_t>(INT64_MAX)) out.integer = static_cast<std::int64_t>(*u);
        out.canonical = std::to_string(*u);
        return out;
    }
    if (auto* b = std::get_if<protocol::bytes_view>(&v)) {
        out.canonical = std::string(protocol::as_chars(*b));
        if (auto n = rules::sql::canonical_number(out.canonical)) {
            out.canonical = *n;
            out.integer = to_int(*n);
        }
        return out;
    }
    if (auto* d = std::get_if<double>(&v)) return resolve_double(*d);  // Node's numbers are doubles
    return std::nullopt;
}

value_resolver bound_resolver(const std::vector<protocol::binary_value>& params) {
    return [&params](const rules::match::value_ref& v) -> std::optional<resolved_value> {
        if (v.type == rules::match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            return resolve_bound(params[v.placeholder_index]);
        }
        return resolve_literal(v);
    };
}

}  // namespace claimguard::engine
