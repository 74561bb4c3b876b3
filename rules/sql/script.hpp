// A script of statements (a .sql file, what `claimguard explain --file` and `suggest` read).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace claimguard::rules::sql {

// The statements of a script: split at ';' outside strings, quoted names and comments (and
// versioned comments); empty statements dropped; each trimmed of surrounding white space. No
// DELIMITER: a routine's body is cut at its inner ';'.
[[nodiscard]] std::vector<std::string> split_script(const std::string& text);

// A statement shown on one line of a report: line breaks and tabs as spaces, cut to `max`
// characters (the last three "...") when longer.
[[nodiscard]] std::string one_line(std::string text, std::size_t max);

}  // namespace claimguard::rules::sql
