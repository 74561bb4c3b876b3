// Redis key templates such as "lock:coupon:{user_id}:{campaign_id}": parsing and expansion.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::rules {

// One piece of a key template: literal text, or a column whose value is substituted.
struct template_part {
    enum class kind { literal, column };
    kind type = kind::literal;
    std::string text;  // the literal, or the column name
};

struct parsed_key_template {
    std::vector<template_part> parts;
    std::string error;        // empty when the template is well formed
    std::size_t error_offset = 0;  // byte offset of the problem in the template
};

// Splits a template into literals and {column} placeholders. "{{" and "}}" stand for literal
// braces. An unclosed "{", a stray "}" or an empty "{}" is an error.
[[nodiscard]] parsed_key_template parse_key_template(std::string_view key_template);

// The key with every placeholder replaced by `value_of(column)` (a callable returning a string).
template <class ValueOf>
[[nodiscard]] std::string expand_key_template(const std::vector<template_part>& parts, ValueOf&& value_of) {
    std::string key;
    for (const auto& part : parts)
        key += part.type == template_part::kind::literal ? part.text : std::string(value_of(part.text));
    return key;
}

}  // namespace claimguard::rules
