// The end of each client command, for the claim bookkeeping of the session's transaction: what the
// command said it would do (COMMIT, ROLLBACK, a savepoint step, XA), what the server's reply says
// happened (the status flags, an ERR), and from both whether the transaction ended and how. A
// commit moves its takes into the sidecar's ledger and keeps its claims' Redis keys; anything else
// gives them back. Pure: the session carries out the steps it returns (Redis releases, admission).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "claim_operation.hpp"
#include "memory.hpp"
#include "rules/match/facts.hpp"
#include "take_ledger.hpp"

namespace claimguard::engine {

// A claim's Redis key, held by this session (its value: the token only this session knows).
struct redis_hold {
    std::string key;
    std::string token;
    std::chrono::milliseconds ttl{0};  // the claim rule's redis ttl (the commit mark starts it again)
};

class transaction_tracker {
public:
    // Before the command goes: what its facts say it does to the transaction.
    void expect(const rules::match::match_result& facts);

    // A claim inserted in the open transaction: its Redis key goes if the transaction does not commit.
    void hold(redis_hold h) { held_.push_back(std::move(h)); }
    // The transaction's Redis keys, given up now (the session releases them): COM_RESET_CONNECTION,
    // COM_CHANGE_USER, a COMMIT turned into ROLLBACK, a lost backend link.
    [[nodiscard]] std::vector<redis_hold> release_all() { return std::exchange(held_, {}); }
    [[nodiscard]] std::size_t held() const { return held_.size(); }

    struct outcome {
        bool was_in_transaction = false;  // the status flags before the command
        std::uint16_t status = 0;         // ... and after its reply
        bool failed = false;              // the server answered ERR
    };
    struct end_steps {
        bool ended = false;                  // the transaction ended with this command
        bool committed = false;              // ... by a commit
        std::vector<redis_hold> release;         // Redis keys of claims that did not commit: release them
        std::vector<redis_hold> committed_keys;  // ... of claims that committed: mark them committed
        std::vector<deferred_take> dropped;  // deferred takes never sent (after a commit: an error)
    };
    // After the reply: applies the command's savepoint step (ROLLBACK TO SAVEPOINT returns what the
    // rollback undid), decides whether the transaction ended, and ends it in `memory` and `ledger`.
    [[nodiscard]] end_steps finish(const outcome& o, session_memory& memory, take_ledger& ledger,
                                   std::uint64_t session);

private:
    enum class savepoint_step : std::uint8_t { none, set, rollback_to, release };
    enum class xa_step : std::uint8_t { none, prepare, end };

    void apply_savepoint_step(session_memory& memory, take_ledger& ledger, std::uint64_t session,
                              std::vector<redis_hold>& release);

    std::vector<redis_hold> held_;
    // The command's expectations, reset by finish().
    bool ends_transaction_ = false;  // COMMIT, ROLLBACK, BEGIN, SET autocommit = 1, XA COMMIT / ROLLBACK
    bool rollback_ = false;          // ROLLBACK, XA ROLLBACK
    savepoint_step savepoint_ = savepoint_step::none;
    std::string savepoint_name_;
    xa_step xa_ = xa_step::none;
    // XA PREPARE succeeded: the transaction left the session; it ends at XA COMMIT / XA ROLLBACK,
    // whatever the status flags say.
    bool xa_prepared_ = false;
};

}  // namespace claimguard::engine
