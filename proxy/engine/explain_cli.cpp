// `claimguard explain`: reads the rules files, then the engine's dry run of one statement, or the
// decision for each statement of a file as a table or JSON.
#include "explain_cli.hpp"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "decide.hpp"
#include "explain.hpp"
#include "memory.hpp"
#include "rules/cli/read_rules.hpp"
#include "rules/match/describe.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/script.hpp"

namespace claimguard::engine {
namespace {

namespace match = rules::match;

// What one statement of a file gets: the summary row of the table / one JSON object.
struct summary {
    std::string statement;
    std::string rule;
    std::string decision;
    std::string mode;
    std::string unmodeled;  // the reason, when not modelled
    std::string note;
    std::int64_t units = 0;
    bool admission = false;
};

std::optional<resolved_value> bound_to_one(const match::value_ref& v) {
    if (v.type == match::value_ref::kind::placeholder) return resolved_value{"1", 1};
    return resolve_literal(v);
}

summary summarize(const match::rule_index& index, const std::string& sql, bool trusted) {
    summary s;
    s.statement = sql;
    if (trusted) {
        s.decision = "forward";
        s.note = "a trusted user: forwarded unchanged (a write of a stock table audited as trusted-write)";
        return s;
    }
    std::ostringstream ignored;
    const auto described = match::describe_statement(index, sql, {}, ignored);
    session_memory memory;
    const decision d = decide(described.facts, index.rules(), bound_to_one, memory);
    if (d.stock) s.rule = d.stock->name;
    if (d.claim) s.rule = d.claim->name;
    s.decision = std::string(verdict_name(d.what));
    if (d.stock || d.claim) s.mode = d.observe ? "observe" : "enforce";
    if (d.unmodeled) s.unmodeled = std::string(d.reason);
    s.note = d.note;
    if (d.what == verdict::take || d.what == verdict::track_decrement || d.what == verdict::restock) s.units = d.units;
    s.admission = d.stock && d.stock->admission && (d.what == verdict::take || d.what == verdict::track_decrement);
    return s;
}

void print_table(const std::vector<summary>& rows, std::ostream& out) {
    out << "#    rule                 mode     decision         units  unmodeled                statement\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        char line[256];
        std::snprintf(line, sizeof line, "%-4zu %-20s %-8s %-16s %-6s %-24s ", i + 1,
                      rules::sql::one_line(r.rule.empty() ? "-" : r.rule, 20).c_str(),
                      r.mode.empty() ? "-" : r.mode.c_str(), (r.decision + (r.admission ? "+adm" : "")).c_str(),
                      r.units == 0 ? "-" : std::to_string(r.units).c_str(),
                      rules::sql::one_line(r.unmodeled.empty() ? "-" : r.unmodeled, 24).c_str());
        out << line << rules::sql::one_line(r.statement, 100) << "\n";
    }
    out << rows.size() << " statement(s); +adm: the per-key admission queue applies. One statement in full: "
                          "claimguard explain --rules ... \"<statement>\"\n";
}

void print_json(const std::vector<summary>& rows, std::ostream& out) {
    auto all = nlohmann::json::array();
    for (const auto& r : rows) {
        nlohmann::json j{{"statement", r.statement}, {"decision", r.decision}, {"admission", r.admission}};
        j["rule"] = r.rule.empty() ? nlohmann::json() : nlohmann::json(r.rule);
        j["mode"] = r.mode.empty() ? nlohmann::json() : nlohmann::json(r.mode);
        j["unmodeled"] = r.unmodeled.empty() ? nlohmann::json() : nlohmann::json(r.unmodeled);
        j["units"] = r.units;
        j["note"] = r.note;
        all.push_back(std::move(j));
    }
    out << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

int explain_command(const explain_request& request, std::ostream& out, std::ostream& err) {
    match::explain_options options;
    if (request.read_value) {
        std::int64_t v = 0;
        const char* first = request.read_value->data();
        const char* last = first + request.read_value->size();
        const auto [end, ec] = std::from_chars(first, last, v);
        if (ec != std::errc{} || end != last) {
            err << "claimguard explain: --read takes the integer the session read before, not \""
                << *request.read_value << "\"\n";
            return 2;
        }
        options.read_value = v;
    }
    if (request.format != "table" && request.format != "json") {
        err << "claimguard explain: --format is table or json, not \"" << request.format << "\"\n";
        return 2;
    }
    if (request.file.empty() == request.sql.empty()) {
        err << "claimguard explain: give one statement, or --file with many (not both)\n";
        return 2;
    }
    rules::rule_set set;
    if (const int rc = rules_cli::detail::read_and_load(request.rules_paths, "explain", err, set); rc != 0) return rc;
    const bool trusted = request.user && set.is_trusted(*request.user);
    const match::rule_index index(set);
    if (request.file.empty()) {
        if (trusted) {
            out << "user " << *request.user << " is in trusted_users: the statement is forwarded unchanged, never "
                << "refused; a write of a stock table is audited (trusted-write) and counted, and after its OK the "
                << "read cache and the admission queue forget what they knew of its key\n";
            return 0;
        }
        if (!explain(index, request.sql, options, out)) {
            err << "claimguard explain: the dry run is incomplete (see the error line above)\n";
            return 1;
        }
        return 0;
    }
    std::string text;
    if (request.file == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
        std::ifstream in(request.file, std::ios::binary);
        if (!in) {
            err << "claimguard explain: cannot read " << request.file << "\n";
            return 2;
        }
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::vector<summary> rows;
    for (const auto& statement : rules::sql::split_script(text)) rows.push_back(summarize(index, statement, trusted));
    if (request.format == "json")
        print_json(rows, out);
    else
        print_table(rows, out);
    return 0;
}

}  // namespace claimguard::engine
