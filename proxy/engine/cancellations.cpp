// Cancellations in the claim operation: a DELETE of claim rows (a refund). With on_cancel:
// keep_stock it is forwarded and counted. With return_stock each deleted row's units go back to
// the stock row the DELETE's WHERE pins, in the DELETE's own transaction: the app's, or in
// autocommit one of ours (BEGIN; DELETE; UPDATE stock SET c = c + rows * units; COMMIT), so a
// DELETE never commits without its give-back, nor a give-back without its DELETE. The rows the
// DELETE affected are the claims it removed: a concurrent cancel of the same row waits for the row
// lock and then deletes, and gives back, nothing.
//
// A DELETE whose WHERE does not pin the stock key (WHERE id = ?: an ORM deleting a row it loaded) is
// preceded by a read of the rows it is about to delete, with their row lock, in the same transaction
// (decision::read_claim_rows): their stock keys say where the units go (one give-back per key, of
// rows x units), their idempotency values which Redis keys go. The lock keeps those rows the ones the
// DELETE removes; should the counts differ all the same, nothing is committed.
#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"

#include <algorithm>
#include <iterator>
#include <string>

namespace claimguard::engine {

namespace match = rules::match;
using namespace detail;

namespace {

action reply_client() {
    action a;
    a.type = action::kind::reply_client;
    return a;
}

}  // namespace

action claim_operation::start_cancel() {
    action a;
    a.keep_reply = true;  // an error of any step is the app's answer
    if (d_.returns_stock && !in_transaction_) {
        cancel_wrapped_ = true;
        a.type = action::kind::send_sql;
        a.sql.sql = "BEGIN";
        state_ = state::cancel_begin_sent;
        return a;
    }
    if (d_.read_claim_rows) return cancel_read();
    a.type = action::kind::send_statement;
    state_ = state::cancel_delete_sent;
    return a;
}

// The DELETE's answer: the OK of the rows it removed, with the status after our COMMIT (autocommit
// again) or the app's transaction's.
action claim_operation::cancel_answer(std::uint16_t status) {
    action a;
    a.type = action::kind::answer;
    a.answer.type = rules::answer::kind::ok;
    a.ok_rows = deleted_rows_;
    a.status = status;
    return finish(std::move(a));
}

// A step of our own transaction failed: it is rolled back (the DELETE with it) and the app gets
// that step's error, kept from its reply.
action claim_operation::cancel_undo() {
    action a;
    a.type = action::kind::send_sql;
    a.sql.sql = "ROLLBACK";
    state_ = state::cancel_rollback_sent;
    return a;
}

action claim_operation::cancel_failure(std::uint16_t status) {
    action a;
    a.type = action::kind::answer;
    a.answer = {rules::answer::kind::error, 1644, "45000",
                "claimguard: rule " + d_.claim->name + ": " +
                    (cancel_error_.empty() ? "the units of the deleted claims cannot be given back to their stock row"
                                           : cancel_error_) +
                    (d_.read_claim_rows && !cancel_deleted_ ? "; nothing was deleted"
                     : cancel_wrapped_                      ? "; the DELETE was rolled back"
                                                            : "; roll the transaction back")};
    a.status = status;
    return finish(std::move(a));
}

action claim_operation::after_cancel(const reply_summary& r) {
    switch (state_) {
        case state::cancel_begin_sent: {
            if (!r.ok) return finish(reply_client());
            if (d_.read_claim_rows) return cancel_read();
            action a;
            a.type = action::kind::send_statement;
            a.keep_reply = true;
            state_ = state::cancel_delete_sent;
            return a;
        }

        case state::cancel_delete_sent: {
            if (!r.ok) return cancel_server_error(r);
            deleted_rows_ = r.affected_rows;
            if (!d_.returns_stock) {
                cancelled_rows_ = deleted_rows_;
                if (deleted_rows_ > 0) events_.push_back(event::cancelled_kept);
                return finish(reply_client());
            }
            const auto* key = stock_key_of(d_);
            const bool fits = deleted_rows_ <= static_cast<std::uint64_t>(INT64_MAX / d_.units);
            if (deleted_rows_ > 0 && key != nullptr && fits) {
                auto sql = match::compensation(*d_.stock, *key, static_cast<std::int64_t>(deleted_rows_) * d_.units,
                                               d_.schema);
                if (sql) {
                    action a;
                    a.type = action::kind::send_sql;
                    a.sql = std::move(*sql);
                    a.keep_reply = true;
                    state_ = state::cancel_give_back_sent;
                    return a;
                }
            }
            if (deleted_rows_ > 0) {
                // Never commit a cancellation whose units cannot go back (a key decide() found bindable
                // always builds one): undone in our transaction, an error in the app's.
                events_.push_back(event::compensation_failed);
                return cancel_fails({}, r.status);
            }
            if (!cancel_wrapped_) return cancel_answer(r.status);
            action a;
            a.type = action::kind::send_sql;
            a.sql.sql = "COMMIT";
            a.keep_reply = true;
            state_ = state::cancel_commit_sent;
            return a;
        }

        case state::cancel_give_back_sent: {
            if (!r.ok) return cancel_server_error(r);
            if (r.affected_rows == 0) {
                // No stock row under that key: there is nothing to give the units back to.
                events_.push_back(event::compensation_failed);
            } else {
                gave_back_ = true;
            }
            if (!cancel_wrapped_) {
                // The app's transaction: the give-back commits or rolls back with its DELETE. The app's own
                // restock of these units later in it is absorbed (cancel_credits).
                cancelled_rows_ = deleted_rows_;
                if (gave_back_) {
                    auto& e = memory_.entry(d_.stock->name, d_.key);
                    for (std::uint64_t i = 0; i < deleted_rows_; ++i) e.cancel_credits.push_back(d_.units);
                    events_.push_back(event::cancelled_returned);
                } else {
                    events_.push_back(event::cancelled_kept);
                }
                return cancel_answer(r.status);
            }
            action a;
            a.type = action::kind::send_sql;
            a.sql.sql = "COMMIT";
            a.keep_reply = true;
            state_ = state::cancel_commit_sent;
            return a;
        }

        case state::cancel_commit_sent: {
            if (!r.ok) return finish(reply_client());  // not committed: nothing was deleted nor given back
            if (d_.read_claim_rows) {
                cancelled_rows_ = deleted_rows_;
                credit_cancelled();
                return cancel_answer(r.status);
            }
            cancelled_rows_ = deleted_rows_;
            if (deleted_rows_ > 0) {
                if (gave_back_) {
                    // The app's own restock of these units right after is the same give-back: absorbed once
                    // per deleted row (take_ledger::credit_lifetime, this connection's first).
                    for (std::uint64_t i = 0; i < deleted_rows_; ++i)
                        ledger_.add_credit(d_.stock->name, d_.key, d_.units, ctx_.session);
                    events_.push_back(event::cancelled_returned);
                } else {
                    events_.push_back(event::cancelled_kept);
                }
            }
            return cancel_answer(r.status);
        }

        case state::cancel_rollback_sent:
            if (cancel_failed_) return cancel_failure(r.status);
            return finish(reply_client());  // the error kept from the step that failed

        case state::cancel_read_sent: return after_cancel_read(r);
        case state::cancel_read_delete_sent: return after_cancel_read_delete(r);
        case state::cancel_key_give_back_sent: return after_key_give_back(r);

        default: break;
    }
    return finish({});
}

// --- A cancellation that reads its claim rows first (decision::read_claim_rows) ---

// SELECT <stock key>, <idempotency> FROM claim WHERE <the DELETE's WHERE> ... FOR UPDATE, in the
// DELETE's transaction (ours in autocommit: BEGIN was sent).
action claim_operation::cancel_read() {
    auto sql = match::cancel_claim_read(st_, *d_.claim, *d_.stock, max_cancel_rows);
    if (!sql) {  // decide() checked the shape; never delete what cannot be read
        events_.push_back(event::unmodeled_refused);
        return cancel_fails("the claim rows the DELETE removes cannot be read (" + sql.error().message() + ")",
                                   ctx_.status);
    }
    action a;
    a.type = action::kind::send_sql;
    a.sql = std::move(*sql);
    a.keep_reply = true;  // its error is the app's answer
    a.read_rows = true;
    state_ = state::cancel_read_sent;
    return a;
}

// The cancellation cannot be carried out (refused before anything was deleted, or its units cannot
// go back): our transaction is rolled back, the DELETE with it; in the app's, an error says to roll
// back. `why` (when given) is the error's text.
action claim_operation::cancel_fails(std::string why, std::uint16_t status) {
    if (!why.empty()) cancel_error_ = std::move(why);
    cancel_failed_ = true;
    if (cancel_wrapped_) return cancel_undo();
    return cancel_failure(status);
}

// A statement of the cancellation failed on the server (a deadlock, a lock wait timeout, a
// constraint): its error is the app's answer. In claimguard's own transaction the rest is undone
// first; in the app's, the server already rolled back what the error rolled back.
action claim_operation::cancel_server_error(const reply_summary& r) {
    if (cancel_wrapped_ && in_transaction(r.status)) return cancel_undo();
    return finish(reply_client());
}

action claim_operation::after_cancel_read(const reply_summary& r) {
    if (r.err) return cancel_server_error(r);
    if (r.rows && *r.rows > max_cancel_rows) {
        // More claim rows than claimguard reads for one DELETE: the rule's unmodeled policy says.
        if (d_.claim->unmodeled == rules::unmodeled_policy::refuse) {
            events_.push_back(event::unmodeled_refused);
            return cancel_fails("a cancellation of more than " + std::to_string(max_cancel_rows) +
                                           " claim rows is not modelled (unmodeled: refuse)",
                                       r.status);
        }
        events_.push_back(event::unmodeled_forwarded);
        cancel_unmodeled_ = true;  // deleted as written, the units stay taken
    } else {
        if (!r.values) {
            events_.push_back(event::compensation_failed);
            return cancel_fails("the claim rows the DELETE removes could not be read", r.status);
        }
        for (const auto& values : *r.values) {
            auto row = claim_row_of(d_, values);
            if (!row) {
                events_.push_back(event::compensation_failed);
                return cancel_fails("a claim row the DELETE removes names no stock row (a NULL key)", r.status);
            }
            auto it = std::find_if(cancelled_keys_.begin(), cancelled_keys_.end(),
                                   [&](const cancelled_key& k) { return k.key == row->key; });
            if (it == cancelled_keys_.end()) {
                cancelled_keys_.push_back({row->key, std::move(row->key_literals), 0, false});
                it = std::prev(cancelled_keys_.end());
            }
            ++it->rows;
            if (!row->redis_key.empty()) cancel_redis_keys_.push_back(std::move(row->redis_key));
        }
        read_rows_ = r.values->size();
    }
    action a;
    a.type = action::kind::send_statement;
    a.keep_reply = true;
    state_ = state::cancel_read_delete_sent;
    return a;
}

action claim_operation::after_cancel_read_delete(const reply_summary& r) {
    if (!r.ok) return cancel_server_error(r);
    deleted_rows_ = r.affected_rows;
    cancel_deleted_ = true;
    if (cancel_unmodeled_) {
        cancelled_keys_.clear();
        cancel_redis_keys_.clear();
        return cancel_end(r.status);
    }
    if (deleted_rows_ != read_rows_) {
        // The row locks make this impossible; should it happen all the same, the units of the rows
        // deleted are not known: never commit it.
        events_.push_back(event::compensation_failed);
        return cancel_fails("the DELETE removed " + std::to_string(deleted_rows_) + " claim rows, not the " +
                                std::to_string(read_rows_) + " read before it",
                            r.status);
    }
    for (const auto& k : cancelled_keys_)
        if (k.rows > static_cast<std::uint64_t>(INT64_MAX / d_.units)) {
            events_.push_back(event::compensation_failed);
            return cancel_fails("the units of the deleted claims do not fit a 64-bit integer", r.status);
        }
    return next_key_give_back(r.status);
}

// One give-back per stock key the deleted rows name: c = c + rows_of_key x units.
action claim_operation::next_key_give_back(std::uint16_t status) {
    if (cancelled_key_next_ == cancelled_keys_.size()) return cancel_end(status);
    const auto& k = cancelled_keys_[cancelled_key_next_];
    auto sql =
        match::literal_give_back(*d_.stock, k.key_literals, static_cast<std::int64_t>(k.rows) * d_.units, d_.schema);
    if (!sql) {
        events_.push_back(event::compensation_failed);
        return cancel_fails({}, status);
    }
    action a;
    a.type = action::kind::send_sql;
    a.sql = std::move(*sql);
    a.keep_reply = true;
    state_ = state::cancel_key_give_back_sent;
    return a;
}

action claim_operation::after_key_give_back(const reply_summary& r) {
    if (!r.ok) return cancel_server_error(r);
    auto& k = cancelled_keys_[cancelled_key_next_++];
    if (r.affected_rows == 0)
        events_.push_back(event::compensation_failed);  // no stock row under that key
    else
        k.gave_back = true;
    return next_key_give_back(r.status);
}

// Every give-back sent: our COMMIT, or (the app's transaction) the answer, its credits kept in the
// transaction's memory.
action claim_operation::cancel_end(std::uint16_t status) {
    if (cancel_wrapped_) {
        action a;
        a.type = action::kind::send_sql;
        a.sql.sql = "COMMIT";
        a.keep_reply = true;
        state_ = state::cancel_commit_sent;
        return a;
    }
    cancelled_rows_ = deleted_rows_;
    credit_cancelled();
    return cancel_answer(status);
}

// The cancellation is done (committed, or in the app's transaction): the app's own restock of the
// given-back units is the same give-back, absorbed (one credit of units per deleted row of the key).
void claim_operation::credit_cancelled() {
    bool returned = false;
    for (const auto& k : cancelled_keys_) {
        if (!k.gave_back) continue;
        returned = true;
        for (std::uint64_t i = 0; i < k.rows; ++i) {
            if (cancel_wrapped_)
                ledger_.add_credit(d_.stock->name, k.key, d_.units, ctx_.session);
            else
                memory_.entry(d_.stock->name, k.key).cancel_credits.push_back(d_.units);
        }
    }
    if (deleted_rows_ > 0) events_.push_back(returned ? event::cancelled_returned : event::cancelled_kept);
}

}  // namespace claimguard::engine
