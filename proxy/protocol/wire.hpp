// Little-endian integer and length-encoded field reading/writing over byte spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"

namespace claimguard::protocol {

using bytes_view = std::span<const std::uint8_t>;
using byte_buffer = std::vector<std::uint8_t>;

inline std::string_view as_chars(bytes_view b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}
inline bytes_view as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

inline std::uint32_t load_u24(const std::uint8_t* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16;
}
inline std::uint16_t load_u16(const std::uint8_t* p) {
    return std::uint16_t(p[0] | p[1] << 8);
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
    return std::uint32_t(load_u16(p)) | std::uint32_t(load_u16(p + 2)) << 16;
}

// A forward-only cursor over one packet payload. Every read checks bounds; the
// first failure sticks, so a decoder can read a whole structure then check once.
class reader {
public:
    explicit reader(bytes_view data) : data_(data) {}

    [[nodiscard]] bool ok() const { return err_ == errc::ok; }
    [[nodiscard]] errc error() const { return err_; }
    [[nodiscard]] std::size_t remaining() const { return ok() ? data_.size() - pos_ : 0; }
    [[nodiscard]] bool empty() const { return remaining() == 0; }
    [[nodiscard]] std::size_t position() const { return pos_; }
    [[nodiscard]] bytes_view rest() const { return ok() ? data_.subspan(pos_) : bytes_view{}; }

    std::uint8_t u8();
    std::uint16_t u16();
    std::uint32_t u24();
    std::uint32_t u32();
    std::uint64_t u64();
    // Length-encoded integer: < 0xFB one byte, 0xFC + 2, 0xFD + 3, 0xFE + 8 bytes.
    // 0xFB (NULL in rows) and 0xFF (ERR) are errors here; use peek() to handle NULL.
    std::uint64_t lenenc();
    bytes_view fixed(std::size_t n);
    std::string_view fixed_str(std::size_t n) { return as_chars(fixed(n)); }
    std::string_view lenenc_str();
    std::string_view null_terminated();  // without the NUL; error if none
    std::string_view rest_str();         // everything left
    void skip(std::size_t n) { (void)fixed(n); }
    [[nodiscard]] int peek() const { return ok() && pos_ < data_.size() ? data_[pos_] : -1; }
    void fail(errc e) {
        if (err_ == errc::ok) err_ = e;
    }

private:
    bool need(std::size_t n);
    bytes_view data_;
    std::size_t pos_ = 0;
    errc err_ = errc::ok;
};

// Appends wire fields to a byte buffer.
class writer {
public:
    explicit writer(byte_buffer& out) : out_(out) {}
    void u8(std::uint8_t v) { out_.push_back(v); }
    void u16(std::uint16_t v);
    void u24(std::uint32_t v);
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    void lenenc(std::uint64_t v);
    void bytes(bytes_view b) { out_.insert(out_.end(), b.begin(), b.end()); }
    void str(std::string_view s) { bytes(as_bytes(s)); }
    void lenenc_str(std::string_view s) {
        lenenc(s.size());
        str(s);
    }
    void null_terminated(std::string_view s) {
        str(s);
        u8(0);
    }
    void zeros(std::size_t n) { out_.insert(out_.end(), n, 0); }
    [[nodiscard]] std::size_t size() const { return out_.size(); }

private:
    byte_buffer& out_;
};

// Where a length-encoded string would start, 0xFB means SQL NULL (text rows,
// COM_FIELD_LIST default values).
inline constexpr std::uint8_t null_value_marker = 0xFB;

// Number of bytes lenenc(v) takes on the wire.
std::size_t lenenc_size(std::uint64_t v);

}  // namespace claimguard::protocol
