// The sidecar's read cache: counter values and reply templates per stock rule and key.
#include "read_cache.hpp"

namespace claimguard::engine {

std::string_view read_cache_bypass(const rules::match::counter_read& r, const key_tuple& key,
                                   const session_memory& memory, const read_situation& s) {
    if (s.observe) return "observe mode changes nothing on the wire";
    if (r.lock != rules::sql::lock_clause::none) return "a locking read (FOR UPDATE, LOCK IN SHARE MODE)";
    if (!r.plain) return "not a plain read (a function, a modifier, the version column, or more than the key in WHERE)";
    if (s.cursor) return "a cursor";
    if (!s.autocommit_or_transaction) return "autocommit is off: the read opens a transaction";
    if (const auto* e = memory.find(r.rule->name, key))
        if (!e->transaction_takes.empty() || !e->borrowed.empty() || e->claims_ahead != 0 || !e->credits.empty())
            return "the transaction already changed this key";
    return {};
}

read_cache::value_slot& read_cache::value_of(const std::string& rule, const key_tuple& key) {
    auto k = std::make_pair(rule, key);
    auto it = values_.find(k);
    if (it != values_.end()) return it->second;
    if (values_.size() >= max_keys) {
        values_.erase(values_.begin());
        ++evictions_;
    }
    auto& slot = values_[std::move(k)];
    slot.generation = next_generation_++;
    return slot;
}

std::chrono::milliseconds read_cache::sold_out_age(std::chrono::milliseconds ttl, const sold_out_backoff& sold_out,
                                                   unsigned refreshes_sold_out) {
    auto age = ttl;
    for (unsigned i = 0; i < refreshes_sold_out && age < sold_out.max; ++i) age *= 2;
    return std::max(ttl, std::min(age, sold_out.max));
}

read_cache::lookup read_cache::find(const std::string& rule, const key_tuple& key, const std::string& shape,
                                    std::chrono::milliseconds ttl, clock::time_point now, bool may_refresh,
                                    std::chrono::milliseconds max_wait, const sold_out_backoff& sold_out) {
    std::lock_guard lock(mutex_);
    lookup out;
    auto& v = value_of(rule, key);
    out.generation = v.generation;
    auto t = templates_.find(std::make_pair(std::make_pair(rule, key), shape));
    if (t == templates_.end()) return out;  // miss
    out.what = outcome::refresh;
    // A sold-out key is asked for less and less often (read_cache_sold_out): after a sale every
    // attempt still reads it, and each refresh would be a statement the database runs for nothing.
    const auto age = v.valid && v.value <= sold_out.floor ? sold_out_age(ttl, sold_out, v.refreshes_sold_out) : ttl;
    if (!v.valid || now - v.fetched >= age || now - t->second.fetched >= age) {
        if (v.refreshing && now - *v.refreshing < max_wait) {
            out.what = outcome::wait;
        } else if (may_refresh) {
            v.refreshing = now;
        }
        return out;
    }
    out.what = outcome::hit;
    out.reply = t->second.reply;
    out.value = v.value;
    return out;
}

void read_cache::store(const std::string& rule, const key_tuple& key, const std::string& shape,
                       std::shared_ptr<const protocol::counter_reply> reply, std::int64_t value,
                       std::uint64_t generation, clock::time_point asked, const sold_out_backoff& sold_out) {
    std::lock_guard lock(mutex_);
    auto& v = value_of(rule, key);
    v.refreshing.reset();
    if (v.generation == generation) {
        // Sold out before and still sold out: the next refresh waits twice as long (up to the bound).
        const bool still_sold_out = v.valid && v.value <= sold_out.floor && value <= sold_out.floor;
        v.refreshes_sold_out = still_sold_out ? std::min(v.refreshes_sold_out + 1, max_sold_out_doublings) : 0;
        v.value = value;
        v.valid = true;
        v.fetched = asked;
        v.generation = next_generation_++;  // a concurrent read that was sent earlier does not overwrite it
    }
    if (!reply || reply->size_bytes() > max_template_bytes) return;
    auto k = std::make_pair(std::make_pair(rule, key), shape);
    auto it = templates_.find(k);
    if (it == templates_.end()) {
        if (templates_.size() >= max_templates) {
            templates_.erase(templates_.begin());
            ++evictions_;
        }
        it = templates_.emplace(std::move(k), template_slot{}).first;
    }
    it->second.reply = std::move(reply);
    it->second.fetched = asked;
}

void read_cache::end_refresh(const std::string& rule, const key_tuple& key) {
    std::lock_guard lock(mutex_);
    auto it = values_.find(std::make_pair(rule, key));
    if (it != values_.end()) it->second.refreshing.reset();
}

void read_cache::on_take(const std::string& rule, const key_tuple& key, std::int64_t units) {
    std::lock_guard lock(mutex_);
    auto it = values_.find(std::make_pair(rule, key));
    if (it == values_.end()) return;
    it->second.value -= units;
    it->second.refreshes_sold_out = 0;  // it had stock: whatever it finds next starts from the TTL
    it->second.generation = next_generation_++;
}

void read_cache::on_exhausted(const std::string& rule, const key_tuple& key, std::int64_t floor,
                              clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto& v = value_of(rule, key);
    if (!v.valid || v.value > floor) v.refreshes_sold_out = 0;  // newly sold out: its backoff starts at the TTL
    v.value = floor;
    v.valid = true;
    v.fetched = now;  // the server just said so
    v.generation = next_generation_++;
}

void read_cache::invalidate(const std::string& rule, const key_tuple& key) {
    std::lock_guard lock(mutex_);
    auto it = values_.find(std::make_pair(rule, key));
    if (it == values_.end()) return;
    it->second.valid = false;
    it->second.refreshes_sold_out = 0;
    it->second.generation = next_generation_++;
}

void read_cache::invalidate_rule(const std::string& rule) {
    std::lock_guard lock(mutex_);
    for (auto it = values_.lower_bound(key_id(rule, {})); it != values_.end() && it->first.first == rule; ++it) {
        it->second.valid = false;
        it->second.refreshes_sold_out = 0;
        it->second.generation = next_generation_++;
    }
}

std::size_t read_cache::keys() const {
    std::lock_guard lock(mutex_);
    return values_.size();
}

std::size_t read_cache::templates() const {
    std::lock_guard lock(mutex_);
    return templates_.size();
}

std::uint64_t read_cache::evictions() const {
    std::lock_guard lock(mutex_);
    return evictions_;
}

}  // namespace claimguard::engine
