// The claim flows as a state machine: takes, refusals, restocks, observe mode, and the COMMIT a
// refused deferred take turns into ROLLBACK. The claim INSERT and its give-back: claim_inserts.cpp.
#include "claim_operation.hpp"
#include "claim_operation_detail.hpp"
#include "reserve_pool.hpp"

#include <algorithm>
#include <iterator>
#include <variant>

namespace claimguard::engine {

namespace match = rules::match;

using namespace detail;
namespace status = protocol::status;

namespace {

// A decrement that took `units` on this connection: it backs a claim its transaction inserted
// first, or waits (in the transaction, or in the sidecar's ledger) for the claim that follows.
void record_take(session_memory& memory, take_ledger& ledger, const decision& d, std::int64_t units, bool in_trans,
                 std::uint64_t session) {
    auto& e = memory.entry(d.stock->name, d.key);
    e.refused = false;
    if (e.last_read) *e.last_read -= units;  // the app's own view after its write
    if (in_trans) {
        if (e.claims_ahead > 0) {
            --e.claims_ahead;  // the claim inserted earlier in this transaction is backed now
            return;
        }
        e.transaction_takes.push_back(units);
        return;
    }
    if (e.unbacked_claims > 0) {
        // after_refused: this connection's claim went in first (committed); this take is its unit,
        // not one waiting for the next claim.
        --e.unbacked_claims;
        return;
    }
    ledger.add_take(d.stock->name, d.key, units, session);
}

void record_refusal(session_memory& memory, const decision& d, bool in_trans) {
    auto& e = memory.entry(d.stock->name, d.key);
    e.refused = true;
    if (in_trans && e.claims_ahead > 0) {
        memory.transaction_poisoned = true;
        memory.poisoned_rule = d.stock->name;
    }
}

// The take a transaction holds without sending it now (deferred to its COMMIT, or served from reserve).
deferred_take take_held(const decision& d) {
    deferred_take t;
    t.rule = d.stock->name;
    t.table = d.stock->table.name;
    t.key = d.key;
    t.key_columns = d.stock->key_columns;
    t.units = d.units;
    t.exhausted = d.stock->exhausted;
    return t;
}

}  // namespace

claim_operation::claim_operation(const decision& d, const rules::sql::parsed_statement& st, session_memory& memory,
                                 take_ledger& ledger, const operation_context& ctx)
    : d_(d), st_(st), memory_(memory), ledger_(ledger), ctx_(ctx), in_transaction_(in_transaction(ctx.status)) {}

std::vector<event> claim_operation::take_events() { return std::exchange(events_, {}); }

std::vector<std::pair<event, deferred_take>> claim_operation::take_deferred_events() {
    return std::exchange(deferred_events_, {});
}

action claim_operation::finish(action a) {
    state_ = state::done;
    return a;
}

action claim_operation::refusal(std::string_view why) {
    action a;
    a.type = action::kind::answer;
    // A shape the rules do not model is refused by its policy; an ambiguous write is refused always.
    const bool by_policy = d_.what != verdict::take && !d_.ambiguous;
    a.answer = {rules::answer::kind::error, 1644, "45000",
                "claimguard: rule " + std::string(d_.claim ? d_.claim->name : d_.stock ? d_.stock->name : "?") +
                    " refuses this statement" + (by_policy ? " (unmodeled: refuse): " : ": ") + std::string(why)};
    a.status = ctx_.status;
    return finish(std::move(a));
}

action claim_operation::exhausted_answer(std::uint16_t status) {
    action a;
    a.type = action::kind::answer;
    a.answer = d_.stock->exhausted;
    a.status = status;
    return finish(std::move(a));
}

action claim_operation::start() {
    // The open transaction's deferred takes this statement needs sent first, in order.
    // (A transaction already poisoned rolls back: its deferred takes are dropped unsent.)
    if (d_.deferred != deferred_step::none && d_.what != verdict::rollback_instead) {
        committing_ = d_.deferred == deferred_step::commit;
        // A take that is itself deferred joins the others instead of flushing them.
        const bool joins = !committing_ && deferrable();
        auto& pending = memory_.deferred;
        for (auto it = pending.begin(); it != pending.end();) {
            // A take served from the reserved block is never sent: the transaction's end settles it.
            const bool wanted =
                !it->reserved && (committing_ || (std::find(d_.flush_rules.begin(), d_.flush_rules.end(), it->rule) !=
                                                      d_.flush_rules.end() &&
                                                  !(joins && it->rule == d_.stock->name)));
            if (!wanted) {
                ++it;
                continue;
            }
            flushing_.push_back(std::move(*it));
            it = pending.erase(it);
        }
        if (!flushing_.empty()) return send_next_deferred();
    }
    return start_main();
}

action claim_operation::defer_take() {
    auto sql = match::deferred_decrement(*d_.stock, d_.key_literals, d_.units,
                                         d_.schema.empty() ? database_ : std::string_view(d_.schema));
    if (!sql) return {};  // relay: never happens for a take deferrable() accepted
    auto t = take_held(d_);
    t.sql = std::move(sql->sql);
    memory_.deferred.push_back(std::move(t));
    // Recorded as taken in this transaction: the claim that follows is backed by it; if it is
    // refused when sent, the transaction is poisoned and its COMMIT rolls back.
    record_take(memory_, ledger_, d_, d_.units, true, ctx_.session);
    events_.push_back(event::deferred);
    if (d_.app_meant) events_.push_back(event::app_meant_other);
    return one_row_ok(static_cast<std::uint16_t>(ctx_.status | status::in_trans));
}

// reserve: the take's units come from the sidecar's block (taken from the row on the sidecar's own
// connection): answered OK at once, never sent, so the app's transaction holds no lock on the row
// (and an autocommit take costs no statement at all).
action claim_operation::serve_reserved() {
    auto t = take_held(d_);
    t.reserved = true;
    t.seq = memory_.reserve_seq++;
    deferred_events_.emplace_back(event::reserve_served, t);
    if (in_transaction_) {
        memory_.deferred.push_back(std::move(t));  // settled by the transaction's end
    } else {
        // Autocommit: the take is its own transaction, committed the moment it is answered: the unit
        // is consumed now (it left the row with the block). A duplicate's give-back goes to the row.
        ctx_.reserve->consumed(t.rule, t.key, t.units);
        deferred_events_.emplace_back(event::reserve_committed, std::move(t));
    }
    // As a take the row committed (autocommit: in the ledger) or a deferred one: it backs the claim that follows.
    record_take(memory_, ledger_, d_, d_.units, in_transaction_, ctx_.session);
    if (d_.app_meant) events_.push_back(event::app_meant_other);
    const auto held = in_transaction_ ? status::in_trans : std::uint16_t{0};
    return one_row_ok(static_cast<std::uint16_t>(ctx_.status | held));
}

action claim_operation::start_main() {
    if (d_.observe) {
        // The wire stays as it is; the memory and ledger follow what enforce mode would do, so
        // the next decision is the one enforce mode would make.
        if (d_.what == verdict::take || d_.what == verdict::track_decrement)
            record_take(memory_, ledger_, d_, d_.units, in_transaction_, ctx_.session);
        if (d_.what == verdict::claim && !d_.rows.empty()) {
            observe_rows();
            return finish({});
        }
        bool would_block = false;
        if (d_.what == verdict::claim && !d_.by_trigger && !d_.own_take) {
            reserve_take();
            would_block = reserved_ == 0 && (d_.after_refusal || (!in_transaction_ && d_.claim->strict ==
                                                                                           rules::strictness::require_decrement));
            if (d_.after_refusal) memory_.entry(d_.stock->name, d_.key).refused = false;
            if (reserved_ == 0 && !in_transaction_ && !would_block)
                ++memory_.entry(d_.stock->name, d_.key).unbacked_claims;
        }
        events_.push_back(would_block ? event::would_block : event::would);
        return finish({});
    }
    switch (d_.what) {
    case verdict::forward:
        if (d_.unmodeled) events_.push_back(event::unmodeled_forwarded);
        return finish({});

    case verdict::refuse:
        events_.push_back(event::unmodeled_refused);
        return refusal(d_.note);

    case verdict::remember_read: {
        action a;
        a.type = action::kind::send_statement;
        a.keep_reply = true;
        a.read_counter = true;
        state_ = state::read_sent;
        return a;
    }

    case verdict::take: {
        if (reservable()) {
            switch (ctx_.reserve->take(d_.stock->name, d_.key, d_.units, reserve_pool::clock::now())) {
                case reserve_pool::serve::served: return serve_reserved();
                case reserve_pool::serve::sold_out:
                    // The row had less than one take left at the last refill and the block is empty:
                    // the answer the row's own take would get.
                    record_refusal(memory_, d_, true);
                    events_.push_back(event::exhausted);
                    return exhausted_answer(ctx_.status);
                case reserve_pool::serve::empty: break;  // the take goes to the row, as without reserve
            }
        }
        if (deferrable()) {
            action a = defer_take();
            if (a.type == action::kind::answer) return a;
        }
        auto rewritten = std::holds_alternative<match::counter_write>(*d_.fact)
                             ? match::rewrite_write(st_, std::get<match::counter_write>(*d_.fact), d_.units, d_.only_if_lower)
                             : match::rewrite_change(st_, std::get<match::counter_change>(*d_.fact), d_.units);
        if (!rewritten) {
            // Never forward a write the rule could not make safe.
            events_.push_back(event::unmodeled_refused);
            return refusal("the write cannot be made a conditional take (" + rewritten.error().message() + ")");
        }
        action a;
        a.type = action::kind::send_sql;
        a.sql = std::move(*rewritten);
        a.keep_reply = true;
        state_ = state::take_sent;
        return a;
    }

    case verdict::track_decrement: {
        action a;
        a.type = action::kind::send_statement;
        a.keep_reply = true;
        state_ = state::track_sent;
        return a;
    }

    case verdict::restock: {
        if (d_.absorb_recompute) {
            // The recompute after the claim by INSERT ... SELECT: its take already moved the counter.
            auto& e = memory_.entry(d_.stock->name, d_.key);
            e.recompute_command = e.recompute_transaction = 0;
            events_.push_back(event::absorbed_recompute);
            return one_row_ok(ctx_.status);
        }
        // The app giving back units the sidecar already gave back for its failed claim.
        bool absorbed = false;
        if (auto* e = memory_.find(d_.stock->name, d_.key); e && in_transaction_) {
            for (auto it = e->credits.begin(); it != e->credits.end(); ++it)
                if (*it == d_.units) {
                    e->credits.erase(it);
                    absorbed = true;
                    break;
                }
            // ... or back for a claim this transaction cancelled (DELETE, on_cancel: return_stock).
            for (auto it = e->cancel_credits.begin(); !absorbed && it != e->cancel_credits.end(); ++it)
                if (*it == d_.units) {
                    e->cancel_credits.erase(it);
                    absorbed = true;
                }
            // ... or back for several of them at once (an N-row DELETE, then remain = remain + N): the
            // credits that fit, never more than they hold.
            if (!absorbed) {
                std::vector<std::size_t> used;
                std::int64_t left = d_.units;
                for (std::size_t i = 0; i < e->cancel_credits.size() && left > 0; ++i)
                    if (e->cancel_credits[i] <= left) {
                        used.push_back(i);
                        left -= e->cancel_credits[i];
                    }
                if (left == 0) {
                    for (auto i = used.rbegin(); i != used.rend(); ++i)
                        e->cancel_credits.erase(e->cancel_credits.begin() + static_cast<std::ptrdiff_t>(*i));
                    absorbed = true;
                }
            }
        }
        if (!absorbed && !in_transaction_) absorbed = ledger_.use_credit(d_.stock->name, d_.key, d_.units, ctx_.session);
        if (absorbed) {
            events_.push_back(event::absorbed);
            return one_row_ok(ctx_.status);
        }
        action a;
        a.type = action::kind::send_statement;
        a.keep_reply = true;
        state_ = state::restock_sent;
        return a;
    }

    case verdict::exhausted:
        events_.push_back(event::blocked);
        return exhausted_answer(ctx_.status);

    case verdict::cancel: return start_cancel();

    case verdict::rollback_instead: {
        action a;
        a.type = action::kind::send_sql;
        a.sql.sql = "ROLLBACK";
        state_ = state::rollback_sent;
        return a;
    }

    case verdict::claim: {
        if (!d_.rows.empty()) return start_rows();  // several rows: one claim per row
        if (d_.by_trigger) {
            // The INSERT is the take (the claim table's trigger decrements the stock): no take of the
            // sidecar's is used or required. Redis first, as for any plain claim INSERT.
            if (d_.claim->redis && ctx_.redis_available) return redis_acquire(state::redis_wait);
            return start_trigger_claim();
        }
        if (d_.own_take) return start_own_take();
        reserve_take();
        if (d_.after_refusal) {
            memory_.entry(d_.stock->name, d_.key).refused = false;  // this refusal is answered now
            if (reserved_ == 0) {
                events_.push_back(event::blocked);
                return exhausted_answer(ctx_.status);
            }
        }
        if (reserved_ == 0 && !in_transaction_) {
            if (d_.claim->strict == rules::strictness::require_decrement) {
                // No decrement of this sidecar took a unit for this claim (refused, or never sent):
                // inserting it would issue a claim without stock.
                events_.push_back(event::blocked);
                return exhausted_answer(ctx_.status);
            }
        }
        return redis_then_claim();
    }
    }
    return finish({});
}

action claim_operation::answer_sold_out() {
    record_refusal(memory_, d_, in_transaction_);
    if (d_.what != verdict::take) {
        action a;
        a.type = action::kind::answer;
        a.answer.type = rules::answer::kind::ok;
        a.ok_rows = 0;
        a.status = ctx_.status;
        return finish(std::move(a));
    }
    events_.push_back(event::exhausted);
    return exhausted_answer(ctx_.status);
}

bool claim_operation::groupable() const {
    if (d_.observe || d_.what != verdict::take || !d_.stock || !d_.stock->group_update || in_transaction_) return false;
    if (d_.deferred != deferred_step::none || d_.may_conflict || d_.only_if_lower || d_.units <= 0 ||
        d_.key_literals.size() != d_.stock->key_columns.size() || d_.fact == nullptr)
        return false;
    // The batch's UPDATE assigns the counter and the version column: any other assignment would be lost.
    std::optional<std::uint32_t> version;
    if (const auto* w = std::get_if<match::counter_write>(d_.fact)) {
        if (w->expected || w->extra_conditions) return false;
        version = w->version_assignment;
    } else if (const auto* c = std::get_if<match::counter_change>(d_.fact)) {
        if (c->extra_conditions) return false;
        version = c->version_assignment;
    } else {
        return false;
    }
    const auto* u = std::get_if<rules::sql::update_statement>(&st_.body);
    return u != nullptr && u->assignments.size() == (version ? 2u : 1u);
}

action claim_operation::answer_grouped_take() {
    record_take(memory_, ledger_, d_, d_.units, false, ctx_.session);
    events_.push_back(event::took);
    if (d_.app_meant) events_.push_back(event::app_meant_other);
    return one_row_ok(ctx_.status);
}

// The synthesized answer of a write the sidecar stands for (a deferred take, a grouped take, an
// absorbed restock): OK, 1 row (also what the app's ROW_COUNT() sees once it is sent).
action claim_operation::one_row_ok(std::uint16_t status) {
    action a;
    a.type = action::kind::answer;
    a.answer.type = rules::answer::kind::ok;
    a.ok_rows = 1;
    a.status = status;
    return finish(std::move(a));
}

action claim_operation::continue_with(action next) {
    if (next.type == action::kind::send_statement) {
        state_ = state::original_sent;
        return next;
    }
    return finish(std::move(next));
}

action claim_operation::after_take(const reply_summary& r, bool rewritten) {
    const bool trans = in_transaction(r.status);
    if (r.affected_rows > 0) {
        record_take(memory_, ledger_, d_, d_.units, trans, ctx_.session);
        events_.push_back(rewritten ? event::took : event::tracked);
        if (d_.app_meant) events_.push_back(event::app_meant_other);
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }
    if (!rewritten) {
        // The app's own guarded decrement changed nothing: its answer stands (it handles 0 rows).
        record_refusal(memory_, d_, trans);
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }
    if (d_.may_conflict || d_.only_if_lower) {
        const auto* key = stock_key_of(d_);
        auto probe = key ? match::counter_probe(*d_.stock, *key, d_.schema) : match::result<match::rewritten_sql>(match::errc::key_not_bindable);
        if (probe) {
            action a;
            a.type = action::kind::send_sql;
            a.sql = std::move(*probe);
            a.read_counter = true;
            state_ = state::probe_sent;
            return a;
        }
    }
    record_refusal(memory_, d_, trans);
    events_.push_back(event::exhausted);
    return exhausted_answer(r.status);
}

action claim_operation::on_reply(const reply_summary& r) {
    const bool trans = in_transaction(r.status);
    switch (state_) {
    case state::read_sent: {
        if (r.counter) {
            auto& e = memory_.entry(d_.stock->name, d_.key);
            memory_.note_read(e, *r.counter, trans);
            e.refused = false;  // a new attempt starts with a read
            // reserve: the last units this sidecar holds go back to the row (not while this app holds the
            // row's lock: the give-back would wait for it).
            if (!(d_.locking_read && trans)) reserve_read_seen(ctx_.reserve, *d_.stock, d_.key, *r.counter);
        }
        if (d_.locking_read && trans && !r.err) {
            memory_.note_row_lock(memory_.entry(d_.stock->name, d_.key));
        }
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }

    case state::take_sent:
    case state::track_sent:
        if (!r.ok) {
            action a;
            a.type = action::kind::reply_client;  // the server's error stands
            return finish(a);
        }
        return after_take(r, state_ == state::take_sent);

    case state::probe_sent: {
        if (r.counter && *r.counter >= d_.stock->floor + d_.units) {
            if (!d_.may_conflict) {
                // Stock is left and the write did not lower the counter: a restock or a stale write,
                // which the sidecar cannot tell apart. Never a take, never "sold out": refused loudly.
                events_.push_back(event::not_lower);
                return refusal("an absolute write at or above the current counter is not a take (a restock or a "
                               "stale write); restock as a trusted user or with SET c = c + n");
            }
            // Stock is left: the app's own condition (AND version = ?) failed. Its zero rows stand,
            // so an optimistic app retries instead of hearing "sold out".
            events_.push_back(event::conflict);
            action a;
            a.type = action::kind::reply_client;
            return finish(a);
        }
        record_refusal(memory_, d_, trans);
        events_.push_back(event::exhausted);
        return exhausted_answer(r.status);
    }

    case state::restock_sent: {
        if (r.ok && r.affected_rows > 0) events_.push_back(event::restocked);
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }

    case state::rollback_sent: {
        auto dropped = end_transaction(memory_, ledger_, false, ctx_.session);
        // reserve: the units its takes were served from go back to the block (nothing committed).
        if (ctx_.reserve)
            for (auto& e : settle_reserved(*ctx_.reserve, dropped, false)) deferred_events_.push_back(std::move(e));
        rolled_back_ = true;
        const rules::answer* exhausted = refused_answer_ ? &*refused_answer_ : d_.stock ? &d_.stock->exhausted : nullptr;
        if (refused_answer_) {
            deferred_take which;
            which.rule = refused_rule_;
            deferred_events_.emplace_back(event::rolled_back, std::move(which));
        } else {
            events_.push_back(event::rolled_back);
        }
        // The app asked to COMMIT and nothing was committed: never answered with an OK, even
        // when the rule answers a refused decrement with one (exhausted: {type: ok}).
        action a;
        a.type = action::kind::answer;
        a.status = r.status;
        if (d_.no_decrement && !refused_answer_ && d_.stock)
            // The claim's decrement never came (an ORM that saw no change to save): the app is told
            // so, not "sold out" while stock may be left.
            a.answer = {rules::answer::kind::error, 1644, "45000",
                        "claimguard: rule " + d_.stock->name +
                            " refuses this COMMIT: the transaction inserted a claim with no decrement of the "
                            "stock behind it (nothing was taken for it); it was rolled back"};
        else if (exhausted && exhausted->type == rules::answer::kind::error)
            a.answer = *exhausted;
        else
            a.answer = {rules::answer::kind::error, 1644, "45000",
                        "claimguard: transaction rolled back: it holds a claim without stock"};
        return finish(std::move(a));
    }

    case state::claim_sent: return after_claim(r);
    case state::own_take_sent: return after_own_take(r);

    case state::status_asked: return after_status_asked(r);

    case state::give_back_sent: return after_give_back(r);

    case state::rows_sent: return after_rows(r);
    case state::rows_status_asked: return after_rows_status(r);
    case state::rows_give_back_sent: return after_row_give_back(r);

    case state::original_sent: {
        action a;
        a.type = action::kind::reply_client;
        return finish(a);
    }

    case state::deferred_sent: return after_deferred(r);

    case state::cancel_begin_sent:
    case state::cancel_delete_sent:
    case state::cancel_give_back_sent:
    case state::cancel_commit_sent:
    case state::cancel_rollback_sent:
    case state::cancel_read_sent:
    case state::cancel_read_delete_sent:
    case state::cancel_key_give_back_sent: return after_cancel(r);

    case state::trigger_open_sent:
    case state::trigger_before_sent:
    case state::trigger_insert_sent:
    case state::trigger_after_sent:
    case state::trigger_close_sent:
    case state::trigger_undo_sent: return after_trigger(r);

    case state::idle:
    case state::redis_wait:
    case state::rows_redis_wait:
    case state::done:
        break;
    }
    return finish({});
}

std::vector<deferred_take> end_transaction(session_memory& memory, take_ledger& ledger, bool committed,
                                           std::uint64_t session) {
    auto dropped = std::exchange(memory.deferred, {});
    std::vector<session_memory::give_back> after_rollback;
    memory.for_each([&](const std::string& rule, const key_tuple& key, stock_entry& e) {
        if (committed) {
            for (auto units : e.transaction_takes) ledger.add_take(rule, key, units, session);
            // Units its cancellations gave back: the app's own restock of them may come after the
            // COMMIT (a refund in a transaction, then remain = remain + 1 in autocommit).
            for (auto units : e.cancel_credits) ledger.add_credit(rule, key, units, session);
        } else {
            for (auto units : e.borrowed) ledger.return_take(rule, key, units, session);
            for (auto& sql : e.give_backs_of_committed_takes) after_rollback.push_back({rule, std::move(sql)});
        }
    });
    memory.reset();
    // Added to what is still waiting: a reset (COM_RESET_CONNECTION) or ROLLBACK AND CHAIN left
    // give-backs that are owed whatever the next end of a transaction is.
    memory.after_rollback.insert(memory.after_rollback.end(), std::make_move_iterator(after_rollback.begin()),
                                 std::make_move_iterator(after_rollback.end()));
    return dropped;
}

}  // namespace claimguard::engine
