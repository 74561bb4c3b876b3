// A script of statements (a .sql file, what `claimguard explain --file` and `suggest` read).
#pragma once

#include <string>
#include <vector>

namespace claimguard::rules::sql {

// The statements of a script: split at ';' outside strings, quoted names and comments (and
// versioned comments); empty statements dropped; each trimmed of surrounding white space. No
// DELIMITER: a routine's body is cut at its inner ';'.
[[nodiscard]] std::vector<std::string> split_script(const std::string& text);

}  // namespace claimguard::rules::sql
