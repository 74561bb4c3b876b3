// Log set-up: text or JSON lines on standard error, at a level. Logs never carry
// passwords or auth packets: the proxy never decodes them into log lines.
#pragma once

#include <string>

namespace claimguard::session {

void setup_logging(const std::string& level, const std::string& format);

}  // namespace claimguard::session
