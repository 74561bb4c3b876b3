// libFuzzer target: the Redis reply decoder the guard drives (hiredis's reader with our
// resp_value callbacks), fed the input in chunks whose sizes come from the input, and the
// cluster pieces that read replies (slot map from CLUSTER SLOTS, MOVED/ASK parsing).
//
// Input: byte 0 picks the chunk size (1..256), the rest is the byte stream from a "server".
// Properties: no crash or sanitizer report; a broken stream stays broken; every slot the map
// covers names a node it holds; a parsed redirect has a slot below 16384 and a port.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proxy/guards/cluster_map.hpp"
#include "proxy/guards/resp.hpp"

namespace cg = claimguard::guards;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

void inspect(const cg::resp_value& v) {
    if (v.type == cg::resp_value::kind::error) {
        if (auto r = cg::parse_redirect(v.str, "127.0.0.1")) check(r->slot < cg::cluster_slots && r->node.port != 0);
    }
    if (auto map = cg::slot_map::from_cluster_slots(v, "127.0.0.1")) {
        for (std::uint16_t s = 0; s < cg::cluster_slots; ++s) {
            const auto* n = map->node_for(s);
            check(!n || (!n->host.empty() && n->port != 0));
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    std::size_t chunk = static_cast<std::size_t>(data[0]) + 1;
    std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    cg::resp_decoder d;
    bool broken = false;
    for (std::size_t i = 0; i < bytes.size() && !broken; i += chunk) {
        if (!d.feed(bytes.substr(i, chunk))) {
            broken = true;
            break;
        }
        for (;;) {
            cg::resp_value v;
            auto s = d.next(v);
            if (s == cg::resp_decoder::status::need_more) break;
            if (s == cg::resp_decoder::status::broken) {
                broken = true;
                break;
            }
            inspect(v);
        }
    }
    if (broken) {
        cg::resp_value v;
        check(d.next(v) == cg::resp_decoder::status::broken);
    }
    (void)cg::key_slot(bytes);
    return 0;
}
