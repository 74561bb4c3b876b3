// The per-key admission gate: slots, FIFO waiters with deadlines, sold-out answers.
#include "admission_gate.hpp"

#include <algorithm>

namespace claimguard::engine {

std::string_view admission_name(admission a) {
    switch (a) {
        case admission::admitted: return "admitted";
        case admission::queued: return "queued";
        case admission::sold_out: return "sold-out";
        case admission::timed_out: return "timeout";
        case admission::queue_full: return "queue-full";
        case admission::bypass: return "bypass";
        case admission::grouped: return "grouped";
        case admission::grouped_taken: return "grouped-taken";
        case admission::grouped_sold_out: return "grouped-sold-out";
        case admission::grouped_failed: return "grouped-failed";
    }
    return "?";
}

namespace {
void call_all(std::vector<admission_gate::wake_fn>& woken) {
    for (auto& w : woken)
        if (w) w();
}
}  // namespace

admission_gate::entry_result admission_gate::enter(const std::string& rule, const key_tuple& key,
                                                   const rules::admission_limits& limits, std::int64_t units,
                                                   wake_fn wake, clock::time_point now) {
    return enter_waiter(rule, key, limits, {0, units, {}, std::move(wake), false, 0}, now);
}

admission_gate::entry_result admission_gate::enter_groupable(const std::string& rule, const key_tuple& key,
                                                             const rules::admission_limits& limits, std::int64_t units,
                                                             std::uint64_t session, wake_fn wake,
                                                             clock::time_point now) {
    return enter_waiter(rule, key, limits, {0, units, {}, std::move(wake), true, session}, now);
}

admission_gate::entry_result admission_gate::enter_waiter(const std::string& rule, const key_tuple& key,
                                                          const rules::admission_limits& limits, waiter w,
                                                          clock::time_point now) {
    const auto units = w.units;
    std::vector<wake_fn> woken;
    entry_result out;
    {
        std::lock_guard lock(mutex_);
        auto k = key_type(rule, key);
        auto it = slots_.find(k);
        if (it == slots_.end()) {
            if (slots_.size() >= max_keys) {
                for (auto i = slots_.begin(); i != slots_.end();) forget_if_idle(i++, now);
                if (slots_.size() >= max_keys) return out;  // bypass: every key tracked is busy
            }
            it = slots_.emplace(std::move(k), slot{}).first;
        }
        slot& s = it->second;
        s.max_in_flight = std::max<std::uint32_t>(1, limits.max_in_flight);  // a reload may change it
        if (now < s.sold_out_until && units >= s.sold_out_units) {
            out.what = admission::sold_out;
            return out;
        }
        if (s.in_flight < s.max_in_flight && s.queue.empty()) {
            ++s.in_flight;
            out.what = admission::admitted;
            out.id = next_ticket_++;
            tickets_.emplace(out.id, ticket_state{it, admission::admitted, {}, {}});
            return out;
        }
        if (s.queue.size() >= limits.max_queue) {
            out.what = admission::queue_full;
            return out;
        }
        out.what = admission::queued;
        out.id = next_ticket_++;
        w.id = out.id;
        w.deadline = now + limits.queue_timeout;
        s.queue.push_back(std::move(w));
        ++queued_;
        tickets_.emplace(out.id, ticket_state{it, admission::queued, {}, {}});
        grant(s, now, woken);  // a reload that raised max_in_flight frees slots only here
    }
    call_all(woken);
    return out;
}

void admission_gate::grant(slot& s, clock::time_point now, std::vector<wake_fn>& woken) {
    while (s.in_flight < s.max_in_flight && !s.queue.empty()) {
        auto w = std::move(s.queue.front());
        s.queue.pop_front();
        --queued_;
        auto t = tickets_.find(w.id);
        if (t == tickets_.end()) continue;
        if (now >= w.deadline) {
            t->second.what = admission::timed_out;  // its timer is about to fire: no slot for it
        } else {
            t->second.what = admission::admitted;
            ++s.in_flight;
        }
        woken.push_back(std::move(w.wake));
    }
}

void admission_gate::forget_if_idle(std::map<key_type, slot>::iterator it, clock::time_point now) {
    const slot& s = it->second;
    if (s.in_flight != 0 || !s.queue.empty() || now < s.sold_out_until) return;
    // Tickets still pointing here are answered ones (sold_out, timed_out): they never use the key.
    slots_.erase(it);
}

admission admission_gate::resolve(ticket id, clock::time_point now) {
    group_result ignored;
    return resolve(id, ignored, now);
}

admission admission_gate::resolve(ticket id, group_result& result, clock::time_point now) {
    std::vector<wake_fn> woken;
    admission what = admission::timed_out;
    {
        std::lock_guard lock(mutex_);
        auto t = tickets_.find(id);
        if (t == tickets_.end()) return admission::timed_out;
        what = t->second.what;
        if (what == admission::admitted || what == admission::grouped) return what;
        if (what != admission::queued) {
            result = t->second.result;
            tickets_.erase(t);
            return what;
        }
        auto key = t->second.key;
        slot& s = key->second;
        auto w = std::find_if(s.queue.begin(), s.queue.end(), [&](const waiter& x) { return x.id == id; });
        if (w == s.queue.end() || now < w->deadline) return admission::queued;
        s.queue.erase(w);
        --queued_;
        tickets_.erase(t);
        what = admission::timed_out;
        grant(s, now, woken);
        forget_if_idle(key, now);
    }
    call_all(woken);
    return what;
}

void admission_gate::release_locked(ticket id, clock::time_point now, std::vector<wake_fn>& woken) {
    auto t = tickets_.find(id);
    if (t == tickets_.end()) return;
    auto key = t->second.key;
    const auto what = t->second.what;
    tickets_.erase(t);
    if (what == admission::admitted) {
        slot& s = key->second;
        if (s.in_flight > 0) --s.in_flight;
        grant(s, now, woken);
        forget_if_idle(key, now);
    } else if (what == admission::queued) {
        slot& s = key->second;
        auto w = std::find_if(s.queue.begin(), s.queue.end(), [&](const waiter& x) { return x.id == id; });
        if (w != s.queue.end()) {
            s.queue.erase(w);
            --queued_;
        }
        grant(s, now, woken);
        forget_if_idle(key, now);
    }
}

void admission_gate::release(ticket id, clock::time_point now) {
    std::vector<wake_fn> woken;
    {
        std::lock_guard lock(mutex_);
        release_locked(id, now, woken);
    }
    call_all(woken);
}

void admission_gate::abandon(ticket id, clock::time_point now) { release(id, now); }

std::size_t admission_gate::groupable_behind(ticket leader) const {
    std::lock_guard lock(mutex_);
    auto t = tickets_.find(leader);
    if (t == tickets_.end() || t->second.what != admission::admitted) return 0;
    std::size_t n = 0;
    for (const auto& w : t->second.key->second.queue) {
        if (!w.groupable) break;
        ++n;
    }
    return n;
}

std::vector<admission_gate::member> admission_gate::take_group(ticket leader, std::size_t most, clock::time_point now) {
    std::vector<member> out;
    std::vector<wake_fn> woken;
    {
        std::lock_guard lock(mutex_);
        auto t = tickets_.find(leader);
        if (t == tickets_.end() || t->second.what != admission::admitted) return out;
        slot& s = t->second.key->second;
        while (out.size() < most && !s.queue.empty() && s.queue.front().groupable) {
            auto w = std::move(s.queue.front());
            s.queue.pop_front();
            --queued_;
            auto m = tickets_.find(w.id);
            if (m == tickets_.end()) continue;
            if (now >= w.deadline) {  // as grant(): its timer is about to fire
                m->second.what = admission::timed_out;
                woken.push_back(std::move(w.wake));
                continue;
            }
            m->second.what = admission::grouped;
            m->second.wake = std::move(w.wake);
            out.push_back({w.id, w.units, w.session});
        }
    }
    call_all(woken);
    return out;
}

bool admission_gate::settle(ticket id, const group_result& result) {
    wake_fn wake;
    {
        std::lock_guard lock(mutex_);
        auto t = tickets_.find(id);
        if (t == tickets_.end() || t->second.what != admission::grouped) return false;
        t->second.what = result.what;
        t->second.result = result;
        wake = std::move(t->second.wake);
    }
    if (wake) wake();
    return true;
}

void admission_gate::note_sold_out(const std::string& rule, const key_tuple& key, std::int64_t units,
                                   clock::time_point now) {
    std::vector<wake_fn> woken;
    {
        std::lock_guard lock(mutex_);
        auto it = slots_.find(key_type(rule, key));
        if (it == slots_.end()) {
            if (slots_.size() >= max_keys) return;
            it = slots_.emplace(key_type(rule, key), slot{}).first;
        }
        slot& s = it->second;
        s.sold_out_units = now < s.sold_out_until ? std::min(s.sold_out_units, units) : units;
        s.sold_out_until = now + sold_out_recheck;
        std::deque<waiter> kept;
        for (auto& w : s.queue) {
            if (w.units < s.sold_out_units) {
                kept.push_back(std::move(w));
                continue;
            }
            if (auto t = tickets_.find(w.id); t != tickets_.end()) t->second.what = admission::sold_out;
            woken.push_back(std::move(w.wake));
            --queued_;
        }
        s.queue = std::move(kept);
    }
    call_all(woken);
}

void admission_gate::note_available(const std::string& rule, const key_tuple& key) {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key_type(rule, key));
    if (it == slots_.end()) return;
    it->second.sold_out_until = {};
    if (it->second.in_flight == 0 && it->second.queue.empty()) slots_.erase(it);
}

void admission_gate::note_available_rule(const std::string& rule) {
    std::lock_guard lock(mutex_);
    for (auto it = slots_.lower_bound(key_type(rule, {})); it != slots_.end() && it->first.first == rule;) {
        it->second.sold_out_until = {};
        if (it->second.in_flight == 0 && it->second.queue.empty())
            it = slots_.erase(it);
        else
            ++it;
    }
}

std::size_t admission_gate::queued() const {
    std::lock_guard lock(mutex_);
    return queued_;
}

std::size_t admission_gate::queued(const std::string& rule, const key_tuple& key) const {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key_type(rule, key));
    return it == slots_.end() ? 0 : it->second.queue.size();
}

std::size_t admission_gate::in_flight(const std::string& rule, const key_tuple& key) const {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key_type(rule, key));
    return it == slots_.end() ? 0 : it->second.in_flight;
}

std::size_t admission_gate::keys() const {
    std::lock_guard lock(mutex_);
    return slots_.size();
}

std::size_t admission_gate::tickets() const {
    std::lock_guard lock(mutex_);
    return tickets_.size();
}

}  // namespace claimguard::engine
