// A trusted user's write of a stock table: what the sidecar's caches learn from its OK.
#include "trusted_writes.hpp"

namespace claimguard::engine {

void follow_trusted_write(const decision& d, read_cache* cache, admission_gate* gate) {
    if (!d.trusted_write || d.stock == nullptr) return;
    const auto& rule = d.stock->name;
    // Every key when the WHERE pins none (or its values were not known): a restock of all the
    // rule's rows (UPDATE ... SET c = c + 5), a DELETE, a LOAD DATA.
    const bool whole_rule = d.key.empty();
    if (cache != nullptr && d.stock->read_cache) {
        if (whole_rule)
            cache->invalidate_rule(rule);
        else
            cache->invalidate(rule, d.key);
    }
    if (gate != nullptr && d.stock->admission) {
        if (whole_rule)
            gate->note_available_rule(rule);
        else
            gate->note_available(rule, d.key);
    }
}

}  // namespace claimguard::engine
