// The watcher of tables no rule names (see unlisted_watch.hpp).
#include "unlisted_watch.hpp"

#include <algorithm>
#include <regex>
#include <variant>

#include "rules/sql/text.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::engine {

namespace sqlns = rules::sql;

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = sqlns::ascii_lower(c);
    return out;
}

std::string column_of(const sqlns::parsed_statement& st, const sqlns::name_ref& n) {
    return lower(sqlns::unquote_identifier(st.text(n.name)));
}

// "<db>.<table>" as the server resolves it: the schema written, else the session's database.
std::string table_of(const sqlns::parsed_statement& st, const sqlns::table_ref& t, std::string_view database) {
    const auto schema = t.name.qualifier == sqlns::no_token ? std::string(database)
                                                            : sqlns::unquote_identifier(st.text(t.name.qualifier));
    return schema + "." + sqlns::unquote_identifier(st.text(t.name.name));
}

bool is_value(const sqlns::operand& o) {
    return o.kind == sqlns::operand_kind::literal || o.kind == sqlns::operand_kind::placeholder;
}

// SET c = 42 (or ?): a counter's value; a full-row save's strings (an ORM's name = 'Sale') are not.
bool is_number(const sqlns::parsed_statement& st, const sqlns::assignment& a) {
    if (a.kind != sqlns::assignment_kind::value) return false;
    if (a.value.kind == sqlns::operand_kind::placeholder) return true;
    return a.value.kind == sqlns::operand_kind::literal && a.value.value_token < st.tokens.size() &&
           st.tokens[a.value.value_token].kind == sqlns::token_kind::integer;
}

// '2026-12-04 13:38:07': a time an ORM sends with the row, never what makes a claim unique.
bool looks_like_a_time(std::string_view literal) {
    static const std::regex time(R"('(\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?|\d\d:\d\d:\d\d(\.\d+)?)')");
    return std::regex_match(literal.begin(), literal.end(), time);
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool may_watch(std::string_view sql) noexcept {
    std::size_t i = 0;
    const std::size_t n = sql.size();
    while (i < n) {  // whitespace and plain comments (a versioned one's content is not judged here)
        if (sqlns::is_space(sql[i])) {
            ++i;
        } else if (sql[i] == '#' || (sql.substr(i, 3) == "-- ")) {
            while (i < n && sql[i] != '\n') ++i;
        } else if (sql.substr(i, 2) == "/*" && sql.substr(i, 3) != "/*!") {
            const auto close = sql.find("*/", i + 2);
            if (close == std::string_view::npos) return false;
            i = close + 2;
        } else {
            break;
        }
    }
    std::size_t end = i;
    while (end < n && sqlns::is_ident_byte(sql[end])) ++end;
    const auto word = sql.substr(i, end - i);
    for (std::string_view w : {"SELECT", "UPDATE", "INSERT", "REPLACE"})
        if (sqlns::iequals(word, w)) return true;
    return false;
}

void unlisted_watch::reset() {
    reads_.clear();
    last_take_.reset();
}

const unlisted_watch::read* unlisted_watch::last_read(std::string_view table) const {
    for (const auto& r : reads_)
        if (r.table == table) return &r;
    return nullptr;
}

std::optional<unlisted_shape> unlisted_watch::observe(const sqlns::parsed_statement& st, std::string_view database) {
    if (st.kind == sqlns::statement_kind::select) {
        const auto& sel = std::get<sqlns::select_statement>(st.body);
        if (!sel.has_from) return std::nullopt;
        read r{lower(table_of(st, sel.table, database)), {}, false};
        for (const auto& item : sel.items) {
            if (item.kind == sqlns::select_item_kind::star) r.all = true;
            if (item.kind == sqlns::select_item_kind::column) r.columns.push_back(column_of(st, item.column));
        }
        std::erase_if(reads_, [&](const read& old) { return old.table == r.table; });
        if (reads_.size() >= max_reads) reads_.erase(reads_.begin());
        reads_.push_back(std::move(r));
        return std::nullopt;
    }
    if (st.kind == sqlns::statement_kind::update) {
        const auto& up = std::get<sqlns::update_statement>(st.body);
        if (!up.joined.empty() || !up.where.present) return std::nullopt;
        // The WHERE's `column = value` conditions: the key (and an optimistic lock's version).
        std::vector<std::pair<std::string, std::string>> where;
        for (const auto& p : up.where.predicates)
            if (p.kind == sqlns::predicate_kind::compare && p.op == sqlns::compare_op::eq && is_value(p.value))
                where.emplace_back(column_of(st, p.column), std::string(st.text(p.value.span)));
        if (where.empty()) return std::nullopt;
        const auto in_where = [&](const std::string& c) {
            return std::any_of(where.begin(), where.end(), [&](const auto& w) { return w.first == c; });
        };
        const auto table = table_of(st, up.table, database);
        const auto* r = last_read(lower(table));
        std::string counter;
        std::string version;
        std::string units;
        for (const auto& a : up.assignments) {
            const auto column = column_of(st, a.column);
            const bool relative = a.kind == sqlns::assignment_kind::relative && column_of(st, a.base) == column;
            if (in_where(column) || (relative && a.sign == '+')) {  // SET v = 4 WHERE v = 3; SET v = v + 1
                if (version.empty()) version = column;
                continue;
            }
            if (!counter.empty()) continue;
            if (relative && a.sign == '-') {
                counter = column;
                units = a.value.kind == sqlns::operand_kind::literal ? std::string(st.text(a.value.span)) : "?";
            } else if (is_number(st, a) && r != nullptr && (r->all || contains(r->columns, column))) {
                counter = column;  // written from what this connection read just before: the incident's race
            }
        }
        if (counter.empty()) return std::nullopt;
        take t{lower(table), {}};
        std::vector<std::string> key;
        for (const auto& [column, value] : where)
            if (column != version && column != counter && !contains(key, column)) {
                key.push_back(column);
                t.key_values.emplace_back(column, value);
            }
        if (key.empty()) return std::nullopt;
        unlisted_shape s{table, "would-rewritten", {"counter: " + counter, "key_columns: " + join(key)}};
        if (!version.empty()) s.notes.push_back("version: " + version);
        if (!units.empty()) s.notes.push_back("units: " + units);
        s.notes.push_back(r != nullptr ? "after_read: yes" : "after_read: no");
        last_take_ = std::move(t);
        return s;
    }
    if (st.kind == sqlns::statement_kind::insert) {
        const auto& ins = std::get<sqlns::insert_statement>(st.body);
        if (!last_take_ || !ins.has_column_list || ins.row_count() == 0) return std::nullopt;
        const auto table = table_of(st, ins.table, database);
        if (lower(table) == last_take_->table) return std::nullopt;
        unlisted_shape s{table, "would-claimed", {"after: " + last_take_->table}};
        std::vector<std::string> valued;
        for (std::size_t c = 0; c < ins.columns.size() && c < ins.row_width; ++c) {
            const auto& value = ins.values[c];
            const auto column = sqlns::unquote_identifier(st.text(ins.columns[c].name));
            if (!is_value(value) || lower(column) == "id" || looks_like_a_time(st.text(value.span))) continue;
            valued.push_back(column);
            for (const auto& [key, key_value] : last_take_->key_values)
                if (st.text(value.span) == key_value) s.notes.push_back("consumes: " + column + "=" + key);
        }
        s.notes.push_back("columns: " + join(valued));
        last_take_.reset();  // one claim per take
        return s;
    }
    return std::nullopt;
}

}  // namespace claimguard::engine
