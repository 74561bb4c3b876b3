// Internal: reads the fields of one rules document into stock and claim rules, checking each rule on its own.
//
// Each mapping of a rules file (the file itself, a stock rule, admission, a claim rule, consumes, redis) has one
// table of its fields below (field_table.hpp), each field with its reader. Adding a stock-rule field: its reader,
// one line in stock_fields, its member in rules.hpp (and its limits in limits.hpp).
#include <algorithm>
#include <limits>

#include "rules/model/field_table.hpp"
#include "rules/model/key_template.hpp"
#include "rules/model/limits.hpp"
#include "rules/model/parsed_rules.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules::detail {
namespace {

std::string display_table(const table_name& t) { return t.schema.empty() ? t.name : t.schema + "." + t.name; }

answer error_answer(std::string message) {
    return answer{answer::kind::error, default_answer_code, default_answer_sql_state, std::move(message)};
}

// Readers of the fields stock and claim rules share.

template <class Parsed>
void read_name(yaml_file& file, const field& f, Parsed& p) {
    p.name_pos = file.pos(f.value_mark());
    if (auto n = read_rule_name(file, f))
        p.rule.name = std::move(*n);
    else
        p.complete = false;
}

// A rule left unnamed is named after its table, as written.
template <class Parsed>
void name_after_table(Parsed& p) {
    p.name_pos = p.rule.pos;
    p.rule.name = display_table(p.rule.table);
}

template <class Parsed>
void read_rule_table(yaml_file& file, const field& f, Parsed& p) {
    p.table_pos = file.pos(f.value_mark());
    p.rule.table_pos = p.table_pos;
    if (auto t = read_table(file, f))
        p.rule.table = std::move(*t);
    else
        p.complete = false;
}

template <class Parsed>
void read_rule_mode(yaml_file& file, const field& f, Parsed& p) {
    p.rule.rule_mode = read_mode(file, f);
    p.complete = p.complete && p.rule.rule_mode.has_value();
}

template <class Parsed>
void read_rule_unmodeled(yaml_file& file, const field& f, Parsed& p) {
    const auto v = read_unmodeled_policy(file, f);
    p.complete = p.complete && v.has_value();
    p.rule.unmodeled = v.value_or(unmodeled_policy::refuse);
}

// Stock rules.

bool is_key_column(const stock_rule& r, std::string_view column) {
    return std::any_of(r.key_columns.begin(), r.key_columns.end(),
                       [&](const std::string& k) { return iequals(k, column); });
}

void read_key_columns(yaml_file& file, const field& f, parsed_stock& p) {
    const auto keys = read_column_list(file, f);
    if (!keys) {
        p.complete = false;
        return;
    }
    for (const auto& k : *keys) {
        p.rule.key_columns.push_back(k.name);
        p.rule.columns_named.push_back({f.name, k.name, k.pos});
    }
}

void read_counter_column(yaml_file& file, const field& f, parsed_stock& p) {
    const auto c = read_identifier(file, f);
    if (c && is_key_column(p.rule, c->name)) {
        file.error(f.value_mark(),
                   "counter_column " + quoted(c->name) + " is also a key column; the counter must be its own column");
        p.complete = false;
    } else if (c) {
        p.rule.counter_column = c->name;
        p.rule.columns_named.push_back({f.name, c->name, c->pos});
    } else {
        p.complete = false;
    }
}

void read_version_column(yaml_file& file, const field& f, parsed_stock& p) {
    const auto c = read_identifier(file, f);
    if (c && (is_key_column(p.rule, c->name) || iequals(c->name, p.rule.counter_column))) {
        file.error(f.value_mark(), "version_column " + quoted(c->name) + " is also the " +
                                       (is_key_column(p.rule, c->name) ? "key" : "counter") +
                                       " column; the version must be its own column");
        p.complete = false;
    } else if (c) {
        p.rule.version_column = c->name;
        p.rule.columns_named.push_back({f.name, c->name, c->pos});
    } else {
        p.complete = false;
    }
}

void read_floor(yaml_file& file, const field& f, parsed_stock& p) {
    const auto v =
        read_integer(file, f, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), "0");
    p.rule.floor = v.value_or(0);
    p.complete = p.complete && v.has_value();
}

// The "sold out" answer of a stock rule that does not say its own; names the table when it could be read.
answer default_exhausted(const stock_rule& r) {
    const auto table = r.table.name.empty() ? std::string("the stock") : display_table(r.table);
    return error_answer("claimguard: " + table + " is sold out for this key");
}

void read_exhausted(yaml_file& file, const field& f, parsed_stock& p) {
    auto a = read_answer(file, f, default_exhausted(p.rule));
    p.complete = p.complete && a.has_value();
    p.rule.exhausted = a ? std::move(*a) : default_exhausted(p.rule);
}

void exhausted_by_default(parsed_stock& p) { p.rule.exhausted = default_exhausted(p.rule); }

void read_units(yaml_file& file, const field& f, parsed_stock& p) {
    const auto v = read_integer(file, f, 1, max_units_per_claim, "1");
    p.rule.units = v.value_or(1);
    p.complete = p.complete && v.has_value();
}

void read_read_cache(yaml_file& file, const field& f, parsed_stock& p) {
    p.rule.read_cache = read_duration(file, f, min_read_cache, max_read_cache);
    p.complete = p.complete && p.rule.read_cache.has_value();
}

void read_max_refresh_wait(yaml_file& file, const field& f, parsed_stock& p) {
    if (!p.rule.read_cache) {
        file.error(f.value_mark(), "max_refresh_wait applies to reads the sidecar answers: set read_cache too");
        p.complete = false;
        return;
    }
    p.rule.max_refresh_wait = read_duration(file, f, min_refresh_wait, max_refresh_wait);
    p.complete = p.complete && p.rule.max_refresh_wait.has_value();
}

void read_read_cache_sold_out(yaml_file& file, const field& f, parsed_stock& p) {
    if (!p.rule.read_cache) {
        file.error(f.value_mark(), "read_cache_sold_out applies to reads the sidecar answers: set read_cache too");
        p.complete = false;
        return;
    }
    p.rule.read_cache_sold_out = read_duration(file, f, *p.rule.read_cache, max_read_cache_sold_out);
    p.complete = p.complete && p.rule.read_cache_sold_out.has_value();
}

void read_defer_decrement(yaml_file& file, const field& f, parsed_stock& p) {
    const auto v = read_bool(file, f);
    p.rule.defer_decrement = v.value_or(false);
    p.complete = p.complete && v.has_value();
}

void read_amount_evidence(yaml_file& file, const field& f, parsed_stock& p) {
    const std::string* text = read_scalar(file, f, "refuse, units or read");
    if (text == nullptr) {
        p.complete = false;
    } else if (*text == "refuse") {
        p.rule.amount_evidence = stock_rule::evidence::refuse;
    } else if (*text == "units") {
        p.rule.amount_evidence = stock_rule::evidence::units;
    } else if (*text == "read") {
        p.rule.amount_evidence = stock_rule::evidence::read;
    } else {
        file.error(f.value_mark(), "amount_evidence must be refuse, units or read, not " + quoted(*text));
        p.complete = false;
    }
}

// admission: {max_in_flight: 4, queue_timeout: 2s, max_queue: 10000}, while it is read.
struct admission_read {
    admission_limits limits{.max_queue = static_cast<std::uint32_t>(default_admission_max_queue)};
    bool complete = true;
};

void read_max_in_flight(yaml_file& file, const field& f, admission_read& a) {
    const auto v = read_integer(file, f, 1, max_admission_in_flight, "4");
    a.complete = a.complete && v.has_value();
    a.limits.max_in_flight = static_cast<std::uint32_t>(v.value_or(1));
}

void read_queue_timeout(yaml_file& file, const field& f, admission_read& a) {
    const auto v = read_duration(file, f, min_admission_queue_timeout, max_admission_queue_timeout);
    a.complete = a.complete && v.has_value();
    a.limits.queue_timeout = v.value_or(min_admission_queue_timeout);
}

void read_max_queue(yaml_file& file, const field& f, admission_read& a) {
    const auto v = read_integer(file, f, 1, max_admission_max_queue, "10000");
    a.complete = a.complete && v.has_value();
    a.limits.max_queue = static_cast<std::uint32_t>(v.value_or(default_admission_max_queue));
}

constexpr field_spec<admission_read> admission_fields[] = {
    {"max_in_flight", read_max_in_flight, presence::required,
     "how many decrements of one key this sidecar lets reach the database at once, e.g. max_in_flight: 4"},
    {"queue_timeout", read_queue_timeout, presence::required,
     "how long a statement may wait for its turn, e.g. queue_timeout: 2s"},
    {"max_queue", read_max_queue},
};

void read_admission(yaml_file& file, const field& f, parsed_stock& p) {
    if (!f.value.IsMap()) {
        file.error(f.value_mark(), "admission needs a mapping with max_in_flight: and queue_timeout:, not " +
                                       std::string(describe_node(f.value)));
        p.complete = false;
        return;
    }
    admission_read a;
    read_mapping(file, f.value, "admission", "admission", file.pos(f.value_mark()), admission_fields, a);
    p.complete = p.complete && a.complete;
    if (a.complete) p.rule.admission = a.limits;
}

// group_update: {max_batch: 32, max_wait: 1ms}, while it is read.
struct group_update_read {
    group_update_limits limits{.max_batch = static_cast<std::uint32_t>(default_group_update_batch)};
    bool complete = true;
};

void read_max_batch(yaml_file& file, const field& f, group_update_read& g) {
    const auto v = read_integer(file, f, 2, max_group_update_batch, "32");
    g.complete = g.complete && v.has_value();
    g.limits.max_batch = static_cast<std::uint32_t>(v.value_or(default_group_update_batch));
}

void read_max_wait(yaml_file& file, const field& f, group_update_read& g) {
    const auto v = read_duration(file, f, std::chrono::milliseconds{0}, max_group_update_wait);
    g.complete = g.complete && v.has_value();
    g.limits.max_wait = v.value_or(std::chrono::milliseconds{1});
}

constexpr field_spec<group_update_read> group_update_fields[] = {
    {"max_batch", read_max_batch},
    {"max_wait", read_max_wait},
};

void read_group_update(yaml_file& file, const field& f, parsed_stock& p) {
    if (!f.value.IsMap()) {
        file.error(f.value_mark(), "group_update needs a mapping such as {max_batch: 32, max_wait: 1ms}, not " +
                                       std::string(describe_node(f.value)));
        p.complete = false;
        return;
    }
    group_update_read g;
    read_mapping(file, f.value, "group_update", "group_update", file.pos(f.value_mark()), group_update_fields, g);
    // The batch is gathered from the key's admission queue: without one there is nothing to gather.
    if (!p.rule.admission) {
        file.error(f.value_mark(),
                   "group_update needs admission: on the same rule (the takes it groups wait in "
                   "the key's admission queue), e.g. admission: {max_in_flight: 1, queue_timeout: 2s}");
        g.complete = false;
    }
    p.complete = p.complete && g.complete;
    if (g.complete) p.rule.group_update = g.limits;
}

// reserve: {block: 50, idle: 5s}, while it is read.
struct reserve_read {
    reserve_limits limits{.idle = default_reserve_idle};
    bool complete = true;
};

void read_block(yaml_file& file, const field& f, reserve_read& r) {
    const auto v = read_integer(file, f, 1, max_reserve_block, "50");
    r.complete = r.complete && v.has_value();
    r.limits.block = v.value_or(1);
}

void read_idle(yaml_file& file, const field& f, reserve_read& r) {
    const auto v = read_duration(file, f, min_reserve_idle, max_reserve_idle);
    r.complete = r.complete && v.has_value();
    r.limits.idle = v.value_or(default_reserve_idle);
}

constexpr field_spec<reserve_read> reserve_fields[] = {
    {"block", read_block, presence::required, "how many units the sidecar takes from the row at once, e.g. block: 50"},
    {"idle", read_idle},
};

void read_reserve(yaml_file& file, const field& f, parsed_stock& p) {
    if (!f.value.IsMap()) {
        file.error(f.value_mark(),
                   "reserve needs a mapping such as {block: 50, idle: 5s}, not " + std::string(describe_node(f.value)));
        p.complete = false;
        return;
    }
    reserve_read r;
    read_mapping(file, f.value, "reserve", "reserve", file.pos(f.value_mark()), reserve_fields, r);
    // A take served from the sidecar's block never reaches the row, so a version column could not
    // count it: an app's compare-and-set on the version would see the row unchanged by its own take.
    if (p.rule.version_column) {
        file.error(f.value_mark(),
                   "reserve cannot go with version_column " + quoted(*p.rule.version_column) +
                       ": a take served from the sidecar's reserved block never reaches the row, so the version "
                       "would not count it (remove version_column, or reserve)");
        r.complete = false;
    }
    p.complete = p.complete && r.complete;
    if (r.complete) p.rule.reserve = r.limits;
}

// The fields of a stock rule, in the order of the "unknown field" list. A reader may use the fields above it.
constexpr field_spec<parsed_stock> stock_fields[] = {
    {.name = "name",
     .read = read_name<parsed_stock>,
     .need = presence::not_empty,
     .left_out = name_after_table<parsed_stock>},
    {"table", read_rule_table<parsed_stock>, presence::required,
     "the table that holds the stock counter, e.g. table: coupon_stock"},
    {"key_columns", read_key_columns, presence::required,
     "the column(s) that pick the stock row, e.g. key_columns: [campaign_id]"},
    {"counter_column", read_counter_column, presence::required,
     "the column that holds the remaining stock, e.g. counter_column: remain"},
    {"version_column", read_version_column},
    {"floor", read_floor},
    {.name = "exhausted", .read = read_exhausted, .left_out = exhausted_by_default},
    {"mode", read_rule_mode<parsed_stock>},
    {"units", read_units},
    {"unmodeled", read_rule_unmodeled<parsed_stock>},
    {"read_cache", read_read_cache},
    {"max_refresh_wait", read_max_refresh_wait},
    {"read_cache_sold_out", read_read_cache_sold_out},
    {"defer_decrement", read_defer_decrement},
    {"admission", read_admission},
    {"amount_evidence", read_amount_evidence},
    {"group_update", read_group_update},
    {"reserve", read_reserve},
};

// Claim rules.

void read_idempotency_columns(yaml_file& file, const field& f, parsed_claim& p) {
    const auto columns = read_column_list(file, f);
    if (!columns) {
        p.complete = false;
        return;
    }
    for (const auto& c : *columns) {
        p.rule.idempotency_columns.push_back(c.name);
        p.rule.columns_named.push_back({f.name, c.name, c.pos});
    }
}

void read_idempotency_key_column(yaml_file& file, const field& f, parsed_claim& p) {
    const auto c = read_identifier(file, f);
    const auto& idem = p.rule.idempotency_columns;
    const bool in_idem =
        c && std::any_of(idem.begin(), idem.end(), [&](const std::string& k) { return iequals(k, c->name); });
    if (in_idem) {
        file.error(f.value_mark(), "idempotency_key_column " + quoted(c->name) +
                                       " is already one of the idempotency_columns; name a separate "
                                       "request-id column or leave it out");
        p.complete = false;
    } else if (c) {
        p.rule.idempotency_key_column = c->name;
        p.rule.columns_named.push_back({f.name, c->name, c->pos});
    } else {
        p.complete = false;
    }
}

// The name of a stock rule, implied names (any table name) included; validate_rules looks it up.
void read_stock_reference(yaml_file& file, const field& f, parsed_claim& p) {
    const std::string* text = read_scalar(file, f, "a rule name");
    if (text != nullptr && text->empty())
        file.error(f.value_mark(), f.name + " is empty; it needs the name of a stock rule");
    if (text == nullptr || text->empty())
        p.complete = false;
    else
        p.rule.stock_rule = *text;
}

void read_consumes_rule(yaml_file& file, const field& f, parsed_claim& p) {
    p.consumes_pos = file.pos(f.value_mark());
    read_stock_reference(file, f, p);
}

void read_consumes_columns(yaml_file& file, const field& f, parsed_claim& p) {
    if (!f.value.IsMap() || f.value.size() == 0) {
        file.error(f.value_mark(),
                   "columns needs a mapping from each claim column to the stock key "
                   "column it holds, e.g. {campaign_id: campaign_id}, not " +
                       std::string(f.value.IsMap() ? "an empty mapping" : describe_node(f.value)));
        p.complete = false;
        return;
    }
    for (const auto& entry : f.value) {
        const YAML::Node claim_node = entry.first;
        const YAML::Node stock_node = entry.second;
        const auto claim_col = read_identifier(file, field{"the claim column", claim_node.Mark(), claim_node});
        const auto stock_col = read_identifier(file, field{"the stock key column", stock_node.Mark(), stock_node});
        if (!claim_col || !stock_col) {
            p.complete = false;
            continue;
        }
        const auto dup = std::find_if(p.explicit_mapping.begin(), p.explicit_mapping.end(),
                                      [&](const auto& m) { return iequals(m.first.name, claim_col->name); });
        if (dup != p.explicit_mapping.end()) {
            file.error(claim_node.Mark(), "columns lists claim column " + quoted(claim_col->name) + " twice");
            p.complete = false;
            continue;
        }
        p.rule.columns_named.push_back({"consumes.columns", claim_col->name, claim_col->pos});
        p.explicit_mapping.emplace_back(*claim_col, *stock_col);
    }
}

constexpr field_spec<parsed_claim> consumes_fields[] = {
    {"rule", read_consumes_rule, presence::required,
     "the name of the stock rule this claim uses up, e.g. rule: coupon_stock"},
    {"columns", read_consumes_columns},
};

// consumes: coupon_stock, or consumes: {rule: coupon_stock, columns: {cid: campaign_id}}.
void read_consumes(yaml_file& file, const field& f, parsed_claim& p) {
    p.consumes_pos = file.pos(f.value_mark());
    if (f.value.IsMap())
        read_mapping(file, f.value, "consumes", "consumes", file.pos(f.value_mark()), consumes_fields, p);
    else
        read_stock_reference(file, f, p);
    p.rule.consumes_pos = p.consumes_pos;
}

// redis: {key: "lock:coupon:{user_id}:{campaign_id}", ttl: 3000ms}, while it is read.
struct redis_read {
    redis_guard guard{.key_template = {}, .ttl = default_redis_ttl};
    source_pos key_pos;
    bool complete = true;
};

void read_redis_key(yaml_file& file, const field& f, redis_read& r) {
    r.key_pos = file.pos(f.value_mark());
    const std::string* text = read_scalar(file, f, "a key template such as lock:coupon:{user_id}");
    if (text == nullptr) {
        r.complete = false;
        return;
    }
    const auto parsed = parse_key_template(*text);
    std::string problem;
    if (text->empty())
        problem = "is empty";
    else if (text->size() > max_key_template_bytes)
        problem = "is longer than " + std::to_string(max_key_template_bytes) + " bytes";
    else if (first_invalid_utf8(*text) || std::any_of(text->begin(), text->end(), [](char c) {
                 return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
             }))
        problem = "contains a control character or invalid UTF-8";
    else if (!parsed.error.empty())
        problem = parsed.error;
    for (const auto& part : parsed.parts) {
        if (!problem.empty()) break;
        if (part.type == template_part::kind::column) {
            if (const auto why = identifier_problem(part.text); !why.empty())
                problem = "has a placeholder {" + printable(part.text) + "} that " + why;
        }
    }
    if (!problem.empty()) {
        file.error(f.value_mark(), "redis key " + quoted(*text) + " " + problem);
        r.complete = false;
    } else {
        r.guard.key_template = *text;
    }
}

void read_redis_ttl(yaml_file& file, const field& f, redis_read& r) {
    const auto v = read_duration(file, f);
    r.complete = r.complete && v.has_value();
    r.guard.ttl = v.value_or(default_redis_ttl);
}

constexpr field_spec<redis_read> redis_fields[] = {
    {"key", read_redis_key, presence::required,
     "the Redis key template, e.g. key: \"lock:coupon:{user_id}:{campaign_id}\""},
    {"ttl", read_redis_ttl},
};

void read_redis(yaml_file& file, const field& f, parsed_claim& p) {
    if (!f.value.IsMap()) {
        file.error(f.value_mark(),
                   "redis needs a mapping with key: and ttl:, not " + std::string(describe_node(f.value)));
        p.complete = false;
        return;
    }
    redis_read r;
    read_mapping(file, f.value, "redis", "redis", file.pos(f.value_mark()), redis_fields, r);
    p.redis_key_pos = r.key_pos;
    p.complete = p.complete && r.complete;
    if (r.complete) p.rule.redis = std::move(r.guard);
}

answer default_duplicate() { return error_answer("claimguard: already claimed"); }

void read_duplicate(yaml_file& file, const field& f, parsed_claim& p) {
    auto a = read_answer(file, f, default_duplicate());
    p.complete = p.complete && a.has_value();
    p.rule.duplicate = a ? std::move(*a) : default_duplicate();
}

void duplicate_by_default(parsed_claim& p) { p.rule.duplicate = default_duplicate(); }

void read_claim_strictness(yaml_file& file, const field& f, parsed_claim& p) {
    const auto s = read_strictness(file, f);
    p.complete = p.complete && s.has_value();
    p.rule.strict = s.value_or(strictness::require_decrement);
}

void read_on_cancel(yaml_file& file, const field& f, parsed_claim& p) {
    const std::string* text = read_scalar(file, f, "keep_stock or return_stock");
    if (text == nullptr) {
        p.complete = false;
    } else if (*text == "keep_stock") {
        p.rule.on_cancel = cancel_policy::keep_stock;
    } else if (*text == "return_stock") {
        p.rule.on_cancel = cancel_policy::return_stock;
    } else {
        file.error(f.value_mark(), "on_cancel must be keep_stock or return_stock, not " + quoted(*text));
        p.complete = false;
    }
}

void read_decremented_by_trigger(yaml_file& file, const field& f, parsed_claim& p) {
    const auto v = read_bool(file, f);
    p.rule.decremented_by_trigger = v.value_or(false);
    p.complete = p.complete && v.has_value();
}

// The fields of a claim rule, in the order of the "unknown field" list. A reader may use the fields above it.
constexpr field_spec<parsed_claim> claim_fields[] = {
    {.name = "name",
     .read = read_name<parsed_claim>,
     .need = presence::not_empty,
     .left_out = name_after_table<parsed_claim>},
    {"table", read_rule_table<parsed_claim>, presence::required,
     "the table that gets one row per claim, e.g. table: coupon_order"},
    {"idempotency_columns", read_idempotency_columns, presence::required,
     "the business key that may be claimed once, e.g. idempotency_columns: [user_id, campaign_id]"},
    {"idempotency_key_column", read_idempotency_key_column},
    {"consumes", read_consumes, presence::required, "the stock rule each claim uses up, e.g. consumes: coupon_stock"},
    {"redis", read_redis},
    {.name = "duplicate", .read = read_duplicate, .left_out = duplicate_by_default},
    {"strictness", read_claim_strictness},
    {"on_cancel", read_on_cancel},
    {"decremented_by_trigger", read_decremented_by_trigger},
    {"mode", read_rule_mode<parsed_claim>},
    {"unmodeled", read_rule_unmodeled<parsed_claim>},
};

// The rules file itself.

void read_stock(yaml_file& file, const YAML::Node& node, parsed_rules& out) {
    parsed_stock p;
    p.rule.pos = file.pos(node.Mark());
    read_mapping(file, node, "a stock rule", "this stock rule", p.rule.pos, stock_fields, p);
    p.order = out.stocks.size() + out.claims.size();
    out.stocks.push_back(std::move(p));
}

void read_claim(yaml_file& file, const YAML::Node& node, parsed_rules& out) {
    parsed_claim p;
    p.rule.pos = file.pos(node.Mark());
    read_mapping(file, node, "a claim rule", "this claim rule", p.rule.pos, claim_fields, p);
    p.order = out.stocks.size() + out.claims.size();
    out.claims.push_back(std::move(p));
}

void read_rule_list(yaml_file& file, const field& f, std::string_view kind, parsed_rules& out,
                    void (*read_one)(yaml_file&, const YAML::Node&, parsed_rules&)) {
    if (f.value.IsNull()) return;
    if (!f.value.IsSequence()) {
        file.error(f.value_mark(), f.name + " must be a list of " + std::string(kind) +
                                       " rules, each starting with '- ', not " + std::string(describe_node(f.value)));
        return;
    }
    for (const auto& item : f.value) {
        // An alias item carries its anchor's mark; report it at the list's key instead.
        const auto item_mark = item.Mark().pos < f.key_mark.pos ? f.key_mark : item.Mark();
        if (out.stocks.size() + out.claims.size() >= max_rules_per_set) {
            file.error(item_mark, "too many rules: a rule set holds at most " + std::to_string(max_rules_per_set));
            return;
        }
        if (file.diags().full()) return;
        if (!item.IsMap()) {
            file.error(item_mark, "each " + std::string(kind) + " rule is a mapping of fields (table:, ...), not " +
                                      std::string(describe_node(item)));
            continue;
        }
        read_one(file, item, out);
    }
}

void read_stock_rules(yaml_file& file, const field& f, parsed_rules& out) {
    read_rule_list(file, f, "stock", out, read_stock);
}

void read_claim_rules(yaml_file& file, const field& f, parsed_rules& out) {
    read_rule_list(file, f, "claim", out, read_claim);
}

void read_default_mode(yaml_file& file, const field& f, parsed_rules& out) {
    const auto m = read_mode(file, f);
    if (!m) return;
    const auto here = file.pos(f.value_mark());
    if (out.default_mode && out.default_mode->first != *m) {
        const auto& [other, where] = *out.default_mode;
        file.error(f.value_mark(), "default_mode is " + std::string(*m == mode::enforce ? "enforce" : "observe") +
                                       " here but " + (other == mode::enforce ? "enforce" : "observe") + " at " +
                                       where.file + ":" + std::to_string(where.line) + ":" +
                                       std::to_string(where.column) +
                                       "; all files form one rule set with one default mode");
        return;
    }
    if (!out.default_mode) out.default_mode.emplace(*m, here);
}

void read_trusted_users(yaml_file& file, const field& f, parsed_rules& out) {
    if (f.value.IsNull()) return;
    const auto one = [&](const YAML::Node& n) {
        const std::string* text = read_scalar(file, field{f.name, n.Mark(), n}, "a database user name");
        if (text == nullptr) return;
        if (text->empty() || text->size() > max_user_name_bytes) {
            file.error(n.Mark(), "trusted_users holds database user names of 1 to " +
                                     std::to_string(max_user_name_bytes) + " bytes, not " + quoted(*text));
            return;
        }
        out.trusted_users.push_back(*text);
    };
    if (f.value.IsSequence()) {
        for (const auto& item : f.value) one(item);
    } else {
        one(f.value);
    }
}

// rule_modes: {name: enforce|observe, ...}: an overlay that sets rules' modes without editing the
// rules (a second ConfigMap key, a file the DBA drops next to the rules). Names are checked against
// every file's rules in validate_rules.
void read_rule_modes(yaml_file& file, const field& f, parsed_rules& out) {
    if (f.value.IsNull()) return;
    if (!f.value.IsMap()) {
        file.error(f.value_mark(), "rule_modes is a mapping of rule names to enforce or observe (coupon_stock: "
                                   "observe), not " + std::string(describe_node(f.value)));
        return;
    }
    for (const auto& entry : f.value) {
        const YAML::Node key = entry.first;
        if (!key.IsScalar() || key.Scalar().empty()) {
            file.error(key.Mark(), "rule_modes holds rule names, not " + std::string(describe_node(key)));
            continue;
        }
        const field one{key.Scalar(), key.Mark(), entry.second};
        const auto m = read_mode(file, one);
        if (!m) continue;
        out.rule_modes.push_back({{key.Scalar(), file.pos(key.Mark())}, *m});
    }
}

// The fields of the rules file, in the order of the "unknown field" list; read in the order written (below).
constexpr field_spec<parsed_rules> top_fields[] = {
    {"default_mode", read_default_mode},
    {"stock_rules", read_stock_rules},
    {"claim_rules", read_claim_rules},
    {"trusted_users", read_trusted_users},
    {"rule_modes", read_rule_modes},
};

template <class T, std::size_t N>
known_mapping known(std::string_view mapping, const field_spec<T> (&specs)[N]) {
    known_mapping m{mapping, {}};
    for (const auto& spec : specs) m.fields.push_back({spec.name, spec.need == presence::required});
    return m;
}

}  // namespace

void read_rules_document(yaml_file& file, const YAML::Node& root, parsed_rules& out) {
    if (root.IsNull()) return;  // an empty file is an empty rule set
    if (!root.IsMap()) {
        file.error(root.Mark(), "a rules file is a mapping with default_mode:, stock_rules: and claim_rules:, not " +
                                    std::string(describe_node(root)));
        return;
    }
    // In the order written, not the table's: rules are numbered in file order.
    for (const auto& f : read_fields(file, root, "the rules file", names_of(top_fields))) {
        for (const auto& spec : top_fields) {
            if (spec.name == f.name) spec.read(file, f, out);
        }
    }
}

std::vector<known_mapping> known_fields() {
    return {known("the rules file", top_fields),  known("a stock rule", stock_fields),
            known("admission", admission_fields), known("group_update", group_update_fields),
            known("reserve", reserve_fields),     known("a claim rule", claim_fields),
            known("consumes", consumes_fields),   known("redis", redis_fields)};
}

}  // namespace claimguard::rules::detail
