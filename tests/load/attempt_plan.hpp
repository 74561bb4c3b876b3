// Which user makes each attempt of a load run: every user N times, or a herd of random users (pure).
#pragma once

#include <cstdint>
#include <vector>

namespace claimguard::load {

// Every user of first_user .. first_user + users - 1 attempts attempts_per_user times, shuffled so that one
// user's attempts land on different threads at about the same time.
[[nodiscard]] std::vector<std::int64_t> make_plan(std::int64_t first_user, std::int64_t users,
                                                  unsigned attempts_per_user, std::uint64_t seed);

// A herd: `attempts` attempts, each by a user drawn uniformly from first_user .. first_user + users - 1, so
// some users try more than once and some never.
[[nodiscard]] std::vector<std::int64_t> make_herd_plan(std::int64_t first_user, std::int64_t users,
                                                       std::uint64_t attempts, std::uint64_t seed);

}  // namespace claimguard::load
