// libFuzzer target: everything the proxy decodes from a server (greeting, OK/ERR/EOF,
// column count and definitions, text and binary rows, prepare OK), and the exchange
// state machines fed with the input split into packets.
//
// Input: byte 0 picks the decoder, byte 1 its options (capabilities, counts, types),
// the rest feeds it (a whole reply also as a read_cache template). Properties: no crash or sanitizer report; encoders accept what
// decoders return; encoding is canonical (encode(decode(encode(decode(x)))) ==
// encode(decode(x))); the state machines never read past their input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "proxy/protocol/binary_row.hpp"
#include "proxy/protocol/capabilities.hpp"
#include "proxy/protocol/column.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/prepared.hpp"
#include "proxy/protocol/text_row.hpp"

namespace cg = claimguard::protocol;

namespace {

constexpr std::size_t fuzz_max_packet = std::size_t{1} << 20;
constexpr std::size_t max_binary_columns = 32;

void check(bool ok) {
    if (!ok) std::abort();
}

// Capability sets the options byte chooses from.
std::uint32_t caps_for(std::uint8_t options) {
    std::uint32_t caps = 0;
    if (options & 1) caps |= cg::cap::protocol_41;
    if (options & 2) caps |= cg::cap::session_track;
    if (options & 4) caps |= cg::cap::deprecate_eof;
    return caps;
}

constexpr cg::field_type column_types[] = {
    cg::field_type::tiny,      cg::field_type::short_,   cg::field_type::long_,
    cg::field_type::longlong,  cg::field_type::float_,   cg::field_type::double_,
    cg::field_type::string,    cg::field_type::blob,     cg::field_type::null,
    cg::field_type::date,      cg::field_type::datetime, cg::field_type::time,
    cg::field_type::timestamp, cg::field_type::year,     cg::field_type::int24,
    cg::field_type::newdecimal, cg::field_type::bit,     cg::field_type::json,
};

// decode -> encode -> decode -> encode, the two encodings must be equal.
template <class Parse, class Encode>
void canonical(cg::bytes_view p, Parse parse, Encode encode) {
    auto v = parse(p);
    if (!v) return;
    cg::byte_buffer once;
    encode(*v, once);
    auto v2 = parse(once);
    check(static_cast<bool>(v2));
    cg::byte_buffer twice;
    encode(*v2, twice);
    check(once == twice);
}

void fuzz_generic(std::uint8_t options, cg::bytes_view p) {
    const auto caps = caps_for(options);
    canonical(p, cg::parse_server_greeting,
              [](const auto& g, cg::byte_buffer& out) { cg::serialize(g, out); });
    canonical(p, [caps](cg::bytes_view b) { return cg::parse_ok(b, caps); },
              [caps](const auto& ok, cg::byte_buffer& out) { cg::serialize(ok, caps, out); });
    canonical(p, cg::parse_err, [](const auto& e, cg::byte_buffer& out) { cg::serialize(e, out); });
    canonical(p, cg::parse_eof, [](const auto& e, cg::byte_buffer& out) { cg::serialize(e, out); });
    canonical(p, cg::parse_prepare_ok,
              [](const auto& e, cg::byte_buffer& out) { cg::serialize(e, out); });
    (void)cg::is_eof_packet(p, caps);
}

void fuzz_metadata(std::uint8_t options, cg::bytes_view p) {
    const std::uint32_t ext = (options & 1) ? cg::mariadb_cap::extended_metadata : 0;
    canonical(p, [ext](cg::bytes_view b) { return cg::parse_column_definition(b, ext); },
              [ext](const auto& c, cg::byte_buffer& out) { cg::serialize(c, ext, out); });
    if (auto c = cg::parse_column_definition(p, ext)) (void)cg::parse_extended_metadata(c->extended_metadata);
    (void)cg::parse_extended_metadata(p);
    canonical(p, cg::parse_column_count,
              [](std::uint64_t n, cg::byte_buffer& out) { cg::serialize_column_count(n, out); });
}

void fuzz_text_row(std::uint8_t columns, cg::bytes_view p) {
    canonical(p, [columns](cg::bytes_view b) { return cg::parse_text_row(b, columns); },
              [](const cg::text_row& r, cg::byte_buffer& out) { cg::serialize_text_row(r, out); });
}

void fuzz_binary_row(std::uint8_t options, cg::bytes_view p) {
    if (p.empty()) return;
    const std::size_t n = options % (max_binary_columns + 1);
    const std::uint8_t seed = p[0];
    std::vector<cg::value_type> types;
    for (std::size_t i = 0; i < n; ++i)
        types.push_back({column_types[(seed + i * 7) % std::size(column_types)], ((seed >> 5) + i) % 2 == 1});
    canonical(p.subspan(1), [&](cg::bytes_view b) { return cg::parse_binary_row(b, types); },
              [&](const cg::binary_row& r, cg::byte_buffer& out) {
                  check(!cg::serialize_binary_row(types, r, out));
              });
}

// Commands whose replies have different shapes.
constexpr std::uint8_t commands[] = {
    cg::com::query,      cg::com::stmt_execute, cg::com::stmt_prepare, cg::com::stmt_fetch,
    cg::com::field_list, cg::com::change_user,  cg::com::statistics,   cg::com::set_option,
    cg::com::ping,       cg::com::init_db,      cg::com::stmt_reset,   cg::com::process_info,
};

// Splits the input into packets; when `fix_seq`, each packet's frames are renumbered to
// the sequence the exchange expects so the fuzzer reaches deep states.
void fuzz_command_exchange(std::uint8_t options, cg::bytes_view p) {
    if (p.size() < 2) return;
    const std::uint8_t command = commands[p[0] % std::size(commands)];
    const auto caps = caps_for(p[1]) | cg::cap::protocol_41;
    const bool fix_seq = options & 1;
    cg::byte_buffer stream(p.begin() + 2, p.end());
    cg::command_exchange ex(command, caps, cg::status::autocommit);
    auto step = ex.start(0);
    std::size_t pos = 0;
    while (step != cg::next_step::done && pos < stream.size()) {
        if (fix_seq) {
            std::uint8_t seq = ex.next_seq();
            for (std::size_t f = pos; f <= stream.size() && stream.size() - f >= cg::frame_header_size;) {
                stream[f + 3] = seq++;
                const auto h = cg::parse_frame_header(stream.data() + f);
                f += cg::frame_header_size + h.size;
                if (h.size < cg::max_frame_payload) break;
            }
        }
        auto s = cg::scan_packet(cg::bytes_view(stream).subspan(pos), fuzz_max_packet);
        if (!s || s->raw_size == 0) return;
        auto r = step == cg::next_step::read_server ? ex.on_server_packet(*s)
                                                    : ex.on_client_packet(*s);
        if (!r) return;
        step = *r;
        pos += s->raw_size;
    }
}

void fuzz_auth_exchange(cg::bytes_view p) {
    cg::auth_exchange a;
    std::size_t pos = 0;
    while (pos < p.size()) {
        auto s = cg::scan_packet(p.subspan(pos), fuzz_max_packet);
        if (!s || s->raw_size == 0) return;
        auto step = a.on_server_packet(s->first_payload);
        if (!step || *step == cg::next_step::done) return;
        pos += s->raw_size;
    }
}

}  // namespace

// A reply kept as a read_cache template: rebuilt with its own value it parses again to the same
// value; rebuilt with any other value it is still a template (or refused as out of range).
void fuzz_counter_reply(std::uint8_t options, cg::bytes_view p) {
    const auto caps = caps_for(options);
    const bool binary = (options & 8) != 0;
    const std::uint32_t column = (options >> 4) & 3;
    auto t = cg::parse_counter_reply(p, caps, 0, binary, column, "");
    if (!t) return;
    auto same = cg::rebuild_counter_reply(*t, t->value, t->status, 1);
    check(static_cast<bool>(same));
    auto again = cg::parse_counter_reply(*same, caps, 0, binary, column, "");
    check(again && again->value == t->value);
    if (t->value == INT64_MIN) return;
    if (auto other = cg::rebuild_counter_reply(*t, t->value - 1, 0, 9)) {
        auto parsed = cg::parse_counter_reply(*other, caps, 0, binary, column, "");
        check(parsed && parsed->value == t->value - 1);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::uint8_t options = data[1];
    const cg::bytes_view rest(data + 2, size - 2);
    switch (data[0] % 6) {
    case 0: fuzz_generic(options, rest); break;
    case 1: fuzz_metadata(options, rest); break;
    case 2: fuzz_text_row(options, rest); break;
    case 3: fuzz_binary_row(options, rest); break;
    case 4:
        fuzz_command_exchange(options, rest);
        fuzz_counter_reply(options, rest);
        break;
    default: fuzz_auth_exchange(rest); break;
    }
    return 0;
}
