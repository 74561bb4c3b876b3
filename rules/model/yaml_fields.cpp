// Internal: reading typed, located fields out of yaml-cpp nodes, reporting every problem.
#include "rules/model/yaml_fields.hpp"

#include "rules/model/duration.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>

#include "rules/model/limits.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules::detail {
namespace {

// Misspellings common enough to deserve a direct hint.
constexpr std::pair<std::string_view, std::string_view> field_aliases[] = {
    {"stock", "consumes"},          {"stock_rule", "consumes"},  {"redis_guard", "redis"},
    {"key_template", "key"},        {"sql_state", "sqlstate"},   {"state", "sqlstate"},
    {"errno", "code"},              {"error_code", "code"},      {"kind", "type"},
    {"idempotency_key", "idempotency_key_column"},
};

constexpr std::size_t max_quoted_value_chars = 60;

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

std::string join(std::span<const std::string_view> names) {
    std::string out;
    for (const auto name : names) {
        if (!out.empty())
            out += ", ";
        out += name;
    }
    return out;
}

bool has_control_character(std::string_view s) {
    return std::any_of(s.begin(), s.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

}  // namespace

void diagnostics::add(source_pos pos, std::string message) {
    if (out_.size() < max_diagnostics) {
        out_.push_back({std::move(pos), std::move(message)});
    } else if (out_.size() == max_diagnostics) {
        out_.push_back({std::move(pos), "too many errors (more than " + std::to_string(max_diagnostics) +
                                            "); fix these first"});
    }
}

bool diagnostics::full() const { return out_.size() > max_diagnostics; }

source_pos yaml_file::pos(const YAML::Mark& mark) const {
    // yaml-cpp marks are 0-based; a null mark (-1) means "somewhere in this file".
    return {name_, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1};
}

YAML::Mark field::value_mark() const {
    // An alias carries the mark of its anchor; a value that starts before its own key is one,
    // and the key is where the DBA looks.
    const auto mark = value.Mark();
    return value.IsNull() || mark.pos < key_mark.pos ? key_mark : mark;
}

std::string_view describe_node(const YAML::Node& node) {
    switch (node.Type()) {
    case YAML::NodeType::Map:
        return "a mapping";
    case YAML::NodeType::Sequence:
        return "a list";
    case YAML::NodeType::Scalar:
        return "a single value";
    default:
        return "nothing";
    }
}

std::string quoted(std::string_view value) {
    const auto shown = first_invalid_utf8(value) ? value.substr(0, max_quoted_value_chars)
                                                 : utf8_prefix(value, max_quoted_value_chars);
    return "'" + printable(shown) + (shown.size() < value.size() ? "...'" : "'");
}

std::string_view suggest_field(std::string_view unknown, std::span<const std::string_view> known) {
    const auto lower = ascii_lower(unknown);
    for (const auto& [alias, target] : field_aliases)
        if (lower == alias && std::find(known.begin(), known.end(), target) != known.end())
            return target;
    for (const auto name : known)
        if (lower == name || (lower.size() >= 3 && (name.starts_with(lower) || name.ends_with("_" + lower))))
            return name;
    std::string_view best;
    std::size_t best_distance = std::max<std::size_t>(1, lower.size() / 3) + 1;
    for (const auto name : known) {
        const auto d = edit_distance(lower, name);
        if (d < best_distance)
            best = name, best_distance = d;
    }
    return best;
}

std::vector<field> read_fields(yaml_file& file, const YAML::Node& node, std::string_view what,
                               std::span<const std::string_view> known) {
    std::vector<field> fields;
    std::map<std::string, int> first_line;
    // yaml-cpp iterators return pairs by value: copy the nodes (they are handles) out of them.
    for (const auto& entry : node) {
        const YAML::Node key = entry.first;
        if (!key.IsScalar()) {
            file.error(key.Mark(), key.IsNull() ? "a field name is missing before the ':'"
                                                : "a field name must be a single word, not " +
                                                      std::string(describe_node(key)));
            continue;
        }
        const std::string& name = key.Scalar();
        if (name == "<<") {
            file.error(key.Mark(), "merge keys (<<) are not supported; write the fields out in full");
            continue;
        }
        if (std::find(known.begin(), known.end(), name) == known.end()) {
            const auto hint = suggest_field(name, known);
            file.error(key.Mark(), "unknown field " + quoted(name) + " in " + std::string(what) +
                                       (hint.empty() ? "; its fields are: " + join(known)
                                                     : "; did you mean '" + std::string(hint) + "'?"));
            continue;
        }
        const auto [seen, inserted] = first_line.emplace(name, key.Mark().line + 1);
        if (!inserted) {
            file.error(key.Mark(), name + " is set twice in " + std::string(what) + " (first on line " +
                                       std::to_string(seen->second) + "); keep one");
            continue;
        }
        fields.push_back({name, key.Mark(), entry.second});
    }
    return fields;
}

const std::string* read_scalar(yaml_file& file, const field& f, std::string_view expectation) {
    if (f.value.IsNull()) {
        file.error(f.key_mark, f.name + " has no value; it needs " + std::string(expectation));
        return nullptr;
    }
    if (!f.value.IsScalar()) {
        file.error(f.value_mark(),
                   f.name + " needs " + std::string(expectation) + ", not " + std::string(describe_node(f.value)));
        return nullptr;
    }
    return &f.value.Scalar();
}

std::optional<located_name> read_identifier(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "a column name");
    if (text == nullptr)
        return std::nullopt;
    if (const auto problem = identifier_problem(*text); !problem.empty()) {
        file.error(f.value_mark(), f.name + " " + quoted(*text) + " " + problem);
        return std::nullopt;
    }
    return located_name{*text, file.pos(f.value_mark())};
}

std::optional<std::vector<located_name>> read_column_list(yaml_file& file, const field& f) {
    if (f.value.IsNull() || f.value.IsScalar()) {
        auto one = read_identifier(file, f);
        if (!one)
            return std::nullopt;
        return std::vector<located_name>{std::move(*one)};
    }
    if (!f.value.IsSequence()) {
        file.error(f.value_mark(), f.name + " needs a column name or a list of column names, not " +
                                       std::string(describe_node(f.value)));
        return std::nullopt;
    }
    if (f.value.size() == 0) {
        file.error(f.value_mark(), f.name + " is an empty list; it needs at least one column");
        return std::nullopt;
    }
    if (f.value.size() > max_index_columns) {
        file.error(f.value_mark(), f.name + " lists " + std::to_string(f.value.size()) +
                                       " columns; a MySQL index holds at most " +
                                       std::to_string(max_index_columns));
        return std::nullopt;
    }
    std::vector<located_name> columns;
    bool ok = true;
    for (const auto& item : f.value) {
        // An alias item carries its anchor's mark; report it at the list's key instead.
        const auto item_mark = item.Mark().pos < f.key_mark.pos ? f.key_mark : item.Mark();
        const auto column = read_identifier(file, field{"each entry of " + f.name, item_mark, item});
        if (!column) {
            ok = false;
            continue;
        }
        const auto dup = std::find_if(columns.begin(), columns.end(),
                                      [&](const located_name& c) { return iequals(c.name, column->name); });
        if (dup != columns.end()) {
            file.error(item_mark, f.name + " lists " + quoted(column->name) + " twice");
            ok = false;
            continue;
        }
        columns.push_back(*column);
    }
    if (!ok)
        return std::nullopt;
    return columns;
}

std::optional<std::string> read_rule_name(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "a rule name");
    if (text == nullptr)
        return std::nullopt;
    const auto allowed = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '-' || c == '.';
    };
    std::string problem;
    if (text->empty())
        problem = "is empty";
    else if (text->size() > max_rule_name_chars)
        problem = "is longer than " + std::to_string(max_rule_name_chars) + " characters";
    else if (!std::all_of(text->begin(), text->end(), allowed))
        problem = "may hold only letters, digits, '_', '-' and '.' (it appears in metrics and logs)";
    else if (text->front() == '-' || text->front() == '.')
        problem = "must start with a letter, a digit or '_'";
    if (!problem.empty()) {
        file.error(f.value_mark(), "name " + quoted(*text) + " " + problem);
        return std::nullopt;
    }
    return *text;
}

std::optional<table_name> read_table(yaml_file& file, const field& f) {
    if (f.value.IsMap()) {
        static constexpr std::string_view known[] = {"schema", "name"};
        table_name table;
        bool ok = true;
        bool has_name = false;
        for (const auto& sub : read_fields(file, f.value, "a table", known)) {
            auto id = read_identifier(file, field{"table " + sub.name, sub.key_mark, sub.value});
            ok = ok && id.has_value();
            if (id && sub.name == "schema")
                table.schema = std::move(id->name);
            else if (id)
                table.name = std::move(id->name), has_name = true;
            has_name = has_name || sub.name == "name";
        }
        if (!has_name) {
            file.error(f.value_mark(), "table needs name: (and optionally schema:)");
            return std::nullopt;
        }
        if (!ok)
            return std::nullopt;
        return table;
    }
    const std::string* text = read_scalar(file, f, "a table name such as coupon_stock or shop.coupon_stock");
    if (text == nullptr)
        return std::nullopt;
    if (text->find('`') != std::string::npos) {
        file.error(f.value_mark(), "table " + quoted(*text) +
                                       " contains a backtick; write names without quotes (claimguard quotes "
                                       "them itself), or use table: {schema: ..., name: ...} for a name that "
                                       "really contains one");
        return std::nullopt;
    }
    const auto dot = text->find('.');
    if (dot != std::string::npos && text->find('.', dot + 1) != std::string::npos) {
        file.error(f.value_mark(), "table " + quoted(*text) +
                                       " has more than one '.'; for names that contain dots write "
                                       "table: {schema: ..., name: ...}");
        return std::nullopt;
    }
    table_name table;
    if (dot != std::string::npos) {
        table.schema = text->substr(0, dot);
        table.name = text->substr(dot + 1);
        if (const auto problem = identifier_problem(table.schema); !problem.empty()) {
            file.error(f.value_mark(), "the schema in table " + quoted(*text) + " " + problem);
            return std::nullopt;
        }
    } else {
        table.name = *text;
    }
    if (const auto problem = identifier_problem(table.name); !problem.empty()) {
        file.error(f.value_mark(), "the table name in table " + quoted(*text) + " " + problem);
        return std::nullopt;
    }
    return table;
}

std::optional<std::int64_t> read_integer(yaml_file& file, const field& f, std::int64_t min, std::int64_t max,
                                         std::string_view example) {
    const std::string* text = read_scalar(file, f, "a whole number such as " + std::string(example));
    if (text == nullptr)
        return std::nullopt;
    std::int64_t value = 0;
    const char* first = text->data();
    const char* last = first + text->size();
    const auto [end, ec] = std::from_chars(first, last, value);
    if (end == last && ec == std::errc() && value >= min && value <= max)
        return value;
    if (end == last && (ec == std::errc() || ec == std::errc::result_out_of_range)) {
        file.error(f.value_mark(), f.name + " is " + quoted(*text) + ", outside the range " + std::to_string(min) +
                                       " to " + std::to_string(max));
        return std::nullopt;
    }
    file.error(f.value_mark(),
               f.name + " must be a whole number such as " + std::string(example) + ", not " + quoted(*text));
    return std::nullopt;
}

std::optional<mode> read_mode(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "enforce or observe");
    if (text == nullptr)
        return std::nullopt;
    if (*text == "enforce")
        return mode::enforce;
    if (*text == "observe")
        return mode::observe;
    file.error(f.value_mark(), f.name + " must be enforce or observe, not " + quoted(*text));
    return std::nullopt;
}

std::optional<strictness> read_strictness(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "after_refused or require_decrement");
    if (text == nullptr)
        return std::nullopt;
    if (*text == "after_refused")
        return strictness::after_refused;
    if (*text == "require_decrement")
        return strictness::require_decrement;
    file.error(f.value_mark(), f.name + " must be after_refused or require_decrement, not " + quoted(*text));
    return std::nullopt;
}

std::optional<unmodeled_policy> read_unmodeled_policy(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "refuse or forward");
    if (text == nullptr)
        return std::nullopt;
    if (*text == "refuse")
        return unmodeled_policy::refuse;
    if (*text == "forward")
        return unmodeled_policy::forward;
    file.error(f.value_mark(), f.name + " must be refuse or forward, not " + quoted(*text));
    return std::nullopt;
}

std::optional<bool> read_bool(yaml_file& file, const field& f) {
    const std::string* text = read_scalar(file, f, "true or false");
    if (text == nullptr)
        return std::nullopt;
    if (*text == "true")
        return true;
    if (*text == "false")
        return false;
    file.error(f.value_mark(), f.name + " must be true or false, not " + quoted(*text));
    return std::nullopt;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) { return duration::parse(text).value; }

std::optional<std::chrono::milliseconds> read_duration(yaml_file& file, const field& f) {
    return read_duration(file, f, min_redis_ttl, max_redis_ttl);
}

std::optional<std::chrono::milliseconds> read_duration(yaml_file& file, const field& f, std::chrono::milliseconds min,
                                                       std::chrono::milliseconds max) {
    const std::string* text = read_scalar(file, f, "a duration such as 250ms or 1.5s");
    if (text == nullptr)
        return std::nullopt;
    const auto parsed = duration::parse(*text);
    const auto range = "; it must be at least " + duration::format(min) + " and at most " + duration::format(max);
    if (!parsed.value) {
        if (parsed.problem == duration::problem::too_large)
            file.error(f.value_mark(), f.name + " is " + quoted(*text) + range);
        else
            file.error(f.value_mark(), f.name + ": " + duration::describe(parsed, *text));
        return std::nullopt;
    }
    const auto value = parsed.value;
    if (*value < min || *value > max) {
        file.error(f.value_mark(), f.name + " is " + quoted(*text) + range);
        return std::nullopt;
    }
    return value;
}

std::string sql_state_problem(std::string_view text) {
    if (text.size() != sql_state_length)
        return "must be 5 characters, such as 45000";
    for (const char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')))
            return "may hold only digits and upper-case letters, such as 45000";
    if (text.starts_with("00"))
        return "is in class 00, which means success; an error needs another class, such as 45000";
    return {};
}

std::optional<answer> read_answer(yaml_file& file, const field& f, const answer& defaults) {
    if (f.value.IsScalar()) {
        // Shorthand: `exhausted: ok` or `exhausted: error` (with the default code and message).
        const std::string& text = f.value.Scalar();
        if (text == "ok")
            return answer{answer::kind::ok, 0, {}, {}};
        if (text == "error")
            return defaults;
        file.error(f.value_mark(), f.name + " must be ok, error, or a mapping with type, code, sqlstate and "
                                            "message, not " + quoted(text));
        return std::nullopt;
    }
    if (!f.value.IsMap()) {
        file.error(f.value_mark(), f.name + " needs a mapping with type, code, sqlstate and message, not " +
                                       std::string(describe_node(f.value)));
        return std::nullopt;
    }
    static constexpr std::string_view known[] = {"type", "code", "sqlstate", "message"};
    const auto what = "the " + f.name + " answer";
    const auto fields = read_fields(file, f.value, what, known);
    answer out = defaults;
    bool ok = true;
    for (const auto& sub : fields) {
        if (sub.name != "type")
            continue;
        const std::string* text = read_scalar(file, sub, "error or ok");
        if (text == nullptr) {
            return std::nullopt;
        } else if (*text == "ok") {
            out = answer{answer::kind::ok, 0, {}, {}};
        } else if (*text != "error") {
            file.error(sub.value_mark(), "type must be error or ok, not " + quoted(*text));
            return std::nullopt;
        }
    }
    for (const auto& sub : fields) {
        if (sub.name == "type")
            continue;
        if (out.type == answer::kind::ok) {
            file.error(sub.key_mark, "an ok answer sends no " + sub.name + "; remove it or set type: error");
            ok = false;
        } else if (sub.name == "code") {
            const auto code = read_integer(file, sub, min_error_code, max_error_code, "1644");
            if (code && *code >= first_client_error_code && *code <= last_client_error_code) {
                file.error(sub.value_mark(), "code " + std::to_string(*code) +
                                                 " is a client-library error (2000-2999, e.g. 2013 Lost "
                                                 "connection) that drivers treat as a broken connection; use a "
                                                 "server code such as 1644");
                ok = false;
            } else if (code) {
                out.code = static_cast<std::uint16_t>(*code);
            } else {
                ok = false;
            }
        } else if (sub.name == "sqlstate") {
            const std::string* text = read_scalar(file, sub, "a 5-character SQLSTATE such as 45000");
            if (text == nullptr) {
                ok = false;
            } else if (const auto problem = sql_state_problem(*text); !problem.empty()) {
                file.error(sub.value_mark(), "sqlstate " + quoted(*text) + " " + problem);
                ok = false;
            } else {
                out.sql_state = *text;
            }
        } else if (sub.name == "message") {
            const std::string* text = read_scalar(file, sub, "the text the app receives");
            if (text == nullptr) {
                ok = false;
            } else if (text->empty()) {
                file.error(sub.value_mark(), "message is empty; write the text the app should receive");
                ok = false;
            } else if (text->size() > max_answer_message_bytes) {
                file.error(sub.value_mark(), "message is " + std::to_string(text->size()) +
                                                 " bytes long; it may be at most " +
                                                 std::to_string(max_answer_message_bytes));
                ok = false;
            } else if (first_invalid_utf8(*text) || has_control_character(*text)) {
                file.error(sub.value_mark(), "message contains a control character or invalid UTF-8; keep it "
                                             "to one line of plain text");
                ok = false;
            } else {
                out.message = *text;
            }
        }
    }
    if (!ok)
        return std::nullopt;
    return out;
}

}  // namespace claimguard::rules::detail
