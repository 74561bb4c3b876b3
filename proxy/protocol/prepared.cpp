// Decoders and encoders for the prepared-statement packets.
#include "prepared.hpp"

#include "binary_row.hpp"
#include "command.hpp"
#include "packets.hpp"

namespace claimguard::protocol {

namespace {

constexpr std::uint8_t prepare_ok_reserved = 0x00;

// Reads the command byte and checks it.
bool expect_command(reader& r, std::uint8_t command) {
    const auto c = r.u8();
    if (r.ok() && c != command) r.fail(errc::unexpected_packet);
    return r.ok();
}

template <class T>
result<T> finish(reader& r, T value) {
    if (!r.ok()) return r.error();
    if (!r.empty()) return errc::unexpected_packet;
    return value;
}

}  // namespace

result<prepare_ok> parse_prepare_ok(bytes_view payload) {
    reader r(payload);
    prepare_ok p;
    if (r.u8() != ok_header) return r.ok() ? errc::unexpected_packet : r.error();
    p.statement_id = r.u32();
    p.column_count = r.u16();
    p.param_count = r.u16();
    r.skip(1);  // reserved
    p.warnings = r.u16();
    if (r.ok() && !r.empty()) p.metadata_follows = r.u8();
    return finish(r, p);
}

void serialize(const prepare_ok& p, byte_buffer& out) {
    writer w(out);
    w.u8(ok_header);
    w.u32(p.statement_id);
    w.u16(p.column_count);
    w.u16(p.param_count);
    w.u8(prepare_ok_reserved);
    w.u16(p.warnings);
    if (p.metadata_follows) w.u8(*p.metadata_follows);
}

result<stmt_execute> parse_stmt_execute(bytes_view payload, const execute_context& context) {
    reader r(payload);
    stmt_execute e;
    if (!expect_command(r, com::stmt_execute)) return r.error();
    e.statement_id = r.u32();
    e.flags = r.u8();
    e.iteration_count = r.u32();
    const std::size_t n = context.param_count;
    if (n == 0) return finish(r, std::move(e));
    const auto bitmap = r.fixed(null_bitmap_size(n, 0));
    e.new_params_bound = r.u8() != 0;
    if (!r.ok()) return r.error();
    if (e.new_params_bound) {
        // Two bytes per type: check the size before allocating for a hostile count.
        if (r.remaining() < 2 * n) return errc::truncated;
        e.param_types.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto type = static_cast<field_type>(r.u8());
            const auto flag = r.u8();
            e.param_types.push_back({type, (flag & param_unsigned_flag) != 0});
        }
    } else {
        if (context.previous_types.size() != n) return errc::missing_param_types;
        e.param_types.assign(context.previous_types.begin(), context.previous_types.end());
    }
    // Mark long-data parameters once: a linear search per parameter would let a client
    // that sent SEND_LONG_DATA for many ids make each execute cost params x ids.
    std::vector<bool> long_data(n, false);
    for (const auto id : context.long_data_params)
        if (id < n) long_data[id] = true;
    e.params.reserve(n);
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
        if (null_bit(bitmap, i, 0)) {
            e.params.emplace_back(std::monostate{});
        } else if (long_data[i]) {
            e.params.emplace_back(long_data_value{});
        } else {
            e.params.push_back(read_binary_value(r, e.param_types[i]));
        }
    }
    return finish(r, std::move(e));
}

boost::system::error_code serialize(const stmt_execute& e, byte_buffer& out) {
    const std::size_t n = e.params.size();
    if (e.param_types.size() != n) return errc::bad_value;
    writer w(out);
    w.u8(com::stmt_execute);
    w.u32(e.statement_id);
    w.u8(e.flags);
    w.u32(e.iteration_count);
    if (n == 0) return {};
    const std::size_t bitmap_at = out.size();
    w.zeros(null_bitmap_size(n, 0));
    w.u8(e.new_params_bound ? 1 : 0);
    if (e.new_params_bound) {
        for (const auto& t : e.param_types) {
            w.u8(static_cast<std::uint8_t>(t.type));
            w.u8(t.is_unsigned ? param_unsigned_flag : 0);
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (std::holds_alternative<std::monostate>(e.params[i])) {
            set_null_bit(std::span(out).subspan(bitmap_at), i, 0);
        } else if (!std::holds_alternative<long_data_value>(e.params[i])) {
            if (auto ec = write_binary_value(out, e.param_types[i], e.params[i])) return ec;
        }
    }
    return {};
}

result<stmt_bulk_execute> parse_stmt_bulk_execute(bytes_view payload, const execute_context& context,
                                                  std::size_t max_rows) {
    reader r(payload);
    stmt_bulk_execute e;
    if (!expect_command(r, com::stmt_bulk_execute)) return r.error();
    e.statement_id = r.u32();
    e.flags = r.u16();
    if (!r.ok()) return r.error();
    const std::size_t n = context.param_count;
    // Without parameters a row takes no bytes: how many rows the packet means cannot be read.
    if (n == 0) return errc::unexpected_packet;
    if ((e.flags & bulk_flag::send_types_to_server) != 0) {
        if (r.remaining() < 2 * n) return errc::truncated;  // before allocating for a hostile count
        e.param_types.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto type = static_cast<field_type>(r.u8());
            const auto flag = r.u8();
            e.param_types.push_back({type, (flag & param_unsigned_flag) != 0});
        }
    } else {
        if (context.previous_types.size() != n) return errc::missing_param_types;
        e.param_types.assign(context.previous_types.begin(), context.previous_types.end());
    }
    // Every parameter of a row takes at least its indicator byte: the packet bounds the rows, and
    // max_rows bounds what is held.
    while (r.ok() && !r.empty()) {
        if (e.values.size() / n >= max_rows) return errc::too_many_rows;
        for (std::size_t i = 0; i < n && r.ok(); ++i) {
            const auto indicator = r.u8();
            if (!r.ok()) break;
            if (indicator > static_cast<std::uint8_t>(bulk_indicator::ignore)) return errc::unexpected_packet;
            e.indicators.push_back(static_cast<bulk_indicator>(indicator));
            if (e.indicators.back() == bulk_indicator::none)
                e.values.push_back(read_binary_value(r, e.param_types[i]));
            else
                e.values.emplace_back(std::monostate{});
        }
    }
    if (!r.ok()) return r.error();  // truncated: the packet ends inside a row
    return e;
}

boost::system::error_code serialize(const stmt_bulk_execute& e, byte_buffer& out) {
    const std::size_t n = e.param_types.size();
    if (e.values.size() != e.indicators.size() || (n == 0 && !e.values.empty()) || (n != 0 && e.values.size() % n != 0))
        return errc::bad_value;
    writer w(out);
    w.u8(com::stmt_bulk_execute);
    w.u32(e.statement_id);
    w.u16(e.flags);
    if ((e.flags & bulk_flag::send_types_to_server) != 0) {
        for (const auto& t : e.param_types) {
            w.u8(static_cast<std::uint8_t>(t.type));
            w.u8(t.is_unsigned ? param_unsigned_flag : 0);
        }
    }
    for (std::size_t k = 0; k < e.values.size(); ++k) {
        w.u8(static_cast<std::uint8_t>(e.indicators[k]));
        // A NULL-typed parameter's value takes no bytes.
        if (e.indicators[k] != bulk_indicator::none || e.param_types[k % n].type == field_type::null) continue;
        if (auto ec = write_binary_value(out, e.param_types[k % n], e.values[k])) return ec;
    }
    return {};
}

result<stmt_close> parse_stmt_close(bytes_view payload) {
    reader r(payload);
    if (!expect_command(r, com::stmt_close)) return r.error();
    return finish(r, stmt_close{r.u32()});
}

result<stmt_reset> parse_stmt_reset(bytes_view payload) {
    reader r(payload);
    if (!expect_command(r, com::stmt_reset)) return r.error();
    return finish(r, stmt_reset{r.u32()});
}

result<stmt_fetch> parse_stmt_fetch(bytes_view payload) {
    reader r(payload);
    if (!expect_command(r, com::stmt_fetch)) return r.error();
    stmt_fetch f;
    f.statement_id = r.u32();
    f.rows = r.u32();
    return finish(r, f);
}

result<stmt_send_long_data> parse_stmt_send_long_data(bytes_view payload) {
    reader r(payload);
    if (!expect_command(r, com::stmt_send_long_data)) return r.error();
    stmt_send_long_data d;
    d.statement_id = r.u32();
    d.param_id = r.u16();
    d.data = r.rest();
    r.skip(d.data.size());
    return finish(r, d);
}

void serialize(const stmt_close& c, byte_buffer& out) {
    writer w(out);
    w.u8(com::stmt_close);
    w.u32(c.statement_id);
}

void serialize(const stmt_reset& c, byte_buffer& out) {
    writer w(out);
    w.u8(com::stmt_reset);
    w.u32(c.statement_id);
}

void serialize(const stmt_fetch& c, byte_buffer& out) {
    writer w(out);
    w.u8(com::stmt_fetch);
    w.u32(c.statement_id);
    w.u32(c.rows);
}

void serialize(const stmt_send_long_data& c, byte_buffer& out) {
    writer w(out);
    w.u8(com::stmt_send_long_data);
    w.u32(c.statement_id);
    w.u16(c.param_id);
    w.bytes(c.data);
}

result<std::uint32_t> peek_statement_id(bytes_view payload) {
    reader r(payload);
    switch (r.u8()) {
    case com::stmt_execute:
    case com::stmt_close:
    case com::stmt_reset:
    case com::stmt_fetch:
    case com::stmt_send_long_data:
    case com::stmt_bulk_execute:
        break;
    default:
        return r.ok() ? errc::unexpected_packet : r.error();
    }
    const auto id = r.u32();
    if (!r.ok()) return r.error();
    return id;
}

}  // namespace claimguard::protocol
