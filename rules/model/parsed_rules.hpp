// Internal: rules as read from the files, with the positions cross-rule checks report at.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/model/rules.hpp"
#include "rules/model/yaml_fields.hpp"

namespace claimguard::rules::detail {

struct parsed_stock {
    stock_rule rule;
    source_pos name_pos;   // the name: value, or the rule's first field when the name is implied
    source_pos table_pos;
    bool complete = true;  // every field was read without error
    std::size_t order = 0;  // position among all rules read, across files
};

struct parsed_claim {
    claim_rule rule;
    source_pos name_pos;
    source_pos table_pos;
    source_pos consumes_pos;        // the stock rule's name
    // consumes.columns as written (claim column -> stock key column); empty: same names.
    std::vector<std::pair<located_name, located_name>> explicit_mapping;
    source_pos redis_key_pos;
    bool complete = true;
    std::size_t order = 0;
};

// Everything read from all files, in file order.
struct parsed_rules {
    std::optional<std::pair<mode, source_pos>> default_mode;
    std::vector<parsed_stock> stocks;
    std::vector<parsed_claim> claims;
    std::vector<std::string> trusted_users;
    // rule_modes: (an overlay file): a rule's mode set apart from the rule, where written.
    struct rule_mode_override {
        located_name rule;
        mode value = mode::enforce;
    };
    std::vector<rule_mode_override> rule_modes;
};

// Reads one parsed YAML document into `out`, reporting problems within a file and within a rule.
void read_rules_document(yaml_file& file, const YAML::Node& root, parsed_rules& out);

// The fields of each mapping of a rules file as the reader knows them, for the test that holds
// docs/RULES.md to the reader. `mapping` is named as in "unknown field" errors: "a stock rule", "admission".
struct known_field {
    std::string_view name;
    bool required = false;
};
struct known_mapping {
    std::string_view mapping;
    std::vector<known_field> fields;
};
[[nodiscard]] std::vector<known_mapping> known_fields();

// Checks across rules and files (names, tables, consumes, mappings, key templates) and fills
// each claim's stock_key_mapping.
void validate_rules(parsed_rules& rules, diagnostics& diags);

// Warnings for a valid rule set: a Redis key template whose {hash tag} puts every claim, or every
// claim on one stock key (one campaign), in one Redis Cluster slot, i.e. on one node.
void warn_redis_key_slots(const parsed_rules& rules, std::vector<diagnostic>& warnings);

}  // namespace claimguard::rules::detail
