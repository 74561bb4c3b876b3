// What one session remembers about protected rows: the counter it last read (a cross-check
// only), takes and claims of its open transaction, refused decrements.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
    std::string sql;          // the conditional decrement, the key as literals
    rules::answer exhausted;  // the rule's answer when it is refused at COMMIT
    // reserve: served from the sidecar's reserved block (never sent; `sql` is empty): consumed when
    // the transaction commits, back to the block otherwise. `seq` orders it against savepoints.
    bool reserved = false;
    std::uint64_t seq = 0;
};

struct stock_entry {
    std::optional<std::int64_t> last_read;  // the counter as this session last saw it (cross-check only)
    std::uint64_t read_command = 0;         // session_memory::command() of that read
    std::uint64_t read_transaction = 0;     // session_memory::transaction() of that read; 0: outside one
    bool refused = false;                   // the last decrement was refused: its claim must not follow
    // session_memory::transaction() of a locking read of the key (FOR UPDATE, LOCK IN SHARE MODE) in
    // an open transaction: the row lock is held until that transaction ends.
    std::uint64_t lock_transaction = 0;
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
    // Open transaction: units it gave back for claim rows it deleted (on_cancel: return_stock), one
    // entry per row; absorbed like `credits`, and handed to the ledger's credits when it commits.
    std::vector<std::int64_t> cancel_credits;
    // Open transaction: give-backs it made for claims that did not happen, whose takes were committed
    // before it (borrowed from the ledger). A ROLLBACK undoes the give-back but not the take: the
    // unit goes back after the rollback, in autocommit (these statements, the key as literals).
    std::vector<std::string> give_backs_of_committed_takes;
    // Autocommit claims of this connection that went in with no take (strictness after_refused):
    // the connection's next take of the key is theirs.
    std::int64_t unbacked_claims = 0;
    // A claim by INSERT ... SELECT of this connection took its own unit of the key and went in: the
    // app's recompute of the counter that follows it (SET c = N - (SELECT COUNT(*) ...)) is that take,
    // absorbed once. session_memory::command() of the claim (0: none), and session_memory::transaction()
    // when it went in inside a transaction (0: in autocommit; then only the very next command).
    std::uint64_t recompute_command = 0;
    std::uint64_t recompute_transaction = 0;
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
    // The session counts its statements (not prepares or closes): a read is evidence about the write that comes
    // right after it (the next command), or later in the same transaction; not across a pool's
    // borrowers, who share the connection's memory but not its reads.
    void next_command() { ++command_; }
    // The session's current database (empty: none or not known), set before each decision: an
    // unqualified table of a rule without a schema is in it, and keys carry it (one database per
    // tenant: the same key in two databases is two rows).
    std::string database;
    [[nodiscard]] std::uint64_t command() const { return command_; }
    [[nodiscard]] std::uint64_t transaction() const { return transaction_; }
    // The counter was read (`in_transaction`: inside an open transaction).
    void note_read(stock_entry& e, std::int64_t value, bool in_transaction) {
        e.last_read = value;
        e.read_command = command_;
        e.read_transaction = in_transaction ? transaction_ : 0;
    }
    // A locking read of the key succeeded in the open transaction.
    void note_row_lock(stock_entry& e) { e.lock_transaction = transaction_; }
    [[nodiscard]] bool holds_row_lock(const std::string& rule, const key_tuple& key) const {
        const stock_entry* e = find(rule, key);
        return e != nullptr && e->lock_transaction == transaction_;
    }
    // Whether the command being decided may be the recompute that follows this connection's claim by
    // INSERT ... SELECT of the key (stock_entry::recompute_command).
    [[nodiscard]] bool recompute_owed(const std::string& rule, const key_tuple& key) const {
        const stock_entry* e = find(rule, key);
        if (e == nullptr || e->recompute_command == 0) return false;
        if (e->recompute_transaction != 0) return e->recompute_transaction == transaction_;
        return e->recompute_command + 1 == command_;
    }
    // What the connection read of the key, when it is evidence for the command being decided.
    [[nodiscard]] std::optional<std::int64_t> fresh_read(const std::string& rule, const key_tuple& key) const {
        const stock_entry* e = find(rule, key);
        if (e == nullptr || !e->last_read) return std::nullopt;
        if (e->read_command + 1 == command_ || (e->read_transaction != 0 && e->read_transaction == transaction_))
            return e->last_read;
        return std::nullopt;
    }

    // A savepoint of the open transaction: what its takes, claims and give-backs were then, and
    // how many of the session's Redis keys it held. ROLLBACK TO SAVEPOINT puts them back.
    struct savepoint {
        std::string name;  // lower case
        std::map<std::pair<std::string, key_tuple>, stock_entry> entries;
        bool poisoned = false;
        std::string poisoned_rule;
        std::size_t redis_locks = 0;
        std::uint64_t reserve_seq = 0;  // reserved takes from this seq on came after the savepoint
    };
    static constexpr std::size_t max_savepoints = 64;
    std::vector<savepoint> savepoints;

    // The transaction ended: what belonged to it goes (a refused decrement too: the next
    // attempt starts afresh); what this connection read and its autocommit claims' debts stay.
    void reset() {
        for (auto it = entries_.begin(); it != entries_.end();) {
            auto& e = it->second;
            e.transaction_takes.clear();
            e.borrowed.clear();
            e.credits.clear();
            e.cancel_credits.clear();
            e.give_backs_of_committed_takes.clear();
            e.claims_ahead = 0;
            e.strict_ahead = false;
            e.refused = false;
            if (e.recompute_transaction != 0) e.recompute_command = e.recompute_transaction = 0;
            if (!e.last_read && e.unbacked_claims == 0 && e.recompute_command == 0)
                it = entries_.erase(it);
            else
                ++it;
        }
        transaction_poisoned = false;
        poisoned_rule.clear();
        deferred.clear();
        savepoints.clear();
        ++transaction_;
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
    // Takes of the open transaction not sent yet (defer_decrement), oldest first; also the takes
    // served from the sidecar's reserved block (reserve), which are never sent.
    std::vector<deferred_take> deferred;
    // reserve: the next reserved take's seq; the reserved takes a ROLLBACK TO SAVEPOINT undid (the
    // session gives their units back to the block and clears this).
    std::uint64_t reserve_seq = 1;
    std::vector<deferred_take> reserve_undone;
    // The transaction rolled back: give-backs to send now, in autocommit (see stock_entry).
    struct give_back {
        std::string rule;
        std::string sql;
    };
    std::vector<give_back> after_rollback;

    // SAVEPOINT name succeeded: the transaction's bookkeeping as it is now (a savepoint of the same
    // name is replaced, as the server replaces it). The deferred takes were sent before it.
    void set_savepoint(std::string name, std::size_t redis_locks);
    // ROLLBACK TO SAVEPOINT name succeeded: the transaction's takes, claims, borrowed takes and
    // give-backs since then are undone, as the server undid their rows. Borrowed takes since then
    // go back to `returned` (rule, key, units) for the ledger. Returns the Redis keys the session
    // held then (those acquired since are the rolled-back claims'); nullopt: no such savepoint.
    struct returned_take {
        std::string rule;
        key_tuple key;
        std::int64_t units = 0;
    };
    std::optional<std::size_t> rollback_to_savepoint(std::string_view name, std::vector<returned_take>& returned);
    // RELEASE SAVEPOINT name: it and the later ones go; nothing is undone.
    void release_savepoint(std::string_view name);

private:
    std::map<std::pair<std::string, key_tuple>, stock_entry> entries_;
    std::uint64_t command_ = 0;
    std::uint64_t transaction_ = 1;
};

}  // namespace claimguard::engine
