// What a load run saw: answers per kind and reason, errors by code and message, latency percentiles, output.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/load/claim_flow.hpp"

namespace claimguard::load {

// Distinct (code, message) pairs kept; later ones are counted under "(other messages)" for their code.
inline constexpr std::size_t max_distinct_errors = 50;

// One thread's counts; merged into the run's at the end.
struct tally {
    std::uint64_t attempts = 0;
    std::uint64_t claimed = 0;
    std::uint64_t sold_out = 0;
    std::uint64_t duplicate = 0;
    std::uint64_t other_errors = 0;
    std::uint64_t reconnects = 0;
    // When the latest successful claim ended, from the start of the run (a herd: when the stock sold out).
    std::chrono::microseconds last_claim{0};
    std::map<answer_reason, std::uint64_t> sold_out_by;
    std::map<answer_reason, std::uint64_t> duplicate_by;
    // (statement, code, message pattern) -> count
    std::map<std::tuple<std::string, unsigned, std::string>, std::uint64_t> errors;
    std::vector<std::uint32_t> latencies_us;
    std::vector<std::int64_t> claimed_users;

    // finished: when the attempt ended, from the start of the run.
    void add(const attempt_result& result, std::int64_t user, std::chrono::microseconds latency,
             std::chrono::microseconds finished = std::chrono::microseconds{0});
    void merge(tally&& other);
};

struct run_summary {
    std::string tool;
    nlohmann::json config;  // the flags, echoed
    std::uint64_t attempts_planned = 0;
    double elapsed_s = 0;
    bool record_claims = false;
    tally totals;
};

// An error message with every run of digits replaced by N, so "Duplicate entry '7-1'" and
// "Duplicate entry '9-1'" count as one kind of error.
[[nodiscard]] std::string error_pattern(std::string_view message);

// Nearest-rank percentile (0 < p <= 100) of microsecond samples, in milliseconds; 0 when empty.
[[nodiscard]] double percentile_ms(std::vector<std::uint32_t> samples_us, double p);

// The JSON keys claim_load.py prints too (tests/incident reads them).
[[nodiscard]] nlohmann::json to_json(const run_summary& summary);
[[nodiscard]] std::string to_table(const run_summary& summary);

}  // namespace claimguard::load
