// The rules library's command-line entry points (`claimguard lint|ddl`; explain is the engine's).
#pragma once

#include <functional>
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

// A claim table's existing UNIQUE indexes on whole columns (name, columns in index order), as the
// database has them (`suggest --backend`); it throws std::runtime_error when it cannot read them.
using unique_index_list = std::vector<std::pair<std::string, std::vector<std::string>>>;
using unique_keys_lookup = std::function<unique_index_list(const std::string& table)>;
// ... naming each claim rule's idempotency columns after an existing UNIQUE index all of whose columns
// the INSERTs give values, when `unique_keys` finds one. 2 also when it throws.
int suggest(const std::vector<std::string>& paths, const std::vector<std::string>& digests,
            const unique_keys_lookup& unique_keys, std::ostream& out, std::ostream& err);

}  // namespace claimguard::rules_cli
