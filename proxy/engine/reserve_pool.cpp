// Reserved stock's units per key (reserve:): serving takes, refills planned and settled, give-backs.
#include "reserve_pool.hpp"

#include <algorithm>

namespace claimguard::engine {

bool reserve_unchanged(const rules::stock_rule& then, const rules::stock_rule& now) {
    return then.name == now.name && then.table.schema == now.table.schema && then.table.name == now.table.name &&
           then.key_columns == now.key_columns && then.counter_column == now.counter_column &&
           then.floor == now.floor && then.units == now.units && then.reserve && now.reserve &&
           then.reserve->block == now.reserve->block && then.reserve->idle == now.reserve->idle;
}

std::int64_t reserve_pool::refill_size(std::int64_t block, std::int64_t units, std::int64_t left) {
    if (units <= 0 || left < units) return 0;
    std::int64_t n = std::min(block, left / shrink_divisor);
    n = std::max(n, units);  // one take at least, when it fits
    n = std::min(n, left);   // never more than is left
    return n - n % units;    // whole takes: a remainder would only wait to go back
}

reserve_pool::serve reserve_pool::take(const std::string& rule, const key_tuple& key, std::int64_t units,
                                       clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    if (it == entries_.end()) return serve::empty;
    auto& e = it->second;
    if (e.units >= units) {
        e.units -= units;
        e.handed += units;
        e.last_used = now;
        ++totals_.served;
        return serve::served;
    }
    return now < e.sold_out_until ? serve::sold_out : serve::empty;
}

void reserve_pool::give_back(const std::string& rule, const key_tuple& key, std::int64_t units, clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    if (it == entries_.end()) return;  // never happens: an entry with units handed out stays
    auto& e = it->second;
    const auto n = std::min(units, e.handed);
    e.handed -= n;
    e.units += n;
    e.last_used = now;
    e.sold_out_until = {};  // a unit is here again
    totals_.returned += static_cast<std::uint64_t>(n);
}

void reserve_pool::consumed(const std::string& rule, const key_tuple& key, std::int64_t units) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    if (it == entries_.end()) return;
    it->second.handed -= std::min(units, it->second.handed);
}

std::optional<reserve_refill> reserve_pool::begin_refill(reserve_target target, const key_tuple& key,
                                                         std::int64_t units, clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto& e = entries_[key_type(target.rule.name, key)];
    if (e.units >= units || e.refilling || now < e.sold_out_until || now < e.failed_until) return std::nullopt;
    const std::int64_t block = target.rule.reserve ? target.rule.reserve->block : 0;
    const std::int64_t room = block - e.handed - e.units;
    if (room < units) return std::nullopt;
    e.refilling = true;
    e.target = target;  // the rule as the take saw it: its idle, its table
    e.last_used = now;
    return reserve_refill{std::move(target), key, units, room};
}

void reserve_pool::end_refill(const std::string& rule, const key_tuple& key, std::int64_t taken, bool failed,
                              clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto& e = entries_[key_type(rule, key)];
    e.refilling = false;
    e.last_used = now;
    if (taken > 0) {
        e.units += taken;
        e.sold_out_until = {};
        ++totals_.refills;
    } else if (!failed) {
        ++totals_.empty_refills;
        if (e.units <= 0) e.sold_out_until = now + sold_out_hold;
    } else {
        e.failed_until = now + failure_backoff;
    }
}

bool reserve_pool::refilling(const std::string& rule, const key_tuple& key) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    return it != entries_.end() && it->second.refilling;
}

void reserve_pool::row_seen_empty(const std::string& rule, const key_tuple& key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    if (it != entries_.end() && it->second.units > 0) it->second.release_due = true;
}

void reserve_pool::give_back_refused(const reserve_give_back& g, clock::time_point now) {
    if (g.units <= 0) return;
    std::lock_guard lock(mutex_);
    auto& e = entries_[key_type(g.target.rule.name, g.key)];
    if (!e.target.rule.reserve) e.target = g.target;  // the entry went meanwhile: the rule as it was
    e.units += g.units;
    e.last_used = now;  // tried again after `idle`
    e.sold_out_until = {};
    totals_.given_back -= std::min(totals_.given_back, static_cast<std::uint64_t>(g.units));
}

reserve_give_back reserve_pool::release(const key_type& k, entry& e) {
    reserve_give_back g{e.target, k.second, e.units};
    totals_.given_back += static_cast<std::uint64_t>(e.units);
    e.units = 0;
    e.release_due = false;
    return g;
}

std::vector<reserve_give_back> reserve_pool::take_idle(clock::time_point now) {
    std::lock_guard lock(mutex_);
    std::vector<reserve_give_back> out;
    for (auto it = entries_.begin(); it != entries_.end();) {
        auto& e = it->second;
        const bool idle = e.target.rule.reserve && now - e.last_used >= e.target.rule.reserve->idle;
        if ((idle || e.release_due) && e.units > 0) out.push_back(release(it->first, e));
        e.release_due = false;
        // Nothing left of a key idle this long: its entry goes (the map holds the keys in use).
        if (idle && e.units == 0 && e.handed == 0 && !e.refilling && now >= e.sold_out_until)
            it = entries_.erase(it);
        else
            ++it;
    }
    return out;
}

reserve_pool::totals reserve_pool::stats() const {
    std::lock_guard lock(mutex_);
    totals t = totals_;
    for (const auto& [k, e] : entries_) {
        t.pooled += e.units;
        t.handed += e.handed;
    }
    return t;
}

std::int64_t reserve_pool::pooled(const std::string& rule, const key_tuple& key) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key_type(rule, key));
    return it == entries_.end() ? 0 : it->second.units;
}

}  // namespace claimguard::engine
