// Expected binary-protocol values for the protocol tests, built from their parts.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "proxy/protocol/binary_value.hpp"
#include "test_support.hpp"

namespace claimguard::protocol::test {

// Temporal wire layouts (MySQL binary protocol): year u16, month, day, hour,
// minute, second u8, microseconds u32; TIME: negative u8, days u32, h, m, s, us.
inline byte_buffer date_bytes(int y, int mo, int d) {
    byte_buffer b;
    writer w(b);
    w.u16(static_cast<std::uint16_t>(y));
    w.u8(static_cast<std::uint8_t>(mo));
    w.u8(static_cast<std::uint8_t>(d));
    return b;
}
inline byte_buffer datetime_bytes(int y, int mo, int d, int h, int mi, int s) {
    auto b = date_bytes(y, mo, d);
    b.push_back(static_cast<std::uint8_t>(h));
    b.push_back(static_cast<std::uint8_t>(mi));
    b.push_back(static_cast<std::uint8_t>(s));
    return b;
}
inline byte_buffer datetime_bytes(int y, int mo, int d, int h, int mi, int s, std::uint32_t us) {
    auto b = datetime_bytes(y, mo, d, h, mi, s);
    writer(b).u32(us);
    return b;
}
inline byte_buffer time_bytes(bool negative, std::uint32_t days, int h, int mi, int s,
                              std::uint32_t us) {
    byte_buffer b;
    writer w(b);
    w.u8(negative ? 1 : 0);
    w.u32(days);
    w.u8(static_cast<std::uint8_t>(h));
    w.u8(static_cast<std::uint8_t>(mi));
    w.u8(static_cast<std::uint8_t>(s));
    w.u32(us);
    return b;
}

// Owns the bytes the expected values point to.
struct expected_values {
    static constexpr std::size_t max_buffers = 64;
    expected_values() { storage.reserve(max_buffers); }
    // Values point into storage: copying would leave them pointing at the original;
    // moving keeps the heap blocks, so the views stay valid.
    expected_values(const expected_values&) = delete;
    expected_values& operator=(const expected_values&) = delete;
    expected_values(expected_values&&) = default;

    std::vector<byte_buffer> storage;
    std::vector<binary_value> values;

    expected_values& null() { return add(std::monostate{}); }
    expected_values& i(std::int64_t v) { return add(v); }
    expected_values& u(std::uint64_t v) { return add(v); }
    expected_values& d(double v) { return add(v); }
    expected_values& s(std::string_view v) {
        if (storage.size() == max_buffers) throw std::length_error("too many expected buffers");
        storage.emplace_back(v.begin(), v.end());
        return add(bytes_view(storage.back()));
    }
    expected_values& t(byte_buffer raw) {
        if (storage.size() == max_buffers) throw std::length_error("too many expected buffers");
        storage.push_back(std::move(raw));
        return add(temporal_view{storage.back()});
    }
    expected_values& long_data() { return add(long_data_value{}); }

private:
    expected_values& add(binary_value v) {
        values.push_back(v);
        return *this;
    }
};

inline void expect_values(const std::vector<binary_value>& got,
                          const std::vector<binary_value>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(equal_values(got[i], want[i])) << "value " << i;
}

}  // namespace claimguard::protocol::test
