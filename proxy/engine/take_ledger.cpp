// The sidecar's ledger of committed takes and give-back credits.
#include "take_ledger.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

namespace claimguard::engine {

namespace {

// Removes and returns the oldest entry of `session`, else the oldest of any session.
std::optional<take_ledger::take> pop_preferring(std::deque<take_ledger::take>& q, std::uint64_t session,
                                                const std::function<bool(const take_ledger::take&)>& fits) {
    auto own = std::find_if(q.begin(), q.end(), [&](const auto& t) { return t.session == session && fits(t); });
    auto it = own != q.end() ? own : std::find_if(q.begin(), q.end(), fits);
    if (it == q.end()) return std::nullopt;
    auto t = *it;
    q.erase(it);
    return t;
}

}  // namespace

take_ledger::slot* take_ledger::find_or_add(const std::string& rule, const key_tuple& key) {
    auto k = std::make_pair(rule, key);
    auto it = slots_.find(k);
    if (it != slots_.end()) return &it->second;
    if (slots_.size() >= max_keys) {
        // Full: drop the first key's bookkeeping (its takes stay taken; counted and reported).
        for (const auto& t : slots_.begin()->second.takes) drop(slots_.begin()->first, t, clock::now());
        slots_.erase(slots_.begin());
    }
    return &slots_[std::move(k)];
}

void take_ledger::drop(const std::pair<std::string, key_tuple>& k, const take& t, clock::time_point now) {
    ++dropped_;
    if (unreported_.size() < max_reported)
        unreported_.push_back({k.first, k.second, t.units, t.session,
                               std::chrono::duration_cast<std::chrono::seconds>(now - t.at)});
}

void take_ledger::expire(const std::pair<std::string, key_tuple>& k, slot& s, clock::time_point now) {
    while (!s.takes.empty() && now - s.takes.front().at > take_lifetime) {
        drop(k, s.takes.front(), now);
        s.takes.pop_front();
    }
    while (!s.credits.empty() && now - s.credits.front().at > credit_lifetime) s.credits.pop_front();
}

void take_ledger::add_take(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                           clock::time_point now) {
    if (units <= 0) return;
    std::lock_guard lock(mutex_);
    slot* s = find_or_add(rule, key);
    const auto k = std::make_pair(rule, key);
    expire(k, *s, now);
    if (s->takes.size() >= max_takes_per_key) {
        drop(k, s->takes.front(), now);
        s->takes.pop_front();
    }
    s->takes.push_back({units, session, now});
}

std::optional<std::int64_t> take_ledger::pop_take(const std::string& rule, const key_tuple& key,
                                                  std::uint64_t session, clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(std::make_pair(rule, key));
    if (it == slots_.end()) return std::nullopt;
    expire(it->first, it->second, now);
    auto t = pop_preferring(it->second.takes, session, [](const take&) { return true; });
    if (!t) return std::nullopt;
    return t->units;
}

void take_ledger::return_take(const std::string& rule, const key_tuple& key, std::int64_t units,
                              std::uint64_t session, clock::time_point now) {
    add_take(rule, key, units, session, now);
}

void take_ledger::add_credit(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                             clock::time_point now) {
    if (units <= 0) return;
    std::lock_guard lock(mutex_);
    slot* s = find_or_add(rule, key);
    expire(std::make_pair(rule, key), *s, now);
    if (s->credits.size() >= max_takes_per_key) s->credits.pop_front();
    s->credits.push_back({units, session, now});
}

bool take_ledger::use_credit(const std::string& rule, const key_tuple& key, std::int64_t units, std::uint64_t session,
                             clock::time_point now) {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(std::make_pair(rule, key));
    if (it == slots_.end()) return false;
    expire(it->first, it->second, now);
    auto& credits = it->second.credits;
    if (pop_preferring(credits, session, [&](const take& t) { return t.units == units; })) return true;
    // One restock of several credits' units (an N-row cancellation, then remain = remain + N): the
    // credits are used, this session's first, while they fit; none is used unless they sum to it.
    std::vector<std::size_t> used;
    std::int64_t left = units;
    for (int pass = 0; pass < 2 && left > 0; ++pass)
        for (std::size_t i = 0; i < credits.size() && left > 0; ++i)
            if ((credits[i].session == session) == (pass == 0) && credits[i].units <= left) {
                used.push_back(i);
                left -= credits[i].units;
            }
    if (left != 0) return false;
    std::sort(used.rbegin(), used.rend());
    for (auto i : used) credits.erase(credits.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
}

std::uint64_t take_ledger::dropped_takes() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

std::vector<take_ledger::unclaimed_take> take_ledger::sweep(clock::time_point now) {
    std::lock_guard lock(mutex_);
    for (auto it = slots_.begin(); it != slots_.end();) {
        expire(it->first, it->second, now);
        if (it->second.takes.empty() && it->second.credits.empty()) it = slots_.erase(it);
        else ++it;
    }
    return std::exchange(unreported_, {});
}

std::map<std::string, std::int64_t> take_ledger::waiting_units() const {
    std::lock_guard lock(mutex_);
    std::map<std::string, std::int64_t> out;
    for (const auto& [k, s] : slots_)
        for (const auto& t : s.takes) out[k.first] += t.units;
    return out;
}

std::size_t take_ledger::waiting_takes(const std::string& rule, const key_tuple& key) const {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(std::make_pair(rule, key));
    return it == slots_.end() ? 0 : it->second.takes.size();
}

}  // namespace claimguard::engine
