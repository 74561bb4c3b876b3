// Cancellations in the claim operation: a DELETE of claim rows (a refund). With on_cancel:
// keep_stock it is forwarded and counted. With return_stock each deleted row's units go back to
// the stock row the DELETE's WHERE pins, in the DELETE's own transaction: the app's, or in
// autocommit one of ours (BEGIN; DELETE; UPDATE stock SET c = c + rows * units; COMMIT), so a
// DELETE never commits without its give-back, nor a give-back without its DELETE. The rows the
// DELETE affected are the claims it removed: a concurrent cancel of the same row waits for the row
// lock and then deletes, and gives back, nothing.
#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"

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
                "claimguard: rule " + d_.claim->name +
                    ": the units of the deleted claims cannot be given back to their stock row" +
                    (cancel_wrapped_ ? "; the DELETE was rolled back" : "; roll the transaction back")};
    a.status = status;
    return finish(std::move(a));
}

action claim_operation::after_cancel(const reply_summary& r) {
    switch (state_) {
        case state::cancel_begin_sent: {
            if (!r.ok) return finish(reply_client());
            action a;
            a.type = action::kind::send_statement;
            a.keep_reply = true;
            state_ = state::cancel_delete_sent;
            return a;
        }

        case state::cancel_delete_sent: {
            if (!r.ok) {
                if (cancel_wrapped_ && in_transaction(r.status)) return cancel_undo();
                return finish(reply_client());  // the server's error stands; nothing was deleted
            }
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
                cancel_failed_ = true;
                if (cancel_wrapped_) return cancel_undo();
                return cancel_failure(r.status);
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
            if (!r.ok) {
                // A deadlock rolled the transaction back (the DELETE with it): its error is the answer. In
                // our own transaction anything else undoes the DELETE too.
                if (cancel_wrapped_ && in_transaction(r.status)) return cancel_undo();
                return finish(reply_client());
            }
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

        default: break;
    }
    return finish({});
}

}  // namespace claimguard::engine
