// Counting a load run's answers and printing them as a table or as JSON.
#include "tests/load/load_report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace claimguard::load {

namespace {

const std::string other_messages = "(other messages)";
constexpr double percent = 100.0;
constexpr double us_per_ms = 1000.0;
constexpr double us_per_s = 1'000'000.0;

std::uint64_t count_of(const std::map<answer_reason, std::uint64_t>& counts, answer_reason reason) {
    const auto it = counts.find(reason);
    return it == counts.end() ? 0 : it->second;
}

double per_second(std::uint64_t count, double elapsed_s) {
    return elapsed_s > 0 ? static_cast<double>(count) / elapsed_s : 0.0;
}

}  // namespace

void tally::add(const attempt_result& result, std::int64_t user, std::chrono::microseconds latency,
                std::chrono::microseconds finished) {
    ++attempts;
    latencies_us.push_back(static_cast<std::uint32_t>(std::max<std::int64_t>(0, latency.count())));
    switch (result.kind) {
        case answer_kind::claimed:
            ++claimed;
            claimed_users.push_back(user);
            last_claim = std::max(last_claim, finished);
            return;
        case answer_kind::sold_out:
            ++sold_out;
            ++sold_out_by[result.reason];
            return;
        case answer_kind::duplicate:
            ++duplicate;
            ++duplicate_by[result.reason];
            return;
        case answer_kind::error:
            break;
    }
    ++other_errors;
    const unsigned code = result.error ? result.error->code : 0;
    std::string message = result.error ? error_pattern(result.error->message) : "unknown";
    if (errors.size() >= max_distinct_errors && !errors.contains({result.statement, code, message}))
        message = other_messages;
    ++errors[{result.statement, code, message}];
}

void tally::merge(tally&& other) {
    attempts += other.attempts;
    claimed += other.claimed;
    sold_out += other.sold_out;
    duplicate += other.duplicate;
    other_errors += other.other_errors;
    reconnects += other.reconnects;
    last_claim = std::max(last_claim, other.last_claim);
    for (const auto& [reason, n] : other.sold_out_by) sold_out_by[reason] += n;
    for (const auto& [reason, n] : other.duplicate_by) duplicate_by[reason] += n;
    for (auto& [key, n] : other.errors) {
        auto k = key;
        if (errors.size() >= max_distinct_errors && !errors.contains(k))
            std::get<2>(k) = other_messages;
        errors[k] += n;
    }
    latencies_us.insert(latencies_us.end(), other.latencies_us.begin(), other.latencies_us.end());
    claimed_users.insert(claimed_users.end(), other.claimed_users.begin(), other.claimed_users.end());
}

std::string error_pattern(std::string_view message) {
    std::string out;
    bool in_digits = false;
    for (const char c : message) {
        const bool digit = c >= '0' && c <= '9';
        if (digit && !in_digits)
            out += 'N';
        else if (!digit)
            out += c;
        in_digits = digit;
    }
    return out;
}

double percentile_ms(std::vector<std::uint32_t> samples_us, double p) {
    if (samples_us.empty())
        return 0.0;
    std::sort(samples_us.begin(), samples_us.end());
    const auto n = samples_us.size();
    auto rank = static_cast<std::size_t>(std::ceil(p / percent * static_cast<double>(n)));
    rank = std::clamp<std::size_t>(rank, 1, n);
    return samples_us[rank - 1] / us_per_ms;
}

nlohmann::json to_json(const run_summary& s) {
    const tally& t = s.totals;
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& [key, n] : t.errors)
        errors.push_back({{"statement", std::get<0>(key)},
                          {"code", std::get<1>(key)},
                          {"message", std::get<2>(key)},
                          {"count", n}});
    nlohmann::json out = {
        {"tool", s.tool},
        {"config", s.config},
        {"attempts_planned", s.attempts_planned},
        {"attempts", t.attempts},
        {"claimed", t.claimed},
        {"sold_out", t.sold_out},
        {"duplicate", t.duplicate},
        {"other_errors", t.other_errors},
        {"sold_out_by",
         {{"app_check", count_of(t.sold_out_by, answer_reason::app_check)},
          {"affected_rows", count_of(t.sold_out_by, answer_reason::affected_rows)},
          {"server_answer", count_of(t.sold_out_by, answer_reason::server_answer)},
          {"insert_no_row", count_of(t.sold_out_by, answer_reason::insert_no_row)}}},
        {"duplicate_by",
         {{"server_answer", count_of(t.duplicate_by, answer_reason::server_answer)},
          {"duplicate_key", count_of(t.duplicate_by, answer_reason::duplicate_key)}}},
        {"errors", errors},
        {"reconnects", t.reconnects},
        {"elapsed_s", s.elapsed_s},
        {"claims_per_s", per_second(t.claimed, s.elapsed_s)},
        {"attempts_per_s", per_second(t.attempts, s.elapsed_s)},
        {"last_claim_s", static_cast<double>(t.last_claim.count()) / us_per_s},
        {"claims_per_s_until_last_claim",
         per_second(t.claimed, static_cast<double>(t.last_claim.count()) / us_per_s)},
        {"latency_ms",
         {{"p50", percentile_ms(t.latencies_us, 50)},
          {"p95", percentile_ms(t.latencies_us, 95)},
          {"p99", percentile_ms(t.latencies_us, 99)},
          {"max", percentile_ms(t.latencies_us, 100)}}},
    };
    if (s.record_claims) {
        auto users = t.claimed_users;
        std::sort(users.begin(), users.end());
        out["claimed_users"] = users;
    }
    return out;
}

std::string to_table(const run_summary& s) {
    const tally& t = s.totals;
    const auto& c = s.config;
    std::string out;
    out += fmt::format("{}: {} flow, {} protocol, {}, {} threads over {} target(s), campaign {}\n", s.tool,
                       c.value("flow", ""), c.value("protocol", ""),
                       c.value("transaction", false) ? "transactions" : "autocommit", c.value("threads", 0),
                       c.contains("targets") ? c["targets"].size() : 0, c.value("campaign", 0));
    out += fmt::format("  {:<22}{:>10} of {}\n", "attempts", t.attempts, s.attempts_planned);
    out += fmt::format("  {:<22}{:>10}\n", "claimed", t.claimed);
    out += fmt::format("  {:<22}{:>10}   (app check {}, 0 rows updated {}, server answer {}, insert without row {})\n",
                       "sold out", t.sold_out, count_of(t.sold_out_by, answer_reason::app_check),
                       count_of(t.sold_out_by, answer_reason::affected_rows),
                       count_of(t.sold_out_by, answer_reason::server_answer),
                       count_of(t.sold_out_by, answer_reason::insert_no_row));
    out += fmt::format("  {:<22}{:>10}   (server answer {}, duplicate key {})\n", "already claimed", t.duplicate,
                       count_of(t.duplicate_by, answer_reason::server_answer),
                       count_of(t.duplicate_by, answer_reason::duplicate_key));
    out += fmt::format("  {:<22}{:>10}\n", "other errors", t.other_errors);
    for (const auto& [key, n] : t.errors)
        out += fmt::format("      {:>5} x {:<8} {:<8} {}\n", n, std::get<0>(key), std::get<1>(key), std::get<2>(key));
    out += fmt::format("  {:<22}{:>10}\n", "reconnects", t.reconnects);
    out += fmt::format("  {:<22}{:>10.3f} s\n", "elapsed", s.elapsed_s);
    out += fmt::format("  {:<22}{:>10.1f}\n", "claims/s", per_second(t.claimed, s.elapsed_s));
    out += fmt::format("  {:<22}{:>10.1f}\n", "attempts/s", per_second(t.attempts, s.elapsed_s));
    const double last_claim_s = static_cast<double>(t.last_claim.count()) / us_per_s;
    out += fmt::format("  {:<22}{:>10.3f} s   ({:.1f} claims/s until then)\n", "last claim at", last_claim_s,
                       per_second(t.claimed, last_claim_s));
    out += fmt::format("  {:<22}    p50 {:.2f}  p95 {:.2f}  p99 {:.2f}  max {:.2f}\n", "latency ms",
                       percentile_ms(t.latencies_us, 50), percentile_ms(t.latencies_us, 95),
                       percentile_ms(t.latencies_us, 99), percentile_ms(t.latencies_us, 100));
    return out;
}

}  // namespace claimguard::load
