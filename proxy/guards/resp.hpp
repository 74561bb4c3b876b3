// RESP on byte spans, no sockets: hiredis's reader decodes replies into resp_value trees and
// its formatter encodes commands. The guard's connections feed whatever bytes they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace claimguard::guards {

// Bounds on what one reply may hold: a node answering more is misbehaving, not slow.
constexpr std::size_t max_pending_reply_bytes = 16u * 1024 * 1024;  // bytes buffered for one unfinished reply
constexpr int max_reply_array_elements = 1 << 20;                   // elements of one array

struct resp_value {
    enum class kind : std::uint8_t { string, status, error, integer, nil, array };
    kind type = kind::nil;
    long long integer = 0;
    std::string str;                   // string, status, error
    std::vector<resp_value> elements;  // array

    [[nodiscard]] bool is_error() const { return type == kind::error; }
    [[nodiscard]] bool is_status(std::string_view s) const { return type == kind::status && str == s; }
};

// Incremental decoder: feed bytes as they arrive, take whole replies out.
class resp_decoder {
public:
    resp_decoder();
    ~resp_decoder();
    resp_decoder(const resp_decoder&) = delete;
    resp_decoder& operator=(const resp_decoder&) = delete;

    // False when the stream is broken (protocol error or a limit exceeded); the connection must go.
    [[nodiscard]] bool feed(std::span<const char> bytes);
    enum class status : std::uint8_t { value, need_more, broken };
    // The next complete reply, if any.
    [[nodiscard]] status next(resp_value& out);
    [[nodiscard]] std::string_view error() const { return error_; }

private:
    redisReader* reader_;
    std::string error_;
};

// One command in RESP (an array of bulk strings).
[[nodiscard]] std::string format_command(std::span<const std::string_view> args);

}  // namespace claimguard::guards
