// A claim INSERT of several rows (INSERT ... VALUES (...), (...): Connector/J with
// rewriteBatchedStatements, PyMySQL's executemany): one claim per row, each paid for by its own take.
// The statement is sent once, as written, so the app gets the server's own reply (affected rows,
// insert id, warnings). What the server did decides each row's take: every row went in (each uses
// its take), none did (a plain INSERT fails as a whole, ERR 1062 included: every row's unit goes
// back), or, for INSERT IGNORE, some did (the skipped rows' units go back; decide() lets an IGNORE of
// several rows through only when all its rows have one stock key, so the count says which units).
// The one-row claim is claim_inserts.cpp.
#include <algorithm>
#include <numeric>
#include <variant>

#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"

namespace claimguard::engine {

namespace match = rules::match;
using namespace detail;

void claim_operation::unreserve(const key_tuple& key, const reservation& r) {
    if (r.units <= 0) return;
    auto& e = memory_.entry(d_.stock->name, key);
    if (!r.from_ledger) {
        e.transaction_takes.push_front(r.units);
        return;
    }
    ledger_.return_take(d_.stock->name, key, r.units, ctx_.session);
    if (in_transaction_) {
        if (auto it = std::find(e.borrowed.begin(), e.borrowed.end(), r.units); it != e.borrowed.end())
            e.borrowed.erase(it);
    }
}

action claim_operation::start_rows() {
    const bool strict = d_.claim->strict == rules::strictness::require_decrement;
    bool blocked = false;
    row_reserved_.clear();
    for (const auto& row : d_.rows) {
        row_reserved_.push_back(reserve_for(row.key));
        if (row.after_refusal) memory_.entry(d_.stock->name, row.key).refused = false;  // answered now
        if (row_reserved_.back().units == 0 && (row.after_refusal || (!in_transaction_ && strict))) blocked = true;
    }
    if (blocked) {
        // A row has no take behind it: inserting it would issue a claim without stock. The statement
        // is answered as one (the server's statements succeed or fail whole); the takes the other rows
        // had found wait on for their claims.
        for (std::size_t i = 0; i < d_.rows.size(); ++i) unreserve(d_.rows[i].key, row_reserved_[i]);
        row_reserved_.clear();
        events_.push_back(event::blocked);
        return exhausted_answer(ctx_.status);
    }
    // The Redis first filter, row by row (plain inserts and INSERT IGNORE only: decide() refuses the
    // other forms of several rows).
    if (d_.claim->redis && ctx_.redis_available) {
        redis_next_ = 0;
        return ask_row_redis();
    }
    return send_rows();
}

action claim_operation::ask_row_redis() {
    while (redis_next_ < d_.rows.size() && d_.rows[redis_next_].redis_key.empty()) ++redis_next_;
    if (redis_next_ >= d_.rows.size()) return send_rows();
    return redis_acquire(state::rows_redis_wait, d_.rows[redis_next_].redis_key);
}

action claim_operation::on_row_redis(redis_reply r) {
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    if (r == redis_reply::held && !ins.ignore) {
        // A committed claim holds this row's key: the plain INSERT would fail as a whole (ERR 1062).
        // Answered without the database; every row's unit goes back.
        events_.push_back(event::duplicate_redis);
        action a;
        a.type = action::kind::answer;
        a.answer = d_.claim->duplicate;
        a.status = ctx_.status;
        plan_row_give_backs(std::vector<bool>(d_.rows.size(), false));
        after_give_back_ = std::move(a);
        return next_row_give_back();
    }
    // acquired; pending or unavailable (the database decides); held under IGNORE (the server skips
    // the row and says so in its affected rows)
    ++redis_next_;
    return ask_row_redis();
}

action claim_operation::send_rows() {
    action a;
    a.type = action::kind::send_statement;
    a.keep_reply = true;
    state_ = state::rows_sent;
    return a;
}

void claim_operation::observe_rows() {
    // What enforce mode would do, in the memory and the ledger; the wire stays as it is.
    const bool strict = d_.claim->strict == rules::strictness::require_decrement;
    bool would_block = false;
    std::vector<reservation> got;
    for (const auto& row : d_.rows) {
        got.push_back(reserve_for(row.key));
        if (row.after_refusal) memory_.entry(d_.stock->name, row.key).refused = false;
        if (got.back().units == 0 && (row.after_refusal || (!in_transaction_ && strict))) would_block = true;
    }
    for (std::size_t i = 0; i < d_.rows.size(); ++i)
        if (got[i].units == 0 && !in_transaction_ && !would_block)
            ++memory_.entry(d_.stock->name, d_.rows[i].key).unbacked_claims;
    events_.push_back(would_block ? event::would_block : event::would);
}

action claim_operation::after_rows(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    const std::size_t n = d_.rows.size();
    std::size_t inserted = 0;
    if (r.ok)
        inserted = static_cast<std::size_t>(std::min<std::uint64_t>(r.affected_rows, n));
    else if (r.rows)
        inserted = static_cast<std::size_t>(std::min<std::uint64_t>(*r.rows, n));  // RETURNING

    // Which rows went in: all, none, or (INSERT IGNORE, one stock key) as many as the server says.
    // Rows with a take count first, so no unit goes back while a row without one went in.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return row_reserved_[i].units > 0; });
    std::vector<bool> went_in(n, false);
    for (std::size_t k = 0; k < inserted; ++k) went_in[order[k]] = true;

    const bool strict = d_.claim->strict == rules::strictness::require_decrement;
    for (std::size_t i = 0; i < n; ++i) {
        if (!went_in[i]) continue;
        events_.push_back(event::claim_inserted);
        if (row_reserved_[i].units > 0) continue;  // the claim uses its take
        auto& e = memory_.entry(d_.stock->name, d_.rows[i].key);
        if (trans) {
            ++e.claims_ahead;
            if (strict) e.strict_ahead = true;
            events_.push_back(event::claim_ahead);
        } else {
            ++e.unbacked_claims;
            events_.push_back(event::claim_unbacked);
        }
    }
    action final_action;
    final_action.type = action::kind::reply_client;
    rows_in_transaction_ = trans;
    if (inserted == n) {
        rows_all_in_ = true;
        return finish(std::move(final_action));
    }

    const bool duplicate_error = r.err && r.err_code == er_dup_entry;
    if (duplicate_error) {
        events_.push_back(event::duplicate_db);  // one row was the duplicate; the statement failed whole
    } else if (!r.err) {
        for (std::size_t k = inserted; k < n; ++k) events_.push_back(event::duplicate_db);  // IGNORE skipped them
    }
    if (duplicate_error && !ins.ignore) {
        final_action.type = action::kind::answer;
        final_action.answer = d_.claim->duplicate;
        final_action.status = r.status;
    }

    plan_row_give_backs(went_in);
    after_give_back_ = std::move(final_action);

    if (r.err && !row_give_backs_.empty() && in_transaction(ctx_.status)) {
        if (!trans) {
            // The error ended the transaction (a deadlock): the server undid the takes with it, and the
            // ledger's takes it borrowed go back when the session sees the transaction end.
            row_give_backs_.clear();
        } else if (r.err_code == er_lock_wait_timeout) {
            // The ERR carries no status flags: did the whole transaction roll back? Ask first.
            action a;
            a.type = action::kind::send_sql;
            a.sql.sql = std::string(status_question);
            state_ = state::rows_status_asked;
            return a;
        }
    }
    return next_row_give_back();
}

void claim_operation::plan_row_give_backs(const std::vector<bool>& went_in) {
    // The units of the rows that did not go in go back, one give-back per stock key. A take deferred
    // to COMMIT and not sent yet is not sent at all instead.
    row_give_backs_.clear();
    row_give_back_next_ = 0;
    for (std::size_t i = 0; i < d_.rows.size() && i < row_reserved_.size(); ++i) {
        const auto& t = row_reserved_[i];
        if (went_in[i] || t.units <= 0) continue;
        const auto& key = d_.rows[i].key;
        if (cancel_deferred_of(key, t.units, t.from_ledger)) {
            events_.push_back(event::compensated);
            memory_.entry(d_.stock->name, key).credits.push_back(t.units);  // the app's own give-back is absorbed
            continue;
        }
        auto same = std::find_if(row_give_backs_.begin(), row_give_backs_.end(),
                                 [&](const row_give_back& g) { return d_.rows[g.row].key == key; });
        if (same == row_give_backs_.end()) same = row_give_backs_.insert(row_give_backs_.end(), row_give_back{i, {}});
        same->takes.push_back(t);
    }
    row_reserved_.clear();
}

action claim_operation::after_rows_status(const reply_summary& r) {
    if (!in_transaction(r.status)) row_give_backs_.clear();  // the transaction rolled back: the takes went with it
    return next_row_give_back();
}

action claim_operation::next_row_give_back() {
    const auto& ins = std::get<match::claim_insert>(*d_.fact);
    while (row_give_back_next_ < row_give_backs_.size()) {
        const auto& g = row_give_backs_[row_give_back_next_];
        std::int64_t units = 0;
        for (const auto& t : g.takes) units += t.units;
        auto sql = match::compensation(*d_.stock, ins.rows[g.row].stock_key, units, d_.schema);
        if (!sql) {
            events_.push_back(event::compensation_failed);
            ++row_give_back_next_;
            continue;
        }
        action a;
        a.type = action::kind::send_sql;
        a.sql = std::move(*sql);
        state_ = state::rows_give_back_sent;
        return a;
    }
    action next = std::move(*after_give_back_);
    after_give_back_.reset();
    return finish(std::move(next));
}

action claim_operation::after_row_give_back(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    const auto& g = row_give_backs_[row_give_back_next_++];
    const auto& row = d_.rows[g.row];
    if (r.ok && r.affected_rows > 0) {
        events_.push_back(event::compensated);
        auto& e = memory_.entry(d_.stock->name, row.key);
        for (const auto& t : g.takes) {
            if (!trans) {
                ledger_.add_credit(d_.stock->name, row.key, t.units, ctx_.session);
                continue;
            }
            e.credits.push_back(t.units);
            if (t.from_ledger) {
                // As after_give_back: a rollback undoes this give-back but not the committed take.
                if (auto it = std::find(e.borrowed.begin(), e.borrowed.end(), t.units); it != e.borrowed.end())
                    e.borrowed.erase(it);
                auto sql = match::literal_give_back(*d_.stock, row.key_literals, t.units,
                                                    d_.schema.empty() ? database_ : std::string_view(d_.schema));
                if (sql) e.give_backs_of_committed_takes.push_back(std::move(sql->sql));
            }
        }
    } else {
        events_.push_back(event::compensation_failed);
    }
    if (after_give_back_ && after_give_back_->type == action::kind::answer) after_give_back_->status = r.status;
    return next_row_give_back();
}

}  // namespace claimguard::engine
