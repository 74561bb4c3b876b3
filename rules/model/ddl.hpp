// DDL for the claim rules: the UNIQUE indexes that make the database refuse a second claim.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/model/rules.hpp"

namespace claimguard::rules {

// One UNIQUE index a claim rule needs (`claimguard ddl` creates it, `claimguard check` looks for it).
struct unique_index {
    enum class purpose {
        idempotency_columns,     // the business key, e.g. (user_id, campaign_id)
        idempotency_key_column,  // the request id column
    };
    std::string rule;  // the claim rule it backs
    table_name table;
    std::vector<std::string> columns;
    std::string name;  // deterministic, at most max_index_name_chars characters
    purpose why = purpose::idempotency_columns;
};

// `id` in backticks, inner backticks doubled: a``b -> `a````b`.
[[nodiscard]] std::string quote_identifier(std::string_view id);

// `schema`.`name`, or `name` when the rule names no schema.
[[nodiscard]] std::string quote_table(const table_name& table);

// uq_claimguard_<table>_<col>_<col>; when longer than 64 characters, cut and ended with
// '_' and 8 hex digits of a hash of the table and columns, so distinct indexes keep distinct names.
[[nodiscard]] std::string unique_index_name(std::string_view table, const std::vector<std::string>& columns);

// The indexes every claim rule needs, in rule order: one on the idempotency columns, and one
// on the idempotency key column when the rule has one.
[[nodiscard]] std::vector<unique_index> required_unique_indexes(const rule_set& rules);

// SELECT ... GROUP BY ... HAVING COUNT(*) > 1: the rows that would stop the index being added.
[[nodiscard]] std::string duplicates_query(const unique_index& index);

// ALTER TABLE ... ADD UNIQUE INDEX ..., ALGORITHM=INPLACE, LOCK=NONE;
[[nodiscard]] std::string add_index_statement(const unique_index& index);

// The whole `claimguard ddl` script, commented for a DBA. Deterministic: same rules, same text.
[[nodiscard]] std::string render_ddl(const rule_set& rules);

}  // namespace claimguard::rules
