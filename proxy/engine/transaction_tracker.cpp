#include "transaction_tracker.hpp"

#include "proxy/protocol/capabilities.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::engine {

namespace match = rules::match;


void transaction_tracker::expect(const match::match_result& facts) {
    using ev = match::transaction_event;
    for (const auto& f : facts.facts) {
        const auto* t = std::get_if<match::transaction_boundary>(&f);
        if (t == nullptr) continue;
        switch (t->event) {
            case ev::commit:
            case ev::begin:
            case ev::autocommit_on: ends_transaction_ = true; break;
            case ev::rollback:
                ends_transaction_ = true;
                rollback_ = true;
                break;
            case ev::xa_commit:
                ends_transaction_ = true;
                xa_ = xa_step::end;
                break;
            case ev::xa_rollback:
                ends_transaction_ = true;
                rollback_ = true;
                xa_ = xa_step::end;
                break;
            case ev::xa_prepare: xa_ = xa_step::prepare; break;
            case ev::savepoint:
            case ev::rollback_to_savepoint:
            case ev::release_savepoint:
                savepoint_ = t->event == ev::savepoint               ? savepoint_step::set
                             : t->event == ev::rollback_to_savepoint ? savepoint_step::rollback_to
                                                                     : savepoint_step::release;
                savepoint_name_ = rules::sql::unquote_identifier(t->savepoint);
                break;
            default: break;
        }
    }
}

void transaction_tracker::apply_savepoint_step(session_memory& memory, take_ledger& ledger, std::uint64_t session,
                                               std::vector<redis_hold>& release) {
    switch (savepoint_) {
        case savepoint_step::none: return;
        case savepoint_step::set: memory.set_savepoint(savepoint_name_, held_.size()); return;
        case savepoint_step::release: memory.release_savepoint(savepoint_name_); return;
        case savepoint_step::rollback_to: {
            std::vector<session_memory::returned_take> returned;
            const auto keys = memory.rollback_to_savepoint(savepoint_name_, returned);
            // Takes borrowed from the ledger by claims the rollback undid back them no more.
            for (const auto& t : returned) ledger.return_take(t.rule, t.key, t.units, session);
            // The claims inserted since the savepoint are gone: their Redis keys too.
            if (keys && *keys < held_.size()) {
                release.insert(release.end(),
                               std::make_move_iterator(held_.begin() + static_cast<std::ptrdiff_t>(*keys)),
                               std::make_move_iterator(held_.end()));
                held_.resize(*keys);
            }
            return;
        }
    }
}

transaction_tracker::end_steps transaction_tracker::finish(const outcome& o, session_memory& memory,
                                                           take_ledger& ledger, std::uint64_t session) {
    end_steps out;
    if (!o.failed) apply_savepoint_step(memory, ledger, session, out.release);
    const bool open_after = (o.status & protocol::status::in_trans) != 0;
    // The status flags say it ended (a COMMIT, a deadlock, an implicit commit); a COMMIT, ROLLBACK
    // or BEGIN that succeeded ended it too (BEGIN inside a transaction commits it and opens the next,
    // so the flags say "in transaction" before and after).
    bool ended = o.was_in_transaction && !open_after;
    if (xa_ == xa_step::prepare) {
        // XA PREPARE: the transaction leaves the session (the flags may say it ended); it commits or
        // rolls back only with XA COMMIT / XA ROLLBACK.
        if (!o.failed) xa_prepared_ = true;
        ended = false;
    } else if (xa_ == xa_step::end) {
        ended = ended || xa_prepared_;
        if (!o.failed) xa_prepared_ = false;
    }
    const bool by_statement = ends_transaction_ && !o.failed && xa_ != xa_step::prepare;
    if (ended || by_statement) {
        out.ended = true;
        out.committed = !(rollback_ || o.failed);
        out.dropped = end_transaction(memory, ledger, out.committed, session);
        // Committed claims keep their keys until their TTL, marked committed; the others' go now.
        auto& to = out.committed ? out.committed_keys : out.release;
        to.insert(to.end(), std::make_move_iterator(held_.begin()), std::make_move_iterator(held_.end()));
        held_.clear();
    }
    ends_transaction_ = false;
    rollback_ = false;
    savepoint_ = savepoint_step::none;
    savepoint_name_.clear();
    xa_ = xa_step::none;
    return out;
}

}  // namespace claimguard::engine
