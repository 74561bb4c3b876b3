// The claim INSERT in the claim operation: the take it uses, the Redis first filter, the database's
// answer (inserted, duplicate, ignored, an error that ended the transaction), and the give-back of a
// unit whose claim did not happen. The takes, refusals and restocks are in claim_operation.cpp.
#include <algorithm>
#include <variant>

#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"

namespace claimguard::engine {

namespace match = rules::match;
using namespace detail;

void claim_operation::reserve_take() {
    const auto r = reserve_for(d_.key);
    reserved_ = r.units;
    reserved_from_ledger_ = r.from_ledger;
}

claim_operation::reservation claim_operation::reserve_for(const key_tuple& key) {
    if (in_transaction_) {
        auto& e = memory_.entry(d_.stock->name, key);
        if (!e.transaction_takes.empty()) {
            const reservation r{e.transaction_takes.front(), false};
            e.transaction_takes.pop_front();
            return r;
        }
    }
    if (auto t = ledger_.pop_take(d_.stock->name, key, ctx_.session)) {
        // A transaction that rolls back returns what it borrowed: its claim row (or the
        // give-back it made inside the transaction) is undone with it.
        if (in_transaction_) memory_.entry(d_.stock->name, key).borrowed.push_back(*t);
        return {*t, true};
    }
    return {};
}

action claim_operation::redis_then_claim() {
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    // Redis answers for plain inserts and INSERT IGNORE; REPLACE and ON DUPLICATE KEY UPDATE
    // change the existing row, so the database decides for them.
    if (d_.claim->redis && ctx_.redis_available && !ins.replace && !ins.on_duplicate_update)
        return redis_acquire(state::redis_wait);
    return send_claim();
}

action claim_operation::redis_acquire(state next, std::string redis_key) {
    action a;
    a.type = action::kind::redis_acquire;
    a.ttl = d_.claim->redis->ttl;
    a.redis_key = std::move(redis_key);
    state_ = next;
    return a;
}

// A claim by INSERT ... SELECT from its stock row: a take of the app's transaction (or one waiting in
// the ledger) pays for it if there is one; else the claim's own conditional take of the rule's units,
// as a decrement of the app's would be rewritten. Redis first: a duplicate it knows takes nothing.
action claim_operation::start_own_take() {
    reserve_take();
    if (reserved_ > 0 || (d_.claim->redis && ctx_.redis_available)) return redis_then_claim();
    return send_own_take();
}

action claim_operation::send_own_take() {
    auto sql = match::deferred_decrement(*d_.stock, d_.key_literals, d_.units,
                                         d_.schema.empty() ? database_ : std::string_view(d_.schema));
    if (!sql) {
        events_.push_back(event::unmodeled_refused);
        return refusal("the claim's take cannot be built (" + sql.error().message() + ")");
    }
    action a;
    a.type = action::kind::send_sql;
    a.sql = std::move(*sql);
    a.keep_reply = true;  // an error of the take is the app's answer
    state_ = state::own_take_sent;
    return a;
}

action claim_operation::after_own_take(const reply_summary& r) {
    if (!r.ok) {
        action a;
        a.type = action::kind::reply_client;  // the server's error stands; nothing was taken
        return finish(a);
    }
    if (r.affected_rows > 0) {
        events_.push_back(event::took);
        reserved_ = d_.units;  // this claim's unit: given back if the row does not go in
        reserved_from_ledger_ = false;
        return send_claim();  // Redis, if configured, was asked before the take
    }
    events_.push_back(event::exhausted);
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    if (!ins.select_guarded) return exhausted_answer(r.status);
    // What the server answers when the SELECT's counter bound selects no row: OK, 0 rows inserted.
    action a;
    a.type = action::kind::answer;
    a.answer.type = rules::answer::kind::ok;
    a.ok_rows = 0;
    a.status = r.status;
    return finish(std::move(a));
}

action claim_operation::send_claim() {
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    action a;
    a.keep_reply = true;
    if (ins.from_select) {
        auto values = match::insert_select_values(st_, ins);
        if (!values)
            return give_back_then(refusal("the claim's row cannot be written (" + values.error().message() + ")"));
        a.type = action::kind::send_sql;
        a.sql = std::move(*values);
        state_ = state::claim_sent;
        return a;
    }
    if (ins.replace || ins.on_duplicate_update) {
        auto plain = match::plain_insert(st_);
        if (plain) {
            plain_first_ = true;
            a.type = action::kind::send_sql;
            a.sql = std::move(*plain);
            state_ = state::claim_sent;
            return a;
        }
    }
    a.type = action::kind::send_statement;
    state_ = state::claim_sent;
    return a;
}

action claim_operation::on_redis(redis_reply r) {
    if (state_ == state::rows_redis_wait) return on_row_redis(r);
    if (state_ != state::redis_wait) return finish({});
    if (r == redis_reply::held) {
        events_.push_back(event::duplicate_redis);
        const auto& ins = std::get<match::claim_insert>(*d_.fact);
        action a;
        a.type = action::kind::answer;
        a.status = ctx_.status;
        if (ins.ignore) {
            a.answer.type = rules::answer::kind::ok;  // what the server says for an ignored duplicate
        } else {
            a.answer = d_.claim->duplicate;
        }
        return give_back_then(std::move(a));
    }
    // pending: a claim not committed yet holds the key; the database's unique index waits for its
    // transaction and decides. unavailable: the database decides alone.
    redis_locked_ = r == redis_reply::acquired;
    if (d_.own_take && reserved_ == 0) return send_own_take();
    return d_.by_trigger ? start_trigger_claim() : send_claim();
}

action claim_operation::give_back_then(action final_action) {
    if (reserved_ <= 0) return continue_with(std::move(final_action));
    if (cancel_deferred()) {
        events_.push_back(event::compensated);
        memory_.entry(d_.stock->name, d_.key).credits.push_back(reserved_);  // the app's own give-back is absorbed
        reserved_ = 0;
        return continue_with(std::move(final_action));
    }
    const auto* key = stock_key_of(d_);
    auto sql = key ? match::compensation(*d_.stock, *key, reserved_, d_.schema)
                   : match::result<match::rewritten_sql>(match::errc::key_not_bindable);
    if (!sql) {
        events_.push_back(event::compensation_failed);
        return finish(std::move(final_action));
    }
    after_give_back_ = std::move(final_action);
    action a;
    a.type = action::kind::send_sql;
    a.sql = std::move(*sql);
    state_ = state::give_back_sent;
    return a;
}

action claim_operation::after_claim(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    // INSERT ... RETURNING answers with a result set of the rows it inserted.
    if ((r.ok && r.affected_rows > 0) || (r.rows && *r.rows > 0)) {
        inserted_ = true;
        in_transaction_ = trans;
        events_.push_back(event::claim_inserted);
        if (d_.own_take && reserved_ > 0) {
            // The app's recompute of the counter may follow: this take already moved it.
            auto& e = memory_.entry(d_.stock->name, d_.key);
            e.recompute_command = memory_.command();
            e.recompute_transaction = trans ? memory_.transaction() : 0;
        }
        if (reserved_ > 0) {
            // the claim uses its take
        } else if (trans) {
            auto& e = memory_.entry(d_.stock->name, d_.key);
            ++e.claims_ahead;
            if (d_.claim->strict == rules::strictness::require_decrement) e.strict_ahead = true;
            events_.push_back(event::claim_ahead);
        } else {
            ++memory_.entry(d_.stock->name, d_.key).unbacked_claims;
            events_.push_back(event::claim_unbacked);
        }
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }
    const bool duplicate =
        (r.err && r.err_code == er_dup_entry) || (r.ok && r.affected_rows == 0) || (r.rows && *r.rows == 0);
    if (duplicate) events_.push_back(event::duplicate_db);
    action final_action;
    if (plain_first_ && r.err && r.err_code == er_dup_entry) {
        // REPLACE / ON DUPLICATE KEY UPDATE: the row exists; after the unit goes back the
        // app's own statement runs as written and its reply is the answer.
        action original;
        original.type = action::kind::send_statement;
        original.keep_reply = true;
        return give_back_then(std::move(original));
    }
    if (r.err && r.err_code == er_dup_entry && !ins.ignore) {
        final_action.type = action::kind::answer;
        final_action.answer = d_.claim->duplicate;
        final_action.status = r.status;
    } else {
        final_action.type = action::kind::reply_client;  // IGNORE's 0 rows, or another error
    }
    if (r.err && reserved_ > 0 && in_transaction(ctx_.status)) {
        if (!trans) {
            // The error ended the transaction (a deadlock): the server undid the take with it.
            // A give-back now would run in autocommit and add a unit nobody took.
            reserved_ = 0;
            return finish(std::move(final_action));
        }
        if (r.err_code == er_lock_wait_timeout) {
            // The statement rolled back, or with innodb_rollback_on_timeout the whole
            // transaction: the ERR carries no status flags, so the server is asked first.
            after_give_back_ = std::move(final_action);
            action a;
            a.type = action::kind::send_sql;
            a.sql.sql = std::string(status_question);
            state_ = state::status_asked;
            return a;
        }
    }
    return give_back_then(std::move(final_action));
}

action claim_operation::after_status_asked(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    action final_action = std::move(*after_give_back_);
    after_give_back_.reset();
    if (!trans) {
        reserved_ = 0;  // the transaction rolled back: the take went with it
        return finish(std::move(final_action));
    }
    return give_back_then(std::move(final_action));
}

action claim_operation::after_give_back(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    if (r.ok && r.affected_rows > 0) {
        events_.push_back(event::compensated);
        if (trans) {
            auto& e = memory_.entry(d_.stock->name, d_.key);
            e.credits.push_back(reserved_);
            if (reserved_from_ledger_) {
                // The take was committed before this transaction: if it rolls back, the give-back
                // is undone and the unit must go back after it (not to the ledger: no claim is owed it).
                auto it = std::find(e.borrowed.begin(), e.borrowed.end(), reserved_);
                if (it != e.borrowed.end()) e.borrowed.erase(it);
                auto sql = match::literal_give_back(*d_.stock, d_.key_literals, reserved_,
                                                    d_.schema.empty() ? database_ : std::string_view(d_.schema));
                if (sql) e.give_backs_of_committed_takes.push_back(std::move(sql->sql));
            }
        } else
            ledger_.add_credit(d_.stock->name, d_.key, reserved_, ctx_.session);
    } else {
        events_.push_back(event::compensation_failed);
    }
    reserved_ = 0;
    action next = std::move(*after_give_back_);
    after_give_back_.reset();
    if (next.type == action::kind::answer) next.status = r.status;
    return continue_with(std::move(next));
}

}  // namespace claimguard::engine
