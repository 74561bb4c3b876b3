// libFuzzer target: everything the proxy decodes from a client (frames, handshake
// response, command packets, COM_STMT_EXECUTE and COM_STMT_BULK_EXECUTE with any parameter count/types).
//
// Input: byte 0 picks the decoder (mode below), the rest feeds it. Properties checked:
// no crash or sanitizer report; encoders accept whatever the decoders return; the
// encoding is canonical (encode(decode(encode(decode(x)))) == encode(decode(x))), and
// exact (encode(decode(x)) == x) for the fixed-layout statement commands.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/packets.hpp"
#include "proxy/protocol/prepared.hpp"

namespace cg = claimguard::protocol;

namespace {

constexpr std::size_t fuzz_max_packet = std::size_t{1} << 20;
constexpr std::size_t long_data_stride = 3;  // every third parameter came as long data

void check(bool ok) {
    if (!ok) std::abort();
}

// Types a client may bind; the fuzzer picks among them by index.
constexpr cg::field_type bindable[] = {
    cg::field_type::tiny,     cg::field_type::short_,     cg::field_type::long_,
    cg::field_type::longlong, cg::field_type::float_,     cg::field_type::double_,
    cg::field_type::string,   cg::field_type::var_string, cg::field_type::blob,
    cg::field_type::null,     cg::field_type::date,       cg::field_type::datetime,
    cg::field_type::time,     cg::field_type::newdecimal, cg::field_type::year,
    cg::field_type::int24,    cg::field_type::timestamp,  cg::field_type::json,
};

void fuzz_stream(cg::bytes_view in) {
    std::size_t pos = 0;
    while (pos < in.size()) {
        auto s = cg::scan_packet(in.subspan(pos), fuzz_max_packet);
        if (!s || s->raw_size == 0) return;
        check(s->raw_size <= in.size() - pos && s->frames >= 1);
        const auto joined = cg::join_payload(in.subspan(pos, s->raw_size));
        check(joined.size() == s->payload_size);
        // Re-framing the payload from the same first sequence id gives the same bytes.
        cg::byte_buffer again;
        std::uint8_t seq = s->first_seq;
        cg::write_packet(again, seq, joined);
        check(again.size() == s->raw_size && seq == static_cast<std::uint8_t>(s->last_seq + 1));
        pos += s->raw_size;
    }
}

void fuzz_handshake_response(cg::bytes_view p) {
    auto h = cg::parse_handshake_response(p);
    if (!h) return;
    cg::byte_buffer once;
    cg::serialize(*h, once);
    auto h2 = cg::parse_handshake_response(once);
    check(static_cast<bool>(h2));
    cg::byte_buffer twice;
    cg::serialize(*h2, twice);
    check(once == twice);
}

template <class T, class Parse>
void exact_round_trip(cg::bytes_view p, Parse parse) {
    auto v = parse(p);
    if (!v) return;
    cg::byte_buffer out;
    cg::serialize(T(*v), out);
    check(out.size() == p.size() && std::equal(out.begin(), out.end(), p.begin()));
}

void fuzz_command(cg::bytes_view p) {
    (void)cg::peek_statement_id(p);
    if (auto q = cg::parse_query(p)) {
        cg::byte_buffer out;
        cg::serialize_query(*q, out);
        check(out.size() == p.size());
    }
    (void)cg::parse_stmt_prepare(p);
    (void)cg::parse_init_db(p);
    exact_round_trip<cg::stmt_close>(p, cg::parse_stmt_close);
    exact_round_trip<cg::stmt_reset>(p, cg::parse_stmt_reset);
    exact_round_trip<cg::stmt_fetch>(p, cg::parse_stmt_fetch);
    exact_round_trip<cg::stmt_send_long_data>(p, cg::parse_stmt_send_long_data);
}

// COM_STMT_BULK_EXECUTE with the same parameters (a bulk carries no long data): whole rows, and a
// canonical encoding.
void fuzz_bulk_execute(cg::bytes_view payload, cg::execute_context ctx) {
    constexpr std::size_t max_rows = 1024;
    ctx.long_data_params = {};
    auto b = cg::parse_stmt_bulk_execute(payload, ctx, max_rows);
    if (!b) return;
    check(b->values.size() == b->indicators.size() && b->param_types.size() == ctx.param_count);
    check(b->rows(ctx.param_count) <= max_rows && b->rows(ctx.param_count) * ctx.param_count == b->values.size());
    cg::byte_buffer once;
    check(!cg::serialize(*b, once));
    ctx.previous_types = b->param_types;
    auto b2 = cg::parse_stmt_bulk_execute(once, ctx, max_rows);
    check(static_cast<bool>(b2));
    cg::byte_buffer twice;
    check(!cg::serialize(*b2, twice));
    check(once == twice);
}

// Input after the mode byte: u16 param count, option byte, type seed, payload.
void fuzz_execute(cg::bytes_view in) {
    if (in.size() < 4) return;
    const std::uint16_t params = static_cast<std::uint16_t>(in[0] | in[1] << 8);
    const std::uint8_t options = in[2];
    const std::uint8_t seed = in[3];
    const auto payload = in.subspan(4);
    // A count whose NULL bitmap does not fit the payload fails before types matter;
    // skip building 65535 types for it (keeps the fuzzer fast, not the decoder).
    if (params / 8 > payload.size()) {
        cg::execute_context ctx;
        ctx.param_count = params;
        check(!cg::parse_stmt_execute(payload, ctx));
        return;
    }
    std::vector<cg::value_type> previous;
    if (options & 1) {
        previous.reserve(params);
        for (std::size_t i = 0; i < params; ++i)
            previous.push_back({bindable[(seed + i) % std::size(bindable)], ((seed >> 4) + i) % 2 == 1});
    }
    std::vector<std::uint16_t> long_data;
    if (options & 2)
        for (std::size_t i = 0; i < params; i += long_data_stride)
            long_data.push_back(static_cast<std::uint16_t>(i));
    cg::execute_context ctx;
    ctx.param_count = params;
    ctx.previous_types = previous;
    ctx.long_data_params = long_data;
    fuzz_bulk_execute(payload, ctx);
    auto e = cg::parse_stmt_execute(payload, ctx);
    if (!e) return;
    check(e->params.size() == params && e->param_types.size() == params);
    cg::byte_buffer once;
    check(!cg::serialize(*e, once));
    // Decode the canonical bytes again with the types this execute established.
    cg::execute_context ctx2 = ctx;
    ctx2.previous_types = e->param_types;
    auto e2 = cg::parse_stmt_execute(once, ctx2);
    check(static_cast<bool>(e2));
    cg::byte_buffer twice;
    check(!cg::serialize(*e2, twice));
    check(once == twice);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const cg::bytes_view rest(data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: fuzz_stream(rest); break;
    case 1: fuzz_handshake_response(rest); break;
    case 2: fuzz_command(rest); break;
    default: fuzz_execute(rest); break;
    }
    return 0;
}
