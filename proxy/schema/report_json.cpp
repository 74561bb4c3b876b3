// The schema check's JSON report, for tooling (CI gates, dashboards).
//
// {
//   "server": "host:port", "database": "app", "tls_cipher": null | "TLS_AES_256_GCM_SHA384",
//   "error": null | "why the database was not read",
//   "ok": bool, "exit_code": 0 | 1 | 2,
//   "summary": {"indexes": n, "covered": n, "covered_stricter": n, "missing": n,
//               "table_missing": n, "column_missing": n},
//   "timeouts": null | {"values": {"wait_timeout": 28800 | null, ...}, "orphan_lock_bound_s": n | null,
//                       "advice": [{"variable", "value", "ok", "advice"}]},
//   "timeouts_error": null | "why they were not read",
//   "rule_errors": [{"rule", "field", "file", "line", "column", "message"}],
//   "database_code": [{"kind": "procedure" | "function" | "view" | "trigger" | "event", "schema", "name",
//                      "table": null | "the trigger's table", "rule", "via"}],
//   "database_code_error": null | "why it was not read",
//   "key_collations": [{"rule", "column", "data_type", "collation": null | "utf8mb4_general_ci",
//                       "compare": "bytes" | "bytes_pad" | "ci_pad" | "ci_nopad" | "unknown",
//                       "claims": [{"rule", "column", "collation", "compare"}], "warning": null | "..."}],
//   "rules": [{"rule": "coupon_order", "status": <worst of its indexes>, "indexes": [{
//       "purpose": "idempotency_columns" | "idempotency_key_column",
//       "schema": "app", "table": "coupon_order", "columns": ["user_id", "campaign_id"],
//       "status": "covered" | "covered_stricter" | "missing" | "table_missing" | "column_missing",
//       "covering_index": null | {"name", "columns", "primary_key", "prefix"},
//       "near_misses": [{"name", "columns", "reason": "superset" | "not_unique", "extra_columns"}],
//       "missing_columns": [...], "nullable_columns": [...],
//       "duplicates": null | {"keys": n, "surplus_rows": n}, "duplicates_error": null | "...",
//       "index_name": "uq_claimguard_...", "duplicates_query": "SELECT ...",
//       "fix": null | "ALTER TABLE ..."}]}]
// }
#include <nlohmann/json.hpp>

#include "proxy/schema/report.hpp"

namespace claimguard::schema {
namespace {

nlohmann::json index_json(const index_info& index) {
    return {{"name", index.name},
            {"columns", index.columns},
            {"primary_key", index.name == primary_key_name},
            {"prefix", index.prefix}};
}

nlohmann::json check_json(const index_check& c) {
    const auto& r = c.required;
    nlohmann::json j;
    j["purpose"] =
        r.why == rules::unique_index::purpose::idempotency_columns ? "idempotency_columns" : "idempotency_key_column";
    j["schema"] = r.table.schema;
    j["table"] = r.table.name;
    j["columns"] = r.columns;
    j["status"] = to_string(c.status);
    j["covering_index"] = c.covering ? index_json(*c.covering) : nlohmann::json(nullptr);
    auto misses = nlohmann::json::array();
    for (const auto& m : c.near_misses) {
        auto mj = index_json(m.index);
        mj["reason"] = m.why == near_miss::reason::superset ? "superset" : "not_unique";
        mj["extra_columns"] = m.extra_columns;
        misses.push_back(std::move(mj));
    }
    j["near_misses"] = std::move(misses);
    j["missing_columns"] = c.missing_columns;
    j["nullable_columns"] = c.nullable_columns;
    j["duplicates"] = c.duplicates
                          ? nlohmann::json{{"keys", c.duplicates->keys}, {"surplus_rows", c.duplicates->surplus_rows}}
                          : nlohmann::json(nullptr);
    j["duplicates_error"] = c.duplicates_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.duplicates_error);
    j["index_name"] = r.name;
    j["duplicates_query"] = rules::duplicates_query(r);
    j["fix"] =
        c.status == index_status::missing ? nlohmann::json(rules::add_index_statement(r)) : nlohmann::json(nullptr);
    return j;
}

}  // namespace

nlohmann::json to_json(const schema_report& report) {
    nlohmann::json j;
    j["server"] = report.server;
    j["database"] = report.database;
    j["tls_cipher"] = report.tls_cipher.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.tls_cipher);
    j["error"] = report.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.error);
    j["ok"] = exit_code(report) == 0;
    j["exit_code"] = exit_code(report);
    j["summary"] = {{"indexes", report.checks.size()},
                    {"covered", report.count(index_status::covered)},
                    {"covered_stricter", report.count(index_status::covered_stricter)},
                    {"missing", report.count(index_status::missing)},
                    {"table_missing", report.count(index_status::table_missing)},
                    {"column_missing", report.count(index_status::column_missing)},
                    {"rule_errors", report.rule_errors.size()},
                    {"database_code", report.database_code.size()}};
    auto rules_json = nlohmann::json::array();
    for (const auto& c : report.checks) {
        const auto& rule = c.required.rule;
        if (rules_json.empty() || rules_json.back()["rule"] != rule)
            rules_json.push_back({{"rule", rule},
                                  {"status", to_string(rule_status(report, rule))},
                                  {"indexes", nlohmann::json::array()}});
        rules_json.back()["indexes"].push_back(check_json(c));
    }
    j["rules"] = std::move(rules_json);
    auto errors = nlohmann::json::array();
    for (const auto& e : report.rule_errors)
        errors.push_back({{"rule", e.rule},
                          {"field", e.field},
                          {"file", e.pos.file},
                          {"line", e.pos.line},
                          {"column", e.pos.column},
                          {"message", e.message}});
    j["rule_errors"] = std::move(errors);
    auto code = nlohmann::json::array();
    for (const auto& o : report.database_code)
        code.push_back(
            {{"kind", rules::match::to_string(o.kind)},
             {"schema", o.schema},
             {"name", o.name},
             {"table", o.kind == rules::match::code_kind::trigger ? nlohmann::json(o.table) : nlohmann::json(nullptr)},
             {"rule", o.rule},
             {"via", o.via}});
    j["database_code"] = std::move(code);
    j["database_code_error"] =
        report.database_code_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.database_code_error);
    auto keys = nlohmann::json::array();
    for (const auto& c : report.key_collations) {
        auto claims = nlohmann::json::array();
        for (const auto& cc : c.claims)
            claims.push_back(
                {{"rule", cc.rule},
                 {"column", cc.column},
                 {"collation", cc.collation.empty() ? nlohmann::json(nullptr) : nlohmann::json(cc.collation)},
                 {"compare", engine::to_string(cc.compare)}});
        keys.push_back({{"rule", c.rule},
                        {"column", c.column},
                        {"data_type", c.data_type},
                        {"collation", c.collation.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.collation)},
                        {"compare", engine::to_string(c.compare)},
                        {"claims", std::move(claims)},
                        {"warning", c.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.warning)}});
    }
    j["key_collations"] = std::move(keys);
    j["timeouts_error"] =
        report.timeouts_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.timeouts_error);
    j["timeouts"] = nullptr;
    if (report.timeouts) {
        const auto number = [](const std::optional<double>& v) {
            return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
        };
        nlohmann::json t;
        auto& values = t["values"] = nlohmann::json::object();
        auto advice = nlohmann::json::array();
        for (const auto& a : advise_timeouts(*report.timeouts)) {
            values[a.variable] = number(a.value);
            advice.push_back(
                {{"variable", a.variable}, {"value", number(a.value)}, {"ok", a.ok}, {"advice", a.advice}});
        }
        t["advice"] = std::move(advice);
        t["orphan_lock_bound_s"] = number(orphan_lock_bound_s(*report.timeouts));
        j["timeouts"] = std::move(t);
    }
    return j;
}

}  // namespace claimguard::schema
