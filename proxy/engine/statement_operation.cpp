// One statement carried out: admission turns, the claim operation, the Redis key's settlement.
#include "statement_operation.hpp"
#include "reserve_pool.hpp"

#include <algorithm>

namespace claimguard::engine {

namespace match = rules::match;

namespace {

constexpr std::uint16_t er_lock_wait_timeout = 1205;  // what drivers and ORMs retry
constexpr const char* er_lock_wait_timeout_state = "HY000";
constexpr std::uint16_t cr_server_lost = 2013;    // the batch's connection failed under its UPDATE
constexpr std::uint16_t er_unknown_error = 1105;  // the batch's UPDATE could not be written

std::string describe_key(const decision& d) {
    std::string out;
    for (std::size_t i = 0; i < d.key.size(); ++i) {
        if (i) out += ", ";
        if (i < d.stock->key_columns.size())
            out += d.stock->key_columns[i] + "=";
        else
            out += "in database ";  // the key's database, after its columns
        out += d.key[i];
    }
    return out;
}

std::string format_ms(std::chrono::milliseconds d) {
    if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
    return std::to_string(d.count()) + "ms";
}

}  // namespace

bool admission_slots::holds(const std::string& rule, const key_tuple& key) const {
    return std::any_of(held_.begin(), held_.end(), [&](const slot& s) { return s.rule == rule && s.key == key; });
}

void admission_slots::release_all(admission_gate& gate) {
    for (const auto& s : held_) gate.release(s.id);
    held_.clear();
}

statement_operation::statement_operation(const decision& d, const rules::sql::parsed_statement& st,
                                         session_memory& memory, take_ledger& ledger, transaction_tracker& transaction,
                                         admission_slots& slots, const statement_context& ctx)
    : d_(d),
      memory_(memory),
      ledger_(ledger),
      transaction_(transaction),
      slots_(slots),
      ctx_(ctx),
      claim_(d, st, memory, ledger, ctx.op),
      status_(ctx.op.status) {}

statement_operation::~statement_operation() {
    if (members_settled_ || members_.empty()) return;
    // The session stopped the leader (shutdown) before its batch was decided: whether an UPDATE on
    // its way committed nobody knows, as for a connection lost under it.
    group_result r;
    r.what = admission::grouped_failed;
    r.error_code = cr_server_lost;
    r.batch = static_cast<std::uint32_t>(members_.size() + 1);
    r.leader_thread = ctx_.backend_thread;
    for (const auto& m : members_) ctx_.gate->settle(m.id, r);
}

bool statement_operation::admission_applies() const {
    if (ctx_.gate == nullptr || d_.observe || !d_.stock || !d_.stock->admission ||
        (d_.what != verdict::take && d_.what != verdict::track_decrement))
        return false;
    // reserve: a take the reserved block can serve never reaches the row, so it needs no turn.
    return !(claim_.reservable() && ctx_.op.reserve->pooled(d_.stock->name, d_.key) >= d_.units);
}

namespace {

// Whether `in` answers `asked`, the last action the operation returned.
bool answers(const statement_input& in, statement_action::kind asked, bool started) {
    using k = statement_input::kind;
    using a = statement_action::kind;
    switch (in.type) {
        case k::start: return !started;
        case k::reply:
        case k::io_lost: return started && (asked == a::send_statement || asked == a::send_sql);
        case k::redis: return started && asked == a::redis_acquire;
        case k::redis_done: return started && (asked == a::redis_release || asked == a::redis_commit);
        case k::turn: return started && (asked == a::wait_turn || asked == a::wait_refresh);
        case k::closing:
            return started && (asked == a::wait_turn || asked == a::wait_refresh || asked == a::wait_group);
        case k::gathered: return started && asked == a::wait_group;
        case k::refreshed: return started && asked == a::wait_refresh;
        case k::rebuilt: return started && asked == a::serve_cached;
    }
    return false;
}

}  // namespace

statement_action statement_operation::resume(const statement_input& in) {
    report_.clear();
    if (!answers(in, asked_, phase_ != phase::idle)) return finish(statement_action::fail());
    auto next = step(in);
    asked_ = next.type;
    if (auto deferred = claim_.take_deferred_events(); !deferred.empty()) report_.deferred = std::move(deferred);
    return next;
}

statement_action statement_operation::step(const statement_input& in) {
    using k = statement_input::kind;
    switch (in.type) {
        case k::start: {
            if (phase_ != phase::idle) break;
            if (auto read = start_cached_read()) return *read;
            // The key's turn first: at most max_in_flight of its decrements reach the database at once.
            // (A take deferred to COMMIT reaches nothing now: it waits for its turn when it is sent.)
            if (admission_applies() && !claim_.deferrable()) {
                phase_ = phase::main_turn;
                if (auto wait = ask_turn({d_.stock->name, d_.key, &*d_.stock->admission, d_.units, d_.holds_row_lock,
                                          groups_takes(), ctx_.op.session}))
                    return *wait;
            }
            return after_main_turn();
        }
        case k::turn: {
            if (!waiting_ || (phase_ != phase::main_turn && phase_ != phase::deferred_turns)) break;
            auto t = std::move(*waiting_);
            waiting_.reset();
            if (in.turn == admission::admitted) slots_.add({std::move(t.rule), std::move(t.key), in.ticket});
            if (phase_ == phase::deferred_turns) return next_deferred_turn();
            if (in.turn == admission::grouped_taken || in.turn == admission::grouped_sold_out ||
                in.turn == admission::grouped_failed)
                return grouped_answer(in.group, false);  // another session's batch decided this take
            if (in.turn == admission::admitted && t.groupable) {
                leader_ticket_ = in.ticket;
                return gather();
            }
            if (in.turn == admission::admitted || in.turn == admission::bypass) return after_main_turn();
            return not_admitted(in.turn);
        }
        case k::closing: return finish(statement_action::fail());
        case k::gathered:
            if (phase_ != phase::gathering) break;
            return send_group_next();
        case k::refreshed:
            if (phase_ != phase::cache_wait) break;
            return look_up();
        case k::rebuilt:
            if (phase_ != phase::cache_serve) break;
            return after_cached_read(in);
        case k::reply:
            if (phase_ == phase::cache_read) return after_cached_read(in);
            if (phase_ == phase::grouping) {
                status_ = in.reply.status;
                if (in.reply.err || !in.reply.ok)
                    group_->on_error(in.reply.err ? in.reply.err_code : er_unknown_error);
                else
                    group_->on_changed(in.reply.affected_rows > 0);
                return send_group_next();
            }
            if (phase_ != phase::running) break;
            status_ = in.reply.status;
            claim_action_ = claim_.on_reply(in.reply);
            return follow();
        case k::redis:
            if (phase_ != phase::running) break;
            token_ = in.token;
            if (!claim_action_.redis_key.empty() && in.redis == redis_reply::acquired)  // one row's of several
                row_keys_.push_back({claim_action_.redis_key, in.token, d_.claim->redis->ttl});
            claim_action_ = claim_.on_redis(in.redis);
            return follow();
        case k::redis_done:
            if (phase_ != phase::settling || settle_next_ >= settle_count_) break;
            return next_queued();
        case k::io_lost: {
            // The connection is gone: a claim's Redis key goes with it (in the background), and with
            // it the keys the transaction's earlier claims hold. The claim's take is not given back
            // to the ledger: nobody knows whether the INSERT committed.
            settle_count_ = settle_next_ = 0;
            if (phase_ == phase::cache_read) end_refresh();
            if (phase_ == phase::grouping) {
                // The batch's members learn the same as this app does: the connection was lost under
                // the UPDATE, which may or may not have committed.
                group_->on_error(cr_server_lost);
                (void)decide_members();
            }
            if ((claim_.redis_locked() || !row_keys_.empty()) && ctx_.op.redis_available) {
                if (claim_.redis_locked()) transaction_.hold({d_.redis_key, token_, d_.claim->redis->ttl});
                for (auto& k : std::exchange(row_keys_, {})) transaction_.hold(std::move(k));
                settle(statement_action::release(false), transaction_.release_all());
            }
            settle(statement_action::fail());
            phase_ = phase::settling;
            return next_queued();
        }
    }
    return finish(statement_action::fail());  // an input the operation did not ask for
}

std::optional<statement_action> statement_operation::start_cached_read() {
    if (ctx_.cache == nullptr || ctx_.read == nullptr || d_.what != verdict::remember_read ||
        d_.deferred != deferred_step::none || !d_.stock || !d_.stock->read_cache)
        return std::nullopt;
    const auto* r = std::get_if<rules::match::counter_read>(d_.fact);
    if (r == nullptr) return std::nullopt;
    // Cacheable only when the reply differs from the kept one in the counter alone and the
    // session may see the sidecar's value (read_cache_bypass says why not).
    if (auto why = read_cache_bypass(*r, d_.key, memory_, ctx_.read->situation); !why.empty()) {
        report_.reads.push_back({read_note::kind::bypass, std::string(why)});
        return std::nullopt;
    }
    // A read inside a transaction may answer from an older snapshot: its reply is never kept as
    // the key's value, so it never refreshes the cache for the others.
    in_transaction_before_ = (ctx_.op.status & protocol::status::in_trans) != 0;
    return look_up();
}

statement_action statement_operation::look_up() {
    asked_at_ = read_cache::clock::now();
    found_ = ctx_.cache->find(
        d_.stock->name, d_.key, ctx_.read->shape, *d_.stock->read_cache, asked_at_, !in_transaction_before_,
        d_.stock->max_refresh_wait.value_or(read_cache::max_refresh_wait), sold_out_backoff_of(*d_.stock));
    switch (found_.what) {
        case read_cache::outcome::wait:
            // Another read of this key is refreshing it: its answer serves this one too (one
            // refresh per key per TTL). find() stops saying wait after the rule's max_refresh_wait, and then
            // this read asks the server itself.
            phase_ = phase::cache_wait;
            return statement_action::wait_refresh();
        case read_cache::outcome::hit: phase_ = phase::cache_serve; return statement_action::serve_cached();
        case read_cache::outcome::miss: return read_from_server(read_note::kind::miss);
        case read_cache::outcome::refresh: break;
    }
    return read_from_server(read_note::kind::refresh);
}

statement_action statement_operation::read_from_server(read_note::kind why) {
    report_.reads.push_back({why, {}});
    phase_ = phase::cache_read;
    claim_action_ = action{};
    claim_action_.type = action::kind::send_statement;
    claim_action_.keep_reply = true;
    return statement_action::send_statement(true);
}

statement_action statement_operation::after_cached_read(const statement_input& in) {
    const auto note_read = [&](std::int64_t value) {
        auto& e = memory_.entry(d_.stock->name, d_.key);
        memory_.note_read(e, value, in_transaction_before_);
        e.refused = false;  // a new attempt starts with a read
        reserve_read_seen(ctx_.op.reserve, *d_.stock, d_.key, value);  // reserve: the last units go back
    };
    if (in.type == statement_input::kind::rebuilt) {
        if (!in.rebuilt_ok) return read_from_server(read_note::kind::refresh);  // the value does not fit the column
        report_.reads.push_back({read_note::kind::hit, {}});
        note_read(found_.value);
        return finish(statement_action::reply_rebuilt());
    }
    bool stored = false;
    if (in.kept_read) {
        const auto value = in.kept_read->value;
        note_read(value);
        // In a transaction: served from the kept template later, never kept as the key's value.
        if (!in_transaction_before_) {
            ctx_.cache->store(d_.stock->name, d_.key, ctx_.read->shape, in.kept_read, value, found_.generation,
                              asked_at_, sold_out_backoff_of(*d_.stock));
            stored = true;
            report_.reads.push_back({read_note::kind::stored, {}});
        }
    }
    if (!stored) end_refresh();
    return finish(statement_action::reply_kept());
}

void statement_operation::end_refresh() {
    if (!in_transaction_before_) ctx_.cache->end_refresh(d_.stock->name, d_.key);
}

std::optional<statement_action> statement_operation::ask_turn(const turn_request& t) {
    if (slots_.holds(t.rule, t.key)) return std::nullopt;  // its transaction's slot
    if (t.holds_row_lock || !slots_.empty()) {
        // Waiting now could close a cycle nobody detects: a holder of this key's slot waiting in
        // InnoDB for the row lock this transaction holds (its locking read), or for a slot this
        // transaction holds (another key). Go at once: a real deadlock is then InnoDB's to find.
        report_.admission.push_back({admission_note::kind::lock_held, t.rule, {}});
        return std::nullopt;
    }
    waiting_ = t;
    return statement_action::wait_for_turn();
}

statement_action statement_operation::after_main_turn() {
    // The deferred takes this statement sends first (defer_decrement: at COMMIT, or before a
    // statement on their table) wait for their keys' turns too. Whatever the gate answers (sold
    // out, timed out), the takes are sent: each is conditional, so the database has the last
    // word; the turn only orders them. Slots are held to the end of the transaction.
    phase_ = phase::deferred_turns;
    if (ctx_.gate != nullptr && d_.deferred != deferred_step::none && !memory_.deferred.empty() && ctx_.rules) {
        for (const auto& t : memory_.deferred) {
            if (t.reserved) continue;  // never sent: no turn
            if (d_.deferred == deferred_step::flush &&
                std::find(d_.flush_rules.begin(), d_.flush_rules.end(), t.rule) == d_.flush_rules.end())
                continue;
            const auto* rule = ctx_.rules->find_stock(t.rule);
            if (rule == nullptr || !rule->admission) continue;
            deferred_turns_.push_back(
                {rule->name, t.key, &*rule->admission, t.units, memory_.holds_row_lock(t.rule, t.key)});
        }
    }
    return next_deferred_turn();
}

statement_action statement_operation::next_deferred_turn() {
    while (next_turn_ < deferred_turns_.size())
        if (auto wait = ask_turn(deferred_turns_[next_turn_++])) return *wait;
    phase_ = phase::running;
    claim_action_ = claim_.start();
    return follow();
}

bool statement_operation::groups_takes() const {
    return ctx_.gate != nullptr && d_.stock && d_.stock->group_update && admission_applies() && claim_.groupable();
}

statement_action statement_operation::gather() {
    phase_ = phase::gathering;
    const auto& g = *d_.stock->group_update;
    // Followers already queue behind this leader (a herd): wait max_wait once for more to come, so
    // the batch is fuller; a leader alone in the queue goes at once (one take costs no wait).
    const auto behind = ctx_.gate->groupable_behind(leader_ticket_);
    if (g.max_wait.count() > 0 && behind > 0 && behind + 1 < g.max_batch) return statement_action::wait_group();
    return send_group_next();
}

statement_action statement_operation::send_group_next() {
    if (phase_ == phase::gathering) {
        // The batch: this take first, then the groupable waiters behind it in queue order.
        members_ = ctx_.gate->take_group(leader_ticket_, d_.stock->group_update->max_batch - 1);
        if (members_.empty()) return after_main_turn();  // alone: its own UPDATE, as without group_update
        members_settled_ = false;
        std::vector<std::int64_t> units{d_.units};
        for (const auto& m : members_) units.push_back(m.units);
        group_.emplace(std::move(units));
        phase_ = phase::grouping;
    }
    const auto b = group_->next();
    if (!b) return group_decided();
    auto sql = match::group_decrement(*d_.stock, d_.key_literals, b->units, b->takes,
                                      d_.schema.empty() ? std::string_view(database_) : std::string_view(d_.schema));
    if (!sql) {
        group_->on_error(er_unknown_error);
        return group_decided();
    }
    claim_action_ = action{};
    claim_action_.type = action::kind::send_sql;
    claim_action_.sql = std::move(*sql);
    return statement_action::send_sql();
}

statement_action statement_operation::group_decided() { return grouped_answer(decide_members().front(), true); }

std::vector<group_result> statement_operation::decide_members() {
    const auto& g = *group_;
    std::vector<group_result> results;
    std::uint32_t taken = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        group_result r;
        r.batch = static_cast<std::uint32_t>(g.size());
        r.leader_thread = ctx_.backend_thread;
        r.error_code = g.error_code();
        switch (g.of(i)) {
            case group_take::outcome::taken:
                r.what = admission::grouped_taken;
                ++taken;
                break;
            case group_take::outcome::sold_out: r.what = admission::grouped_sold_out; break;
            case group_take::outcome::undecided:
            case group_take::outcome::failed: r.what = admission::grouped_failed; break;
        }
        results.push_back(r);
    }
    report_.groups.push_back(
        {d_.stock->name, static_cast<std::uint32_t>(g.size()), taken, static_cast<std::uint32_t>(g.statements())});
    settle_members(results);
    // The key's queue learns what the batch learned, as from a take of its own.
    if (g.taken_units() > 0) ctx_.gate->note_available(d_.stock->name, d_.key);
    if (g.sold_out_units() > 0) ctx_.gate->note_sold_out(d_.stock->name, d_.key, g.sold_out_units());
    return results;
}

void statement_operation::settle_members(const std::vector<group_result>& results) {
    for (std::size_t i = 0; i < members_.size(); ++i) {
        const auto& m = members_[i];
        const auto& r = results[i + 1];
        // A member whose client went away after joining: its unit was taken as its own UPDATE would
        // have been; it waits in the ledger for a claim, as any committed take of the sidecar.
        if (!ctx_.gate->settle(m.id, r) && r.what == admission::grouped_taken)
            ledger_.add_take(d_.stock->name, d_.key, m.units, m.session);
    }
    members_settled_ = true;
}

statement_action statement_operation::grouped_answer(const group_result& r, bool leader) {
    admission_note note;
    note.what = admission_note::kind::grouped;
    note.rule = d_.stock->name;
    note.batch = r.batch;
    note.leader_thread = r.leader_thread;
    note.message = std::string(leader ? "led" : "joined") + " a batch of " + std::to_string(r.batch) + " takes";
    report_.admission.push_back(std::move(note));
    phase_ = phase::running;
    if (r.what == admission::grouped_taken) {
        claim_action_ = claim_.answer_grouped_take();
        return follow(false);  // the gate heard from the leader already
    }
    if (r.what == admission::grouped_sold_out) {
        claim_action_ = claim_.answer_sold_out();
        return follow(false);
    }
    const auto code = r.error_code ? r.error_code : er_unknown_error;
    claim_action_ = action{};
    claim_action_.type = action::kind::answer;
    claim_action_.answer = {rules::answer::kind::error, code, "HY000",
                            code == cr_server_lost
                                ? "claimguard: the connection that sent the grouped take of key " + describe_key(d_) +
                                      " was lost; whether it took the stock is unknown"
                                : "claimguard: the grouped take of key " + describe_key(d_) +
                                      " failed on the database (error " + std::to_string(code) +
                                      "); nothing was taken; try again"};
    claim_action_.status = ctx_.op.status;
    return finish(statement_action::answer());
}

statement_action statement_operation::not_admitted(admission what) {
    const auto& rule = d_.stock->name;
    if (what == admission::sold_out) {
        report_.admission.push_back({admission_note::kind::sold_out, rule, {}});
        // Not noted in the gate: the key is sold out there already (a note would keep it so).
        phase_ = phase::running;
        claim_action_ = claim_.answer_sold_out();
        return follow(false);
    }
    const auto& limits = *d_.stock->admission;
    admission_note note;
    note.rule = rule;
    if (what == admission::queue_full) {
        note.what = admission_note::kind::queue_full;
        note.message = "claimguard: the queue for key " + describe_key(d_) + " of rule " + rule + " is full (" +
                       std::to_string(limits.max_queue) + " statements wait); try again";
    } else {
        note.what = admission_note::kind::timed_out;
        note.message = "claimguard: waited more than queue_timeout (" + format_ms(limits.queue_timeout) + ") for key " +
                       describe_key(d_) + " of rule " + rule + "; try again";
    }
    claim_action_ = action{};
    claim_action_.type = action::kind::answer;
    claim_action_.answer = {rules::answer::kind::error, er_lock_wait_timeout, er_lock_wait_timeout_state, note.message};
    claim_action_.status = ctx_.op.status;
    report_.admission.push_back(std::move(note));
    return finish(statement_action::answer());
}

statement_action statement_operation::follow(bool note_gate) {
    const bool gate_follows = note_gate && ctx_.gate != nullptr && d_.stock && d_.stock->admission && !d_.observe;
    const bool cache_follows = ctx_.cache != nullptr && d_.stock && d_.stock->read_cache;
    for (auto e : claim_.take_events()) {
        report_.events.push_back(e);
        if (cache_follows) read_cache_follows(e);
        // What the database said about the key: sold out, or a take or restock went through.
        if (!gate_follows) continue;
        if (e == event::exhausted)
            ctx_.gate->note_sold_out(d_.stock->name, d_.key, d_.units);
        else if (e == event::took || e == event::tracked || e == event::restocked || e == event::cancelled_returned)
            ctx_.gate->note_available(d_.stock->name, d_.key);
        if (e == event::cancelled_returned)  // a cancellation by row id: the stock keys its rows named
            for (const auto& key : claim_.cancelled_stock_keys()) ctx_.gate->note_available(d_.stock->name, key);
    }
    const auto& a = claim_action_;
    if (!a.final()) {
        if (a.type == action::kind::redis_acquire) return statement_action::redis_acquire();
        return a.type == action::kind::send_sql ? statement_action::send_sql() : statement_action::send_statement();
    }
    // The Redis key of a claim that did not go in goes at once (before the answer: the user's
    // retry must not hear "already claimed"); one inserted in a transaction goes if the
    // transaction does not commit; one committed in autocommit is marked so.
    settle_count_ = settle_next_ = 0;
    if (claim_.redis_locked() && ctx_.op.redis_available) {
        redis_hold key{d_.redis_key, token_, d_.claim->redis->ttl};
        if (claim_.redis_keep_for_transaction()) {
            transaction_.hold(std::move(key));
        } else if (claim_.redis_release_now()) {
            std::vector<redis_hold> keys;
            keys.push_back(std::move(key));
            settle(statement_action::release(true), std::move(keys));
        } else if (claim_.redis_commit_now()) {
            std::vector<redis_hold> keys;
            keys.push_back(std::move(key));
            settle(statement_action::commit(), std::move(keys));
        }
    }
    if (claim_.cancel_release() && ctx_.op.redis_available && d_.claim && d_.claim->redis) {
        // A cancelled claim's key: deleted if a committed claim holds it, whoever's (no token), so the
        // user may claim again as the unique index now allows; before the answer, as for a failed claim.
        std::vector<redis_hold> keys;
        keys.push_back({d_.redis_key, {}, d_.claim->redis->ttl});
        settle(statement_action::release(true), std::move(keys));
    }
    if (!claim_.cancel_release_keys().empty() && ctx_.op.redis_available && d_.claim && d_.claim->redis) {
        // ... or the keys of the claim rows a cancellation by row id read before deleting them.
        std::vector<redis_hold> keys;
        for (const auto& k : claim_.cancel_release_keys()) keys.push_back({k, {}, d_.claim->redis->ttl});
        settle(statement_action::release(true), std::move(keys));
    }
    if (!row_keys_.empty() && ctx_.op.redis_available) {
        // A claim of several rows: its keys as the single claim's above, all rows together (a statement
        // that went in partly, INSERT IGNORE's skipped rows, lets them all go: Redis only saves work).
        auto keys = std::exchange(row_keys_, {});
        if (!claim_.rows_inserted())
            settle(statement_action::release(true), std::move(keys));
        else if (claim_.rows_in_transaction())
            for (auto& k : keys) transaction_.hold(std::move(k));
        else
            settle(statement_action::commit(), std::move(keys));
    }
    statement_action final_action;
    switch (a.type) {
        case action::kind::reply_client: final_action = statement_action::reply_kept(); break;
        case action::kind::answer:
            // A COMMIT that became a ROLLBACK: the transaction's claims' keys go.
            if (d_.what == verdict::rollback_instead || claim_.rolled_back())
                if (auto keys = transaction_.release_all(); !keys.empty())
                    settle(statement_action::release(false), std::move(keys));
            final_action = statement_action::answer();
            break;
        default: final_action = statement_action::relay(); break;
    }
    settle(final_action);
    phase_ = phase::settling;
    return next_queued();
}

void statement_operation::read_cache_follows(event e) {
    auto& cache = *ctx_.cache;
    const auto& rule = *d_.stock;
    switch (e) {
        case event::took:
        case event::tracked:
            // Committed at once in autocommit; in a transaction it may still roll back, so the
            // next read asks the server.
            // A write that said more than the key (AND version = ?) may have changed other
            // columns the kept reply shows (the version an optimistic app reads next).
            if ((status_ & protocol::status::in_trans) || d_.may_conflict)
                cache.invalidate(rule.name, d_.key);
            else
                cache.on_take(rule.name, d_.key, d_.units);
            break;
        case event::exhausted: cache.on_exhausted(rule.name, d_.key, rule.floor); break;
        // The app's own condition did not hold: what it read was stale (another sidecar's
        // write); its retry reads from the server.
        case event::conflict:
        case event::restocked:
        case event::compensated:
        case event::compensation_failed:
        case event::cancelled_returned:
        case event::claimed_by_trigger:  // the trigger changed the counter where the cache did not see it
        case event::trigger_exhausted:
        case event::trigger_mismatch:
            cache.invalidate(rule.name, d_.key);
            for (const auto& row : d_.rows) cache.invalidate(rule.name, row.key);  // a claim of several rows
            for (const auto& key : claim_.cancelled_stock_keys()) cache.invalidate(rule.name, key);  // by row id
            break;
        default: break;
    }
}

void statement_operation::settle(statement_action a, std::vector<redis_hold> keys) {
    auto& s = settling_[settle_count_++];  // at most max_settle_steps: see follow() and io_lost
    s.act = a;
    s.keys = std::move(keys);
}

statement_action statement_operation::next_queued() {
    auto& s = settling_[settle_next_++];
    keys_ = std::move(s.keys);
    if (s.act.final()) return finish(s.act);
    return s.act;
}

statement_action statement_operation::finish(statement_action a) {
    phase_ = phase::done;
    settle_count_ = settle_next_ = 0;
    waiting_.reset();
    return a;
}

}  // namespace claimguard::engine
