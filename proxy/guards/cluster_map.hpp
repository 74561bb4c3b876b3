// Redis Cluster routing, pure: the CRC16 key slot with {hash tag} rules, MOVED/ASK redirects,
// and the slot -> node map read from CLUSTER SLOTS.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resp.hpp"

namespace claimguard::guards {

constexpr std::uint16_t cluster_slots = 16384;

struct node_address {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const node_address&, const node_address&) = default;
    [[nodiscard]] std::string text() const;  // host:port, [v6]:port
};

// The part of the key that is hashed: the text between the first '{' and the first '}' after
// it, when that is not empty; otherwise the whole key (Redis's keyHashSlot).
[[nodiscard]] std::string_view hash_tag(std::string_view key);
[[nodiscard]] std::uint16_t crc16(std::string_view data);  // CRC16-CCITT (XMODEM), as Redis
[[nodiscard]] std::uint16_t key_slot(std::string_view key);

struct redirect {
    enum class kind : std::uint8_t { moved, ask };
    kind type = kind::moved;
    std::uint16_t slot = 0;
    node_address node;
};
// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 [::1]:6381" (the error reply's text). An empty host
// (":6381", a node that does not know its address) becomes `asked_host`.
[[nodiscard]] std::optional<redirect> parse_redirect(std::string_view error, std::string_view asked_host);

// Which master serves each slot. Nodes are indexed so that a slot costs two bytes.
class slot_map {
public:
    static constexpr std::uint16_t no_node = 0xFFFF;

    // From a CLUSTER SLOTS reply; `asked_host` fills empty hosts. Nothing when the reply does
    // not have the documented shape.
    [[nodiscard]] static std::optional<slot_map> from_cluster_slots(const resp_value& reply,
                                                                     std::string_view asked_host);

    [[nodiscard]] const node_address* node_for(std::uint16_t slot) const;
    void assign(std::uint16_t slot, const node_address& node);  // after MOVED
    [[nodiscard]] const std::vector<node_address>& nodes() const { return nodes_; }
    [[nodiscard]] std::size_t covered_slots() const;
    [[nodiscard]] bool empty() const { return nodes_.empty(); }

private:
    std::uint16_t index_of(const node_address& node);
    std::vector<node_address> nodes_;
    std::vector<std::uint16_t> slots_ = std::vector<std::uint16_t>(cluster_slots, no_node);
};

}  // namespace claimguard::guards
