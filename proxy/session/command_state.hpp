// What a session knows about the client command it is handling: reset when the next one starts.
#pragma once

#include <cstdint>
#include <memory>

namespace claimguard::engine {
struct rules_snapshot;
}

namespace claimguard::session {

struct command_state {
    std::uint8_t seq = 0;              // last sequence id of the command (its reply starts after it)
    bool forwarded_statement = false;  // apply() sent the client's statement to the database
    bool failed = false;               // the server answered the command (or the proxy's SQL for it) with ERR
    std::uint16_t error = 0;           // ... its code
    bool answered = false;             // the sidecar answered the client itself (a rule's answer) ...
    std::uint16_t answered_error = 0;  // ... with this ERR code (0: OK)
    bool ended = false;                // a query of several statements: each one's end was carried out already
    std::shared_ptr<const engine::rules_snapshot> snapshot;  // the rules the command is handled under
};

}  // namespace claimguard::session
