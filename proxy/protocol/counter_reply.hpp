// A server's one-row reply to a counter read kept as a template (stock rule read_cache): the
// same bytes rebuilt with only the counter's value, the session's status flags and the sequence
// ids changed. Text and binary result sets; pure, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "binary_value.hpp"
#include "capabilities.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// Status flags a result set's closing EOF/OK takes from the session rather than from the
// statement (a rebuilt reply carries the session's current ones).
inline constexpr std::uint16_t session_status_flags =
    status::in_trans | status::autocommit | status::no_backslash_escapes | status::in_trans_readonly;
// Flags the statement itself set (index use, slow query): kept from the server's reply.
inline constexpr std::uint16_t statement_status_flags =
    status::no_good_index_used | status::no_index_used | status::query_was_slow;

struct counter_reply {
    std::vector<byte_buffer> head;  // payloads before the row: column count, definitions, EOF
    // Without CLIENT_DEPRECATE_EOF the EOF after the definitions carries status flags too.
    std::optional<std::uint16_t> head_eof_status;
    bool binary = false;
    std::int64_t value = 0;  // the counter as the server returned it
    // Text: the row's bytes before and after the counter's length-encoded value.
    byte_buffer row_before, row_after;
    // Binary: the row and its columns' types, re-encoded with the value replaced.
    byte_buffer row;
    std::vector<value_type> types;
    std::size_t index = 0;  // the counter's column
    value_type counter_type{};
    byte_buffer tail;  // the closing EOF (or OK with the EOF header)
    std::size_t status_offset = 0;
    std::uint16_t status = 0;  // as the server sent it

    [[nodiscard]] std::size_t size_bytes() const;
};

// Keeps a reply as a template, or nullopt when it cannot be rebuilt byte for byte: an ERR or
// OK, not exactly one row, a frame of 16 MiB, the counter NULL or not an integer column, a
// closing packet with session-state information, a binary row that does not re-encode to the
// same bytes. `position` is the counter's column when known, else it is found by `label`.
[[nodiscard]] std::optional<counter_reply> parse_counter_reply(bytes_view raw, std::uint32_t capabilities,
                                                               std::uint32_t mariadb_capabilities, bool binary,
                                                               std::optional<std::uint32_t> position,
                                                               std::string_view label);

// The reply with the counter at `value`, the session's status flags and sequence ids from
// `first_seq`; nullopt when `value` does not fit the column's type.
[[nodiscard]] std::optional<byte_buffer> rebuild_counter_reply(const counter_reply& t, std::int64_t value,
                                                               std::uint16_t session_status, std::uint8_t first_seq);

}  // namespace claimguard::protocol
