// Bounds-checked readers and writers for the MySQL wire types.
#include "wire.hpp"

namespace claimguard::protocol {

namespace {
class protocol_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "claimguard.protocol"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::ok: return "ok";
        case errc::truncated: return "packet truncated: a field runs past the end of the packet";
        case errc::bad_lenenc: return "malformed length-encoded integer";
        case errc::length_past_end: return "length-encoded string runs past the end of the packet";
        case errc::bad_sequence: return "wrong packet sequence id";
        case errc::packet_too_large: return "packet larger than the configured maximum";
        case errc::unexpected_packet: return "unexpected packet in this protocol state";
        case errc::protocol_version: return "unsupported protocol version (expected 10)";
        case errc::unsupported_command: return "command not supported by the proxy";
        case errc::empty_packet: return "empty command packet";
        case errc::bad_value: return "value does not match its column or parameter type";
        case errc::missing_param_types:
            return "statement executed without parameter types and none were bound before";
        case errc::too_many_rows: return "bulk execute with more rows than the proxy reads";
        case errc::bad_compression: return "compressed packet that does not uncompress to its announced length";
        }
        return "unknown protocol error";
    }
};
}  // namespace

const boost::system::error_category& protocol_category() noexcept {
    static const protocol_category_impl cat;
    return cat;
}

bool reader::need(std::size_t n) {
    if (!ok()) return false;
    if (data_.size() - pos_ < n) {
        fail(errc::truncated);
        return false;
    }
    return true;
}

std::uint8_t reader::u8() {
    if (!need(1)) return 0;
    return data_[pos_++];
}

std::uint16_t reader::u16() {
    if (!need(2)) return 0;
    auto v = load_u16(data_.data() + pos_);
    pos_ += 2;
    return v;
}

std::uint32_t reader::u24() {
    if (!need(3)) return 0;
    auto v = load_u24(data_.data() + pos_);
    pos_ += 3;
    return v;
}

std::uint32_t reader::u32() {
    if (!need(4)) return 0;
    auto v = load_u32(data_.data() + pos_);
    pos_ += 4;
    return v;
}

std::uint64_t reader::u64() {
    std::uint64_t lo = u32();
    std::uint64_t hi = u32();
    return lo | hi << 32;
}

std::uint64_t reader::lenenc() {
    if (!need(1)) return 0;
    std::uint8_t first = data_[pos_];
    if (first < 0xFB) {
        ++pos_;
        return first;
    }
    if (first == 0xFB || first == 0xFF) {
        fail(errc::bad_lenenc);
        return 0;
    }
    std::size_t width = first == 0xFC ? 2 : first == 0xFD ? 3 : 8;
    if (!need(1 + width)) return 0;
    ++pos_;
    switch (width) {
    case 2: return u16();
    case 3: return u24();
    default: return u64();
    }
}

bytes_view reader::fixed(std::size_t n) {
    if (!need(n)) return {};
    auto v = data_.subspan(pos_, n);
    pos_ += n;
    return v;
}

std::string_view reader::lenenc_str() {
    auto n = lenenc();
    if (!ok()) return {};
    if (n > data_.size() - pos_) {
        fail(errc::length_past_end);
        return {};
    }
    return fixed_str(static_cast<std::size_t>(n));
}

std::string_view reader::null_terminated() {
    if (!ok()) return {};
    for (std::size_t i = pos_; i < data_.size(); ++i) {
        if (data_[i] == 0) {
            auto s = as_chars(data_.subspan(pos_, i - pos_));
            pos_ = i + 1;
            return s;
        }
    }
    fail(errc::truncated);
    return {};
}

std::string_view reader::rest_str() {
    if (!ok()) return {};
    auto s = as_chars(data_.subspan(pos_));
    pos_ = data_.size();
    return s;
}

void writer::u16(std::uint16_t v) {
    u8(v & 0xFF);
    u8(v >> 8);
}
void writer::u24(std::uint32_t v) {
    u16(v & 0xFFFF);
    u8((v >> 16) & 0xFF);
}
void writer::u32(std::uint32_t v) {
    u16(v & 0xFFFF);
    u16(v >> 16);
}
void writer::u64(std::uint64_t v) {
    u32(static_cast<std::uint32_t>(v));
    u32(static_cast<std::uint32_t>(v >> 32));
}

void writer::lenenc(std::uint64_t v) {
    if (v < 0xFB) {
        u8(static_cast<std::uint8_t>(v));
    } else if (v <= 0xFFFF) {
        u8(0xFC);
        u16(static_cast<std::uint16_t>(v));
    } else if (v <= 0xFFFFFF) {
        u8(0xFD);
        u24(static_cast<std::uint32_t>(v));
    } else {
        u8(0xFE);
        u64(v);
    }
}

std::size_t lenenc_size(std::uint64_t v) {
    if (v < 0xFB) return 1;
    if (v <= 0xFFFF) return 3;
    if (v <= 0xFFFFFF) return 4;
    return 9;
}

}  // namespace claimguard::protocol
