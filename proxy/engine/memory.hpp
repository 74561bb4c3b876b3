// What one session remembers about protected rows: counters it read, units its
// decrements took and not yet consumed by a claim, refused decrements.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace claimguard::engine {

// A key value in canonical form: numbers as canonical decimal text, strings as bytes.
using key_tuple = std::vector<std::string>;

struct stock_entry {
    std::optional<std::int64_t> last_read;  // the counter as this session last saw it
    std::int64_t units_taken = 0;           // decrements that succeeded, not yet consumed by a claim
    std::int64_t claims_ahead = 0;          // claims inserted before their decrement (in a transaction)
    bool refused = false;                   // the last decrement was refused: its claim must not follow
    bool claim_awaits_decrement = false;    // autocommit: a claim row went in (committed) before its decrement
};

// Per-session bookkeeping. Reset on COMMIT, ROLLBACK, COM_RESET_CONNECTION and
// COM_CHANGE_USER; bounded (max_entries) so a session reading many keys cannot grow it without end.
class session_memory {
public:
    static constexpr std::size_t max_entries = 1024;

    // The entry of (stock rule, key), created on first use; the oldest entry goes when full.
    stock_entry& entry(const std::string& rule, const key_tuple& key) {
        auto k = std::make_pair(rule, key);
        auto it = entries_.find(k);
        if (it != entries_.end()) return it->second;
        if (entries_.size() >= max_entries) entries_.erase(entries_.begin());
        return entries_[std::move(k)];
    }
    [[nodiscard]] const stock_entry* find(const std::string& rule, const key_tuple& key) const {
        auto it = entries_.find(std::make_pair(rule, key));
        return it == entries_.end() ? nullptr : &it->second;
    }
    void reset() {
        entries_.clear();
        transaction_poisoned = false;
        poisoned_rule.clear();
    }
    [[nodiscard]] std::size_t size() const { return entries_.size(); }

    // A claim row was inserted in this transaction and its decrement was refused afterwards:
    // committing would issue a claim without stock, so the COMMIT becomes a ROLLBACK.
    bool transaction_poisoned = false;
    std::string poisoned_rule;  // the stock rule whose exhausted answer the COMMIT gets

private:
    std::map<std::pair<std::string, key_tuple>, stock_entry> entries_;
};

}  // namespace claimguard::engine
