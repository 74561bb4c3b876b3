// The rule set the matcher and rewriter tests share, built in C++ (no YAML needed).
#pragma once

#include <string>

#include "rules/match/facts.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::rules::match::test {

// coupon_stock: the incident. inventory: two key columns, a schema, a floor, no version.
inline rule_set make_rules() {
    rule_set rs;
    stock_rule coupon;
    coupon.name = "coupon_stock";
    coupon.table = {"", "coupon_stock"};
    coupon.key_columns = {"campaign_id"};
    coupon.counter_column = "remain";
    coupon.floor = 0;
    coupon.version_column = "version";
    coupon.exhausted = {answer::kind::error, 1644, "45000", "coupons sold out"};
    rs.stocks.push_back(coupon);

    stock_rule inventory;
    inventory.name = "inventory";
    inventory.table = {"shop", "inventory"};
    inventory.key_columns = {"sku", "warehouse"};
    inventory.counter_column = "qty";
    inventory.floor = 5;
    inventory.exhausted = {answer::kind::error, 1644, "45000", "out of stock"};
    inventory.rule_mode = mode::observe;
    rs.stocks.push_back(inventory);

    claim_rule order;
    order.name = "coupon_order";
    order.table = {"", "coupon_order"};
    order.idempotency_columns = {"user_id", "campaign_id"};
    order.idempotency_key_column = "request_id";
    order.stock_rule = "coupon_stock";
    order.stock_key_mapping = {{"campaign_id", "campaign_id"}};
    order.redis = redis_guard{"lock:coupon:{user_id}:{campaign_id}", std::chrono::milliseconds(3000)};
    order.duplicate = {answer::kind::error, 1644, "45000", "already claimed"};
    rs.claims.push_back(order);

    claim_rule shop_order;
    shop_order.name = "shop_order";
    shop_order.table = {"shop", "orders"};
    shop_order.idempotency_columns = {"order_no"};
    shop_order.stock_rule = "inventory";
    shop_order.stock_key_mapping = {{"item_sku", "sku"}, {"wh", "warehouse"}};
    shop_order.duplicate = {answer::kind::ok, 0, "", ""};
    rs.claims.push_back(shop_order);
    return rs;
}

inline std::string render_value(const value_ref& v) {
    switch (v.type) {
        case value_ref::kind::literal: return std::string(v.text);
        case value_ref::kind::placeholder: return "?" + std::to_string(v.placeholder_index);
        case value_ref::kind::null: return "NULL";
        case value_ref::kind::default_: return "DEFAULT";
        case value_ref::kind::expression: return "expr(" + std::string(v.text) + ")";
        case value_ref::kind::absent: return "-";
    }
    return "?";
}

inline std::string render_key(const small_vector<value_ref, 2>& key) {
    std::string s = "[";
    for (std::size_t i = 0; i < key.size(); ++i) s += (i ? "," : "") + render_value(key[i]);
    return s + "]";
}

inline std::string render_table(const table_use& t) {
    return " table='" + std::string(t.written) + "'" + (t.alias.empty() ? "" : " alias=" + std::string(t.alias)) +
           (t.schema.empty() ? "" : " schema=" + std::string(t.schema));
}

inline std::string opt_index(const std::optional<std::uint32_t>& i) { return i ? std::to_string(*i) : "-"; }

// The counter's bounds written with arithmetic (" bounds=[>=0+2]"); nothing when there is none.
inline std::string render_arithmetic_bounds(const counter_change& c) {
    std::string s;
    for (const auto& b : c.bounds) {
        if (b.terms.empty()) continue;
        s += (s.empty() ? "" : " ") + std::string(b.strict ? ">" : ">=") + render_value(b.base);
        for (std::size_t i = 0; i < b.terms.size(); ++i)
            s += std::string((b.subtract >> i) & 1 ? "-" : "+") + render_value(b.terms[i]);
    }
    return s.empty() ? s : " bounds=[" + s + "]";
}

// One fact as a line with every field a test may care about.
inline std::string render(const fact& f) {
    struct visitor {
        std::string operator()(const counter_read& r) const {
            static const char* locks[] = {"none", "for_update", "for_share", "share_mode"};
            return "read " + r.rule->name + render_table(r.table) + " key=" + render_key(r.key) +
                   " pos=" + opt_index(r.counter_position) + " label=" + std::string(r.counter_label) +
                   " lock=" + locks[static_cast<int>(r.lock)];
        }
        std::string operator()(const counter_write& w) const {
            return "write " + w.rule->name + render_table(w.table) + " key=" + render_key(w.key) +
                   (w.full_key ? "" : " partial") + (w.extra_conditions ? " extra" : "") +
                   " value=" + render_value(w.value) + (w.expected ? " expected=" + render_value(*w.expected) : "") +
                   " at=" + std::to_string(w.assignment) + " version=" + opt_index(w.version_assignment) +
                   (w.recomputed ? " recomputed counted=" + w.counted->name + render_key(w.counted_key) : "");
        }
        std::string operator()(const counter_change& c) const {
            static const char* guards[] = {"none", "sufficient", "insufficient", "unknown"};
            return "change " + c.rule->name + render_table(c.table) + " key=" + render_key(c.key) +
                   (c.full_key ? "" : " partial") + " " + c.sign + render_value(c.amount) +
                   " delta=" + (c.delta ? std::to_string(*c.delta) : "-") +
                   " guard=" + guards[static_cast<int>(c.guard)] +
                   (c.guard_bound ? std::string(c.guard_strict ? " >" : " >=") + render_value(*c.guard_bound) : "") +
                   render_arithmetic_bounds(c) + " at=" + std::to_string(c.assignment) +
                   " version=" + opt_index(c.version_assignment);
        }
        std::string operator()(const claim_insert& c) const {
            std::string s = "claim " + c.rule->name + " stock=" + (c.stock ? c.stock->name : "-") + render_table(c.table);
            if (c.replace) s += " replace";
            if (c.ignore) s += " ignore";
            if (c.on_duplicate_update) s += " on_dup";
            if (!c.columns_known) s += " no_columns";
            s += " rows=[";
            for (std::size_t i = 0; i < c.rows.size(); ++i) {
                const auto& r = c.rows[i];
                s += (i ? " " : "") + std::string("{idem=") + render_key(r.idempotency) +
                     (r.idempotency_key ? " key=" + render_value(*r.idempotency_key) : "") +
                     " stock=" + render_key(r.stock_key) + "}";
            }
            s += "]";
            if (c.from_select) s += std::string(" from_select") + (c.select_guarded ? " guarded" : "");
            return s;
        }
        std::string operator()(const transaction_boundary& b) const {
            static const char* events[] = {"begin", "commit", "rollback", "savepoint", "rollback_to", "release",
                                           "autocommit_on", "autocommit_off", "autocommit_unknown"};
            return std::string("txn ") + events[static_cast<int>(b.event)] + (b.chain ? " chain" : "") +
                   (b.release ? " release" : "") + (b.read_only ? " read_only" : "");
        }
        std::string operator()(const session_change& c) const {
            switch (c.setting) {
                case session_setting::sql_mode:
                    if (!c.sql_mode) return "session sql_mode unknown";
                    return std::string("session sql_mode ansi=") + (c.sql_mode->ansi_quotes ? "1" : "0") +
                           " nbe=" + (c.sql_mode->no_backslash_escapes ? "1" : "0");
                case session_setting::client_charset:
                    return "session charset " +
                           (c.charset ? std::string(sql::charset_label(*c.charset)) : std::string("unknown"));
                case session_setting::database: return "session database " + std::string(c.database);
            }
            return "session ?";
        }
        std::string operator()(const claim_delete& c) const {
            return "delete " + c.rule->name + " stock=" + (c.stock ? c.stock->name : "-") + render_table(c.table) +
                   " idem=" + render_key(c.idempotency) + (c.by_idempotency ? "" : " partial") +
                   " stock_key=" + render_key(c.stock_key) + (c.stock_key_pinned ? "" : " unpinned") +
                   (c.extra_conditions ? " extra" : "");
        }
        std::string operator()(const unmodeled& u) const {
            return "unmodeled " + (u.stock ? u.stock->name : u.claim ? u.claim->name : std::string("-"));
        }
    };
    return std::visit(visitor{}, f);
}

}  // namespace claimguard::rules::match::test
