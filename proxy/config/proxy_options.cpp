// Parsing of listen/backend addresses.
#include "proxy_options.hpp"

#include <charconv>
#include <stdexcept>

namespace claimguard::config {

endpoint parse_endpoint(const std::string& text) {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
        throw std::invalid_argument("expected host:port, got '" + text + "'");
    endpoint ep;
    ep.host = text.substr(0, colon);
    if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']')
        ep.host = ep.host.substr(1, ep.host.size() - 2);
    unsigned port = 0;
    auto port_text = std::string_view(text).substr(colon + 1);
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || ptr != port_text.data() + port_text.size() || port > 65535)
        throw std::invalid_argument("bad port in '" + text + "'");
    ep.port = static_cast<std::uint16_t>(port);
    return ep;
}

}  // namespace claimguard::config
