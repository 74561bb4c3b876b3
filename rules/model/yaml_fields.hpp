// Internal: reading typed, located fields out of yaml-cpp nodes, reporting every problem.
#pragma once

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rules/model/limits.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules::detail {

// Collects diagnostics up to max_diagnostics, then one "too many errors" line.
class diagnostics {
public:
    explicit diagnostics(std::vector<diagnostic>& out) : out_(out) {}
    void add(source_pos pos, std::string message);
    [[nodiscard]] bool full() const;
    [[nodiscard]] std::size_t count() const { return out_.size(); }

private:
    std::vector<diagnostic>& out_;
};

// The file being read: turns yaml-cpp marks (0-based) into 1-based positions.
class yaml_file {
public:
    yaml_file(std::string name, diagnostics& diags) : name_(std::move(name)), diags_(diags) {}
    [[nodiscard]] source_pos pos(const YAML::Mark& mark) const;
    void error(const YAML::Mark& mark, std::string message) { diags_.add(pos(mark), std::move(message)); }
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] diagnostics& diags() { return diags_; }

private:
    std::string name_;
    diagnostics& diags_;
};

// One `key: value` of a mapping.
struct field {
    std::string name;
    YAML::Mark key_mark;
    YAML::Node value;
    // Where problems with the value are reported: the value, or the key when the value is empty
    // or an alias defined earlier in the file.
    [[nodiscard]] YAML::Mark value_mark() const;
};

// The fields of mapping `node` (`what` names it in messages, e.g. "a stock rule"). Reports and
// drops non-scalar keys, duplicate keys, merge keys and fields not in `known`.
[[nodiscard]] std::vector<field> read_fields(yaml_file& file, const YAML::Node& node, std::string_view what,
                                             std::span<const std::string_view> known);

// "a mapping", "a list", "a single value", "nothing": what a node is, for messages.
[[nodiscard]] std::string_view describe_node(const YAML::Node& node);

// A value shown in a message: printable, quoted, and cut short when long.
[[nodiscard]] std::string quoted(std::string_view value);

struct located_name {
    std::string name;
    source_pos pos;
};

// Each reader reports its own problems and returns nullopt (or false) after reporting.
[[nodiscard]] const std::string* read_scalar(yaml_file& file, const field& f, std::string_view expectation);
[[nodiscard]] std::optional<located_name> read_identifier(yaml_file& file, const field& f);
// One column or a list of columns; duplicates (case-insensitive) and more than
// max_index_columns are reported.
[[nodiscard]] std::optional<std::vector<located_name>> read_column_list(yaml_file& file, const field& f);
[[nodiscard]] std::optional<std::string> read_rule_name(yaml_file& file, const field& f);
[[nodiscard]] std::optional<table_name> read_table(yaml_file& file, const field& f);
[[nodiscard]] std::optional<std::int64_t> read_integer(yaml_file& file, const field& f, std::int64_t min,
                                                       std::int64_t max, std::string_view example);
[[nodiscard]] std::optional<mode> read_mode(yaml_file& file, const field& f);
[[nodiscard]] std::optional<strictness> read_strictness(yaml_file& file, const field& f);
[[nodiscard]] std::optional<unmodeled_policy> read_unmodeled_policy(yaml_file& file, const field& f);
// true or false (YAML's other spellings, yes/no/on/off, are refused: one way to write it).
[[nodiscard]] std::optional<bool> read_bool(yaml_file& file, const field& f);
[[nodiscard]] std::optional<std::chrono::milliseconds> read_duration(yaml_file& file, const field& f);
// The same within [min, max] (stock rule read_cache).
[[nodiscard]] std::optional<std::chrono::milliseconds> read_duration(yaml_file& file, const field& f,
                                                                     std::chrono::milliseconds min,
                                                                     std::chrono::milliseconds max);
// An answer mapping; `defaults` supplies what the mapping leaves out.
[[nodiscard]] std::optional<answer> read_answer(yaml_file& file, const field& f, const answer& defaults);

// Parses "250ms", "1.5s", "2m", "1h" into milliseconds (rules/model/duration.hpp); nullopt when malformed,
// without a unit, finer than 1ms or too large.
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// Why `text` is not a SQLSTATE usable in an ERR packet (a phrase), or empty when it is.
[[nodiscard]] std::string sql_state_problem(std::string_view text);

// The closest of `known` to a misspelled `unknown`, or empty.
[[nodiscard]] std::string_view suggest_field(std::string_view unknown, std::span<const std::string_view> known);

}  // namespace claimguard::rules::detail
