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

// `claimguard suggest LOG...`: a draft rules file (YAML, every guess explained in comments) from a
// general log or a script of the app's statements ("-": standard input). 0 after printing it, 1 when
// no statement was found, 2 when a file cannot be read.
int suggest(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err);
// ... and from saved GET /digests documents of sidecars with watch_unlisted_tables on (`--digests FILE`),
// alone or with logs. 2 also when a digests file is not that JSON; 1 when nothing was found in all.
int suggest(const std::vector<std::string>& paths, const std::vector<std::string>& digests, std::ostream& out,
            std::ostream& err);

}  // namespace claimguard::rules_cli
