// A trusted user's write of a stock table (trusted_users: a DBA's restock, an admin tool): sent as
// written and never refused, but the sidecar follows it like its own restock, so that a sold-out
// key is sold out no longer at once (not after read_cache's TTL or the gate's sold_out_recheck).
#pragma once

#include "admission_gate.hpp"
#include "decide.hpp"
#include "read_cache.hpp"

namespace claimguard::engine {

// After the database answered OK to `d` (decide_trusted: trusted_write): the read cache forgets the
// key it pins, or every key of its rule when it pins none; the admission gate hears the same keys
// are available again. Nothing after an ERR (the write changed nothing). Either may be null.
void follow_trusted_write(const decision& d, read_cache* cache, admission_gate* gate);

}  // namespace claimguard::engine
