// Key slots, redirect parsing and the slot map: the Redis Cluster spec's routing rules.
#include "cluster_map.hpp"

#include <charconv>

namespace claimguard::guards {

namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size() || v == 0 || v > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(v);
}

// "host:port" or "[v6]:port"; the port follows the last ':'.
std::optional<node_address> parse_node(std::string_view text, std::string_view asked_host) {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto port = parse_port(text.substr(colon + 1));
    if (!port) return std::nullopt;
    auto host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    node_address n{std::string(host.empty() ? asked_host : host), *port};
    if (n.host.empty()) return std::nullopt;
    return n;
}

}  // namespace

std::string node_address::text() const {
    if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
    return host + ":" + std::to_string(port);
}

std::string_view hash_tag(std::string_view key) {
    auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

std::uint16_t crc16(std::string_view data) {
    std::uint16_t crc = 0;
    for (unsigned char c : data) {
        crc ^= static_cast<std::uint16_t>(c << 8);
        for (int i = 0; i < 8; ++i)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

std::uint16_t key_slot(std::string_view key) { return crc16(hash_tag(key)) & (cluster_slots - 1); }

std::optional<redirect> parse_redirect(std::string_view error, std::string_view asked_host) {
    redirect r;
    if (error.starts_with("MOVED ")) {
        r.type = redirect::kind::moved;
        error.remove_prefix(6);
    } else if (error.starts_with("ASK ")) {
        r.type = redirect::kind::ask;
        error.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    auto space = error.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    unsigned slot = 0;
    auto slot_text = error.substr(0, space);
    auto [p, ec] = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
    if (ec != std::errc{} || p != slot_text.data() + slot_text.size() || slot >= cluster_slots) return std::nullopt;
    r.slot = static_cast<std::uint16_t>(slot);
    auto node = parse_node(error.substr(space + 1), asked_host);
    if (!node) return std::nullopt;
    r.node = std::move(*node);
    return r;
}

std::uint16_t slot_map::index_of(const node_address& node) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i] == node) return static_cast<std::uint16_t>(i);
    nodes_.push_back(node);
    return static_cast<std::uint16_t>(nodes_.size() - 1);
}

std::optional<slot_map> slot_map::from_cluster_slots(const resp_value& reply, std::string_view asked_host) {
    using k = resp_value::kind;
    if (reply.type != k::array) return std::nullopt;
    slot_map map;
    for (const auto& range : reply.elements) {
        // [start, end, [host, port, id, ...], replicas...]
        if (range.type != k::array || range.elements.size() < 3) return std::nullopt;
        const auto& start = range.elements[0];
        const auto& end = range.elements[1];
        const auto& master = range.elements[2];
        if (start.type != k::integer || end.type != k::integer || start.integer < 0 || end.integer < start.integer ||
            end.integer >= cluster_slots)
            return std::nullopt;
        if (master.type != k::array || master.elements.size() < 2 || master.elements[0].type != k::string ||
            master.elements[1].type != k::integer || master.elements[1].integer <= 0 ||
            master.elements[1].integer > 65535)
            return std::nullopt;
        std::string host = master.elements[0].str;
        if (host.empty() || host == "?") host = std::string(asked_host);
        if (host.empty()) return std::nullopt;
        auto idx = map.index_of({host, static_cast<std::uint16_t>(master.elements[1].integer)});
        if (idx == no_node) return std::nullopt;
        for (long long s = start.integer; s <= end.integer; ++s) map.slots_[static_cast<std::size_t>(s)] = idx;
    }
    return map;
}

const node_address* slot_map::node_for(std::uint16_t slot) const {
    if (slot >= cluster_slots) return nullptr;
    auto idx = slots_[slot];
    return idx == no_node ? nullptr : &nodes_[idx];
}

void slot_map::assign(std::uint16_t slot, const node_address& node) {
    if (slot >= cluster_slots) return;
    auto idx = index_of(node);
    if (idx != no_node) slots_[slot] = idx;
}

std::size_t slot_map::covered_slots() const {
    std::size_t n = 0;
    for (auto s : slots_) n += s != no_node;
    return n;
}

}  // namespace claimguard::guards
