// The database's own code (procedures, functions, views, triggers, events) that reaches a protected
// table: found by the schema check in information_schema, carried by the rules snapshot.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rules/model/rules.hpp"

namespace claimguard::rules::match {

enum class code_kind : std::uint8_t { procedure, function, view, trigger, event };

// One object whose text names a protected table (or names another object that does).
struct code_object {
    code_kind kind = code_kind::procedure;
    std::string schema;
    std::string name;   // the routine, view, trigger or event
    std::string table;  // trigger: the table it fires on (EVENT_OBJECT_TABLE); empty otherwise
    std::string rule;   // the stock or claim rule whose table it reaches
    std::string via;    // the name in its text that reaches it: the rule's table, or a view/routine/table that does
    friend bool operator==(const code_object&, const code_object&) = default;
};

// "procedure", "function", "view", "trigger", "event": for reports.
[[nodiscard]] std::string_view to_string(code_kind k) noexcept;

// The unmodeled fact's code (the metric label): "routine", "view", "trigger" or "event".
[[nodiscard]] std::string_view fact_code(code_kind k) noexcept;

// Whether `text` names `name` as a whole identifier (quoted or not), ignoring ASCII case: the
// bytes around it cannot be part of an identifier. Comments and strings count too (a false
// match only means a statement is looked at, never that one is missed).
[[nodiscard]] bool names_identifier(std::string_view text, std::string_view name) noexcept;

}  // namespace claimguard::rules::match
