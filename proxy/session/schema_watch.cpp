// The schema check of a running proxy: its thread, the retries, readiness, the database code handed to
// the rules snapshot, and the check a reload waits for.
#include "schema_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "claim_metrics.hpp"
#include "proxy/schema/report.hpp"

namespace claimguard::session {

schema::connection_options schema_account_connection(const config::proxy_options& options) {
    schema::connection_options c;
    c.host = options.backend.host;
    c.port = options.backend.port;
    c.user = options.schema_check_user;
    c.password = options.schema_check_password;
    c.database = options.schema_check_database;
    c.tls.enabled = options.backend_tls.enabled;
    c.tls.verify = options.backend_tls.verify;
    c.tls.ca_file = options.backend_tls.ca_file;
    if (c.tls.verify && !options.backend_tls.server_name.empty() &&
        options.backend_tls.server_name != options.backend.host) {
        // libmysqlclient verifies the certificate against the host it dials and has no option
        // for another name, so the account's connection runs encrypted, unverified.
        c.tls.verify = false;
    }
    return c;
}

namespace {

// The server timeouts that bound an orphaned transaction's row locks, with the recommendations.
void log_server_timeouts(const schema::schema_report& report) {
    if (!report.timeouts_error.empty())
        spdlog::warn("schema check: server timeouts not read: {}", report.timeouts_error);
    if (!report.timeouts) return;
    const auto lines = schema::timeout_lines(*report.timeouts);
    const auto advice = schema::advise_timeouts(*report.timeouts);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i < advice.size() && !advice[i].ok)
            spdlog::warn("schema check: server timeouts: {}", lines[i]);
        else
            spdlog::info("schema check: server timeouts: {}", lines[i]);
    }
}

std::string describe(const rules::match::code_object& o) {
    std::string out = std::string(rules::match::to_string(o.kind)) + " " + o.schema + "." + o.name;
    if (o.kind == rules::match::code_kind::trigger) out += " on " + o.table;
    return out;
}

// What a statement reaching `o` gets, for the log.
std::string consequence(const rules::match::code_object& o) {
    switch (o.kind) {
        case rules::match::code_kind::procedure: return "CALL " + o.name + " gets the rule's unmodeled policy";
        case rules::match::code_kind::function:
            return "statements calling " + o.name + " get the rule's unmodeled policy";
        case rules::match::code_kind::view: return "writes through " + o.name + " get the rule's unmodeled policy";
        case rules::match::code_kind::trigger: return "writes of " + o.table + " get the rule's unmodeled policy";
        case rules::match::code_kind::event: return "it runs on the server's schedule, unseen by claimguard";
    }
    return {};
}

// The report's problems as log lines (rule errors with file:line, the index report).
std::vector<std::string> problem_lines(const schema::schema_report& report) {
    std::vector<std::string> out;
    for (const auto& e : report.rule_errors) out.push_back(schema::format_rule_error(e));
    if (!report.all_covered()) {
        const auto text = schema::render_text(report);
        for (std::size_t at = 0; at < text.size();) {
            const auto nl = text.find('\n', at);
            out.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
            at = nl == std::string::npos ? text.size() : nl + 1;
        }
    }
    return out;
}

// How string keys are compared from now on (docs/RULES.md "String keys and collations").
void log_key_collations(const std::vector<schema::key_collation_check>& keys) {
    for (const auto& c : keys) {
        if (!c.warning.empty()) spdlog::warn("schema check: {}", c.warning);
        if (c.collation.empty()) continue;  // numbers and binary strings: bytes, nothing to say
        spdlog::info("schema check: rule {} key column {} ({}): keys compared as {}", c.rule, c.column, c.collation,
                     engine::to_string(c.compare));
    }
}

std::string readiness_reason(const schema::schema_report& report) {
    if (!report.rule_errors.empty())
        return "the rules name what the database lacks (schema_check: refuse): " +
               schema::format_rule_error(report.rule_errors.front()) +
               (report.rule_errors.size() > 1 ? " (and " + std::to_string(report.rule_errors.size() - 1) + " more)"
                                              : std::string()) +
               "; see claimguard check";
    return "claim rules lack their unique index (schema_check: refuse); see claimguard check";
}

}  // namespace

schema_watch::schema_watch(const config::proxy_options& options, engine::rules_holder& holder,
                           admin::health_state& health)
    : options_(options), holder_(holder), health_(health) {
    enabled_ = options.schema_check != "off" && !options.schema_check_user.empty();
    refuse_ = options.schema_check == "refuse";
    if (enabled_) {
        connection_ = schema_account_connection(options);
        if (options.backend_tls.verify && !connection_.tls.verify)
            spdlog::warn(
                "schema check: backend_tls_server_name {} differs from the backend host {}: the check's "
                "connection is encrypted but its certificate is not verified (sessions are)",
                options.backend_tls.server_name, options.backend.host);
        connection_.connect_timeout = schema_watch_connect_timeout;
        connection_.read_timeout = schema_watch_read_timeout;
        connection_.write_timeout = schema_watch_read_timeout;
    }
}

schema_watch::~schema_watch() {
    health_.schema_pending = false;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void schema_watch::start() {
    if (options_.schema_check == "off") {
        spdlog::info(
            "schema check off: the rules' tables and columns are not checked against the database, and "
            "database code (procedures, functions, views, triggers, events) that reaches a protected table "
            "is not looked for: statements reaching it are forwarded unseen");
        return;
    }
    if (options_.schema_check_user.empty()) {
        spdlog::warn(
            "schema check skipped: no schema_check_user. The rules' tables and columns are not checked "
            "against the database, and database code (procedures, functions, views, triggers, events) that "
            "reaches a protected table is not looked for, so statements reaching it (CALL, writes through a "
            "view, writes of a table whose trigger writes the stock) are forwarded unseen. claimguard never "
            "authenticates on a client's behalf: set schema_check_user (docs/OPERATIONS.md), or run "
            "`claimguard check`");
        return;
    }
    if (refuse_) block("the schema check has not finished yet (schema_check: refuse)");
    {
        std::lock_guard lock(mutex_);
        woken_ = false;
    }
    started_at_ = std::chrono::steady_clock::now();
    health_.schema_pending = true;
    thread_ = std::thread([this] { run(); });
}

void schema_watch::wake() {
    if (!enabled_) return;
    {
        std::lock_guard lock(mutex_);
        woken_ = true;
    }
    wake_.notify_all();
}

void schema_watch::run() {
    auto retry = schema_retry_first;
    for (;;) {
        const bool passed = check_once();
        std::chrono::milliseconds wait = passed ? std::chrono::seconds(schema_recheck_interval) : retry;
        retry = passed ? schema_retry_first : std::min(retry * 2, std::chrono::seconds(schema_retry_max));
        if (health_.schema_pending) {
            if (std::chrono::steady_clock::now() - started_at_ < schema_first_check_wait) {
                wait = schema_pending_retry;
            } else {
                health_.schema_pending = false;
                spdlog::warn(
                    "schema check: the database could not be asked within {} s of start-up; new sessions no longer "
                    "wait for it: until a check runs, database code reaching a protected table is not known and "
                    "string keys compare byte for byte",
                    schema_first_check_wait.count());
            }
        }
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, wait, [this] { return woken_ || stopping_; });
        if (stopping_) return;
        woken_ = false;
    }
}

void schema_watch::block(std::string reason) {
    health_.schema_reason.store(std::make_shared<const std::string>(std::move(reason)));
    health_.schema_blocked = true;
}

void schema_watch::unblock() { health_.schema_blocked = false; }

void schema_watch::publish(const std::shared_ptr<const engine::rules_snapshot>& checked,
                           std::vector<rules::match::code_object> code,
                           const std::vector<schema::key_collation_check>& keys) {
    auto key_compare = schema::key_compare_of(keys);
    const bool code_changed = checked->database_code != code;
    const bool keys_changed = checked->key_compare != key_compare;
    if (!code_changed && !keys_changed) return;
    if (code_changed) {
        for (const auto& o : code)
            spdlog::warn("schema check: {} reaches rule {} (its text names {}): {}", describe(o), o.rule, o.via,
                         consequence(o));
        if (code.empty()) spdlog::info("schema check: no database code reaches a protected table any more");
    }
    if (keys_changed) log_key_collations(keys);
    auto next = std::make_shared<engine::rules_snapshot>(rules::rule_set(checked->rules), std::move(code),
                                                         std::move(key_compare));
    next->files = checked->files;
    // A reload in the meantime wins: it was vetted with its own database code, and it wakes us.
    claim_counter_tables::get().install(next);  // its rules' metric children, before sessions see it
    (void)holder_.replace_if(checked, std::move(next));
}

bool schema_watch::check_once() {
    auto snapshot = holder_.current();
    if (!snapshot || (snapshot->rules.stocks.empty() && snapshot->rules.claims.empty())) {
        unblock();
        health_.schema_pending = false;  // nothing to learn
        return true;
    }
    const auto report = schema::check_schema(snapshot->rules, connection_);
    if (!report.error.empty()) {
        spdlog::warn("schema check could not run: {} (retrying)", report.error);
        if (refuse_) block("the schema check could not run (schema_check: refuse): " + report.error);
        last_logged_.clear();
        passing_ = false;
        return false;
    }
    if (!timeouts_logged_) {
        log_server_timeouts(report);
        timeouts_logged_ = true;
    }
    if (!report.database_code_error.empty())
        spdlog::warn("schema check: database code: {}", report.database_code_error);
    publish(snapshot, report.database_code, report.key_collations);
    health_.schema_pending = false;  // the snapshot knows the database code and key collations now
    if (report.ok()) {
        if (!passing_)
            spdlog::info(
                "schema check: every rule's table and columns exist and every claim rule is backed by a "
                "unique index");
        passing_ = true;
        last_logged_.clear();
        unblock();
        return true;
    }
    passing_ = false;
    const auto lines = problem_lines(report);
    std::string joined;
    for (const auto& l : lines) joined += l + "\n";
    if (joined != last_logged_) {
        for (const auto& e : report.rule_errors) spdlog::error("schema check: {}", schema::format_rule_error(e));
        if (!report.all_covered()) {
            for (std::size_t i = report.rule_errors.size(); i < lines.size(); ++i)
                spdlog::warn("schema check: {}", lines[i]);
            spdlog::warn(
                "schema check: claim rules without a unique index{}: duplicates are caught only by Redis "
                "and this sidecar's own bookkeeping (apply the DDL above)",
                refuse_ ? " (schema_check: refuse, readiness stays 503)" : "");
        }
        if (!report.rule_errors.empty())
            spdlog::error("schema check: a rule naming what the database lacks protects nothing{}",
                          refuse_ ? " (schema_check: refuse, readiness stays 503 until fixed)" : "");
        last_logged_ = joined;
    }
    if (refuse_) block(readiness_reason(report));
    return false;
}

rules_vetting schema_watch::vet(const rules::rule_set& next, const std::vector<rules::match::code_object>& previous) {
    rules_vetting v;
    v.database_code = previous;
    if (!enabled_) return v;
    const auto report = schema::check_schema(next, connection_);
    if (!report.error.empty()) {
        spdlog::warn(
            "rules reload: the schema check could not run ({}): the rules are applied unchecked and "
            "checked again until it runs",
            report.error);
        return v;
    }
    v.database_code = report.database_code;
    v.key_compare = schema::key_compare_of(report.key_collations);
    log_key_collations(report.key_collations);
    for (const auto& e : report.rule_errors) {
        v.why += schema::format_rule_error(e) + "\n";
        if (!refuse_)
            spdlog::error("rules reload: {} (schema_check: warn: applied anyway)", schema::format_rule_error(e));
    }
    v.accept = report.rule_errors.empty() || !refuse_;
    return v;
}

}  // namespace claimguard::session
