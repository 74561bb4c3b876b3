// Internal: a mapping of the rules file read from one table of its fields, so that a field is named once: the
// table gives the "unknown field" check its list, says which fields are required, and drives the reading.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rules/model/yaml_fields.hpp"

namespace claimguard::rules::detail {

// What a mapping gets when it leaves a field out, or writes it with no value (`floor:`).
enum class presence {
    optional,   // left out or written empty: the field's default
    required,   // left out: "<owner> has no <name>: (<hint>)"; written empty: its reader reports it
    not_empty,  // may be left out, but written empty its reader reports it (`name:`)
};

// One field of a mapping and how it is read into T (the rule, or the mapping, being read). `read` reports
// the value's problems itself and then clears T's `complete`.
template <class T>
struct field_spec {
    std::string_view name;
    void (*read)(yaml_file&, const field&, T&);
    presence need = presence::optional;
    std::string_view hint = {};      // a required field: what its "has no" error suggests
    void (*left_out)(T&) = nullptr;  // a default that depends on other fields, set when the field is left out
};

// The fields' names in table order: what read_fields accepts, and lists in its "unknown field" errors.
template <class T, std::size_t N>
std::array<std::string_view, N> names_of(const field_spec<T> (&specs)[N]) {
    std::array<std::string_view, N> names;
    for (std::size_t i = 0; i < N; ++i) names[i] = specs[i].name;
    return names;
}

// Reads mapping `node` field by field in the order of `specs`, so a reader may use the fields above it
// (counter_column checks key_columns), then sets the defaults of the fields left out, which may use any
// field (a rule left unnamed is named after its table). `what` names the mapping in "unknown field"
// errors; a required field left out is reported as "<owner> has no <name>: (<hint>)" at `owner_pos`.
// T has a `complete` flag, cleared when a required field is missing.
template <class T, std::size_t N>
void read_mapping(yaml_file& file, const YAML::Node& node, std::string_view what, std::string_view owner,
                  const source_pos& owner_pos, const field_spec<T> (&specs)[N], T& target) {
    const std::vector<field> fields = read_fields(file, node, what, names_of(specs));
    std::array<const field*, N> found{};
    for (std::size_t i = 0; i < N; ++i) {
        const auto& spec = specs[i];
        const auto it = std::find_if(fields.begin(), fields.end(), [&](const field& f) { return f.name == spec.name; });
        if (it != fields.end() && !(spec.need == presence::optional && it->value.IsNull())) found[i] = &*it;
        if (found[i] != nullptr) {
            spec.read(file, *found[i], target);
        } else if (spec.need == presence::required) {
            file.diags().add(owner_pos, std::string(owner) + " has no " + std::string(spec.name) + ": (" +
                                            std::string(spec.hint) + ")");
            target.complete = false;
        }
    }
    for (std::size_t i = 0; i < N; ++i) {
        if (found[i] == nullptr && specs[i].left_out != nullptr) specs[i].left_out(target);
    }
}

}  // namespace claimguard::rules::detail
