// `claimguard explain`: the command around the engine's dry run. One statement in full
// (`explain --rules R [--read VALUE] [--user U] SQL`), or many in a summary table or JSON
// (`explain --rules R --file F [--user U] [--format table|json]`).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace claimguard::engine {

struct explain_request {
    std::vector<std::string> rules_paths;
    std::optional<std::string> read_value;  // one statement: the counter the session read before
    std::optional<std::string> user;        // the database user sending it (trusted users pass untouched)
    std::string sql;                        // one statement, or
    std::string file;                       // a file of statements separated by ';' ("-": standard input)
    std::string format = "table";           // many statements: table or json
};

// 0 after printing; 1 when the rules are invalid or a dry run is incomplete, 2 when a file cannot be
// read or an option is malformed (each reported on `err`).
int explain_command(const explain_request& request, std::ostream& out, std::ostream& err);

}  // namespace claimguard::engine
