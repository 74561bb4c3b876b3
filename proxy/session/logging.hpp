// Log set-up: text or JSON lines on standard error, at a level. Logs never carry
// passwords or auth packets: the proxy never decodes them into log lines.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace claimguard::session {

void setup_logging(const std::string& level, const std::string& format);

// The fields a JSON log line carries beside time, level and msg, read from the message's
// conventional wording: component ("session", "schema_check", "redis", "inject", "rules",
// "shutdown"), session (number) and peer ("session 12 from 10.0.0.7:51234: ..."), rule ("rule
// coupon_stock"), version ("(version 3f2a...)"), pod and action ("inject: shop/api-0: not
// injected: ..."). Absent fields are left out.
[[nodiscard]] nlohmann::json structured_fields(std::string_view msg);

}  // namespace claimguard::session
