// The schema check's decision: does a UNIQUE index on the server guarantee one row per claim tuple?
#include "proxy/schema/report.hpp"

#include <algorithm>
#include <iterator>

#include "rules/model/text.hpp"

namespace claimguard::schema {
namespace {

bool contains_name(const std::vector<std::string>& names, std::string_view name) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return rules::iequals(n, name); });
}

// Every name of `a` is in `b` (ASCII case ignored); index columns and rule columns are distinct.
bool is_subset(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return std::all_of(a.begin(), a.end(), [&](const std::string& n) { return contains_name(b, n); });
}

std::vector<std::string> names_not_in(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> out;
    for (const auto& n : a)
        if (!contains_name(b, n)) out.push_back(n);
    return out;
}

const column_info* find_column(const table_info& table, std::string_view name) {
    const auto it = std::find_if(table.columns.begin(), table.columns.end(),
                                 [&](const column_info& c) { return rules::iequals(c.name, name); });
    return it == table.columns.end() ? nullptr : &*it;
}

// Higher is worse; the order a rule's overall status is taken in.
int severity(index_status s) {
    switch (s) {
        case index_status::covered: return 0;
        case index_status::covered_stricter: return 1;
        case index_status::missing: return 2;
        case index_status::column_missing: return 3;
        case index_status::table_missing: return 4;
    }
    return 4;
}

// How well `index` backs the rule's `columns`: 2 exactly, 1 stricter, 0 not at all.
int coverage(const index_info& index, const std::vector<std::string>& columns) {
    // An expression key part is no column: nothing can be said about what it makes unique.
    if (!index.unique || index.expression || index.columns.empty() || !is_subset(index.columns, columns)) return 0;
    // A prefix of a value is unique only if fewer values are allowed: stricter, like a subset.
    const bool same_set = index.columns.size() == columns.size();
    return same_set && !index.prefix ? 2 : 1;
}

}  // namespace

std::string_view to_string(index_status s) {
    switch (s) {
        case index_status::covered: return "covered";
        case index_status::covered_stricter: return "covered_stricter";
        case index_status::missing: return "missing";
        case index_status::table_missing: return "table_missing";
        case index_status::column_missing: return "column_missing";
    }
    return "unknown";
}

bool is_covered(index_status s) { return s == index_status::covered || s == index_status::covered_stricter; }

std::size_t schema_report::count(index_status s) const {
    return static_cast<std::size_t>(
        std::count_if(checks.begin(), checks.end(), [&](const index_check& c) { return c.status == s; }));
}

bool schema_report::all_covered() const {
    return error.empty() &&
           std::all_of(checks.begin(), checks.end(), [](const index_check& c) { return is_covered(c.status); });
}

std::string effective_schema(const rules::table_name& table, std::string_view default_schema) {
    return table.schema.empty() ? std::string(default_schema) : table.schema;
}

std::vector<std::string> rules_without_schema(const rules::rule_set& rules, std::string_view default_schema) {
    std::vector<std::string> out;
    if (!default_schema.empty()) return out;
    for (const auto& claim : rules.claims)
        if (claim.table.schema.empty()) out.push_back(claim.name);
    for (const auto& stock : rules.stocks)
        if (stock.table.schema.empty()) out.push_back(stock.name);
    return out;
}

std::vector<rules::table_name> tables_to_inspect(const rules::rule_set& rules, std::string_view default_schema) {
    std::vector<rules::table_name> out;
    const auto add = [&](const rules::table_name& table) {
        rules::table_name t{effective_schema(table, default_schema), table.name};
        const bool seen = std::any_of(out.begin(), out.end(), [&](const rules::table_name& o) {
            return o.schema == t.schema && o.name == t.name;
        });
        if (!seen) out.push_back(std::move(t));
    };
    for (const auto& claim : rules.claims) add(claim.table);
    for (const auto& stock : rules.stocks) add(stock.table);
    return out;
}

std::vector<std::string> schemas_to_inspect(const rules::rule_set& rules, std::string_view default_schema) {
    std::vector<std::string> out;
    for (const auto& t : tables_to_inspect(rules, default_schema))
        if (!t.schema.empty() && std::find(out.begin(), out.end(), t.schema) == out.end()) out.push_back(t.schema);
    return out;
}

const table_info* find_table(const schema_metadata& metadata, const rules::table_name& resolved) {
    const auto& tables = metadata.tables;
    auto it = std::find_if(tables.begin(), tables.end(),
                           [&](const table_info& t) { return t.schema == resolved.schema && t.name == resolved.name; });
    if (it == tables.end())
        it = std::find_if(tables.begin(), tables.end(), [&](const table_info& t) {
            return rules::iequals(t.schema, resolved.schema) && rules::iequals(t.name, resolved.name);
        });
    return it == tables.end() ? nullptr : &*it;
}

index_check check_index(const rules::unique_index& required, const table_info* table) {
    index_check out;
    out.required = required;
    if (table == nullptr) {
        out.status = index_status::table_missing;
        return out;
    }
    // The DDL must name the table as the server spells it.
    out.required.table = {table->schema, table->name};
    const auto& columns = required.columns;
    for (const auto& c : columns)
        if (find_column(*table, c) == nullptr) out.missing_columns.push_back(c);
    if (!out.missing_columns.empty()) {
        out.status = index_status::column_missing;
        return out;
    }

    const index_info* best = nullptr;
    int best_coverage = 0;
    for (const auto& index : table->indexes) {
        const int c = coverage(index, columns);
        // The exact index wins; among stricter ones the one on the most columns (the least strict).
        if (c > best_coverage || (c == 1 && best_coverage == 1 && index.columns.size() > best->columns.size())) {
            best = &index;
            best_coverage = c;
        }
        if (c > 0 || index.expression) continue;
        if (index.unique && is_subset(columns, index.columns))
            out.near_misses.push_back({index, near_miss::reason::superset, names_not_in(index.columns, columns)});
        else if (!index.unique && index.columns.size() == columns.size() && is_subset(index.columns, columns))
            out.near_misses.push_back({index, near_miss::reason::not_unique, {}});
    }

    out.status = best_coverage == 2   ? index_status::covered
                 : best_coverage == 1 ? index_status::covered_stricter
                                      : index_status::missing;
    if (best != nullptr) out.covering = *best;
    // NULLs are never equal to a UNIQUE index: a row holding one escapes the guarantee.
    const auto& guarded = best != nullptr ? best->columns : columns;
    for (const auto& c : guarded)
        if (const auto* col = find_column(*table, c); col != nullptr && col->nullable)
            out.nullable_columns.push_back(col->name);
    return out;
}

schema_report build_report(const rules::rule_set& rules, const schema_metadata& metadata,
                           std::string_view default_schema) {
    schema_report report;
    report.database = std::string(default_schema);
    for (auto required : rules::required_unique_indexes(rules)) {
        required.table.schema = effective_schema(required.table, default_schema);
        report.checks.push_back(check_index(required, find_table(metadata, required.table)));
    }
    report.rule_errors = check_rule_names(rules, metadata, default_schema);
    report.key_collations = check_key_collations(rules, metadata, default_schema);
    return report;
}

std::vector<key_collation_check> check_key_collations(const rules::rule_set& rules, const schema_metadata& metadata,
                                                      std::string_view default_schema) {
    using k = rules::key_comparison;
    const auto column_of = [&](const rules::table_name& t, std::string_view name) -> const column_info* {
        const auto* table = find_table(metadata, {effective_schema(t, default_schema), t.name});
        return table == nullptr ? nullptr : find_column(*table, name);
    };
    std::vector<key_collation_check> out;
    for (const auto& s : rules.stocks) {
        if (find_table(metadata, {effective_schema(s.table, default_schema), s.table.name}) == nullptr) continue;
        for (const auto& key : s.key_columns) {
            key_collation_check c;
            c.rule = s.name;
            c.column = key;
            if (const auto* col = column_of(s.table, key)) {
                c.data_type = col->data_type;
                c.collation = col->collation;
                c.found = engine::classify_collation(
                    col->data_type,
                    col->collation.empty() ? std::nullopt : std::optional<std::string_view>(col->collation));
            }
            c.compare = c.found;
            for (const auto& claim : rules.claims) {
                if (claim.stock_rule != s.name) continue;
                for (const auto& [claim_column, stock_column] : claim.stock_key_mapping) {
                    if (!rules::iequals(stock_column, key)) continue;
                    key_collation_check::claim_column cc{claim.name, claim_column, {}, k::unknown};
                    if (const auto* col = column_of(claim.table, claim_column)) {
                        cc.collation = col->collation;
                        cc.compare = engine::classify_collation(
                            col->data_type,
                            col->collation.empty() ? std::nullopt : std::optional<std::string_view>(col->collation));
                    }
                    // The take finds the stock row by the stock column; the claim row holds the key in its own
                    // column: fold only what both take for one value.
                    if (cc.compare != c.found && c.found != k::bytes && c.found != k::unknown && c.warning.empty()) {
                        c.compare = k::bytes;
                        c.warning =
                            "stock rule " + s.name + " key column " + key + " (" +
                            (c.collation.empty() ? c.data_type : c.collation) + ") and claim rule " + claim.name +
                            " column " + claim_column + " (" +
                            (cc.collation.empty() ? std::string("not a character column or not read") : cc.collation) +
                            ") compare values differently: keys of this column are compared byte for byte "
                            "(give both columns the same collation)";
                    }
                    c.claims.push_back(std::move(cc));
                }
            }
            out.push_back(std::move(c));
        }
    }
    return out;
}

std::vector<engine::rule_key_compare> key_compare_of(const std::vector<key_collation_check>& checks) {
    std::vector<engine::rule_key_compare> out;
    for (const auto& c : checks) {
        if (out.empty() || out.back().rule != c.rule) out.push_back({c.rule, {}});
        out.back().columns.push_back(c.compare);
    }
    return out;
}

bool is_integer_type(std::string_view data_type) {
    constexpr std::string_view integers[] = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"};
    return std::any_of(std::begin(integers), std::end(integers),
                       [&](std::string_view t) { return rules::iequals(t, data_type); });
}

namespace {

std::string display(const rules::table_name& t) { return t.schema.empty() ? t.name : t.schema + "." + t.name; }

std::string column_list(const table_info& table) {
    std::string out;
    for (const auto& c : table.columns) out += (out.empty() ? "" : ", ") + c.name;
    return out;
}

// The rule's columns as written; rules built in code (not read from a file) have none recorded,
// so their fields are listed at the rule's position.
std::vector<rules::column_ref> named_columns(const rules::stock_rule& r) {
    if (!r.columns_named.empty()) return r.columns_named;
    std::vector<rules::column_ref> out;
    for (const auto& k : r.key_columns) out.push_back({"key_columns", k, r.pos});
    out.push_back({"counter_column", r.counter_column, r.pos});
    if (r.version_column) out.push_back({"version_column", *r.version_column, r.pos});
    return out;
}

std::vector<rules::column_ref> named_columns(const rules::claim_rule& r) {
    std::vector<rules::column_ref> out = r.columns_named;
    if (out.empty()) {
        for (const auto& c : r.idempotency_columns) out.push_back({"idempotency_columns", c, r.pos});
        if (r.idempotency_key_column) out.push_back({"idempotency_key_column", *r.idempotency_key_column, r.pos});
    }
    // consumes without columns: the claim table holds each stock key column under its own name.
    const auto& at = r.consumes_pos.line > 0 ? r.consumes_pos : r.pos;
    for (const auto& [claim_column, stock_column] : r.stock_key_mapping) {
        const bool listed = std::any_of(out.begin(), out.end(), [&](const rules::column_ref& c) {
            return c.field == "consumes.columns" && rules::iequals(c.name, claim_column);
        });
        if (!listed) out.push_back({"consumes", claim_column, at});
    }
    return out;
}

template <class Rule>
void check_names(const Rule& rule, const std::vector<rules::column_ref>& columns, const schema_metadata& metadata,
                 std::string_view default_schema, std::vector<rule_error>& out) {
    const rules::table_name resolved{effective_schema(rule.table, default_schema), rule.table.name};
    const auto* table = find_table(metadata, resolved);
    const auto& table_pos = rule.table_pos.line > 0 ? rule.table_pos : rule.pos;
    if (table == nullptr) {
        out.push_back({rule.name, table_pos, "table",
                       display(rule.table) + ": no such table in database " + resolved.schema +
                           " (or the check's user has no privilege on it)"});
        return;
    }
    for (const auto& c : columns) {
        if (find_column(*table, c.name) != nullptr) continue;
        out.push_back({rule.name, c.pos, c.field,
                       display(rule.table) + "." + c.name + ": no such column (columns: " + column_list(*table) + ")"});
    }
}

}  // namespace

std::vector<rule_error> check_rule_names(const rules::rule_set& rules, const schema_metadata& metadata,
                                         std::string_view default_schema) {
    std::vector<rule_error> out;
    for (const auto& s : rules.stocks) {
        const auto columns = named_columns(s);
        const auto before = out.size();
        check_names(s, columns, metadata, default_schema, out);
        if (out.size() != before) continue;  // the table or a column is missing: that is the error
        const auto* table = find_table(metadata, {effective_schema(s.table, default_schema), s.table.name});
        const auto* counter = table ? find_column(*table, s.counter_column) : nullptr;
        if (counter == nullptr || counter->data_type.empty() || is_integer_type(counter->data_type)) continue;
        const auto it = std::find_if(columns.begin(), columns.end(),
                                     [](const rules::column_ref& c) { return c.field == "counter_column"; });
        out.push_back({s.name, it != columns.end() ? it->pos : s.pos, "counter_column",
                       display(s.table) + "." + counter->name + ": the counter is " +
                           (counter->column_type.empty() ? counter->data_type : counter->column_type) +
                           ", not an integer type (TINYINT, SMALLINT, MEDIUMINT, INT or BIGINT): claimguard takes "
                           "whole units from it"});
    }
    for (const auto& c : rules.claims) check_names(c, named_columns(c), metadata, default_schema, out);
    return out;
}

std::string format_rule_error(const rule_error& e) {
    return rules::format_diagnostic({e.pos, "rule " + e.rule + ", " + e.field + ": " + e.message});
}

std::vector<rules::match::code_object> find_database_code(const rules::rule_set& rules,
                                                          const std::vector<code_source>& sources) {
    using rules::match::code_kind;
    struct reach {
        std::string name;  // a name whose use reaches `rule`
        std::string rule;
    };
    std::vector<reach> reaches;
    for (const auto& s : rules.stocks) reaches.push_back({s.table.name, s.name});
    for (const auto& c : rules.claims) reaches.push_back({c.table.name, c.name});

    struct hit {
        std::size_t source;
        rules::match::code_object object;
    };
    std::vector<hit> hits;
    const auto done = [&](std::size_t i, const std::string& rule) {
        return std::any_of(hits.begin(), hits.end(),
                           [&](const hit& h) { return h.source == i && h.object.rule == rule; });
    };
    // Until nothing new: each object found adds the name that reaches it (a view, a routine, a
    // trigger's table) for the objects that use it. At most one hit per (object, rule): it ends.
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t i = 0; i < sources.size(); ++i) {
            const auto& src = sources[i];
            for (std::size_t r = 0; r < reaches.size(); ++r) {
                const auto name = reaches[r].name;
                const auto rule = reaches[r].rule;
                if (done(i, rule) || !rules::match::names_identifier(src.body, name)) continue;
                hits.push_back({i, {src.kind, src.schema, src.name, src.table, rule, name}});
                changed = true;
                if (src.kind == code_kind::trigger)
                    reaches.push_back({src.table, rule});
                else if (src.kind != code_kind::event)
                    reaches.push_back({src.name, rule});
            }
        }
    }
    std::stable_sort(hits.begin(), hits.end(), [](const hit& a, const hit& b) { return a.source < b.source; });
    std::vector<rules::match::code_object> out;
    for (auto& h : hits) out.push_back(std::move(h.object));
    return out;
}

void check_trigger_rules(const rules::rule_set& rules, schema_report& report) {
    using rules::match::code_kind;
    const auto decrements = [](const rules::match::code_object& o, const rules::claim_rule& c) {
        return o.kind == code_kind::trigger && rules::iequals(o.table, c.table.name) && o.rule == c.stock_rule;
    };
    report.database_code_advice.resize(report.database_code.size());
    for (std::size_t i = 0; i < report.database_code.size(); ++i)
        for (const auto& c : rules.claims) {
            if (!decrements(report.database_code[i], c)) continue;
            report.database_code_advice[i] =
                c.decremented_by_trigger
                    ? "expected: claim rule " + c.name +
                          " has decremented_by_trigger: true (each claim INSERT is the take, checked by the "
                          "counter read around it)"
                    : "if it decrements the stock for each claim row, set decremented_by_trigger: true on "
                      "claim rule " +
                          c.name +
                          " (without it every claim INSERT is answered sold out: no take "
                          "of the sidecar's is behind it)";
        }
    if (!report.database_code_error.empty()) return;  // some code was not read: a trigger may be there
    for (const auto& c : rules.claims) {
        if (!c.decremented_by_trigger) continue;
        const bool found = std::any_of(report.database_code.begin(), report.database_code.end(),
                                       [&](const rules::match::code_object& o) { return decrements(o, c); });
        if (found) continue;
        const auto* stock = rules.find_stock(c.stock_rule);
        report.rule_errors.push_back(
            {c.name, c.pos, "decremented_by_trigger",
             "no trigger on " + c.table.name + " names " + (stock ? stock->table.name : c.stock_rule) +
                 ": nothing would take the stock when a claim row goes in (create the trigger, or remove "
                 "decremented_by_trigger so the app's own decrement backs each claim)"});
    }
}

std::string duplicate_count_query(const rules::unique_index& index) {
    std::string cols;
    std::string not_null;
    for (const auto& c : index.columns) {
        cols += (cols.empty() ? "" : ", ") + rules::quote_identifier(c);
        not_null += (not_null.empty() ? "" : " AND ") + rules::quote_identifier(c) + " IS NOT NULL";
    }
    return "SELECT COUNT(*), COALESCE(SUM(`n` - 1), 0) FROM (SELECT COUNT(*) AS `n` FROM " +
           rules::quote_table(index.table) + " WHERE " + not_null + " GROUP BY " + cols +
           " HAVING COUNT(*) > 1) AS `d`";
}

index_status rule_status(const schema_report& report, std::string_view rule) {
    index_status worst = index_status::covered;
    for (const auto& c : report.checks)
        if (c.required.rule == rule && severity(c.status) > severity(worst)) worst = c.status;
    return worst;
}

int exit_code(const schema_report& report) {
    if (!report.error.empty()) return 2;
    return report.ok() ? 0 : 1;
}

}  // namespace claimguard::schema
