// The schema check's pure part: which claim rules a UNIQUE index on the server backs, and the report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "proxy/engine/key_collation.hpp"
#include "proxy/schema/timeouts.hpp"
#include "rules/match/database_code.hpp"
#include "rules/model/ddl.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::schema {

// --- what the server holds (information_schema.COLUMNS and STATISTICS) -------------------------

struct column_info {
    std::string name;
    bool nullable = false;    // IS_NULLABLE = 'YES'
    std::string data_type;    // DATA_TYPE ("int", "varchar"); empty: not read
    std::string column_type;  // COLUMN_TYPE ("int(11) unsigned"), for messages
    std::string collation = {};  // COLLATION_NAME; empty: NULL (not a character column) or not read
};

struct index_info {
    std::string name;                  // "PRIMARY" for the primary key
    bool unique = false;               // NON_UNIQUE = 0
    std::vector<std::string> columns;  // in index order (SEQ_IN_INDEX)
    bool prefix = false;               // some column is indexed by its first characters only (SUB_PART)
    bool expression = false;           // some key part is an expression, not a column (MySQL 8 functional index)
};

struct table_info {
    std::string schema;
    std::string name;
    std::vector<column_info> columns;  // in table order
    std::vector<index_info> indexes;
};

// The tables read from the server; a table that does not exist (or that the check's user
// cannot see) is simply absent.
struct schema_metadata {
    std::vector<table_info> tables;
};

// --- the rules against the tables -------------------------------------------------------------------

// A rule that names a table or column the database lacks, or a counter that is not an integer:
// an error (exit 1, readiness refused with schema_check: refuse, a reload rejected).
struct rule_error {
    std::string rule;
    rules::source_pos pos;  // where the rules file names it
    std::string field;      // "table", "counter_column", "key_columns", ...
    std::string message;    // "coupon_stock.remainder: no such column (columns: campaign_id, remain, version)"
};

// Integer column types (DATA_TYPE) a counter may have.
[[nodiscard]] bool is_integer_type(std::string_view data_type);

// Every table and column each rule names, checked against `metadata` (tables resolved with
// `default_schema`), in rule order: stock rules, then claim rules.
[[nodiscard]] std::vector<rule_error> check_rule_names(const rules::rule_set& rules, const schema_metadata& metadata,
                                                       std::string_view default_schema);

// "file:line:column: error: rule coupon_stock: counter_column: ...", as lint prints.
[[nodiscard]] std::string format_rule_error(const rule_error& e);

// --- database code ----------------------------------------------------------------------------------

// One routine, view, trigger or event as information_schema gives it.
struct code_source {
    rules::match::code_kind kind = rules::match::code_kind::procedure;
    std::string schema;
    std::string name;
    std::string table;  // trigger: EVENT_OBJECT_TABLE
    std::string body;   // ROUTINE_DEFINITION, ACTION_STATEMENT, VIEW_DEFINITION, EVENT_DEFINITION
};

// The objects whose text names a rule's table, or names an object that does (a view over a view,
// a procedure calling a procedure, a routine writing a table whose trigger writes the stock),
// one entry per object and rule reached, in `sources` order.
[[nodiscard]] std::vector<rules::match::code_object> find_database_code(const rules::rule_set& rules,
                                                                        const std::vector<code_source>& sources);

// The schemas the rules' tables are in (resolved), each once: where database code is read.
[[nodiscard]] std::vector<std::string> schemas_to_inspect(const rules::rule_set& rules,
                                                          std::string_view default_schema);

inline constexpr std::string_view primary_key_name = "PRIMARY";

// --- string keys and collations -------------------------------------------------------------------

// How one stock rule key column compares its values, and the claim columns that hold it.
struct key_collation_check {
    std::string rule;       // the stock rule
    std::string column;     // its key column
    std::string data_type;  // DATA_TYPE
    std::string collation;  // COLLATION_NAME (empty: not a character column, or not read)
    rules::key_comparison found = rules::key_comparison::unknown;  // what the stock column's collation says
    // What the proxy uses: `found`, or bytes when a claim column holding the key compares otherwise.
    rules::key_comparison compare = rules::key_comparison::unknown;
    struct claim_column {
        std::string rule;       // the claim rule
        std::string column;     // its column mapped to `column` (consumes)
        std::string collation;  // its COLLATION_NAME
        rules::key_comparison compare = rules::key_comparison::unknown;
    };
    std::vector<claim_column> claims;
    std::string warning;  // the stock and a claim column compare differently (the key stays byte for byte)
};

// Every stock rule's key columns, in rule and key_columns order (none for a table not found).
[[nodiscard]] std::vector<key_collation_check> check_key_collations(const rules::rule_set& rules,
                                                                    const schema_metadata& metadata,
                                                                    std::string_view default_schema);

// What the rules snapshot is given: per stock rule whose every key column was read, the comparisons.
[[nodiscard]] std::vector<engine::rule_key_compare> key_compare_of(const std::vector<key_collation_check>& checks);

// --- the decision ---------------------------------------------------------------------------------

enum class index_status {
    covered,           // a UNIQUE index (or the PRIMARY KEY) on exactly these columns
    covered_stricter,  // a UNIQUE index on some of these columns only: still one claim per tuple, but fewer claims
                       // allowed
    missing,           // no UNIQUE index guarantees one row per tuple
    table_missing,     // the rule's table does not exist (or is invisible to the check's user)
    column_missing,    // a rule column does not exist in the table
};

[[nodiscard]] std::string_view to_string(index_status s);

// True for covered and covered_stricter: the database itself refuses a second claim.
[[nodiscard]] bool is_covered(index_status s);

// Rows that stop a UNIQUE index from being added (rows holding NULL in a column never do).
struct duplicate_count {
    std::uint64_t keys = 0;          // tuples held by more than one row
    std::uint64_t surplus_rows = 0;  // rows beyond the first of each such tuple: to merge or delete
};

// Why an index on the table does not back the rule (shown so the DBA does not assume it does).
struct near_miss {
    enum class reason {
        superset,    // UNIQUE, but on more columns than the rule: allows two claims for one tuple
        not_unique,  // on exactly the rule's columns, but not UNIQUE
    };
    index_info index;
    reason why = reason::superset;
    std::vector<std::string> extra_columns;  // superset: the columns beyond the rule's
};

// One UNIQUE index a claim rule needs, and what the server has for it.
struct index_check {
    rules::unique_index required;  // table.schema is the schema that was inspected
    index_status status = index_status::missing;
    std::optional<index_info> covering;  // covered/covered_stricter: the index that does it
    std::vector<near_miss> near_misses;
    std::vector<std::string> missing_columns;   // column_missing: rule columns the table lacks
    std::vector<std::string> nullable_columns;  // columns of the guarantee that allow NULL
    std::optional<duplicate_count> duplicates;  // counted for missing indexes when asked to
    std::string duplicates_error;               // the count was asked for and failed
};

struct schema_report {
    std::string server;                   // host:port, for messages
    std::string database;                 // the schema of rule tables named without one
    std::string tls_cipher;               // the connection's TLS cipher; empty: not encrypted (or not connected)
    std::vector<index_check> checks;      // in rule order, as rules::required_unique_indexes
    std::vector<rule_error> rule_errors;  // tables and columns the rules name that the database lacks
    // Routines, views, triggers and events reaching a rule's table (warnings: statements that reach
    // them get the rule's unmodeled policy in the proxy).
    std::vector<rules::match::code_object> database_code;
    std::string database_code_error;  // it could not be read (the check's privileges); a warning
    // Per database_code entry (same order; shorter: the rest have none), what the check says of it instead
    // of the default consequence (check_trigger_rules: a claim table's trigger that decrements its stock).
    std::vector<std::string> database_code_advice;
    // How each stock rule key column compares (warnings when a claim column compares otherwise).
    std::vector<key_collation_check> key_collations;
    std::string error;                // the database could not be reached or read; `checks` is empty then
    // The timeouts that bound an orphaned transaction's row locks (advisory: never changes the exit code).
    std::optional<server_timeouts> timeouts;
    std::string timeouts_error;  // they could not be read

    [[nodiscard]] std::size_t count(index_status s) const;
    // Reached, read, and every claim rule backed by a UNIQUE index.
    [[nodiscard]] bool all_covered() const;
    // Reached, read, every name in the rules found, and every claim rule backed: exit 0.
    [[nodiscard]] bool ok() const { return all_covered() && rule_errors.empty(); }
};

// Claim rules with decremented_by_trigger against the database code found: a trigger on the claim
// table whose text names the consumed stock table is expected (its advice says so); none is a rule
// error (nothing takes the stock when a claim goes in). A trigger like it on a rule without the field
// gets the advice to set it. Nothing is reported missing when the code could not all be read.
void check_trigger_rules(const rules::rule_set& rules, schema_report& report);

// The schema a rule table is looked up in: the rule's own, or `default_schema`.
[[nodiscard]] std::string effective_schema(const rules::table_name& table, std::string_view default_schema);

// Claim rules, then stock rules, whose table names no schema, when `default_schema` is empty too
// (a usage error: the check cannot know where to look).
[[nodiscard]] std::vector<std::string> rules_without_schema(const rules::rule_set& rules,
                                                            std::string_view default_schema);

// The distinct tables of the claim rules, then of the stock rules, schema resolved, in rule order.
[[nodiscard]] std::vector<rules::table_name> tables_to_inspect(const rules::rule_set& rules,
                                                               std::string_view default_schema);

// The table `resolved` names: the exact spelling first, then ignoring ASCII case (servers with
// lower_case_table_names = 1 or 2 report names in another case). Null when absent.
[[nodiscard]] const table_info* find_table(const schema_metadata& metadata, const rules::table_name& resolved);

// The decision for one required index against the table (null: the table does not exist).
// Column names compare without regard to ASCII case, as MySQL compares them.
[[nodiscard]] index_check check_index(const rules::unique_index& required, const table_info* table);

// Every claim rule's required indexes and every rule's names checked against `metadata`.
[[nodiscard]] schema_report build_report(const rules::rule_set& rules, const schema_metadata& metadata,
                                         std::string_view default_schema);

// SELECT COUNT(*), SUM(n - 1) over the duplicate tuples of `index` (rows holding NULL excluded):
// one row, two BIGINTs. Identifiers are backtick-quoted; no value is ever spliced in.
[[nodiscard]] std::string duplicate_count_query(const rules::unique_index& index);

// --- output ---------------------------------------------------------------------------------------

// The worst status of a claim rule's checks (table_missing > column_missing > missing >
// covered_stricter > covered).
[[nodiscard]] index_status rule_status(const schema_report& report, std::string_view rule);

// 0: every claim rule covered and every name found; 1: something missing; 2: the database could
// not be reached or read. Database code is a warning and never changes it.
[[nodiscard]] int exit_code(const schema_report& report);

// Lines a DBA reads: per claim rule the status, why, existing duplicates and the DDL that fixes it.
[[nodiscard]] std::string render_text(const schema_report& report);

// The same for tooling; the shape is documented at the top of report_json.cpp.
[[nodiscard]] nlohmann::json to_json(const schema_report& report);

}  // namespace claimguard::schema
