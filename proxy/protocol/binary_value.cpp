// Reading and writing single binary-protocol values (COM_STMT_EXECUTE parameters, binary rows).
#include "binary_value.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace claimguard::protocol {

namespace {

// Lengths the length byte of a temporal value may take.
constexpr std::uint8_t date_lengths[] = {0, 4, 7, 11};
constexpr std::uint8_t time_lengths[] = {0, 8, 12};

bool is_integer(field_type t) {
    switch (t) {
    case field_type::tiny:
    case field_type::short_:
    case field_type::year:
    case field_type::long_:
    case field_type::int24:
    case field_type::longlong:
        return true;
    default:
        return false;
    }
}

bool temporal_length_ok(field_type t, std::size_t n) {
    auto ok = [n](const auto& allowed) {
        return std::find(std::begin(allowed), std::end(allowed), n) != std::end(allowed);
    };
    return t == field_type::time ? ok(time_lengths) : ok(date_lengths);
}

std::uint64_t load_le(bytes_view b) {
    std::uint64_t v = 0;
    for (std::size_t i = b.size(); i-- > 0;) v = v << 8 | b[i];
    return v;
}

void store_le(byte_buffer& out, std::uint64_t v, std::size_t width) {
    for (std::size_t i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// Whether an integer value fits `width` bytes under the signedness of the type.
bool fits(const binary_value& v, std::size_t width, bool is_unsigned) {
    const unsigned bits = static_cast<unsigned>(width * 8);
    if (const auto* s = std::get_if<std::int64_t>(&v)) {
        if (is_unsigned) return *s >= 0 && (bits == 64 || *s < (std::int64_t{1} << bits));
        if (bits == 64) return true;
        const std::int64_t lim = std::int64_t{1} << (bits - 1);
        return *s >= -lim && *s < lim;
    }
    if (const auto* u = std::get_if<std::uint64_t>(&v)) {
        if (is_unsigned) return bits == 64 || *u < (std::uint64_t{1} << bits);
        return *u <= (std::uint64_t{1} << (bits - 1)) - 1;
    }
    return false;
}

}  // namespace

bool equal_values(const binary_value& a, const binary_value& b) {
    if (a.index() != b.index()) return false;
    auto same_bytes = [](bytes_view x, bytes_view y) {
        return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
    };
    return std::visit(
        [&](const auto& x) -> bool {
            using T = std::decay_t<decltype(x)>;
            const auto& y = std::get<T>(b);
            if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, long_data_value>) {
                return true;
            } else if constexpr (std::is_same_v<T, double>) {
                return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
            } else if constexpr (std::is_same_v<T, bytes_view>) {
                return same_bytes(x, y);
            } else if constexpr (std::is_same_v<T, temporal_view>) {
                return same_bytes(x.raw, y.raw);
            } else {
                return x == y;
            }
        },
        a);
}

bool is_fixed_size(field_type t) {
    return is_integer(t) || t == field_type::float_ || t == field_type::double_ ||
           t == field_type::null;
}

std::size_t fixed_size(field_type t) {
    switch (t) {
    case field_type::tiny: return 1;
    case field_type::short_:
    case field_type::year: return 2;
    case field_type::long_:
    case field_type::int24:
    case field_type::float_: return 4;
    case field_type::longlong:
    case field_type::double_: return 8;
    default: return 0;
    }
}

bool is_temporal(field_type t) {
    return t == field_type::date || t == field_type::datetime || t == field_type::timestamp ||
           t == field_type::time;
}

bool is_length_encoded(field_type t) {
    switch (t) {
    case field_type::decimal:
    case field_type::newdecimal:
    case field_type::varchar:
    case field_type::var_string:
    case field_type::string:
    case field_type::enum_:
    case field_type::set:
    case field_type::tiny_blob:
    case field_type::medium_blob:
    case field_type::long_blob:
    case field_type::blob:
    case field_type::bit:
    case field_type::geometry:
    case field_type::json:
    case field_type::vector:
        return true;
    default:
        return false;
    }
}

binary_value read_binary_value(reader& r, value_type t) {
    if (t.type == field_type::null) return std::monostate{};
    if (is_integer(t.type)) {
        const std::size_t width = fixed_size(t.type);
        const std::uint64_t raw = load_le(r.fixed(width));
        if (!r.ok()) return std::monostate{};
        if (t.is_unsigned) return raw;
        const unsigned shift = static_cast<unsigned>(64 - width * 8);
        return static_cast<std::int64_t>(raw << shift) >> shift;  // sign-extend
    }
    if (t.type == field_type::float_) {
        const auto bits = r.u32();
        return static_cast<double>(std::bit_cast<float>(bits));
    }
    if (t.type == field_type::double_) return std::bit_cast<double>(r.u64());
    if (is_temporal(t.type)) {
        const std::size_t n = r.u8();
        if (r.ok() && !temporal_length_ok(t.type, n)) r.fail(errc::bad_value);
        return temporal_view{r.fixed(n)};
    }
    if (is_length_encoded(t.type)) return as_bytes(r.lenenc_str());
    r.fail(errc::bad_value);
    return std::monostate{};
}

boost::system::error_code write_binary_value(byte_buffer& out, value_type t,
                                             const binary_value& v) {
    const auto bad = make_error_code(errc::bad_value);
    if (is_integer(t.type)) {
        const std::size_t width = fixed_size(t.type);
        if (!fits(v, width, t.is_unsigned)) return bad;
        const auto* s = std::get_if<std::int64_t>(&v);
        store_le(out, s ? static_cast<std::uint64_t>(*s) : std::get<std::uint64_t>(v), width);
        return {};
    }
    if (t.type == field_type::float_ || t.type == field_type::double_) {
        const auto* d = std::get_if<double>(&v);
        if (!d) return bad;
        if (t.type == field_type::double_) {
            store_le(out, std::bit_cast<std::uint64_t>(*d), 8);
            return {};
        }
        // Converting a finite double outside float's range is undefined behaviour.
        if (std::isfinite(*d) && std::fabs(*d) > std::numeric_limits<float>::max()) return bad;
        store_le(out, std::bit_cast<std::uint32_t>(static_cast<float>(*d)), 4);
        return {};
    }
    if (is_temporal(t.type)) {
        const auto* tv = std::get_if<temporal_view>(&v);
        if (!tv || !temporal_length_ok(t.type, tv->raw.size())) return bad;
        out.push_back(static_cast<std::uint8_t>(tv->raw.size()));
        out.insert(out.end(), tv->raw.begin(), tv->raw.end());
        return {};
    }
    if (is_length_encoded(t.type)) {
        const auto* b = std::get_if<bytes_view>(&v);
        if (!b) return bad;
        writer w(out);
        w.lenenc(b->size());
        w.bytes(*b);
        return {};
    }
    return bad;  // NULL type and server-internal types carry no value bytes
}

}  // namespace claimguard::protocol
