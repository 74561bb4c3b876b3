// Decode errors of the wire codec, as a boost::system error category.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

namespace claimguard::protocol {

enum class errc {
    ok = 0,
    truncated,             // a field runs past the end of the packet
    bad_lenenc,            // 0xFB or 0xFF where a length-encoded integer must start
    length_past_end,       // a length-encoded string is longer than what is left
    bad_sequence,          // a frame's sequence id is not the one expected
    packet_too_large,      // a packet exceeds the configured max packet size
    unexpected_packet,     // a packet that cannot appear in this state
    protocol_version,      // the server greeting is not protocol version 10
    unsupported_command,   // a command the proxy refuses to relay
    empty_packet,          // a command packet with no payload
    bad_value,             // a value does not match its declared type (binary protocol)
    missing_param_types,   // COM_STMT_EXECUTE reuses parameter types no earlier execute bound
    too_many_rows,         // a COM_STMT_BULK_EXECUTE carries more rows than the caller reads
    bad_compression,       // a compressed frame that does not inflate to what its header announced
};

const boost::system::error_category& protocol_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), protocol_category()};
}

template <class T>
using result = boost::system::result<T>;

}  // namespace claimguard::protocol

namespace boost::system {
template <>
struct is_error_code_enum<claimguard::protocol::errc> : std::true_type {};
}  // namespace boost::system
