// The schema check's text report: what a DBA reads, with the DDL and queries to copy.
#include <string>

#include "proxy/schema/report.hpp"
#include "rules/model/text.hpp"

namespace claimguard::schema {
namespace {

const char* const indent = "  ";
const char* const sql_indent = "    ";

std::string plain_list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + rules::printable(n);
    return out;
}

// (a, b), or a alone: how a DBA writes a tuple of columns.
std::string tuple(const std::vector<std::string>& names) {
    return names.size() == 1 ? plain_list(names) : "(" + plain_list(names) + ")";
}

std::vector<std::string> columns_not_in(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> out;
    for (const auto& n : a) {
        bool found = false;
        for (const auto& m : b) found = found || rules::iequals(n, m);
        if (!found) out.push_back(n);
    }
    return out;
}

std::string display_table(const rules::table_name& t) {
    return rules::printable(t.schema.empty() ? t.name : t.schema + "." + t.name);
}

std::string describe_index(const index_info& index) {
    const std::string what = index.name == primary_key_name
                                 ? std::string("the PRIMARY KEY")
                                 : (index.unique ? "UNIQUE index " : "index ") + rules::quote_identifier(index.name);
    return what + " (" + plain_list(index.columns) + ")";
}

std::string plural(std::uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "coupon_order" or "coupon_order (idempotency key request_id)": which check a line is about.
std::string subject(const index_check& c) {
    std::string out = rules::printable(c.required.rule);
    if (c.required.why == rules::unique_index::purpose::idempotency_key_column)
        out += " (idempotency key " + plain_list(c.required.columns) + ")";
    return out;
}

void headline(const index_check& c, std::string& out) {
    const auto& r = c.required;
    const auto table = display_table(r.table);
    out += subject(c) + ": ";
    switch (c.status) {
        case index_status::covered:
            out += "OK: " + describe_index(*c.covering) + " on " + table + " allows at most one row per " +
                   tuple(r.columns) + ".\n";
            return;
        case index_status::covered_stricter:
            out += "OK, STRICTER: " + describe_index(*c.covering) + " on " + table;
            if (const auto rest = columns_not_in(r.columns, c.covering->columns); !rest.empty())
                out += " allows at most one row per " + tuple(c.covering->columns) + ", whatever " + plain_list(rest) +
                       " holds";
            else
                out += " indexes only the first characters of some columns, so values sharing them count as duplicates";
            out += ". No second claim per " + tuple(r.columns) +
                   " can get in, but the database also refuses some claims the rule allows.\n";
            return;
        case index_status::missing:
            out += "MISSING: no UNIQUE index on " + table + " " + tuple(r.columns) +
                   ". Nothing in the database stops a second claim for the same " + tuple(r.columns) + ".\n";
            return;
        case index_status::table_missing:
            out += "TABLE MISSING: " + table +
                   " does not exist, or the check's user has no privilege on it. Fix the rule's table or --database; "
                   "the rule cannot be backed by a UNIQUE index until then.\n";
            return;
        case index_status::column_missing:
            out += "COLUMN MISSING: " + table + " has no column " + plain_list(c.missing_columns) +
                   " (the rule names " + tuple(r.columns) +
                   "). Fix the rule or the table; no UNIQUE index can be added until then.\n";
            return;
    }
}

void near_misses(const index_check& c, std::string& out) {
    for (const auto& m : c.near_misses) {
        if (m.why == near_miss::reason::superset)
            out += std::string(indent) + describe_index(m.index) + " does not help: it also includes " +
                   plain_list(m.extra_columns) + ", so rows with the same " + tuple(c.required.columns) +
                   " and a different " + plain_list(m.extra_columns) + " are all accepted.\n";
        else
            out += std::string(indent) + describe_index(m.index) + " has the right columns but is not UNIQUE.\n";
    }
}

void nullable(const index_check& c, std::string& out) {
    if (c.nullable_columns.empty() || !(is_covered(c.status) || c.status == index_status::missing)) return;
    out += std::string(indent) + "Note: " + plain_list(c.nullable_columns) +
           (c.nullable_columns.size() == 1 ? " allows" : " allow") +
           " NULL, and a UNIQUE index never treats rows holding NULL as duplicates: make " +
           (c.nullable_columns.size() == 1 ? "it" : "them") + " NOT NULL.\n";
}

void duplicates_and_fix(const index_check& c, std::string& out) {
    if (c.status != index_status::missing) return;
    const auto& r = c.required;
    const auto list_query = rules::duplicates_query(r);
    bool blocked = false;
    if (c.duplicates) {
        const auto& d = *c.duplicates;
        if (d.keys == 0) {
            out += std::string(indent) + "Duplicates: none; the index can be added now.\n";
        } else {
            blocked = true;
            out += std::string(indent) + "Duplicates: " + plural(d.keys, "value", "values") + " of " +
                   tuple(r.columns) + " already held by more than one row (" + plural(d.surplus_rows, "row", "rows") +
                   " beyond the first of each). A UNIQUE index cannot be "
                   "added while they exist (ALTER TABLE fails with error 1062): merge or delete them first. "
                   "List them with:\n" +
                   sql_indent + list_query + "\n";
        }
    } else {
        if (!c.duplicates_error.empty())
            out += std::string(indent) + "Duplicates: not counted (" + rules::printable(c.duplicates_error) + ").\n";
        out += std::string(indent) +
               "Before adding the index, this must return no rows (a UNIQUE index cannot be added while "
               "duplicates exist):\n" +
               sql_indent + list_query + "\n";
    }
    out += std::string(indent) + (blocked ? "Fix, once the duplicates are gone:\n" : "Fix:\n") + sql_indent +
           rules::add_index_statement(r) + "\n";
}

void summary(const schema_report& report, std::string& out) {
    const auto n = report.checks.size();
    const auto covered = report.count(index_status::covered) + report.count(index_status::covered_stricter);
    out += "\nSummary: " + std::to_string(covered) + " of " + plural(n, "UNIQUE index", "UNIQUE indexes") + " in place";
    if (const auto s = report.count(index_status::covered_stricter); s > 0)
        out += " (" + std::to_string(s) + " stricter than the rule)";
    const std::pair<index_status, const char*> problems[] = {{index_status::missing, "missing"},
                                                             {index_status::table_missing, "table missing"},
                                                             {index_status::column_missing, "column missing"}};
    for (const auto& [status, label] : problems)
        if (const auto k = report.count(status); k > 0) out += "; " + std::to_string(k) + " " + label;
    out += report.all_covered() ? ". Every claim rule is backed by the database.\n"
                                : ". Claims are NOT safe from duplicates until this is fixed.\n";
}

// Tables and columns the rules name that the database lacks: each at its place in the rules file.
void rule_errors(const schema_report& report, std::string& out) {
    if (report.rule_errors.empty()) return;
    out += "\nRules naming what the database lacks (" + plural(report.rule_errors.size(), "error", "errors") +
           "; a rule that names a missing column protects nothing):\n";
    for (const auto& e : report.rule_errors) out += indent + rules::printable(format_rule_error(e)) + "\n";
}

std::string describe_code(const rules::match::code_object& o) {
    std::string out = std::string(rules::match::to_string(o.kind)) + " " + rules::printable(o.schema) + "." +
                      rules::printable(o.name);
    if (o.kind == rules::match::code_kind::trigger) out += " on " + rules::printable(o.table);
    return out;
}

// What reaches that statement flows the sidecar sees: a routine's, view's, trigger's or event's
// text names a protected table (or something that does).
std::string code_consequence(const rules::match::code_object& o) {
    switch (o.kind) {
        case rules::match::code_kind::procedure:
            return "CALL " + rules::printable(o.name) + " gets the rule's unmodeled policy";
        case rules::match::code_kind::function:
            return "every statement calling " + rules::printable(o.name) + " gets the rule's unmodeled policy";
        case rules::match::code_kind::view:
            return "writes through " + rules::printable(o.name) +
                   " get the rule's unmodeled policy (reads are forwarded)";
        case rules::match::code_kind::trigger:
            return "writes of " + rules::printable(o.table) + " get the rule's unmodeled policy";
        case rules::match::code_kind::event:
            return "it runs on the server's schedule: claimguard never sees what it changes";
    }
    return {};
}

void database_code(const schema_report& report, std::string& out) {
    if (!report.database_code_error.empty())
        out += "\nDatabase code: not read (" + rules::printable(report.database_code_error) + ").\n";
    if (report.database_code.empty()) return;
    out += "\nDatabase code reaching protected tables (" + plural(report.database_code.size(), "warning", "warnings") +
           "; docs/RULES.md \"Database code\" says what to do instead):\n";
    for (std::size_t i = 0; i < report.database_code.size(); ++i) {
        const auto& o = report.database_code[i];
        const bool advised = i < report.database_code_advice.size() && !report.database_code_advice[i].empty();
        out += std::string(indent) + "WARNING: " + describe_code(o) + " reaches rule " + rules::printable(o.rule) +
               " (its text names " + rules::printable(o.via) +
               "): " + (advised ? rules::printable(report.database_code_advice[i]) : code_consequence(o)) + ".\n";
    }
}

std::string_view comparison_meaning(rules::key_comparison k) {
    switch (k) {
        case rules::key_comparison::bytes: return "compared byte for byte";
        case rules::key_comparison::bytes_pad: return "case-sensitive, trailing spaces ignored";
        case rules::key_comparison::ci_pad: return "ASCII letters without regard to case, trailing spaces ignored";
        case rules::key_comparison::ci_nopad:
            return "ASCII letters without regard to case, trailing spaces significant";
        case rules::key_comparison::unknown: break;
    }
    return "collation not known to claimguard: compared byte for byte";
}

// Character key columns: how their values are compared (and where stock and claim columns disagree).
void key_collations(const schema_report& report, std::string& out) {
    std::string lines;
    std::size_t warnings = 0;
    for (const auto& c : report.key_collations) {
        if (c.collation.empty() && c.warning.empty()) continue;  // numbers, binary strings: bytes, nothing to say
        lines += std::string(indent) + rules::printable(c.rule) + "." + rules::printable(c.column) + " (" +
                 rules::printable(c.collation) + "): " + std::string(comparison_meaning(c.compare)) + ".\n";
        if (!c.warning.empty()) {
            lines += std::string(indent) + "WARNING: " + rules::printable(c.warning) + ".\n";
            ++warnings;
        }
    }
    if (lines.empty()) return;
    out += "\nString keys (docs/RULES.md \"String keys and collations\"" +
           (warnings ? "; " + plural(warnings, "warning", "warnings") : std::string()) + "):\n" + lines;
}

// The timeouts that decide how long a transaction whose client is gone keeps the hot row locked.
void timeouts(const schema_report& report, std::string& out) {
    if (!report.timeouts_error.empty()) {
        out += "\nServer timeouts: not read (" + rules::printable(report.timeouts_error) + ").\n";
        return;
    }
    if (!report.timeouts) return;
    out += "\nServer timeouts (how long an orphaned transaction keeps its row locks; docs/OPERATIONS.md):\n";
    for (const auto& line : timeout_lines(*report.timeouts)) out += indent + line + "\n";
}

}  // namespace

std::string render_text(const schema_report& report) {
    std::string out = "claimguard check";
    if (!report.server.empty()) out += " on " + rules::printable(report.server);
    if (!report.database.empty()) out += ", database " + rules::printable(report.database);
    if (!report.tls_cipher.empty()) out += ", TLS " + rules::printable(report.tls_cipher);
    out += "\n";
    if (!report.error.empty()) return out + "ERROR: " + rules::printable(report.error) + "\n";
    if (report.checks.empty()) {
        out += "The rule set has no claim rules, so no UNIQUE index is needed.\n";
    } else {
        out += "\n";
        for (const auto& c : report.checks) {
            headline(c, out);
            if (!is_covered(c.status)) near_misses(c, out);
            nullable(c, out);
            duplicates_and_fix(c, out);
        }
        summary(report, out);
    }
    rule_errors(report, out);
    database_code(report, out);
    key_collations(report, out);
    timeouts(report, out);
    return out;
}

}  // namespace claimguard::schema
