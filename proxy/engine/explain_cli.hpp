// `claimguard explain --rules R [--read VALUE] SQL`: the command around the engine's dry run.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace claimguard::engine {

// 0 after printing the dry run; 1 when the rules are invalid, 2 when a file cannot be read or
// --read is not an integer (each reported on `err`).
int explain_command(const std::vector<std::string>& rules_paths, const std::optional<std::string>& read_value,
                    const std::string& sql, std::ostream& out, std::ostream& err);

}  // namespace claimguard::engine
