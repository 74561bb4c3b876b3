// A COM_STMT_BULK_EXECUTE (MariaDB's array binding: Connector/C STMT_ATTR_ARRAY_SIZE, Connector/J
// useBulkStmts, the Node connector's batch()) of a prepared claim INSERT: decided as the claim INSERT
// of several rows it means (claim_rows.cpp), one claim per row of values, each with its own take.
//
// The server runs a bulk as one statement. Measured on MariaDB 10.11 (InnoDB), in autocommit and
// inside a transaction: a plain bulk INSERT whose row k is a duplicate (ERR 1062) leaves none of its
// rows and answers that ERR alone; an INSERT IGNORE bulk skips the duplicate rows and answers one OK
// whose affected rows count the rows that went in. That is what a multi-row INSERT does, so the
// multi-row claim's accounting of which units go back holds for a bulk as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "rules/match/facts.hpp"

namespace claimguard::engine {

// Rows of values one bulk execute may carry for the engine to decide it: each row is a claim with its
// own take and Redis key. A larger bulk gets the unmodeled policy (bulk_execute).
inline constexpr std::size_t max_bulk_claim_rows = 10000;

// The facts of a prepared statement (`statement_facts`, `params` placeholders) run as a bulk of
// `rows` rows of values: its claim INSERT's rows once per row of values, in order, each one's
// placeholders numbered into the values laid end to end (placeholder i of row b is b * params + i,
// as protocol::stmt_bulk_execute::values holds them). Empty unless the statement is exactly one plain
// or IGNORE claim INSERT and the bulk has rows: the caller then applies the rules' unmodeled policy
// (bulk_execute), as for a stock-table write, a REPLACE or an ON DUPLICATE KEY UPDATE.
[[nodiscard]] std::optional<rules::match::match_result> bulk_claim_facts(
    const rules::match::match_result& statement_facts, std::uint16_t params, std::size_t rows);

}  // namespace claimguard::engine
