// A claim INSERT whose stock the claim table's trigger decrements (claim rule decremented_by_trigger):
// the INSERT is itself the take. Whatever the trigger's guard is (a SIGNAL, a guard that just
// updates no row, none at all), the sidecar makes the result certain by reading the counter around
// the INSERT on the same connection, under the stock row's lock:
//   BEGIN (autocommit) or SAVEPOINT (the app's transaction);
//   SELECT counter ... FOR UPDATE (before); the app's INSERT; SELECT counter ... (after);
//   the trigger took exactly units x rows and the counter is at or above the floor: COMMIT (or
//   RELEASE SAVEPOINT) and the app gets the INSERT's own OK; else ROLLBACK (TO SAVEPOINT) and the app
//   gets the exhausted answer (nothing taken, or below the floor) or a refusal (another amount).
// An INSERT the server refused (the trigger's SIGNAL, a duplicate) took nothing: the server undid the
// statement with the trigger's change; its error is the answer (ERR 1062: the rule's duplicate answer).
#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"

namespace claimguard::engine {

namespace match = rules::match;
using namespace detail;

namespace {

constexpr std::string_view savepoint = "claimguard_trigger";

action reply_client() {
    action a;
    a.type = action::kind::reply_client;
    return a;
}

action send_sql(std::string sql, bool keep_reply) {
    action a;
    a.type = action::kind::send_sql;
    a.sql.sql = std::move(sql);
    a.keep_reply = keep_reply;
    return a;
}

}  // namespace

action claim_operation::start_trigger_claim() {
    trigger_wrapped_ = !in_transaction_;
    state_ = state::trigger_open_sent;
    // An error of any step before the INSERT is the app's answer: kept.
    return send_sql(trigger_wrapped_ ? std::string("BEGIN") : "SAVEPOINT " + std::string(savepoint), true);
}

// The counter of the claim's stock row: before the INSERT with the row lock (every other claim of
// the key waits, so the two reads see only this INSERT's trigger), after it without.
action claim_operation::trigger_read(bool lock) {
    const auto* key = stock_key_of(d_);
    auto probe = key ? match::counter_probe(*d_.stock, *key, d_.schema)
                     : match::result<match::rewritten_sql>(match::errc::key_not_bindable);
    if (!probe) {
        // A key decide() resolved always binds; never let the INSERT in unchecked.
        events_.push_back(event::trigger_mismatch);
        return trigger_undo(trigger_refusal("the stock row's counter cannot be read for this key", ctx_.status));
    }
    action a;
    a.type = action::kind::send_sql;
    a.sql = std::move(*probe);
    if (lock) a.sql.sql += " FOR UPDATE";
    a.read_counter = true;
    a.keep_reply = lock;  // after the INSERT its reply stays the kept one
    state_ = lock ? state::trigger_before_sent : state::trigger_after_sent;
    return a;
}

action claim_operation::trigger_refusal(std::string why, std::uint16_t status) {
    action a;
    a.type = action::kind::answer;
    a.answer = {rules::answer::kind::error, 1644, "45000",
                "claimguard: rule " + d_.claim->name + " refuses this claim (decremented_by_trigger): " + why +
                    "; the claim was not made"};
    a.status = status;
    return a;
}

// Undo what the INSERT and its trigger did (our transaction, or back to our savepoint), then answer.
action claim_operation::trigger_undo(action final_action) {
    trigger_final_ = std::move(final_action);
    state_ = state::trigger_undo_sent;
    return send_sql(trigger_wrapped_ ? std::string("ROLLBACK") : "ROLLBACK TO SAVEPOINT " + std::string(savepoint),
                    false);
}

action claim_operation::after_trigger(const reply_summary& r) {
    // An error in the app's transaction: the server rolled the failed statement back (or, a deadlock,
    // the whole transaction); our savepoint stays until the transaction ends, harmless. In our own
    // transaction it is rolled back before the answer.
    const auto failed = [&](action final_action) {
        if (trigger_wrapped_) return trigger_undo(std::move(final_action));
        return finish(std::move(final_action));
    };
    switch (state_) {
        case state::trigger_open_sent:
            if (!r.ok) return finish(reply_client());
            return trigger_read(true);

        case state::trigger_before_sent: {
            if (r.err) return failed(reply_client());
            // Sent even with no stock left: a guarded trigger's own SIGNAL is what the app gets directly.
            trigger_before_ = r.counter;
            action a;
            a.type = action::kind::send_statement;
            a.keep_reply = true;  // its OK (affected rows, insert id) or its error is the app's answer
            state_ = state::trigger_insert_sent;
            return a;
        }

        case state::trigger_insert_sent: {
            if (r.err) {
                // The trigger's SIGNAL, a duplicate, any error: the statement took nothing.
                if (r.err_code == er_dup_entry) {
                    events_.push_back(event::duplicate_db);
                    action a;
                    a.type = action::kind::answer;
                    a.answer = d_.claim->duplicate;
                    a.status = r.status;
                    return failed(std::move(a));
                }
                return failed(reply_client());
            }
            return trigger_read(false);
        }

        case state::trigger_after_sent: {
            if (!r.err && !trigger_before_ && !r.counter) {
                // No stock row for the key: nothing was there to take.
                events_.push_back(event::trigger_exhausted);
                return trigger_undo(exhausted_answer(r.status));
            }
            if (r.err || !r.counter || !trigger_before_) {
                events_.push_back(event::trigger_mismatch);
                return trigger_undo(
                    trigger_refusal("the stock row's counter could not be read around the insert", r.status));
            }
            const std::int64_t taken = *trigger_before_ - *r.counter;
            if (*r.counter < d_.stock->floor || taken == 0) {
                // A trigger without a guard went below the floor, or a guard without SIGNAL updated no row.
                events_.push_back(event::trigger_exhausted);
                return trigger_undo(exhausted_answer(r.status));
            }
            if (taken != d_.units) {
                events_.push_back(event::trigger_mismatch);
                return trigger_undo(trigger_refusal(
                    "its trigger changed " + d_.stock->table.name + "." + d_.stock->counter_column + " by " +
                        std::to_string(-taken) + ", not by -" + std::to_string(d_.units) + " (the stock rule's units)",
                    r.status));
            }
            state_ = state::trigger_close_sent;
            return send_sql(trigger_wrapped_ ? std::string("COMMIT") : "RELEASE SAVEPOINT " + std::string(savepoint),
                            false);
        }

        case state::trigger_close_sent: {
            if (!r.ok) {
                // Not committed (or the app's transaction is gone): the claim is not made.
                events_.push_back(event::trigger_mismatch);
                auto refusal = trigger_refusal(
                    "the claim's transaction did not commit (error " + std::to_string(r.err_code) + ")", r.status);
                return trigger_wrapped_ ? trigger_undo(std::move(refusal)) : finish(std::move(refusal));
            }
            inserted_ = true;
            events_.push_back(event::claim_inserted);
            events_.push_back(event::claimed_by_trigger);
            action a = reply_client();
            // The INSERT's OK was read inside our transaction; the app is in autocommit again.
            a.kept_status = trigger_wrapped_;
            a.status = r.status;
            return finish(std::move(a));
        }

        case state::trigger_undo_sent: {
            action a = std::move(*trigger_final_);
            trigger_final_.reset();
            if (a.type == action::kind::answer) a.status = r.status;
            return finish(std::move(a));
        }

        default: break;
    }
    return finish({});
}

}  // namespace claimguard::engine
