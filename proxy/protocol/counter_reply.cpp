// A server's one-row reply to a counter read kept as a template and rebuilt with a new value.
#include "counter_reply.hpp"

#include <limits>
#include <string>

#include "binary_row.hpp"
#include "capabilities.hpp"
#include "column.hpp"
#include "frame.hpp"
#include "packets.hpp"
#include "reply_view.hpp"

namespace claimguard::protocol {
namespace {

// An EOF packet: 0xFE, warnings (2 bytes), then the status flags.
constexpr std::size_t eof_status_offset = 3;

// Result columns a template may have (a counter read names a few columns of one row).
constexpr std::size_t max_template_columns = 64;

bool is_integer(field_type t) {
    return t == field_type::tiny || t == field_type::short_ || t == field_type::long_ || t == field_type::int24 ||
           t == field_type::longlong;
}

// The value of the counter's column type range: a rebuilt reply never says what the column cannot hold.
bool fits(value_type t, std::int64_t v) {
    std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
    switch (t.type) {
        case field_type::tiny: lo = t.is_unsigned ? 0 : -128, hi = t.is_unsigned ? 255 : 127; break;
        case field_type::short_: lo = t.is_unsigned ? 0 : -32768, hi = t.is_unsigned ? 65535 : 32767; break;
        case field_type::int24: lo = t.is_unsigned ? 0 : -8388608, hi = t.is_unsigned ? 16777215 : 8388607; break;
        case field_type::long_:
            lo = t.is_unsigned ? 0 : std::numeric_limits<std::int32_t>::min();
            hi = t.is_unsigned ? std::int64_t{std::numeric_limits<std::uint32_t>::max()}
                               : std::numeric_limits<std::int32_t>::max();
            break;
        default: lo = t.is_unsigned ? 0 : lo; break;
    }
    return v >= lo && v <= hi;
}

}  // namespace

std::size_t counter_reply::size_bytes() const {
    std::size_t n = row_before.size() + row_after.size() + row.size() + tail.size() + types.size() * sizeof(value_type);
    for (const auto& h : head) n += h.size();
    return n;
}

std::optional<counter_reply> parse_counter_reply(bytes_view raw, std::uint32_t capabilities,
                                                 std::uint32_t mariadb_capabilities, bool binary,
                                                 std::optional<std::uint32_t> position, std::string_view label) {
    auto reply = read_reply(raw, capabilities, mariadb_capabilities, max_frame_payload);
    // One result set of exactly one row, closed, nothing after it.
    if (!reply || reply->kind() != reply_kind::result_set || reply->column_count() > max_template_columns ||
        reply->end() != rows_end::closed || reply->row_count() != 1 || reply->packets_after() != 0)
        return std::nullopt;
    counter_reply t;
    t.binary = binary;
    auto columns = reply->columns();
    if (!columns) return std::nullopt;
    for (const auto& col : *columns) t.types.push_back(value_type_of(col));
    const auto index = counter_column(*columns, position, label);
    if (!index) return std::nullopt;
    t.index = *index;
    t.counter_type = t.types[t.index];
    if (!is_integer(t.counter_type.type)) return std::nullopt;
    if (auto eof_at = reply->metadata_eof()) {
        auto eof =
            is_eof_packet(*eof_at, capabilities) ? parse_eof(*eof_at) : result<eof_packet>(errc::unexpected_packet);
        if (!eof || eof_at->size() < eof_status_offset + 2) return std::nullopt;
        t.head_eof_status = eof->status;
    }
    const auto& row_packet = reply->row(0);
    if (!row_packet.whole) return std::nullopt;
    const auto row = row_packet.payload;
    const auto tail = reply->closing();
    // Where the status flags are in the closing packet.
    if (capabilities & cap::deprecate_eof) {
        auto ok = parse_ok(tail, capabilities);
        if (!ok) return std::nullopt;
        t.status = ok->status;
        t.status_offset = 1 + lenenc_size(ok->affected_rows) + lenenc_size(ok->last_insert_id);
    } else {
        auto eof = parse_eof(tail);
        if (!eof) return std::nullopt;
        t.status = eof->status;
        t.status_offset = eof_status_offset;
    }
    if ((t.status & status::session_state_changed) || (t.status & status::more_results_exist) ||
        (t.status & status::cursor_exists) || t.status_offset + 2 > tail.size() ||
        load_u16(tail.data() + t.status_offset) != t.status)
        return std::nullopt;
    if (binary) {
        auto values = reply->binary_values(0, t.types);
        if (!values) return std::nullopt;
        // An integer column: its value is an integer (a DECIMAL's text never gets here).
        auto v = counter_value((*values)[t.index]);
        if (!v) return std::nullopt;
        t.value = *v;
        byte_buffer again;  // only a row the codec writes back byte for byte is a template
        if (serialize_binary_row(t.types, *values, again) || again.size() != row.size() ||
            !std::equal(again.begin(), again.end(), row.begin()))
            return std::nullopt;
        t.row.assign(row.begin(), row.end());
    } else {
        auto values = reply->text_values(0);
        if (!values || !(*values)[t.index]) return std::nullopt;
        const auto text = *(*values)[t.index];
        auto v = counter_value(text);
        if (!v) return std::nullopt;
        t.value = *v;
        const auto offset = static_cast<std::size_t>(reinterpret_cast<const std::uint8_t*>(text.data()) - row.data());
        const auto prefix = lenenc_size(text.size());
        if (offset < prefix || offset + text.size() > row.size()) return std::nullopt;
        t.row_before.assign(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(offset - prefix));
        t.row_after.assign(row.begin() + static_cast<std::ptrdiff_t>(offset + text.size()), row.end());
    }
    // A value its column cannot hold (a binary MEDIUMINT travels in 4 bytes) is no reply a server
    // sends, and no template: rebuild_counter_reply would refuse even its own value.
    if (!fits(t.counter_type, t.value)) return std::nullopt;
    for (const auto& p : reply->metadata()) t.head.emplace_back(p.payload.begin(), p.payload.end());
    t.tail.assign(tail.begin(), tail.end());
    return t;
}

std::optional<byte_buffer> rebuild_counter_reply(const counter_reply& t, std::int64_t value,
                                                 std::uint16_t session_status, std::uint8_t first_seq) {
    if (!fits(t.counter_type, value)) return std::nullopt;
    byte_buffer out, row;
    std::uint8_t seq = first_seq;
    // What the server would say now: the statement's own flags, the session's state.
    auto status_of = [&](std::uint16_t kept) {
        return static_cast<std::uint16_t>((kept & statement_status_flags) | (session_status & session_status_flags));
    };
    auto put_status = [](byte_buffer& payload, std::size_t at, std::uint16_t status) {
        payload[at] = static_cast<std::uint8_t>(status & 0xFF);
        payload[at + 1] = static_cast<std::uint8_t>(status >> 8);
    };
    for (std::size_t i = 0; i < t.head.size(); ++i) {
        if (t.head_eof_status && i + 1 == t.head.size()) {
            byte_buffer eof = t.head[i];
            put_status(eof, eof_status_offset, status_of(*t.head_eof_status));
            write_packet(out, seq, eof);
        } else {
            write_packet(out, seq, t.head[i]);
        }
    }
    if (t.binary) {
        auto values = parse_binary_row(t.row, t.types);
        if (!values) return std::nullopt;
        auto& v = (*values)[t.index];
        if (std::holds_alternative<std::uint64_t>(v))
            v = static_cast<std::uint64_t>(value);
        else
            v = value;
        if (serialize_binary_row(t.types, *values, row)) return std::nullopt;
    } else {
        const auto text = std::to_string(value);
        row = t.row_before;
        writer w(row);
        w.lenenc_str(text);
        w.bytes(t.row_after);
    }
    write_packet(out, seq, row);
    byte_buffer tail = t.tail;
    put_status(tail, t.status_offset, status_of(t.status));
    write_packet(out, seq, tail);
    return out;
}

}  // namespace claimguard::protocol
