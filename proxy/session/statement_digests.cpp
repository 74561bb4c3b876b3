// The per-shape summary behind GET /digests.
#include "statement_digests.hpp"

#include <algorithm>
#include <ctime>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <vector>

namespace claimguard::session {
namespace {

std::string iso_time(std::chrono::system_clock::time_point t) {
    const auto secs = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                       tm.tm_min, tm.tm_sec);
}

constexpr std::string_view observe_prefix = "would-";
constexpr std::string_view unlisted_prefix = "unlisted:";

}  // namespace

statement_digests::shape* statement_digests::shape_of(std::string_view rule, std::string_view digest,
                                                      std::string_view statement,
                                                      std::chrono::system_clock::time_point at) {
    auto it = shapes_.find(std::tuple(rule, digest));
    if (it == shapes_.end()) {
        if (shapes_.size() >= capacity_) {
            ++dropped_;
            return nullptr;
        }
        it = shapes_.emplace(key{std::string(rule), std::string(digest)}, shape{}).first;
        it->second.statement = statement;
        it->second.first_seen = at;
    }
    auto& s = it->second;
    ++s.count;
    s.last_seen = at;
    return &s;
}

statement_digests::shape* statement_digests::record_locked(std::string_view rule, std::string_view digest,
                                                           std::string_view statement, std::string_view action,
                                                           std::chrono::system_clock::time_point at) {
    const bool observed = action.starts_with(observe_prefix);
    if (observed) action.remove_prefix(observe_prefix.size());
    auto* s = shape_of(rule, digest, statement, at);
    if (s == nullptr) return nullptr;
    auto a = s->actions.find(action);
    if (a == s->actions.end()) a = s->actions.emplace(std::string(action), counts{}).first;
    ++(observed ? a->second.observed : a->second.enforced);
    return s;
}

void statement_digests::record(std::string_view rule, std::string_view digest, std::string_view statement,
                               std::string_view action, std::chrono::system_clock::time_point at) {
    std::lock_guard lock(mutex_);
    (void)record_locked(rule, digest, statement, action, at);
}

bool statement_digests::record_unlisted(std::string_view table, std::string_view digest, std::string_view statement,
                                        std::string_view action, const std::vector<std::string>& notes,
                                        std::size_t max_tables, std::chrono::system_clock::time_point at) {
    std::lock_guard lock(mutex_);
    if (!unlisted_tables_.contains(table)) {
        if (unlisted_tables_.size() >= max_tables) {
            ++unlisted_dropped_;
            return false;
        }
        unlisted_tables_.emplace(table);
    }
    const auto rule = std::string(unlisted_prefix) + std::string(table);
    if (auto* s = record_locked(rule, digest, statement, action, at))
        for (const auto& n : notes) ++s->notes[n];
    return true;
}

std::size_t statement_digests::size() const {
    std::lock_guard lock(mutex_);
    return shapes_.size();
}

std::string statement_digests::json() const {
    std::lock_guard lock(mutex_);
    std::vector<const std::pair<const key, shape>*> order;
    for (const auto& entry : shapes_) order.push_back(&entry);
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->second.count > b->second.count; });
    auto list = nlohmann::json::array();
    for (const auto* entry : order) {
        const auto& [k, s] = *entry;
        nlohmann::json actions = nlohmann::json::object();
        for (const auto& [name, c] : s.actions) actions[name] = {{"enforced", c.enforced}, {"observed", c.observed}};
        list.push_back({{"rule", std::get<0>(k)},
                        {"digest", std::get<1>(k)},
                        {"statement", s.statement},
                        {"count", s.count},
                        {"first_seen", iso_time(s.first_seen)},
                        {"last_seen", iso_time(s.last_seen)},
                        {"actions", std::move(actions)}});
        if (!s.notes.empty()) list.back()["notes"] = s.notes;
    }
    nlohmann::json j{{"shapes", std::move(list)}, {"dropped", dropped_}, {"unlisted_dropped", unlisted_dropped_}};
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string statement_digests::text() const {
    const auto j = nlohmann::json::parse(json());
    std::string out = fmt::format("{:<20} {:>8}  {:<40} {}\n", "rule", "count", "actions (enforced/observed)", "statement");
    for (const auto& s : j["shapes"]) {
        std::string actions;
        for (const auto& [name, c] : s["actions"].items())
            actions += fmt::format("{}{} {}/{}", actions.empty() ? "" : ", ", name, c["enforced"].get<std::uint64_t>(),
                                   c["observed"].get<std::uint64_t>());
        out += fmt::format("{:<20} {:>8}  {:<40} {}\n", s["rule"].get<std::string>(), s["count"].get<std::uint64_t>(),
                           actions, s["statement"].get<std::string>());
    }
    if (j["dropped"].get<std::uint64_t>() > 0)
        out += fmt::format("{} statement(s) of shapes beyond the first {} not kept\n", j["dropped"].get<std::uint64_t>(),
                           max_statement_digests);
    if (j["unlisted_dropped"].get<std::uint64_t>() > 0)
        out += fmt::format("{} statement(s) of tables beyond watch_unlisted_tables not kept\n",
                           j["unlisted_dropped"].get<std::uint64_t>());
    return out;
}

}  // namespace claimguard::session
