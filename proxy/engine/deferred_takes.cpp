// defer_decrement in the claim operation: sending the open transaction's deferred takes before a
// statement (and what a refusal does), which takes may be deferred, and cancelling one whose claim
// did not happen. Deferring itself (defer_take) is in claim_operation.cpp beside record_take.
#include <iterator>
#include <variant>

#include "claim_operation.hpp"
#include "reserve_pool.hpp"

namespace claimguard::engine {

action claim_operation::send_next_deferred() {
    action a;
    a.type = action::kind::send_sql;
    a.sql.sql = flushing_[flush_next_].sql;
    a.keep_reply = true;  // an error is the answer
    state_ = state::deferred_sent;
    return a;
}

action claim_operation::after_deferred(const reply_summary& r) {
    auto& t = flushing_[flush_next_++];
    const auto drop_rest = [&] {
        for (; flush_next_ < flushing_.size(); ++flush_next_)
            deferred_events_.emplace_back(event::deferred_dropped, std::move(flushing_[flush_next_]));
    };
    if (r.ok && r.affected_rows > 0) {
        deferred_events_.emplace_back(committing_ ? event::deferred_committed : event::deferred_flushed, std::move(t));
        if (flush_next_ < flushing_.size()) return send_next_deferred();
        return start_main();
    }
    // Refused (or failed): the claims of this transaction have no stock behind them.
    memory_.transaction_poisoned = true;
    memory_.poisoned_rule = t.rule;
    memory_.entry(t.rule, t.key).refused = true;
    const rules::answer exhausted = t.exhausted;
    deferred_events_.emplace_back(r.err ? event::deferred_failed : event::deferred_refused, std::move(t));
    drop_rest();
    if (r.err) {
        action a;
        a.type = action::kind::reply_client;  // the server's error (a deadlock, a lock wait timeout)
        return finish(a);
    }
    if (committing_) {
        // Nothing of this transaction may commit: the takes sent before this one go with it.
        refused_answer_ = exhausted;
        refused_rule_ = memory_.poisoned_rule;
        action a;
        a.type = action::kind::send_sql;
        a.sql.sql = "ROLLBACK";
        state_ = state::rollback_sent;
        return a;
    }
    return start_main();
}

std::vector<std::pair<event, deferred_take>> settle_reserved(reserve_pool& pool, std::vector<deferred_take>& takes,
                                                             bool committed) {
    std::vector<std::pair<event, deferred_take>> out;
    const auto now = reserve_pool::clock::now();
    for (auto it = takes.begin(); it != takes.end();) {
        if (!it->reserved) {
            ++it;
            continue;
        }
        if (committed)
            pool.consumed(it->rule, it->key, it->units);
        else
            pool.give_back(it->rule, it->key, it->units, now);
        out.emplace_back(committed ? event::reserve_committed : event::reserve_returned, std::move(*it));
        it = takes.erase(it);
    }
    return out;
}

bool claim_operation::reservable() const {
    if (ctx_.reserve == nullptr || d_.observe || d_.what != verdict::take || !d_.stock || !d_.stock->reserve)
        return false;
    // The same takes as deferrable(): no condition of the app's own, only the counter assigned.
    if (d_.may_conflict || d_.key_literals.size() != d_.stock->key_columns.size() || d_.units <= 0) return false;
    const auto* u = std::get_if<rules::sql::update_statement>(&st_.body);
    if (u == nullptr || u->assignments.size() != 1) return false;
    // In autocommit the served take is consumed at once and not kept; a transaction keeps its takes.
    return !in_transaction_ || memory_.deferred.size() < session_memory::max_deferred_takes;
}

bool claim_operation::deferrable() const {
    if (d_.observe || d_.what != verdict::take || !d_.stock || !d_.stock->defer_decrement || !in_transaction_)
        return false;
    // AND version = ?: zero rows may be the app's own conflict, which only the database can tell now.
    if (d_.may_conflict || d_.key_literals.size() != d_.stock->key_columns.size() || d_.units <= 0) return false;
    // Only the counter is assigned: other assignments would be lost in the deferred UPDATE.
    const auto* u = std::get_if<rules::sql::update_statement>(&st_.body);
    if (u == nullptr || u->assignments.size() != 1) return false;
    return memory_.deferred.size() < session_memory::max_deferred_takes;
}

// The unit of a claim that did not happen came from a deferred take not sent yet: that take is
// not sent at all (the same as sending it and giving the unit back).
bool claim_operation::cancel_deferred() { return cancel_deferred_of(d_.key, reserved_, reserved_from_ledger_); }

bool claim_operation::cancel_deferred_of(const key_tuple& key, std::int64_t units, bool from_ledger) {
    if (!in_transaction_ || from_ledger) return false;
    auto& pending = memory_.deferred;
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
        if (it->rule != d_.stock->name || it->key != key || it->units != units) continue;
        // A unit of the reserved block goes back to it (the claim that would have used it did not happen).
        if (it->reserved && ctx_.reserve)
            ctx_.reserve->give_back(it->rule, it->key, it->units, reserve_pool::clock::now());
        deferred_events_.emplace_back(it->reserved ? event::reserve_returned : event::deferred_dropped, std::move(*it));
        pending.erase(std::next(it).base());
        return true;
    }
    return false;
}

}  // namespace claimguard::engine
