// Internal: checks across rules and files (names, tables, consumes, column mappings, Redis key templates).
#include <algorithm>
#include <map>
#include <optional>

#include "rules/model/key_template.hpp"
#include "rules/model/parsed_rules.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules::detail {
namespace {

std::string where(const source_pos& p) {
    return p.file + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

std::string display_table(const table_name& t) { return t.schema.empty() ? t.name : t.schema + "." + t.name; }

// Two rule tables can be the same table when the names match and a schema is missing or equal.
bool same_table(const table_name& a, const table_name& b) {
    return iequals(a.name, b.name) && (a.schema.empty() || b.schema.empty() || iequals(a.schema, b.schema));
}

std::string join_names(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

struct rule_ref {
    std::size_t order;
    std::string_view kind;  // "stock" or "claim"
    const std::string* name;
    const source_pos* name_pos;
    const source_pos* rule_pos;
};

void check_unique_names(const parsed_rules& rules, diagnostics& diags) {
    std::vector<rule_ref> all;
    for (const auto& s : rules.stocks)
        all.push_back({s.order, "stock", &s.rule.name, &s.name_pos, &s.rule.pos});
    for (const auto& c : rules.claims)
        all.push_back({c.order, "claim", &c.rule.name, &c.name_pos, &c.rule.pos});
    std::sort(all.begin(), all.end(), [](const rule_ref& a, const rule_ref& b) { return a.order < b.order; });
    std::map<std::string_view, const rule_ref*> seen;
    for (const auto& r : all) {
        if (r.name->empty())
            continue;
        const auto [it, inserted] = seen.emplace(*r.name, &r);
        if (inserted)
            continue;
        const auto first = "the " + std::string(it->second->kind) + " rule at " + where(*it->second->rule_pos);
        const bool implied = r.name_pos == r.rule_pos || *r.name_pos == *r.rule_pos;
        diags.add(*r.name_pos, implied ? "this rule's name defaults to its table " + quoted(*r.name) +
                                             ", which " + first + " already uses; give one of them a name:"
                                       : "there is already a rule named " + quoted(*r.name) + " (" + first +
                                             "); rule names must be unique across all files");
    }
}

void check_unique_tables(const parsed_rules& rules, diagnostics& diags) {
    std::map<std::string, std::vector<const parsed_stock*>> stocks;
    for (const auto& s : rules.stocks) {
        if (s.rule.table.name.empty() || s.rule.counter_column.empty())
            continue;
        auto& bucket = stocks[ascii_lower(s.rule.table.name)];
        const auto clash = std::find_if(bucket.begin(), bucket.end(), [&](const parsed_stock* o) {
            return same_table(o->rule.table, s.rule.table) && iequals(o->rule.counter_column, s.rule.counter_column);
        });
        if (clash != bucket.end())
            diags.add(s.table_pos, "stock rule " + quoted(s.rule.name) + " guards the same counter " +
                                       quoted(display_table(s.rule.table) + "." + s.rule.counter_column) +
                                       " as stock rule " + quoted((*clash)->rule.name) + " at " +
                                       where((*clash)->rule.pos) + "; one rule per counter");
        else
            bucket.push_back(&s);
    }
    std::map<std::string, std::vector<const parsed_claim*>> claims;
    for (const auto& c : rules.claims) {
        if (c.rule.table.name.empty())
            continue;
        auto& bucket = claims[ascii_lower(c.rule.table.name)];
        const auto clash = std::find_if(bucket.begin(), bucket.end(), [&](const parsed_claim* o) {
            return same_table(o->rule.table, c.rule.table);
        });
        if (clash != bucket.end())
            diags.add(c.table_pos, "claim rule " + quoted(c.rule.name) + " is on the same table " +
                                       quoted(display_table(c.rule.table)) + " as claim rule " +
                                       quoted((*clash)->rule.name) + " at " + where((*clash)->rule.pos) +
                                       "; one claim rule per table");
        else
            bucket.push_back(&c);
    }
}

// Fills claim.rule.stock_key_mapping; false when the mapping could not be worked out.
bool resolve_mapping(parsed_claim& claim, const parsed_stock& stock, diagnostics& diags) {
    const auto& keys = stock.rule.key_columns;
    auto& mapping = claim.rule.stock_key_mapping;
    if (claim.explicit_mapping.empty()) {
        for (const auto& k : keys)
            mapping.emplace_back(k, k);
        return true;
    }
    bool ok = true;
    std::vector<const located_name*> claim_col_of(keys.size(), nullptr);
    for (const auto& entry : claim.explicit_mapping) {
        // Named references, not structured bindings: clang 14 cannot capture those in lambdas.
        const located_name& claim_col = entry.first;
        const located_name& stock_col = entry.second;
        const auto k = std::find_if(keys.begin(), keys.end(), [&](const auto& key) { return iequals(key, stock_col.name); });
        if (k == keys.end()) {
            diags.add(stock_col.pos, "columns maps " + quoted(claim_col.name) + " to " + quoted(stock_col.name) +
                                         ", but stock rule " + quoted(stock.rule.name) +
                                         " has no key column by that name; its key columns are: " + join_names(keys));
            ok = false;
            continue;
        }
        auto& slot = claim_col_of[static_cast<std::size_t>(k - keys.begin())];
        if (slot != nullptr) {
            diags.add(stock_col.pos, "columns maps both " + quoted(slot->name) + " and " + quoted(claim_col.name) +
                                         " to stock key column " + quoted(*k) + "; map exactly one");
            ok = false;
            continue;
        }
        slot = &claim_col;
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
        if (claim_col_of[i] == nullptr && ok) {
            diags.add(claim.consumes_pos, "consumes does not say which column of " +
                                              quoted(display_table(claim.rule.table)) + " holds stock key column " +
                                              quoted(keys[i]) + " of stock rule " + quoted(stock.rule.name) +
                                              "; add it under columns:");
            ok = false;
        }
    }
    if (ok)
        for (std::size_t i = 0; i < keys.size(); ++i)
            mapping.emplace_back(claim_col_of[i]->name, keys[i]);
    return ok;
}

void check_key_template(const parsed_claim& claim, bool mapping_known, diagnostics& diags) {
    const auto& r = claim.rule;
    if (!r.redis)
        return;
    const auto parts = parse_key_template(r.redis->key_template).parts;
    std::vector<std::string> columns = r.idempotency_columns;
    if (r.idempotency_key_column)
        columns.push_back(*r.idempotency_key_column);
    for (const auto& mapped : r.stock_key_mapping)
        if (std::none_of(columns.begin(), columns.end(), [&](const auto& c) { return iequals(c, mapped.first); }))
            columns.push_back(mapped.first);
    const auto uses = [&](std::string_view column) {
        return std::any_of(parts.begin(), parts.end(), [&](const template_part& p) {
            return p.type == template_part::kind::column && iequals(p.text, column);
        });
    };
    bool any_placeholder = false;
    for (const auto& p : parts) {
        if (p.type != template_part::kind::column)
            continue;
        any_placeholder = true;
        const bool known = std::any_of(columns.begin(), columns.end(), [&](const auto& c) { return iequals(c, p.text); });
        if (!known && mapping_known)
            diags.add(claim.redis_key_pos, "redis key names column " + quoted(p.text) + ", which claim rule " +
                                               quoted(r.name) + " does not have; it can use: " + join_names(columns));
    }
    if (!any_placeholder) {
        std::string example;
        for (const auto& c : r.idempotency_columns)
            example += ":{" + c + "}";
        diags.add(claim.redis_key_pos, "redis key names no column, so every claim would share one lock; add the "
                                       "idempotency columns, e.g. lock" + example);
        return;
    }
    if (r.idempotency_key_column && uses(*r.idempotency_key_column))
        return;  // the request id alone tells claims apart
    for (const auto& c : r.idempotency_columns)
        if (!uses(c))
            diags.add(claim.redis_key_pos, "redis key leaves out idempotency column " + quoted(c) +
                                               ", so two different claims could share one lock and the second would "
                                               "be refused as already claimed; add {" + c + "}");
}

void check_consumes(parsed_rules& rules, diagnostics& diags) {
    std::map<std::string_view, const parsed_stock*> stock_by_name;
    std::vector<std::string_view> stock_names;
    for (const auto& s : rules.stocks) {
        if (!s.rule.name.empty() && stock_by_name.emplace(s.rule.name, &s).second)
            stock_names.push_back(s.rule.name);
    }
    for (auto& c : rules.claims) {
        if (c.rule.stock_rule.empty()) {
            check_key_template(c, false, diags);
            continue;
        }
        const auto it = stock_by_name.find(c.rule.stock_rule);
        if (it == stock_by_name.end()) {
            const bool is_claim = std::any_of(rules.claims.begin(), rules.claims.end(), [&](const parsed_claim& o) {
                return o.rule.name == c.rule.stock_rule;
            });
            std::string hint;
            if (is_claim)
                hint = "; " + quoted(c.rule.stock_rule) + " is a claim rule, and a claim consumes a stock rule";
            else if (const auto s = suggest_field(c.rule.stock_rule, stock_names); !s.empty())
                hint = "; did you mean '" + std::string(s) + "'?";
            else if (stock_names.empty())
                hint = "; the rule set has no stock rules";
            diags.add(c.consumes_pos, "claim rule " + quoted(c.rule.name) + " consumes stock rule " +
                                          quoted(c.rule.stock_rule) + ", but there is no stock rule by that name" +
                                          hint);
            c.complete = false;
            check_key_template(c, false, diags);
            continue;
        }
        const auto& stock = *it->second;
        bool mapping_known = false;
        if (stock.complete && !stock.rule.key_columns.empty()) {
            mapping_known = resolve_mapping(c, stock, diags);
            c.complete = c.complete && mapping_known;
        }
        check_key_template(c, mapping_known, diags);
    }
}

// rule_modes: each name is a rule of some file; one rule is given one mode; the overlay's mode
// replaces the rule's own `mode:`.
void apply_rule_modes(parsed_rules& rules, diagnostics& diags) {
    std::map<std::string_view, const parsed_rules::rule_mode_override*> seen;
    for (const auto& o : rules.rule_modes) {
        std::optional<mode>* target = nullptr;
        for (auto& s : rules.stocks)
            if (s.rule.name == o.rule.name) target = &s.rule.rule_mode;
        for (auto& c : rules.claims)
            if (c.rule.name == o.rule.name) target = &c.rule.rule_mode;
        if (target == nullptr) {
            std::vector<std::string> names;
            for (const auto& s : rules.stocks) names.push_back(s.rule.name);
            for (const auto& c : rules.claims) names.push_back(c.rule.name);
            diags.add(o.rule.pos, "rule_modes names " + quoted(o.rule.name) + ", which is no rule of these files" +
                                      (names.empty() ? std::string() : " (rules: " + join_names(names) + ")"));
            continue;
        }
        const auto [it, inserted] = seen.emplace(o.rule.name, &o);
        if (!inserted && it->second->value != o.value) {
            diags.add(o.rule.pos, "rule_modes sets " + quoted(o.rule.name) + " to " +
                                      (o.value == mode::enforce ? "enforce" : "observe") + " here but to " +
                                      (it->second->value == mode::enforce ? "enforce" : "observe") + " at " +
                                      where(it->second->rule.pos));
            continue;
        }
        *target = o.value;
    }
}

}  // namespace

void validate_rules(parsed_rules& rules, diagnostics& diags) {
    check_unique_names(rules, diags);
    check_unique_tables(rules, diags);
    check_consumes(rules, diags);
    apply_rule_modes(rules, diags);
}

// The hash tag of the keys a template expands to, assuming column values hold no braces: Redis
// hashes only what lies between the first '{' and the next '}' when that is not empty.
struct template_hash_tag {
    bool present = false;
    std::vector<std::string> columns;  // placeholders inside the tag
    std::string literal;               // literal text inside the tag
};

template_hash_tag hash_tag_of(const std::vector<template_part>& parts) {
    template_hash_tag tag;
    bool open = false;
    for (const auto& p : parts) {
        if (p.type == template_part::kind::column) {
            if (open) tag.columns.push_back(p.text);
            continue;
        }
        for (char c : p.text) {
            if (!open) {
                open = c == '{';
            } else if (c == '}') {
                tag.present = !tag.columns.empty() || !tag.literal.empty();
                if (!tag.present) return {};  // "{}": Redis hashes the whole key
                return tag;
            } else {
                tag.literal += c;
            }
        }
    }
    return {};  // never closed: the whole key is hashed
}

void warn_redis_key_slots(const parsed_rules& rules, std::vector<diagnostic>& warnings) {
    for (const auto& claim : rules.claims) {
        const auto& r = claim.rule;
        if (!r.redis)
            continue;
        const auto tag = hash_tag_of(parse_key_template(r.redis->key_template).parts);
        if (!tag.present)
            continue;  // each key hashed whole: claims spread over every slot, the best case for one-key locks
        if (tag.columns.empty()) {
            warnings.push_back({claim.redis_key_pos,
                                "redis key's hash tag {" + tag.literal + "} is the same for every claim of rule " +
                                    quoted(r.name) + ", so on a Redis Cluster every lock lands in one slot and one "
                                    "node takes all claims; drop the tag (write the key without '{{ }}')"});
            continue;
        }
        const bool only_stock_key = std::all_of(tag.columns.begin(), tag.columns.end(), [&](const std::string& c) {
            return std::any_of(r.stock_key_mapping.begin(), r.stock_key_mapping.end(),
                               [&](const auto& m) { return iequals(m.first, c); });
        });
        if (only_stock_key)
            warnings.push_back({claim.redis_key_pos,
                                "redis key's hash tag holds only " + join_names(tag.columns) +
                                    ", so on a Redis Cluster every claim on one " + quoted(r.stock_rule) +
                                    " stock row shares one slot: a flash sale's whole load goes to one node; drop "
                                    "the tag, or tag the user's column instead"});
    }
}

}  // namespace claimguard::rules::detail
