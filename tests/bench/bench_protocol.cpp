// Google Benchmark: the wire codec's per-packet costs on real MariaDB packets (run by hand).
#include <benchmark/benchmark.h>

#include <vector>

#include "proxy/protocol/binary_row.hpp"
#include "proxy/protocol/column.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/exchange.hpp"
#include "proxy/protocol/frame.hpp"
#include "proxy/protocol/prepared.hpp"
#include "proxy/protocol/text_row.hpp"
#include "tests/proxy/protocol/captures_libmariadb.hpp"
#include "tests/proxy/protocol/captures_mariadb.hpp"

namespace cg = claimguard::protocol;

namespace {

constexpr std::size_t rows_per_result = 1000;
constexpr std::size_t bench_max_packet = std::size_t{1} << 24;

cg::byte_buffer unhex(std::string_view h) {
    cg::byte_buffer out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
        auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
        out.push_back(static_cast<std::uint8_t>(digit(h[i]) << 4 | digit(h[i + 1])));
    }
    return out;
}

// SELECT 1 with the row repeated: count, column, rows, OK (deprecate_eof on).
cg::byte_buffer select_stream() {
    const auto& f = cg::test::mariadb::query_select_1_deof;
    cg::byte_buffer out;
    std::uint8_t seq = 1;
    auto add = [&](std::string_view frame_hex) {
        auto raw = unhex(frame_hex);
        cg::byte_buffer payload(raw.begin() + 4, raw.end());
        cg::write_packet(out, seq, payload);
    };
    add(f[1].hex);
    add(f[2].hex);
    for (std::size_t i = 0; i < rows_per_result; ++i) add(f[3].hex);
    add(f[4].hex);
    return out;
}

void bm_exchange_select_1000_rows(benchmark::State& state) {
    const auto stream = select_stream();
    const std::uint32_t caps = cg::cap::protocol_41 | cg::cap::session_track | cg::cap::deprecate_eof;
    for (auto _ : state) {
        cg::command_exchange ex(cg::com::query, caps, cg::status::autocommit);
        auto step = ex.start(0);
        std::size_t pos = 0;
        while (step == cg::next_step::read_server) {
            auto s = cg::scan_packet(cg::bytes_view(stream).subspan(pos), bench_max_packet);
            step = ex.on_server_packet(*s).value();
            pos += s->raw_size;
        }
        benchmark::DoNotOptimize(ex.rows());
    }
    state.SetItemsProcessed(state.iterations() * (rows_per_result + 3));
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(stream.size()));
}
BENCHMARK(bm_exchange_select_1000_rows);

void bm_parse_text_row_19_columns(benchmark::State& state) {
    const auto raw = unhex(cg::test::mariadb::query_types_text_eof[22].hex);
    const cg::bytes_view p = cg::bytes_view(raw).subspan(4);
    for (auto _ : state) benchmark::DoNotOptimize(cg::parse_text_row(p, 19));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_parse_text_row_19_columns);

void bm_parse_binary_row_19_columns(benchmark::State& state) {
    const auto& f = cg::test::mariadb::execute_types_eof;
    std::vector<cg::byte_buffer> defs;
    std::vector<cg::value_type> types;
    for (int i = 2; i < 21; ++i) {
        defs.push_back(unhex(f[i].hex));
        types.push_back(cg::value_type_of(
            cg::parse_column_definition(cg::bytes_view(defs.back()).subspan(4), 0).value()));
    }
    const auto raw = unhex(f[22].hex);
    const cg::bytes_view p = cg::bytes_view(raw).subspan(4);
    for (auto _ : state) benchmark::DoNotOptimize(cg::parse_binary_row(p, types));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_parse_binary_row_19_columns);

void bm_parse_stmt_execute_12_params(benchmark::State& state) {
    const auto raw = unhex(cg::test::libmariadb::execute_12_params_with_types);
    const cg::bytes_view p = cg::bytes_view(raw).subspan(4);
    cg::execute_context ctx;
    ctx.param_count = 12;
    for (auto _ : state) benchmark::DoNotOptimize(cg::parse_stmt_execute(p, ctx));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_parse_stmt_execute_12_params);

void bm_parse_column_definition(benchmark::State& state) {
    const auto raw = unhex(cg::test::mariadb::query_ok_then_rows_eof[3].hex);
    const cg::bytes_view p = cg::bytes_view(raw).subspan(4);
    for (auto _ : state) benchmark::DoNotOptimize(cg::parse_column_definition(p, 0));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_parse_column_definition);

}  // namespace
