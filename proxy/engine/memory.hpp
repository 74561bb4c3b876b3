// What one session remembers about protected rows: the counter it last read (a cross-check
// only), takes and claims of its open transaction, refused decrements.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rules/model/rules.hpp"

namespace claimguard::engine {

// A key value in canonical form: numbers as canonical decimal text, strings as bytes.
using key_tuple = std::vector<std::string>;

// A take of a defer_decrement rule answered OK in a transaction and not sent yet: sent (in
// order, each conditional) before COMMIT or before the transaction's next statement on the
// table; dropped when the transaction rolls back. Self-contained: the rules may be reloaded and
// the statement's bound values are gone by then.
struct deferred_take {
    std::string rule;
    std::string table;                     // the rule's table name, to see statements that touch it
    key_tuple key;                         // canonical, for metrics and the audit log
    std::vector<std::string> key_columns;  // ... their column names
    std::int64_t units = 0;
    std::string sql;                       // the conditional decrement, the key as literals
    rules::answer exhausted;               // the rule's answer when it is refused at COMMIT
};

struct stock_entry {
    std::optional<std::int64_t> last_read;  // the counter as this session last saw it (cross-check only)
    bool refused = false;                   // the last decrement was refused: its claim must not follow
    // Open transaction: units of decrements that succeeded in it and no claim of it consumed yet
    // (each a separate take, oldest first). They commit or roll back with the transaction.
    std::deque<std::int64_t> transaction_takes;
    // Open transaction: takes borrowed from the sidecar's ledger (committed decrements of other
    // statements) by claims of this transaction; they go back to the ledger if it rolls back.
    std::vector<std::int64_t> borrowed;
    std::int64_t claims_ahead = 0;  // claims inserted in this transaction before their decrement
    bool strict_ahead = false;      // ... of a require_decrement rule: COMMIT without the decrement rolls back
    // Open transaction: units this transaction gave back for its claims that did not happen; the
    // app's own give-back of the same units (remain = remain + u) is absorbed, not applied twice.
    std::vector<std::int64_t> credits;
    // Autocommit claims of this connection that went in with no take (strictness after_refused):
    // the connection's next take of the key is theirs.
    std::int64_t unbacked_claims = 0;
};

// Per-session bookkeeping. Transaction parts reset on COMMIT, ROLLBACK, COM_RESET_CONNECTION and
// COM_CHANGE_USER; bounded (max_entries) so a session touching many keys cannot grow it without end.
class session_memory {
public:
    static constexpr std::size_t max_entries = 1024;
    // Deferred takes of one transaction; a take past this is sent in place (row lock held).
    static constexpr std::size_t max_deferred_takes = 64;

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
    [[nodiscard]] stock_entry* find(const std::string& rule, const key_tuple& key) {
        auto it = entries_.find(std::make_pair(rule, key));
        return it == entries_.end() ? nullptr : &it->second;
    }
    // The transaction ended: what belonged to it goes (a refused decrement too: the next
    // attempt starts afresh); what this connection read and its autocommit claims' debts stay.
    void reset() {
        for (auto it = entries_.begin(); it != entries_.end();) {
            auto& e = it->second;
            e.transaction_takes.clear();
            e.borrowed.clear();
            e.credits.clear();
            e.claims_ahead = 0;
            e.strict_ahead = false;
            e.refused = false;
            if (!e.last_read && e.unbacked_claims == 0) it = entries_.erase(it);
            else ++it;
        }
        transaction_poisoned = false;
        poisoned_rule.clear();
        deferred.clear();
    }
    [[nodiscard]] std::size_t size() const { return entries_.size(); }
    template <class F>
    void for_each(F f) {
        for (auto& [k, e] : entries_) f(k.first, k.second, e);
    }

    // A claim row was inserted in this transaction and no decrement backs it (the decrement was
    // refused, or never came under require_decrement): committing would issue a claim without
    // stock, so the COMMIT becomes a ROLLBACK.
    bool transaction_poisoned = false;
    std::string poisoned_rule;  // the stock rule whose exhausted answer the COMMIT gets
    // Takes of the open transaction not sent yet (defer_decrement), oldest first.
    std::vector<deferred_take> deferred;

private:
    std::map<std::pair<std::string, key_tuple>, stock_entry> entries_;
};

}  // namespace claimguard::engine
