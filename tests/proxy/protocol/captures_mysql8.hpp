// Real MySQL 8 packets found in public material (frames as hex: 4-byte header + payload).
// Sources: the MySQL 8.0.39 greeting and replies are ProxySQL's fake-server test
// vectors (test/tap/tests/test_mariadb_metadata_check-t.cpp, "MySQL 8.0.39 Greeting
// message"); the 8.0.42 greeting is a packet dump of a stock server posted with a
// client-side debugging write-up. Both were found with code search.
#pragma once

#include <string_view>

namespace claimguard::protocol::test::mysql8 {

// MySQL 8.0.39, default plugin mysql_native_password, charset 255 (utf8mb4_0900_ai_ci).
inline constexpr std::string_view greeting_8_0_39 =
    "4a0000000a382e302e3339006a000000"
    "51047d6f1a4b171200ffffff0200ffdf15"
    "00000000000000000000156e3c6e730e6c5a287d671100"
    "6d7973716c5f6e61746976655f70617373776f726400";

// MySQL 8.0.42, default plugin caching_sha2_password.
inline constexpr std::string_view greeting_8_0_42 =
    "4a0000000a382e302e343200330000005d2e754d7f1e420f00ffffff0200ffdf15"
    "00000000000000000000566c16157b481844482f4c05006361636869"
    "6e675f736861325f70617373776f726400";

// Login OK, then "SELECT 1" answered with CLIENT_DEPRECATE_EOF on (8.0.39).
inline constexpr std::string_view login_ok = "0700000200000002000000";
inline constexpr std::string_view select_1_deprecate_eof[] = {
    "0100000101",
    "1700000203646566000000013100" "0c3f00" "02000000" "08" "8100" "00" "0000",
    "0200000301 31",
    "07000004fe000002000000",
};

}  // namespace claimguard::protocol::test::mysql8
