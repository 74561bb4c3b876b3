// Test harness for the claim engine: rules from rules/examples/coupon.yaml (and variants),
// real statements through the parser and matcher, and a session's memory.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/engine/decide.hpp"
#include "proxy/engine/memory.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/parser.hpp"

namespace claimguard::engine::test {

namespace match = rules::match;

enum class variant_id { coupon, observe, strict, floor5, no_version, count_ };

inline const char* variant_name(variant_id v) {
    switch (v) {
    case variant_id::coupon: return "coupon";
    case variant_id::observe: return "observe";
    case variant_id::strict: return "strict";
    case variant_id::floor5: return "floor5";
    case variant_id::no_version: return "no_version";
    case variant_id::count_: break;
    }
    return "?";
}

// The rules of one variant; `error` says why it could not be built.
struct rules_env {
    std::string error;
    std::optional<rules::rule_set> rules;
    std::unique_ptr<match::rule_index> index;  // views `rules`
};

inline std::string read_coupon_yaml() {
    std::ifstream in(CLAIMGUARD_COUPON_RULES);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// Replaces the one occurrence of `from`; false when it is not in the text.
inline bool replace_once(std::string& text, std::string_view from, std::string_view to) {
    const auto pos = text.find(from);
    if (pos == std::string::npos || text.find(from, pos + 1) != std::string::npos) return false;
    text.replace(pos, from.size(), to);
    return true;
}

inline std::unique_ptr<rules_env> build_env(variant_id v) {
    auto env = std::make_unique<rules_env>();
    std::string text = read_coupon_yaml();
    if (text.empty()) {
        env->error = "cannot read " CLAIMGUARD_COUPON_RULES;
        return env;
    }
    bool ok = true;
    switch (v) {
    case variant_id::coupon: break;
    case variant_id::observe: ok = replace_once(text, "default_mode: enforce", "default_mode: observe"); break;
    case variant_id::strict:
        ok = replace_once(text, "strictness: after_refused", "strictness: require_decrement");
        break;
    case variant_id::floor5: ok = replace_once(text, "floor: 0", "floor: 5"); break;
    case variant_id::no_version: {
        const auto pos = text.find("version_column:");
        ok = pos != std::string::npos;
        if (ok) text.erase(text.rfind('\n', pos) + 1, text.find('\n', pos) - text.rfind('\n', pos));
        break;
    }
    case variant_id::count_: ok = false; break;
    }
    if (!ok) {
        env->error = std::string("coupon.yaml changed: cannot make variant ") + variant_name(v);
        return env;
    }
    auto loaded = rules::load_rules({{"coupon.yaml", text}});
    if (!loaded.rules) {
        env->error = loaded.errors.empty() ? "no rules" : rules::format_diagnostic(loaded.errors.front());
        return env;
    }
    env->rules = std::move(loaded.rules);
    env->index = std::make_unique<match::rule_index>(*env->rules);
    return env;
}

inline const rules_env& env_for(variant_id v) {
    static std::array<std::unique_ptr<rules_env>, static_cast<std::size_t>(variant_id::count_)> envs;
    auto& slot = envs[static_cast<std::size_t>(v)];
    if (!slot) slot = build_env(v);
    return *slot;
}

// One statement, parsed and matched; not movable, since the facts view its text.
class statement {
public:
    statement(std::string text, const match::rule_index& index)
        : text_(std::move(text)), parsed_(rules::sql::parse(text_, rules::sql::lexer_options{})),
          facts_(match::match(parsed_, index)) {}
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    [[nodiscard]] const match::match_result& facts() const { return facts_; }

private:
    std::string text_;
    rules::sql::parsed_statement parsed_;
    match::match_result facts_;
};

// Literals as decoded; placeholders bound to integers, as COM_STMT_EXECUTE binds them.
inline value_resolver bound_integers(std::vector<std::int64_t> params) {
    return [params = std::move(params)](const match::value_ref& v) -> std::optional<resolved_value> {
        if (v.type == match::value_ref::kind::placeholder) {
            if (v.placeholder_index >= params.size()) return std::nullopt;
            resolved_value r;
            r.integer = params[v.placeholder_index];
            r.canonical = std::to_string(params[v.placeholder_index]);
            return r;
        }
        return resolve_literal(v);
    };
}

// A session: its memory and the statements its decisions view.
class session {
public:
    explicit session(variant_id v) : env_(env_for(v)) {}

    [[nodiscard]] bool ready() const { return env_.error.empty(); }
    [[nodiscard]] const std::string& error() const { return env_.error; }

    decision run(std::string sql, const value_resolver& values = resolve_literal) {
        statements_.push_back(std::make_unique<statement>(std::move(sql), *env_.index));
        return decide(statements_.back()->facts(), *env_.rules, values, memory);
    }

    // SELECT remain ... answered with `counter`.
    void read(std::string_view key_sql, std::int64_t counter) {
        auto d = run("SELECT remain FROM coupon_stock WHERE campaign_id = " + std::string(key_sql));
        ASSERT_EQ(d.what, verdict::remember_read) << d.note;
        after_read(memory, d, counter);
    }

    // The incident's absolute write, after a read, answered (succeeded or refused).
    decision absolute_decrement(std::string_view key_sql, std::int64_t value, bool succeeded, bool in_transaction) {
        auto d = run("UPDATE coupon_stock SET remain = " + std::to_string(value) +
                     " WHERE campaign_id = " + std::string(key_sql));
        EXPECT_EQ(d.what, verdict::decrement) << d.note;
        if (d.what == verdict::decrement) after_decrement(memory, d, succeeded, in_transaction);
        return d;
    }

    decision claim(std::string_view user_sql, std::string_view key_sql) {
        return run("INSERT INTO coupon_order (user_id, campaign_id) VALUES (" + std::string(user_sql) + ", " +
                   std::string(key_sql) + ")");
    }

    [[nodiscard]] const stock_entry* entry(const key_tuple& key) const { return memory.find("coupon_stock", key); }

    session_memory memory;

private:
    const rules_env& env_;
    std::vector<std::unique_ptr<statement>> statements_;
};

}  // namespace claimguard::engine::test
