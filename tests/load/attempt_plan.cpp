// Which user makes each attempt of a load run (see attempt_plan.hpp).
#include "tests/load/attempt_plan.hpp"

#include <algorithm>
#include <random>

namespace claimguard::load {

std::vector<std::int64_t> make_plan(std::int64_t first_user, std::int64_t users, unsigned attempts_per_user,
                                    std::uint64_t seed) {
    std::vector<std::int64_t> plan;
    plan.reserve(static_cast<std::size_t>(users) * attempts_per_user);
    for (std::int64_t user = first_user; user < first_user + users; ++user)
        for (unsigned a = 0; a < attempts_per_user; ++a) plan.push_back(user);
    std::mt19937_64 rng(seed);
    std::shuffle(plan.begin(), plan.end(), rng);
    return plan;
}

std::vector<std::int64_t> make_herd_plan(std::int64_t first_user, std::int64_t users, std::uint64_t attempts,
                                         std::uint64_t seed) {
    std::vector<std::int64_t> plan;
    plan.reserve(attempts);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> pick(first_user, first_user + users - 1);
    for (std::uint64_t i = 0; i < attempts; ++i) plan.push_back(pick(rng));
    return plan;
}

}  // namespace claimguard::load
