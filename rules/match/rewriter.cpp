// Building the conditional decrement and the compensation from original tokens and rule names.
#include "rules/match/rewriter.hpp"

#include <limits>
#include <string>
#include <vector>

#include "rules/sql/text.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::rules::match {
namespace {

// Appends statement tokens as written; trivia between them (comments, versioned-comment
// markers, whitespace) becomes one space.
class writer {
public:
    writer(const sql::parsed_statement& st, rewritten_sql& out) : st_(st), out_(out) {}

    void copy(sql::token_span s) {
        for (std::uint32_t i = s.first; i < s.last; ++i) {
            const sql::token& t = st_.tokens[i];
            if (i != s.first && (t.flags & sql::token_flag::gap_before) != 0) out_.sql.push_back(' ');
            out_.sql.append(t.text(st_.sql));
            if (t.kind == sql::token_kind::placeholder) out_.parameters.push_back(t.aux);
        }
    }
    void text(std::string_view s) { out_.sql.append(s); }
    void placeholder(std::uint32_t index) {
        out_.sql.push_back('?');
        out_.parameters.push_back(index);
    }

private:
    const sql::parsed_statement& st_;
    rewritten_sql& out_;
};

[[nodiscard]] std::string table_sql(const table_name& t, std::string_view schema = {}) {
    if (!t.schema.empty()) return sql::quote_identifier(t.schema) + "." + sql::quote_identifier(t.name);
    if (!schema.empty()) return sql::quote_identifier(schema) + "." + sql::quote_identifier(t.name);
    return sql::quote_identifier(t.name);
}

}  // namespace

result<rewritten_sql> conditional_decrement(const sql::parsed_statement& st, const stock_rule& rule,
                                            std::uint32_t counter_assignment,
                                            std::optional<std::uint32_t> version_assignment,
                                            const decrement_amount& amount) {
    const auto* u = std::get_if<sql::update_statement>(&st.body);
    if (u == nullptr || counter_assignment >= u->assignments.size() ||
        (version_assignment && *version_assignment >= u->assignments.size()))
        return errc::not_an_update;
    if (amount.placeholder && rule.floor != 0) return errc::amount_needs_value;
    if (!amount.placeholder && amount.units <= 0) return errc::amount_not_positive;
    if (!amount.placeholder && rule.floor > std::numeric_limits<std::int64_t>::max() - amount.units)
        return errc::amount_out_of_range;

    rewritten_sql out;
    out.sql.reserve(st.sql.size() + 64);
    writer w(st, out);
    const sql::assignment& counter = u->assignments[counter_assignment];
    auto counter_ref = [&] { w.copy(counter.column.span); };
    auto version_ref = [&] {
        if (version_assignment) {
            w.copy(u->assignments[*version_assignment].column.span);
        } else {  // the counter's qualifier (s. of s.remain), then the rule's column name
            w.copy({counter.column.span.first, counter.column.name});
            w.text(sql::quote_identifier(*rule.version_column));
        }
    };
    auto bump_version = [&] {
        version_ref();
        w.text(" = ");
        version_ref();
        w.text(" + 1");
    };

    w.text("UPDATE ");
    if (!u->modifiers.empty()) {
        w.copy(u->modifiers);
        w.text(" ");
    }
    w.copy(u->tables);  // a multi-table UPDATE keeps its joins and their ON conditions as written
    w.text(" SET ");
    for (std::uint32_t i = 0; i < u->assignments.size(); ++i) {
        if (i != 0) w.text(", ");
        if (i == counter_assignment) {
            counter_ref();
            w.text(" = ");
            counter_ref();
            w.text(" - ");
            if (amount.placeholder) w.placeholder(*amount.placeholder);
            else w.text(std::to_string(amount.units));
            if (rule.version_column && !version_assignment) {
                w.text(", ");
                bump_version();
            }
        } else if (version_assignment && i == *version_assignment && rule.version_column) {
            bump_version();
        } else {
            w.copy(u->assignments[i].span);
        }
    }
    w.text(" WHERE ");
    if (u->where.present) {
        w.copy(u->where.span);
        w.text(" AND ");
    }
    counter_ref();
    w.text(" >= ");
    if (amount.placeholder) {
        w.placeholder(*amount.placeholder);
    } else {
        w.text(std::to_string(rule.floor + amount.units));
    }
    if (amount.lower_than) {
        w.text(" AND ");
        counter_ref();
        w.text(" > ");
        if (amount.lower_than->type == value_ref::kind::placeholder) w.placeholder(amount.lower_than->placeholder_index);
        else if (amount.lower_than->type == value_ref::kind::literal) w.text(amount.lower_than->text);
        else return errc::not_an_update;
    }
    if (!u->limit.empty()) {
        w.text(" ");
        w.copy(u->limit);
    }
    return out;
}

result<rewritten_sql> rewrite_write(const sql::parsed_statement& st, const counter_write& fact, std::int64_t units,
                                    bool only_if_lower) {
    if (fact.rule == nullptr) return errc::not_an_update;
    decrement_amount amount{units, std::nullopt, only_if_lower ? &fact.value : nullptr};
    return conditional_decrement(st, *fact.rule, fact.assignment, fact.version_assignment, amount);
}

result<rewritten_sql> rewrite_change(const sql::parsed_statement& st, const counter_change& fact,
                                     std::optional<std::int64_t> units) {
    if (fact.rule == nullptr) return errc::not_an_update;
    if (!fact.is_decrement() && !units) return errc::amount_not_positive;
    decrement_amount amount;
    if (units) amount.units = *units;
    else if (fact.amount.type == value_ref::kind::placeholder) amount.placeholder = fact.amount.placeholder_index;
    else if (fact.delta) amount.units = -*fact.delta;
    else return errc::amount_not_integer;
    return conditional_decrement(st, *fact.rule, fact.assignment, fact.version_assignment, amount);
}

namespace {

// " WHERE k1 = <original token or ?> AND ...": the key as the statement wrote it.
[[nodiscard]] bool append_key_where(rewritten_sql& out, const stock_rule& rule, std::span<const value_ref> key) {
    if (key.size() != rule.key_columns.size()) return false;
    for (const auto& v : key)
        if (!v.is_bindable()) return false;
    out.sql += " WHERE ";
    for (std::size_t i = 0; i < key.size(); ++i) {
        if (i != 0) out.sql += " AND ";
        out.sql += sql::quote_identifier(rule.key_columns[i]);
        out.sql += " = ";
        if (key[i].type == value_ref::kind::placeholder) {
            out.sql.push_back('?');
            out.parameters.push_back(key[i].placeholder_index);
        } else {
            out.sql.append(key[i].text);
        }
    }
    return true;
}

}  // namespace

namespace {

// WHERE k1 = <literal> AND ...: the key as literals (integers in canonical decimal, anything else as
// a hex literal of its bytes).
void append_literal_key(std::string& out, const stock_rule& rule, std::span<const key_literal> key) {
    static constexpr char digits[] = "0123456789ABCDEF";
    out += " WHERE ";
    for (std::size_t i = 0; i < key.size(); ++i) {
        if (i != 0) out += " AND ";
        out += sql::quote_identifier(rule.key_columns[i]) + " = ";
        const auto& v = key[i];
        bool canonical_integer = v.integer && !v.value.empty();
        for (std::size_t j = 0; canonical_integer && j < v.value.size(); ++j)
            canonical_integer =
                (v.value[j] >= '0' && v.value[j] <= '9') || (j == 0 && v.value[j] == '-' && v.value.size() > 1);
        if (canonical_integer) {
            out += v.value;
        } else if (v.value.empty()) {
            out += "''";
        } else {
            out += "X'";
            for (unsigned char c : v.value) {
                out.push_back(digits[c >> 4]);
                out.push_back(digits[c & 15]);
            }
            out += "'";
        }
    }
}

// UPDATE t SET c = c <sign> units [, version = version + takes] WHERE <key as literals>[ AND c >= floor + units].
result<rewritten_sql> literal_change(const stock_rule& rule, std::span<const key_literal> key, std::int64_t units,
                                     std::string_view database, char sign, std::int64_t takes = 1) {
    if (units <= 0) return errc::amount_not_positive;
    if (rule.floor > std::numeric_limits<std::int64_t>::max() - units) return errc::amount_out_of_range;
    if (key.empty() || key.size() != rule.key_columns.size()) return errc::key_not_bindable;
    rewritten_sql out;
    const std::string counter = sql::quote_identifier(rule.counter_column);
    table_name table = rule.table;
    if (table.schema.empty()) table.schema = std::string(database);
    out.sql = "UPDATE " + table_sql(table) + " SET " + counter + " = " + counter + " " + sign + " " + std::to_string(units);
    if (rule.version_column) {
        const std::string version = sql::quote_identifier(*rule.version_column);
        out.sql += ", " + version + " = " + version + " + " + std::to_string(takes);
    }
    append_literal_key(out.sql, rule, key);
    if (sign == '-') out.sql += " AND " + counter + " >= " + std::to_string(rule.floor + units);
    return out;
}

}  // namespace

result<rewritten_sql> deferred_decrement(const stock_rule& rule, std::span<const key_literal> key, std::int64_t units,
                                         std::string_view database) {
    return literal_change(rule, key, units, database, '-');
}

result<rewritten_sql> group_decrement(const stock_rule& rule, std::span<const key_literal> key, std::int64_t units,
                                      std::int64_t takes, std::string_view database) {
    if (takes <= 0) return errc::amount_not_positive;
    return literal_change(rule, key, units, database, '-', takes);
}

result<rewritten_sql> literal_give_back(const stock_rule& rule, std::span<const key_literal> key, std::int64_t units,
                                        std::string_view database) {
    return literal_change(rule, key, units, database, '+');
}

result<rewritten_sql> reserve_read(const stock_rule& rule, std::span<const key_literal> key,
                                   std::string_view database) {
    if (key.empty() || key.size() != rule.key_columns.size()) return errc::key_not_bindable;
    table_name table = rule.table;
    if (table.schema.empty()) table.schema = std::string(database);
    rewritten_sql out;
    out.sql = "SELECT " + sql::quote_identifier(rule.counter_column) + " FROM " + table_sql(table);
    append_literal_key(out.sql, rule, key);
    out.sql += " FOR UPDATE";
    return out;
}

result<rewritten_sql> counter_probe(const stock_rule& rule, std::span<const value_ref> key, std::string_view schema) {
    rewritten_sql out;
    out.sql = "SELECT " + sql::quote_identifier(rule.counter_column) + " FROM " + table_sql(rule.table, schema);
    if (!append_key_where(out, rule, key)) return errc::key_not_bindable;
    return out;
}

result<rewritten_sql> cancel_claim_read(const sql::parsed_statement& st, const claim_rule& claim,
                                        const stock_rule& stock, std::size_t max_rows) {
    const auto* d = std::get_if<sql::delete_statement>(&st.body);
    if (d == nullptr || !d->where.present || !d->order_by.empty() || !d->limit.empty()) return errc::not_an_update;
    std::vector<std::string> columns;
    for (const auto& kc : stock.key_columns)
        for (const auto& [claim_col, stock_col] : claim.stock_key_mapping)
            if (sql::iequals(stock_col, kc)) {
                columns.push_back(claim_col);
                break;
            }
    if (columns.size() != stock.key_columns.size()) return errc::key_not_bindable;
    columns.insert(columns.end(), claim.idempotency_columns.begin(), claim.idempotency_columns.end());
    rewritten_sql out;
    writer w(st, out);
    w.text("SELECT ");
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i != 0) w.text(", ");
        w.text(sql::quote_identifier(columns[i]));
    }
    w.text(" FROM ");
    w.copy(d->table.span);
    w.text(" WHERE ");
    w.copy(d->where.span);
    w.text(" LIMIT " + std::to_string(max_rows + 1) + " FOR UPDATE");
    return out;
}

result<rewritten_sql> plain_insert(const sql::parsed_statement& st) {
    const auto* ins = std::get_if<sql::insert_statement>(&st.body);
    if (ins == nullptr || st.tokens.empty()) return errc::not_an_update;
    std::uint32_t end = static_cast<std::uint32_t>(st.tokens.size());
    if (!ins->on_duplicate.empty()) {
        // ON DUPLICATE KEY UPDATE a = ...: the clause starts four tokens before its first assignment.
        const std::uint32_t first = ins->on_duplicate.front().span.first;
        if (first < 4 || !sql::iequals(st.text(first - 4), "ON") || !sql::iequals(st.text(first - 3), "DUPLICATE"))
            return errc::not_an_update;
        end = first - 4;
    }
    rewritten_sql out;
    writer w(st, out);
    std::uint32_t begin = 0;
    if (ins->replace) {
        if (!sql::iequals(st.text(0), "REPLACE")) return errc::not_an_update;
        w.text("INSERT");
        begin = 1;
        if (begin < end) w.text(" ");
    }
    w.copy({begin, end});
    return out;
}

result<rewritten_sql> insert_select_values(const sql::parsed_statement& st, const claim_insert& fact) {
    if (!fact.from_select || fact.select_values.empty() || fact.select_token == 0 ||
        fact.select_token >= st.tokens.size() || !sql::iequals(st.text(fact.select_token), "SELECT"))
        return errc::not_an_update;
    rewritten_sql out;
    writer w(st, out);
    w.copy({0, fact.select_token});
    w.text(" VALUES (");
    for (std::size_t i = 0; i < fact.select_values.size(); ++i) {
        if (i > 0) w.text(", ");
        w.copy(fact.select_values[i]);
    }
    w.text(")");
    return out;
}

result<rewritten_sql> compensation(const stock_rule& rule, std::span<const value_ref> key, std::int64_t units,
                                   std::string_view schema) {
    if (units <= 0) return errc::amount_not_positive;
    if (key.size() != rule.key_columns.size()) return errc::key_not_bindable;
    for (const auto& v : key)
        if (!v.is_bindable()) return errc::key_not_bindable;
    rewritten_sql out;
    const std::string counter = sql::quote_identifier(rule.counter_column);
    out.sql = "UPDATE " + table_sql(rule.table, schema) + " SET " + counter + " = " + counter + " + " + std::to_string(units);
    if (rule.version_column) {
        const std::string version = sql::quote_identifier(*rule.version_column);
        out.sql += ", " + version + " = " + version + " + 1";
    }
    if (!append_key_where(out, rule, key)) return errc::key_not_bindable;
    return out;
}

}  // namespace claimguard::rules::match
