// Parsers and validators for Kubernetes versions, names, host:port values and quantities.
#include "proxy/inject/k8s_values.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

namespace claimguard::inject {

namespace {

constexpr unsigned max_port = 65535;
constexpr std::size_t max_host_length = 253;
constexpr std::size_t max_version_component_digits = 4;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// Reads leading digits into `out`; returns how many were read (0: none or too many).
std::size_t read_number(std::string_view text, unsigned& out) {
    std::size_t n = 0;
    while (n < text.size() && is_digit(text[n])) ++n;
    if (n == 0 || n > max_version_component_digits) return 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + n, out);
    return ec == std::errc{} ? n : 0;
}

bool is_ipv6_literal(std::string_view text) {
    if (text.empty()) return false;
    std::size_t colons = 0;
    for (const char c : text) {
        if (c == ':')
            ++colons;
        else if (!(is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.'))
            return false;
    }
    return colons >= 2;
}

bool is_host_name(std::string_view host) {
    if (host.empty() || host.size() > max_host_length || host.front() == '.' || host.back() == '.' ||
        host.front() == '-')
        return false;
    std::size_t label = 0;
    for (const char c : host) {
        if (c == '.') {
            if (label == 0) return false;
            label = 0;
            continue;
        }
        if (!(is_alnum(c) || c == '-' || c == '_')) return false;
        if (++label > max_dns_label_length) return false;
    }
    return true;
}

}  // namespace

result<k8s_version> parse_k8s_version(std::string_view text) {
    if (!text.empty() && text.front() == 'v') text.remove_prefix(1);
    k8s_version v;
    const std::size_t major_digits = read_number(text, v.major);
    if (major_digits == 0 || major_digits >= text.size() || text[major_digits] != '.')
        return make_error_code(errc::bad_version);
    text.remove_prefix(major_digits + 1);
    const std::size_t minor_digits = read_number(text, v.minor);
    if (minor_digits == 0) return make_error_code(errc::bad_version);
    text.remove_prefix(minor_digits);
    // What may follow the minor: nothing, '+' (managed clusters), ".patch", "-suffix".
    if (!text.empty() && text.front() != '+' && text.front() != '.' && text.front() != '-')
        return make_error_code(errc::bad_version);
    if (v.major == 0) return make_error_code(errc::bad_version);
    return v;
}

bool is_dns_subdomain(std::string_view name) {
    if (name.empty() || name.size() > max_dns_subdomain_length) return false;
    if (!is_lower_alnum(name.front()) || !is_lower_alnum(name.back())) return false;
    for (const char c : name)
        if (!(is_lower_alnum(c) || c == '-' || c == '.')) return false;
    return true;
}

bool is_dns_label(std::string_view name) {
    return name.size() <= max_dns_label_length && name.find('.') == std::string_view::npos && is_dns_subdomain(name);
}

result<std::string_view> validate_host_port(std::string_view text) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return make_error_code(errc::bad_host_port);
    std::string_view host = text.substr(0, colon);
    const std::string_view port = text.substr(colon + 1);
    if (host.front() == '[') {
        if (host.size() < 3 || host.back() != ']' || !is_ipv6_literal(host.substr(1, host.size() - 2)))
            return make_error_code(errc::bad_host_port);
    } else if (!is_host_name(host)) {
        return make_error_code(errc::bad_host_port);
    }
    unsigned value = 0;
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit))
        return make_error_code(errc::bad_host_port);
    std::from_chars(port.data(), port.data() + port.size(), value);
    if (value == 0 || value > max_port) return make_error_code(errc::bad_host_port);
    return text;
}

bool is_quantity(std::string_view text) {
    // <digits>[.<digits>] then one suffix: binary SI, decimal SI, or an exponent e<int>.
    static constexpr std::array<std::string_view, 14> suffixes = {"",  "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                                                                  "n", "u",  "m",  "k",  "M",  "G",  "T"};
    static constexpr std::array<std::string_view, 2> more_suffixes = {"P", "E"};
    std::size_t i = 0;
    std::size_t digits = 0;
    while (i < text.size() && is_digit(text[i])) ++i, ++digits;
    if (i < text.size() && text[i] == '.') {
        ++i;
        while (i < text.size() && is_digit(text[i])) ++i, ++digits;
    }
    if (digits == 0) return false;
    const std::string_view suffix = text.substr(i);
    for (const auto s : suffixes)
        if (suffix == s) return true;
    for (const auto s : more_suffixes)
        if (suffix == s) return true;
    if (suffix.size() >= 2 && (suffix.front() == 'e' || suffix.front() == 'E')) {
        std::string_view exponent = suffix.substr(1);
        if (exponent.front() == '+' || exponent.front() == '-') exponent.remove_prefix(1);
        return !exponent.empty() && std::all_of(exponent.begin(), exponent.end(), is_digit);
    }
    return false;
}

std::string json_pointer_token(std::string_view key) {
    std::string out;
    out.reserve(key.size());
    for (const char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

}  // namespace claimguard::inject
