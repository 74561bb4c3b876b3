// Internal: reads the fields of one rules document into stock and claim rules, checking each rule on its own.
#include <algorithm>
#include <limits>
#include <map>

#include "rules/model/key_template.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/parsed_rules.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules::detail {
namespace {

constexpr std::string_view top_fields[] = {"default_mode", "stock_rules", "claim_rules", "trusted_users"};
constexpr std::string_view stock_fields[] = {"name",           "table", "key_columns", "counter_column",
                                             "version_column", "floor", "exhausted",   "mode",
                                             "units",          "unmodeled",  "read_cache",
                                             "defer_decrement", "admission", "amount_evidence"};
constexpr std::string_view claim_fields[] = {"name",     "table", "idempotency_columns", "idempotency_key_column",
                                             "consumes", "redis", "duplicate",           "strictness",
                                             "mode",     "unmodeled"};
constexpr std::string_view consumes_fields[] = {"rule", "columns"};
constexpr std::string_view redis_fields[] = {"key", "ttl"};
constexpr std::string_view admission_fields[] = {"max_in_flight", "queue_timeout", "max_queue"};

std::string display_table(const table_name& t) { return t.schema.empty() ? t.name : t.schema + "." + t.name; }

// The fields of a rule by name; a missing optional field is a nullptr.
class field_index {
public:
    explicit field_index(const std::vector<field>& fields) {
        for (const auto& f : fields)
            by_name_.emplace(f.name, &f);
    }
    // A present, non-null field.
    [[nodiscard]] const field* get(std::string_view name) const {
        const auto it = by_name_.find(std::string(name));
        return it == by_name_.end() || it->second->value.IsNull() ? nullptr : it->second;
    }
    // Present at all (possibly null): a required field written as `table:` is "empty", not "missing".
    [[nodiscard]] const field* present(std::string_view name) const {
        const auto it = by_name_.find(std::string(name));
        return it == by_name_.end() ? nullptr : it->second;
    }

private:
    std::map<std::string, const field*, std::less<>> by_name_;
};

answer error_answer(std::string message) {
    return answer{answer::kind::error, default_answer_code, default_answer_sql_state, std::move(message)};
}

class rule_reader {
public:
    rule_reader(yaml_file& file, parsed_rules& out) : file_(file), out_(out) {}

    void read_document(const YAML::Node& root) {
        if (root.IsNull())
            return;  // an empty file is an empty rule set
        if (!root.IsMap()) {
            file_.error(root.Mark(), "a rules file is a mapping with default_mode:, stock_rules: and claim_rules:, "
                                     "not " + std::string(describe_node(root)));
            return;
        }
        for (const auto& f : read_fields(file_, root, "the rules file", top_fields)) {
            if (f.name == "default_mode")
                read_default_mode(f);
            else if (f.name == "trusted_users")
                read_trusted_users(f);
            else if (f.name == "stock_rules")
                read_rule_list(f, "stock", [this](const YAML::Node& n) { read_stock(n); });
            else
                read_rule_list(f, "claim", [this](const YAML::Node& n) { read_claim(n); });
        }
    }

private:
    void read_default_mode(const field& f) {
        const auto m = read_mode(file_, f);
        if (!m)
            return;
        const auto here = file_.pos(f.value_mark());
        if (out_.default_mode && out_.default_mode->first != *m) {
            const auto& [other, where] = *out_.default_mode;
            file_.error(f.value_mark(), "default_mode is " + std::string(*m == mode::enforce ? "enforce" : "observe") +
                                            " here but " + (other == mode::enforce ? "enforce" : "observe") +
                                            " at " + where.file + ":" + std::to_string(where.line) + ":" +
                                            std::to_string(where.column) +
                                            "; all files form one rule set with one default mode");
            return;
        }
        if (!out_.default_mode)
            out_.default_mode.emplace(*m, here);
    }

    void read_trusted_users(const field& f) {
        if (f.value.IsNull())
            return;
        const auto one = [&](const YAML::Node& n) {
            const std::string* text = read_scalar(file_, field{f.name, n.Mark(), n}, "a database user name");
            if (text == nullptr)
                return;
            if (text->empty() || text->size() > max_user_name_bytes) {
                file_.error(n.Mark(), "trusted_users holds database user names of 1 to " +
                                          std::to_string(max_user_name_bytes) + " bytes, not " + quoted(*text));
                return;
            }
            out_.trusted_users.push_back(*text);
        };
        if (f.value.IsSequence()) {
            for (const auto& item : f.value)
                one(item);
        } else {
            one(f.value);
        }
    }

    void read_unmodeled(const field_index& fields, unmodeled_policy& out, bool& complete) {
        if (const auto* f = fields.get("unmodeled")) {
            const auto v = read_unmodeled_policy(file_, *f);
            complete = complete && v.has_value();
            out = v.value_or(unmodeled_policy::refuse);
        }
    }

    template <class ReadOne>
    void read_rule_list(const field& f, std::string_view kind, ReadOne read_one) {
        if (f.value.IsNull())
            return;
        if (!f.value.IsSequence()) {
            file_.error(f.value_mark(), f.name + " must be a list of " + std::string(kind) +
                                            " rules, each starting with '- ', not " +
                                            std::string(describe_node(f.value)));
            return;
        }
        for (const auto& item : f.value) {
            // An alias item carries its anchor's mark; report it at the list's key instead.
            const auto item_mark = item.Mark().pos < f.key_mark.pos ? f.key_mark : item.Mark();
            if (out_.stocks.size() + out_.claims.size() >= max_rules_per_set) {
                file_.error(item_mark, "too many rules: a rule set holds at most " +
                                             std::to_string(max_rules_per_set));
                return;
            }
            if (file_.diags().full())
                return;
            if (!item.IsMap()) {
                file_.error(item_mark, "each " + std::string(kind) + " rule is a mapping of fields (table:, ...), "
                                         "not " + std::string(describe_node(item)));
                continue;
            }
            read_one(item);
        }
    }

    // Reports a required field that is absent; a field present but empty was reported by its reader.
    bool require(const field_index& fields, std::string_view name, const source_pos& rule_pos,
                 std::string_view kind, std::string_view hint) {
        if (fields.present(name) != nullptr)
            return true;
        file_.diags().add(rule_pos, "this " + std::string(kind) + " rule has no " + std::string(name) + ": (" +
                                        std::string(hint) + ")");
        return false;
    }

    // The rule's name, or the table as written when the rule has none.
    template <class Parsed>
    void read_name_and_table(const field_index& fields, Parsed& p, std::string_view kind, std::string_view hint) {
        if (const auto* f = fields.present("table")) {
            p.table_pos = file_.pos(f->value_mark());
            p.rule.table_pos = p.table_pos;
            if (auto t = read_table(file_, *f))
                p.rule.table = std::move(*t);
            else
                p.complete = false;
        } else {
            p.complete = require(fields, "table", p.rule.pos, kind, hint);
        }
        if (const auto* f = fields.present("name")) {
            p.name_pos = file_.pos(f->value_mark());
            if (auto n = read_rule_name(file_, *f))
                p.rule.name = std::move(*n);
            else
                p.complete = false;
        } else {
            p.name_pos = p.rule.pos;
            p.rule.name = display_table(p.rule.table);
        }
    }

    void read_rule_mode(const field_index& fields, std::optional<mode>& out, bool& complete) {
        if (const auto* f = fields.get("mode")) {
            out = read_mode(file_, *f);
            complete = complete && out.has_value();
        }
    }

    void read_stock(const YAML::Node& node) {
        parsed_stock p;
        p.rule.pos = file_.pos(node.Mark());
        const auto list = read_fields(file_, node, "a stock rule", stock_fields);
        const field_index fields(list);
        auto& r = p.rule;
        read_name_and_table(fields, p, "stock", "the table that holds the stock counter, e.g. table: coupon_stock");

        std::vector<located_name> keys;
        if (const auto* f = fields.present("key_columns")) {
            if (auto k = read_column_list(file_, *f))
                keys = std::move(*k);
            else
                p.complete = false;
        } else {
            p.complete = require(fields, "key_columns", r.pos, "stock",
                                 "the column(s) that pick the stock row, e.g. key_columns: [campaign_id]") &&
                         p.complete;
        }
        for (const auto& k : keys) {
            r.key_columns.push_back(k.name);
            r.columns_named.push_back({"key_columns", k.name, k.pos});
        }
        const auto is_key = [&](std::string_view c) {
            return std::any_of(keys.begin(), keys.end(), [&](const located_name& k) { return iequals(k.name, c); });
        };

        if (const auto* f = fields.present("counter_column")) {
            const auto c = read_identifier(file_, *f);
            if (c && is_key(c->name)) {
                file_.error(f->value_mark(), "counter_column " + quoted(c->name) +
                                                 " is also a key column; the counter must be its own column");
                p.complete = false;
            } else if (c) {
                r.counter_column = c->name;
                r.columns_named.push_back({"counter_column", c->name, c->pos});
            } else {
                p.complete = false;
            }
        } else {
            p.complete = require(fields, "counter_column", r.pos, "stock",
                                 "the column that holds the remaining stock, e.g. counter_column: remain") &&
                         p.complete;
        }

        if (const auto* f = fields.get("version_column")) {
            const auto c = read_identifier(file_, *f);
            if (c && (is_key(c->name) || iequals(c->name, r.counter_column))) {
                file_.error(f->value_mark(), "version_column " + quoted(c->name) + " is also the " +
                                                 (is_key(c->name) ? "key" : "counter") +
                                                 " column; the version must be its own column");
                p.complete = false;
            } else if (c) {
                r.version_column = c->name;
                r.columns_named.push_back({"version_column", c->name, c->pos});
            } else {
                p.complete = false;
            }
        }

        if (const auto* f = fields.get("floor")) {
            const auto v = read_integer(file_, *f, std::numeric_limits<std::int64_t>::min(),
                                        std::numeric_limits<std::int64_t>::max(), "0");
            r.floor = v.value_or(0);
            p.complete = p.complete && v.has_value();
        }
        if (const auto* f = fields.get("units")) {
            const auto v = read_integer(file_, *f, 1, max_units_per_claim, "1");
            r.units = v.value_or(1);
            p.complete = p.complete && v.has_value();
        }
        read_unmodeled(fields, r.unmodeled, p.complete);
        if (const auto* f = fields.get("amount_evidence")) {
            if (const std::string* text = read_scalar(file_, *f, "refuse, units or read")) {
                if (*text == "refuse") r.amount_evidence = stock_rule::evidence::refuse;
                else if (*text == "units") r.amount_evidence = stock_rule::evidence::units;
                else if (*text == "read") r.amount_evidence = stock_rule::evidence::read;
                else {
                    file_.error(f->value_mark(), "amount_evidence must be refuse, units or read, not " + quoted(*text));
                    p.complete = false;
                }
            } else {
                p.complete = false;
            }
        }
        if (const auto* f = fields.get("read_cache")) {
            r.read_cache = read_duration(file_, *f, min_read_cache, max_read_cache);
            p.complete = p.complete && r.read_cache.has_value();
        }
        if (const auto* f = fields.get("defer_decrement")) {
            const auto v = read_bool(file_, *f);
            r.defer_decrement = v.value_or(false);
            p.complete = p.complete && v.has_value();
        }

        const auto table = r.table.name.empty() ? std::string("the stock") : display_table(r.table);
        r.exhausted = error_answer("claimguard: " + table + " is sold out for this key");
        if (const auto* f = fields.get("exhausted")) {
            auto a = read_answer(file_, *f, r.exhausted);
            p.complete = p.complete && a.has_value();
            if (a)
                r.exhausted = std::move(*a);
        }
        read_rule_mode(fields, r.rule_mode, p.complete);
        if (const auto* f = fields.get("admission"))
            read_admission(*f, p);
        p.order = out_.stocks.size() + out_.claims.size();
        out_.stocks.push_back(std::move(p));
    }

    // admission: {max_in_flight: 4, queue_timeout: 2s, max_queue: 10000}; the first two are required.
    void read_admission(const field& f, parsed_stock& p) {
        if (!f.value.IsMap()) {
            file_.error(f.value_mark(), "admission needs a mapping with max_in_flight: and queue_timeout:, not " +
                                            std::string(describe_node(f.value)));
            p.complete = false;
            return;
        }
        const auto list = read_fields(file_, f.value, "admission", admission_fields);
        const field_index fields(list);
        admission_limits limits;
        limits.max_queue = static_cast<std::uint32_t>(default_admission_max_queue);
        bool ok = true;
        if (const auto* n = fields.present("max_in_flight")) {
            const auto v = read_integer(file_, *n, 1, max_admission_in_flight, "4");
            ok = v.has_value();
            limits.max_in_flight = static_cast<std::uint32_t>(v.value_or(1));
        } else {
            file_.error(f.value_mark(), "admission has no max_in_flight: (how many decrements of one key this "
                                        "sidecar lets reach the database at once, e.g. max_in_flight: 4)");
            ok = false;
        }
        if (const auto* t = fields.present("queue_timeout")) {
            const auto v = read_duration(file_, *t, min_admission_queue_timeout, max_admission_queue_timeout);
            ok = ok && v.has_value();
            limits.queue_timeout = v.value_or(min_admission_queue_timeout);
        } else {
            file_.error(f.value_mark(), "admission has no queue_timeout: (how long a statement may wait for its "
                                        "turn, e.g. queue_timeout: 2s)");
            ok = false;
        }
        if (const auto* q = fields.get("max_queue")) {
            const auto v = read_integer(file_, *q, 1, max_admission_max_queue, "10000");
            ok = ok && v.has_value();
            limits.max_queue = static_cast<std::uint32_t>(v.value_or(default_admission_max_queue));
        }
        p.complete = p.complete && ok;
        if (ok)
            p.rule.admission = limits;
    }

    // The name of a stock rule, implied names (any table name) included; validate_rules looks it up.
    void read_stock_reference(const field& f, parsed_claim& p) {
        const std::string* text = read_scalar(file_, f, "a rule name");
        if (text != nullptr && text->empty())
            file_.error(f.value_mark(), f.name + " is empty; it needs the name of a stock rule");
        if (text == nullptr || text->empty())
            p.complete = false;
        else
            p.rule.stock_rule = *text;
    }

    void read_consumes(const field& f, parsed_claim& p) {
        p.consumes_pos = file_.pos(f.value_mark());
        if (!f.value.IsMap()) {
            read_stock_reference(f, p);
            return;
        }
        const auto list = read_fields(file_, f.value, "consumes", consumes_fields);
        const field_index fields(list);
        if (const auto* rule = fields.present("rule")) {
            p.consumes_pos = file_.pos(rule->value_mark());
            read_stock_reference(*rule, p);
        } else {
            file_.error(f.value_mark(), "consumes has no rule: (the name of the stock rule this claim uses up, "
                                        "e.g. rule: coupon_stock)");
            p.complete = false;
        }
        const auto* columns = fields.get("columns");
        if (columns == nullptr)
            return;
        if (!columns->value.IsMap() || columns->value.size() == 0) {
            file_.error(columns->value_mark(), "columns needs a mapping from each claim column to the stock key "
                                               "column it holds, e.g. {campaign_id: campaign_id}, not " +
                                                   std::string(columns->value.IsMap() ? "an empty mapping"
                                                                                      : describe_node(columns->value)));
            p.complete = false;
            return;
        }
        for (const auto& entry : columns->value) {
            const YAML::Node claim_node = entry.first;
            const YAML::Node stock_node = entry.second;
            const auto claim_col = read_identifier(file_, field{"the claim column", claim_node.Mark(), claim_node});
            const auto stock_col =
                read_identifier(file_, field{"the stock key column", stock_node.Mark(), stock_node});
            if (!claim_col || !stock_col) {
                p.complete = false;
                continue;
            }
            const auto dup = std::find_if(p.explicit_mapping.begin(), p.explicit_mapping.end(),
                                          [&](const auto& m) { return iequals(m.first.name, claim_col->name); });
            if (dup != p.explicit_mapping.end()) {
                file_.error(claim_node.Mark(), "columns lists claim column " + quoted(claim_col->name) + " twice");
                p.complete = false;
                continue;
            }
            p.rule.columns_named.push_back({"consumes.columns", claim_col->name, claim_col->pos});
            p.explicit_mapping.emplace_back(*claim_col, *stock_col);
        }
    }

    void read_redis(const field& f, parsed_claim& p) {
        if (!f.value.IsMap()) {
            file_.error(f.value_mark(), "redis needs a mapping with key: and ttl:, not " +
                                            std::string(describe_node(f.value)));
            p.complete = false;
            return;
        }
        const auto list = read_fields(file_, f.value, "redis", redis_fields);
        const field_index fields(list);
        redis_guard guard;
        guard.ttl = default_redis_ttl;
        bool ok = true;
        if (const auto* key = fields.present("key")) {
            p.redis_key_pos = file_.pos(key->value_mark());
            const std::string* text = read_scalar(file_, *key, "a key template such as lock:coupon:{user_id}");
            ok = text != nullptr;
            if (text != nullptr) {
                const auto parsed = parse_key_template(*text);
                std::string problem;
                if (text->empty())
                    problem = "is empty";
                else if (text->size() > max_key_template_bytes)
                    problem = "is longer than " + std::to_string(max_key_template_bytes) + " bytes";
                else if (first_invalid_utf8(*text) ||
                         std::any_of(text->begin(), text->end(),
                                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }))
                    problem = "contains a control character or invalid UTF-8";
                else if (!parsed.error.empty())
                    problem = parsed.error;
                for (const auto& part : parsed.parts) {
                    if (!problem.empty())
                        break;
                    if (part.type == template_part::kind::column) {
                        if (const auto why = identifier_problem(part.text); !why.empty())
                            problem = "has a placeholder {" + printable(part.text) + "} that " + why;
                    }
                }
                if (!problem.empty()) {
                    file_.error(key->value_mark(), "redis key " + quoted(*text) + " " + problem);
                    ok = false;
                } else {
                    guard.key_template = *text;
                }
            }
        } else {
            file_.error(f.value_mark(), "redis has no key: (the Redis key template, e.g. "
                                        "key: \"lock:coupon:{user_id}:{campaign_id}\")");
            ok = false;
        }
        if (const auto* ttl = fields.get("ttl")) {
            const auto v = read_duration(file_, *ttl);
            ok = ok && v.has_value();
            guard.ttl = v.value_or(default_redis_ttl);
        }
        p.complete = p.complete && ok;
        if (ok)
            p.rule.redis = std::move(guard);
    }

    void read_claim(const YAML::Node& node) {
        parsed_claim p;
        p.rule.pos = file_.pos(node.Mark());
        const auto list = read_fields(file_, node, "a claim rule", claim_fields);
        const field_index fields(list);
        auto& r = p.rule;
        read_name_and_table(fields, p, "claim",
                            "the table that gets one row per claim, e.g. table: coupon_order");

        std::vector<located_name> idem;
        if (const auto* f = fields.present("idempotency_columns")) {
            if (auto k = read_column_list(file_, *f))
                idem = std::move(*k);
            else
                p.complete = false;
        } else {
            p.complete = require(fields, "idempotency_columns", r.pos, "claim",
                                 "the business key that may be claimed once, e.g. "
                                 "idempotency_columns: [user_id, campaign_id]") &&
                         p.complete;
        }
        for (const auto& c : idem) {
            r.idempotency_columns.push_back(c.name);
            r.columns_named.push_back({"idempotency_columns", c.name, c.pos});
        }

        if (const auto* f = fields.get("idempotency_key_column")) {
            const auto c = read_identifier(file_, *f);
            const bool in_idem = c && std::any_of(idem.begin(), idem.end(), [&](const located_name& k) {
                                     return iequals(k.name, c->name);
                                 });
            if (in_idem) {
                file_.error(f->value_mark(), "idempotency_key_column " + quoted(c->name) +
                                                 " is already one of the idempotency_columns; name a separate "
                                                 "request-id column or leave it out");
                p.complete = false;
            } else if (c) {
                r.idempotency_key_column = c->name;
                r.columns_named.push_back({"idempotency_key_column", c->name, c->pos});
            } else {
                p.complete = false;
            }
        }

        if (const auto* f = fields.present("consumes")) {
            read_consumes(*f, p);
            r.consumes_pos = p.consumes_pos;
        } else
            p.complete = require(fields, "consumes", r.pos, "claim",
                                 "the stock rule each claim uses up, e.g. consumes: coupon_stock") &&
                         p.complete;

        if (const auto* f = fields.get("redis"))
            read_redis(*f, p);

        r.duplicate = error_answer("claimguard: already claimed");
        if (const auto* f = fields.get("duplicate")) {
            auto a = read_answer(file_, *f, r.duplicate);
            p.complete = p.complete && a.has_value();
            if (a)
                r.duplicate = std::move(*a);
        }
        if (const auto* f = fields.get("strictness")) {
            const auto s = read_strictness(file_, *f);
            p.complete = p.complete && s.has_value();
            r.strict = s.value_or(strictness::require_decrement);
        }
        read_unmodeled(fields, r.unmodeled, p.complete);
        read_rule_mode(fields, r.rule_mode, p.complete);
        p.order = out_.stocks.size() + out_.claims.size();
        out_.claims.push_back(std::move(p));
    }

    yaml_file& file_;
    parsed_rules& out_;
};

}  // namespace

void read_rules_document(yaml_file& file, const YAML::Node& root, parsed_rules& out) {
    rule_reader(file, out).read_document(root);
}

}  // namespace claimguard::rules::detail
