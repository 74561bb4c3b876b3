// Savepoints of the session memory: what ROLLBACK TO SAVEPOINT undoes in the claim bookkeeping.
#include "memory.hpp"

#include <algorithm>

namespace claimguard::engine {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// The parts of an entry that belong to the open transaction.
void restore_transaction_parts(stock_entry& now, const stock_entry* then) {
    if (then == nullptr) {
        now.transaction_takes.clear();
        now.borrowed.clear();
        now.credits.clear();
        now.give_backs_of_committed_takes.clear();
        now.claims_ahead = 0;
        now.strict_ahead = false;
        return;
    }
    now.transaction_takes = then->transaction_takes;
    now.borrowed = then->borrowed;
    now.credits = then->credits;
    now.give_backs_of_committed_takes = then->give_backs_of_committed_takes;
    now.claims_ahead = then->claims_ahead;
    now.strict_ahead = then->strict_ahead;
}

}  // namespace

void session_memory::set_savepoint(std::string name, std::size_t redis_locks) {
    name = lower(name);
    savepoints.erase(
        std::remove_if(savepoints.begin(), savepoints.end(), [&](const savepoint& s) { return s.name == name; }),
        savepoints.end());
    if (savepoints.size() >= max_savepoints)
        savepoints.erase(savepoints.begin());  // the oldest cannot be rolled back to exactly
    savepoint s;
    s.name = std::move(name);
    s.entries = entries_;
    s.poisoned = transaction_poisoned;
    s.poisoned_rule = poisoned_rule;
    s.redis_locks = redis_locks;
    s.reserve_seq = reserve_seq;
    savepoints.push_back(std::move(s));
}

std::optional<std::size_t> session_memory::rollback_to_savepoint(std::string_view name,
                                                                 std::vector<returned_take>& returned) {
    const std::string n = lower(name);
    auto it = std::find_if(savepoints.begin(), savepoints.end(), [&](const savepoint& s) { return s.name == n; });
    if (it == savepoints.end()) return std::nullopt;
    for (auto& [k, e] : entries_) {
        auto then = it->entries.find(k);
        const stock_entry* before = then == it->entries.end() ? nullptr : &then->second;
        const std::size_t kept = before ? std::min(before->borrowed.size(), e.borrowed.size()) : 0;
        for (std::size_t i = kept; i < e.borrowed.size(); ++i) returned.push_back({k.first, k.second, e.borrowed[i]});
        restore_transaction_parts(e, before);
    }
    // Takes served from the reserved block since the savepoint: the server undid nothing of them (they
    // never reached it); their units go back to the block.
    for (auto d = deferred.begin(); d != deferred.end();) {
        if (d->reserved && d->seq >= it->reserve_seq) {
            reserve_undone.push_back(std::move(*d));
            d = deferred.erase(d);
        } else {
            ++d;
        }
    }
    transaction_poisoned = it->poisoned;
    poisoned_rule = it->poisoned_rule;
    const std::size_t locks = it->redis_locks;
    savepoints.erase(it + 1, savepoints.end());  // the savepoint stays; the later ones go (as on the server)
    return locks;
}

void session_memory::release_savepoint(std::string_view name) {
    const std::string n = lower(name);
    auto it = std::find_if(savepoints.begin(), savepoints.end(), [&](const savepoint& s) { return s.name == n; });
    if (it != savepoints.end()) savepoints.erase(it, savepoints.end());
}

}  // namespace claimguard::engine
