// The rules library's command-line entry points (`claimguard lint|ddl`; explain is the engine's).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace claimguard::rules_cli {

// `claimguard lint RULES...`: 0 when every file is valid, 1 on any error (each
// printed as file:line:column: error: message on `err`), 2 when a file cannot be read.
int lint(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err);

// `claimguard ddl RULES...`: the UNIQUE indexes backing each claim rule.
int ddl(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err);

}  // namespace claimguard::rules_cli
