// The end of each client command, as one I/O-free operation: after ERR 1205 in a transaction,
// whether the server still holds the transaction (it asks); whether the transaction ended and how
// (transaction_tracker::finish: takes into the ledger or back, the claims' Redis keys kept or
// released, deferred takes dropped); the admission slots given back outside a transaction; and the
// give-backs a rollback leaves to send in autocommit, each reply compensated or not. One
// resume(input) returns the next action; the session sends, carries out and reports, and decides
// nothing. Also the transaction's end without a reply: COM_RESET_CONNECTION, COM_CHANGE_USER, the
// connection's end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "claim_operation.hpp"
#include "memory.hpp"
#include "statement_operation.hpp"
#include "take_ledger.hpp"
#include "transaction_tracker.hpp"

namespace claimguard::engine {

// What the client's command did, as the session saw it.
struct command_outcome {
    bool was_in_transaction = false;  // the status flags before the command said "in transaction"
    std::uint16_t status = 0;         // the status flags after its reply
    bool failed = false;              // the server answered ERR
    std::uint16_t error = 0;          // ... its code
};

// What the session learned since the last action.
struct command_end_input {
    enum class kind : std::uint8_t {
        start,        // the first resume
        reply,        // the reply to ask_transaction / give_back, summarised (status flags, OK's rows)
        carried_out,  // settle was carried out
        io_lost,      // the database connection failed under our own statement: no reply comes
    };
    kind type = kind::start;
    reply_summary reply;

    static command_end_input start() { return {}; }
    static command_end_input of_reply(const reply_summary& r) {
        command_end_input in;
        in.type = kind::reply;
        in.reply = r;
        return in;
    }
    static command_end_input carried_out() {
        command_end_input in;
        in.type = kind::carried_out;
        return in;
    }
    static command_end_input lost() {
        command_end_input in;
        in.type = kind::io_lost;
        return in;
    }
};

// What the end of the command changes, for the session to carry out and report at once.
struct command_settlement {
    std::vector<redis_hold> release;         // Redis keys of claims that did not commit: release them
    std::vector<redis_hold> committed_keys;  // ... of claims that committed: mark them committed
    bool release_admission = false;          // give every admission slot back (no transaction is open)
    std::vector<deferred_take> dropped;      // deferred takes never sent: report them dropped
    bool committed = false;                  // ... by a commit (then an error: claims went in without them)
    // ERR 1205 rolled the whole transaction back (innodb_rollback_on_timeout), as the server said.
    bool timeout_rolled_back = false;
};

// The next thing the session does. Small: what it sends or carries out stays in the operation
// (command_end::sql(), rule(), settlement()), as every command ends through here.
struct command_end_action {
    enum class kind : std::uint8_t {
        ask_transaction,  // send sql() of the proxy's own (never forwarded); its reply's status flags: resume
        settle,           // carry out and report settlement(), then resume(carried_out): the command is over
        give_back,        // send sql() (a give-back of rule(), in autocommit), never forwarded; its reply: resume
        done,             // final: status() are the session's status flags now
        fail,             // final: the database connection failed under our own statement; the session ends
    };
    kind type = kind::done;

    [[nodiscard]] bool final() const { return type == kind::done || type == kind::fail; }
    // Only ask_transaction and give_back wait for the database; settle is carried out at once.
    [[nodiscard]] bool needs_server() const { return type == kind::ask_transaction || type == kind::give_back; }

    static command_end_action done() { return {}; }
    static command_end_action fail() { return {kind::fail}; }
    static command_end_action ask_transaction() { return {kind::ask_transaction}; }
    static command_end_action settle() { return {kind::settle}; }
    static command_end_action give_back() { return {kind::give_back}; }
};

// What a give-back's reply meant, for the rule's metrics (compensated or compensation_failed).
struct give_back_result {
    event what = event::compensated;
    std::string rule;
};

class command_end {
public:
    // The question asked after ERR 1205 in a transaction: a diagnostics statement, so it opens no
    // transaction and the app's own SHOW WARNINGS still sees the error.
    static constexpr std::string_view transaction_question = "SHOW COUNT(*) WARNINGS";

    // `ledger`: none when no rules run (then only the 1205 question and the admission slots apply).
    command_end(const command_outcome& o, session_memory& memory, take_ledger* ledger, transaction_tracker& transaction,
                const admission_slots& slots, std::uint64_t session);

    [[nodiscard]] command_end_action resume(const command_end_input& in);

    // The status flags as the end of the command knows them (ERR 1205 carries none: the answer to
    // ask_transaction says whether the transaction is still open).
    [[nodiscard]] std::uint16_t status() const { return outcome_.status; }
    // ask_transaction, give_back: the statement to send; give_back: the rule it gives back to.
    [[nodiscard]] std::string_view sql() const;
    [[nodiscard]] std::string_view rule() const;
    // settle: what to carry out and report (the session may move from it).
    [[nodiscard]] command_settlement& settlement() { return settlement_; }
    // Since the last call: what each give-back's reply meant.
    [[nodiscard]] std::vector<give_back_result> take_results() { return std::exchange(results_, {}); }

private:
    enum class phase : std::uint8_t { idle, asking, settling, giving_back, done };

    command_end_action settle();
    command_end_action next_give_back();
    command_end_action finish(command_end_action a);

    command_outcome outcome_;
    session_memory& memory_;
    take_ledger* ledger_;
    transaction_tracker& transaction_;
    const admission_slots& slots_;
    std::uint64_t session_;
    phase phase_ = phase::idle;
    command_settlement settlement_;
    bool timeout_rolled_back_ = false;
    std::vector<session_memory::give_back> give_backs_;  // taken from memory: a lost link loses the rest
    std::size_t next_ = 0;
    std::vector<give_back_result> results_;
};

// The transaction is gone without a commit and without a reply saying how: COM_RESET_CONNECTION
// and COM_CHANGE_USER (the server rolls an open transaction back), the connection's end.
struct abandon_steps {
    std::vector<redis_hold> release;     // every Redis key the transaction's claims held
    std::vector<deferred_take> dropped;  // deferred takes never sent
};
[[nodiscard]] abandon_steps abandon_transaction(transaction_tracker& transaction, session_memory& memory,
                                                take_ledger* ledger, std::uint64_t session);

}  // namespace claimguard::engine
