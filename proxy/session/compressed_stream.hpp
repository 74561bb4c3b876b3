// What a link holds once its stream is compressed (CLIENT_COMPRESS): the compressed bytes read and not
// yet inflated, the compressed sequence id, the frames of the write under way. Only compressed sessions
// allocate one (an uncompressed link keeps a null pointer), so idle connections stay as small as before.
#pragma once

#include <cstdint>

#include "packet_buffer.hpp"
#include "proxy/protocol/compression.hpp"
#include "proxy/protocol/wire.hpp"

namespace claimguard::session {

using proto_renumbering = claimguard::protocol::sequence_renumbering;

struct compressed_stream {
    packet_buffer raw;              // compressed bytes read, not yet inflated into the link's in()
    std::uint8_t seq = 0;           // the next compressed sequence id, in either direction
    std::vector<std::uint8_t> out;  // the frames of the write under way
    proto_renumbering renumber;     // the database's ordinary ids, as uncompressed (backend link only)
};

}  // namespace claimguard::session
