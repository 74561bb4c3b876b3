// load_rules: the rules files' text to a validated rule set or a list of located errors. Never throws.
#include <algorithm>
#include <map>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "rules/model/limits.hpp"
#include "rules/model/parsed_rules.hpp"
#include "rules/model/precheck.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules {
namespace {

using detail::diagnostics;
using detail::yaml_file;

// Records where documents start; ignores their content.
class document_counter final : public YAML::EventHandler {
public:
    std::vector<YAML::Mark> starts;
    void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

// The first document of `text`, after checking there is no second one. yaml-cpp 0.7's LoadAll
// loops forever on some input (a lone ',' yields the same empty document again and again), so
// documents are counted with at most two parser steps, and a step that makes no progress is a
// syntax error.
std::optional<YAML::Node> parse_first_document(const std::string& text, yaml_file& file) {
    document_counter counter;
    {
        std::istringstream in(text);
        YAML::Parser parser(in);
        if (parser.HandleNextDocument(counter))
            parser.HandleNextDocument(counter);
    }
    if (counter.starts.size() == 2) {
        const auto& first = counter.starts[0];
        const auto& second = counter.starts[1];
        if (second.pos <= first.pos) {
            const auto at = static_cast<std::size_t>(std::max(first.pos, 0));
            file.error(first, "this is not valid YAML: unexpected " +
                                  (at < text.size() ? "'" + std::string(1, text[at]) + "'" : std::string("end")) +
                                  " here");
            return std::nullopt;
        }
        file.error(second, "the file holds more than one YAML document ('---'); put each rule set in its own file");
    }
    return YAML::Load(text);
}

// Parses one source into `parsed`; every problem becomes a diagnostic.
void read_source(const rules_source& source, detail::parsed_rules& parsed, diagnostics& diags) {
    yaml_file file(source.file, diags);
    const auto text = strip_utf8_bom(source.text);
    const auto problems = precheck_rules_text(text);
    for (const auto& p : problems)
        diags.add({source.file, p.line, p.column}, p.message);
    if (!problems.empty())
        return;
    std::optional<YAML::Node> root;
    try {
        root = parse_first_document(std::string(text), file);
    } catch (const YAML::DeepRecursion& e) {
        file.error(e.mark, "the YAML is nested too deeply for the parser here");
        return;
    } catch (const YAML::Exception& e) {
        file.error(e.mark, "this is not valid YAML: " + e.msg);
        return;
    }
    if (root)
        detail::read_rules_document(file, *root, parsed);
}

rule_set build_rule_set(detail::parsed_rules& parsed, const std::vector<rules_source>& sources) {
    rule_set set;
    if (parsed.default_mode)
        set.default_mode = parsed.default_mode->first;
    set.trusted_users = parsed.trusted_users;
    for (auto& s : parsed.stocks)
        set.stocks.push_back(std::move(s.rule));
    for (auto& c : parsed.claims)
        set.claims.push_back(std::move(c.rule));
    std::uint64_t h = fnv1a_offset_basis;
    // The content only, file by file in load order: `claimguard lint` on a DBA's copy of the files
    // shows the version a sidecar reports for the same text, wherever each is mounted.
    for (const auto& source : sources) {
        const auto size = std::to_string(source.text.size());
        h = fnv1a64(size, h);
        h = fnv1a64(std::string_view("\0", 1), h);
        h = fnv1a64(source.text, h);
    }
    set.version_hash = to_hex(h);
    return set;
}

// Errors in file order, then line and column, like a compiler; the "too many errors" note stays last.
void sort_diagnostics(std::vector<diagnostic>& errors, const std::vector<rules_source>& sources) {
    std::map<std::string_view, std::size_t> file_index;
    for (std::size_t i = 0; i < sources.size(); ++i)
        file_index.emplace(sources[i].file, i);
    const auto key = [&](const diagnostic& d) {
        const auto it = file_index.find(d.pos.file);
        return std::tuple(it == file_index.end() ? sources.size() : it->second, d.pos.line, d.pos.column);
    };
    const auto end = errors.begin() + static_cast<std::ptrdiff_t>(std::min(errors.size(), max_diagnostics));
    std::stable_sort(errors.begin(), end, [&](const diagnostic& a, const diagnostic& b) { return key(a) < key(b); });
}

}  // namespace

std::string format_diagnostic(const diagnostic& d) {
    return d.pos.file + ":" + std::to_string(d.pos.line) + ":" + std::to_string(d.pos.column) +
           ": error: " + d.message;
}

std::string format_warning(const diagnostic& d) {
    return d.pos.file + ":" + std::to_string(d.pos.line) + ":" + std::to_string(d.pos.column) +
           ": warning: " + d.message;
}

load_result load_rules(const std::vector<rules_source>& sources) {
    load_result result;
    try {
        diagnostics diags(result.errors);
        detail::parsed_rules parsed;
        if (sources.size() > max_rules_sources) {
            diags.add({sources[max_rules_sources].file, 1, 1},
                      "too many rules files: a rule set is read from at most " + std::to_string(max_rules_sources));
        } else {
            for (const auto& source : sources) {
                if (diags.full())
                    break;
                try {
                    read_source(source, parsed, diags);
                } catch (const std::exception& e) {
                    // yaml-cpp throws from node accessors too; any of it is this file's problem.
                    diags.add({source.file, 1, 1}, std::string("the file could not be read as YAML: ") + e.what());
                }
            }
        }
        if (!diags.full())
            detail::validate_rules(parsed, diags);
        const bool incomplete =
            std::any_of(parsed.stocks.begin(), parsed.stocks.end(), [](const auto& s) { return !s.complete; }) ||
            std::any_of(parsed.claims.begin(), parsed.claims.end(), [](const auto& c) { return !c.complete; });
        if (incomplete && result.errors.empty())
            diags.add({sources.front().file, 1, 1}, "a rule could not be read completely (a claimguard bug: please "
                                                    "report it with this file)");
        sort_diagnostics(result.errors, sources);
        if (result.errors.empty()) {
            detail::warn_redis_key_slots(parsed, result.warnings);
            result.rules = build_rule_set(parsed, sources);
        }
    } catch (const std::exception& e) {
        // Out of memory and the like: report rather than throw, as promised.
        result.rules.reset();
        result.errors.push_back({{sources.empty() ? std::string() : sources.front().file, 1, 1},
                                 std::string("the rules could not be loaded: ") + e.what()});
    }
    return result;
}

const stock_rule* rule_set::find_stock(std::string_view name) const {
    const auto it = std::find_if(stocks.begin(), stocks.end(), [&](const stock_rule& s) { return s.name == name; });
    return it == stocks.end() ? nullptr : &*it;
}

bool rule_set::is_trusted(std::string_view user) const {
    return std::find(trusted_users.begin(), trusted_users.end(), user) != trusted_users.end();
}

}  // namespace claimguard::rules
