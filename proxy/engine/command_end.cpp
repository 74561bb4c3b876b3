// engine::command_end and abandon_transaction: the end of a client command (see command_end.hpp).
#include "command_end.hpp"

#include "proxy/protocol/capabilities.hpp"

namespace claimguard::engine {

namespace {

constexpr std::uint16_t er_lock_wait_timeout = 1205;

bool in_transaction(std::uint16_t status) { return (status & protocol::status::in_trans) != 0; }

}  // namespace

command_end::command_end(const command_outcome& o, session_memory& memory, take_ledger* ledger,
                         transaction_tracker& transaction, const admission_slots& slots, std::uint64_t session)
    : outcome_(o), memory_(memory), ledger_(ledger), transaction_(transaction), slots_(slots), session_(session) {}

command_end_action command_end::resume(const command_end_input& in) {
    using k = command_end_input::kind;
    switch (phase_) {
        case phase::idle:
            if (in.type != k::start) break;
            // ERR 1205 (lock wait timeout) rolls back the statement, or with innodb_rollback_on_timeout
            // the whole transaction, and an ERR carries no status flags: in a transaction, ask.
            if (outcome_.failed && outcome_.error == er_lock_wait_timeout && outcome_.was_in_transaction &&
                in_transaction(outcome_.status)) {
                phase_ = phase::asking;
                return command_end_action::ask_transaction();
            }
            return settle();

        case phase::asking:
            if (in.type == k::io_lost) return finish(command_end_action::fail());  // nothing of it ends here
            if (in.type != k::reply) break;
            if (!in_transaction(in.reply.status)) {
                timeout_rolled_back_ = true;
                outcome_.status = static_cast<std::uint16_t>(outcome_.status & ~protocol::status::in_trans);
            }
            return settle();

        case phase::settling:
            if (in.type != k::carried_out) break;
            // A rollback of a transaction that gave back units of takes committed before it undid those
            // give-backs: they go again now, in autocommit, unless a transaction is open again.
            if (!memory_.after_rollback.empty() && !in_transaction(outcome_.status)) {
                give_backs_ = std::exchange(memory_.after_rollback, {});
                phase_ = phase::giving_back;
                return next_give_back();
            }
            return finish(command_end_action::done());

        case phase::giving_back: {
            if (in.type == k::io_lost) return finish(command_end_action::fail());  // the rest are lost with it
            if (in.type != k::reply) break;
            auto& g = give_backs_[next_++];
            const bool changed = in.reply.ok && in.reply.affected_rows > 0;
            results_.push_back({changed ? event::compensated : event::compensation_failed, std::move(g.rule)});
            return next_give_back();
        }

        case phase::done: break;
    }
    return finish(command_end_action::fail());  // an input the operation did not ask for
}

std::string_view command_end::sql() const {
    if (phase_ == phase::asking) return transaction_question;
    if (phase_ == phase::giving_back && next_ < give_backs_.size()) return give_backs_[next_].sql;
    return {};
}

std::string_view command_end::rule() const {
    if (phase_ == phase::giving_back && next_ < give_backs_.size()) return give_backs_[next_].rule;
    return {};
}

command_end_action command_end::settle() {
    auto& s = settlement_;
    s.timeout_rolled_back = timeout_rolled_back_;
    if (ledger_ != nullptr) {
        auto steps = transaction_.finish({outcome_.was_in_transaction, outcome_.status, outcome_.failed}, memory_,
                                         *ledger_, session_);
        s.release = std::move(steps.release);
        s.committed_keys = std::move(steps.committed_keys);
        s.dropped = std::move(steps.dropped);
        s.committed = steps.committed;
    }
    // An autocommit decrement's turn ends with its reply; a transaction's with the transaction.
    s.release_admission = !slots_.empty() && !in_transaction(outcome_.status);
    phase_ = phase::settling;
    return command_end_action::settle();
}

command_end_action command_end::next_give_back() {
    if (next_ >= give_backs_.size()) return finish(command_end_action::done());
    return command_end_action::give_back();
}

command_end_action command_end::finish(command_end_action a) {
    phase_ = phase::done;
    return a;
}

abandon_steps abandon_transaction(transaction_tracker& transaction, session_memory& memory, take_ledger* ledger,
                                  std::uint64_t session) {
    abandon_steps out;
    out.release = transaction.release_all();
    if (ledger != nullptr) out.dropped = end_transaction(memory, *ledger, false, session);
    return out;
}

}  // namespace claimguard::engine
