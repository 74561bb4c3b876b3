// `claimguard suggest LOG...`: drafts a rules file from what an app sent (a MariaDB/MySQL general
// log, or a .sql script of its statements). It reads the statements of each connection in order
// and looks for the shapes a rule protects:
// - a stock table: a write of a counter column that the same connection read just before (the
//   incident's SELECT remain -> UPDATE ... SET remain = <literal>), or a relative decrement
//   (SET remain = remain - 1); its key columns are the write's WHERE equalities;
// - a claim table: an INSERT that follows such a write on the same connection; the column that
//   holds the stock key's value maps the claim to its stock (`consumes`); the INSERT's columns given
//   values (not times) are the proposed idempotency columns.
// Every guess is written as a YAML comment with its evidence. The draft starts in observe.
//
// From a sidecar's GET /digests (--digests, watch_unlisted_tables) instead: the shapes filed under
// `unlisted:<db>.<table>` already say which write was a take (the counter, its key, an optimistic
// lock's version) and which INSERT followed it (the stock key's column, the valued columns), counted
// over every connection; the same votes are drawn from them.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rules/cli/rules_cli.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/parser.hpp"
#include "rules/sql/script.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::rules_cli {
namespace {

namespace sql = rules::sql;

struct logged_statement {
    std::string connection;  // the general log's thread id; one connection for a script
    std::string text;
};

// Commands of the general log whose argument is a statement the server ran.
bool runs_a_statement(std::string_view command) { return command == "Query" || command == "Execute"; }

// A general log (`Time Id Command Argument`, MariaDB and MySQL 5.x/8.0 formats), or a script.
std::vector<logged_statement> read_statements(const std::string& text) {
    static const std::regex entry(
        R"(^(?:\d{6}\s+\d{1,2}:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?)?\s+(\d+)\s+)"
        R"((Query|Execute|Prepare|Connect|Quit|Init DB|Close stmt|Field List|Statistics|Ping|Reset stmt|Change user|)"
        R"(Set option|Long Data|Fetch|Daemon|Binlog Dump|Refresh|Shutdown|Processlist|Kill|Debug))"
        R"((?:\t(.*))?$)");
    std::vector<logged_statement> out;
    std::istringstream in(text);
    std::string line;
    bool continuing = false;  // the previous entry was a statement that may go on over more lines
    bool general_log = false;
    std::vector<std::string> lines;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    for (const auto& l : lines) {
        std::smatch m;
        if (std::regex_match(l, m, entry)) {
            general_log = true;
            continuing = runs_a_statement(m[2].str());
            if (continuing) out.push_back({m[1].str(), m[3].str()});
            continue;
        }
        // A statement over several lines continues until the next entry; the log's own header
        // lines (written again after a restart or FLUSH LOGS) end it.
        const bool header = l.starts_with("Time ") || l.starts_with("Tcp port:") || l.find(", Version: ") != std::string::npos;
        if (header) continuing = false;
        else if (continuing) out.back().text += "\n" + l;
    }
    if (general_log) return out;
    for (auto& s : sql::split_script(text)) out.push_back({"script", std::move(s)});
    return out;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return out;
}

std::string name_of(const sql::parsed_statement& st, const sql::name_ref& n) {
    return sql::unquote_identifier(st.text(n.name));
}

std::string table_of(const sql::parsed_statement& st, const sql::table_ref& t) {
    const auto table = name_of(st, t.name);
    return t.name.qualifier == sql::no_token ? table : sql::unquote_identifier(st.text(t.name.qualifier)) + "." + table;
}

bool is_value(const sql::operand& o) {
    return o.kind == sql::operand_kind::literal || o.kind == sql::operand_kind::placeholder;
}

// The WHERE's `column = value` conditions (lowercased column -> value as written); false when it has
// anything else (a range, an OR the parser did not read, ...).
bool equalities(const sql::parsed_statement& st, const sql::where_clause& w, std::map<std::string, std::string>& out) {
    if (!w.present) return false;
    for (const auto& p : w.predicates) {
        if (p.kind != sql::predicate_kind::compare || p.op != sql::compare_op::eq || !is_value(p.value)) continue;
        out[lower(name_of(st, p.column))] = std::string(st.text(p.value.span));
    }
    return !out.empty();
}

// '2026-12-04 13:38:07.639', '2026-12-04', '13:38:07': a time the app (an ORM) sends with the row, never part
// of what makes a claim unique.
bool looks_like_a_time(std::string_view literal) {
    static const std::regex time(R"('(\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?|\d\d:\d\d:\d\d(\.\d+)?)')");
    return std::regex_match(literal.begin(), literal.end(), time);
}

// A literal integer operand's value (negative included).
std::optional<std::int64_t> integer(const sql::parsed_statement& st, const sql::operand& o) {
    if (o.kind != sql::operand_kind::literal) return std::nullopt;
    const auto text = std::string(st.text(o.span));
    try {
        std::size_t used = 0;
        const auto v = std::stoll(text, &used);
        if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

// One write of a table with a WHERE of equalities: what it set, and the key it named.
struct stock_write {
    std::string table;
    std::map<std::string, std::string> key_values;  // WHERE column (lowercased) -> value as written
};

// What the writes of one table say, column by column, over the whole log.
struct stock_votes {
    std::size_t writes = 0;
    std::size_t after_read = 0;  // writes of a column the same connection read just before
    std::map<std::vector<std::string>, std::size_t> keys;  // WHERE equality columns not also set -> count
    std::map<std::string, std::size_t> decrements;  // column -> writes that lowered it (relative, or a
                                                    // smaller literal than the key's last one)
    std::map<std::string, std::size_t> bumps;       // column -> writes that raised it by 1 or locked on it
                                                    // (SET v = v + 1; SET v = 4 WHERE ... v = 3; a larger literal)
    std::map<std::int64_t, std::size_t> units;      // a relative decrement's literal amount
    std::map<std::tuple<std::string, std::string>, std::int64_t> last;  // (key values, column) -> last literal
    std::map<std::string, std::size_t> read_and_set;  // column set after being read (the fallback counter)
    std::string example_read;
    std::string example_write;
    bool from_digests = false;  // the votes are the sidecar's notes (the counter is named, not inferred)
};

struct claim_votes {
    std::size_t count = 0;
    std::map<std::string, std::map<std::string, std::size_t>> mapping;  // stock key column -> claim column -> votes
    std::map<std::vector<std::string>, std::size_t> columns;            // the INSERT's valued columns
    std::string example;
};

class analysis {
public:
    void add(const logged_statement& s) {
        const auto st = sql::parse(s.text, {});
        auto& conn = connections_[s.connection];
        ++statements_;
        if (st.kind == sql::statement_kind::select) {
            const auto& sel = std::get<sql::select_statement>(st.body);
            if (!sel.has_from) return;
            read r;
            r.table = table_of(st, sel.table);
            for (const auto& item : sel.items) {
                if (item.kind == sql::select_item_kind::star) r.all = true;
                if (item.kind == sql::select_item_kind::column) r.columns.insert(lower(name_of(st, item.column)));
            }
            r.text = s.text;
            conn.last_read[lower(r.table)] = std::move(r);
        } else if (st.kind == sql::statement_kind::update) {
            const auto& up = std::get<sql::update_statement>(st.body);
            if (!up.joined.empty()) return;
            std::map<std::string, std::string> where;
            if (!equalities(st, up.where, where)) return;
            const auto table = table_of(st, up.table);
            auto& votes = stocks_[table];
            const auto read_it = conn.last_read.find(lower(table));
            const bool read_before = read_it != conn.last_read.end();
            std::set<std::string> set_columns;
            for (const auto& a : up.assignments) set_columns.insert(lower(name_of(st, a.column)));
            std::string key_text;  // the key's values, to follow one row's literals across writes
            std::vector<std::string> key;
            for (const auto& [column, value] : where)
                if (set_columns.count(column) == 0) {
                    key.push_back(column);
                    key_text += value + '\x1f';
                }
            bool counted_read = false;
            for (const auto& a : up.assignments) {
                const auto column = lower(name_of(st, a.column));
                if (a.kind == sql::assignment_kind::relative && lower(name_of(st, a.base)) == column) {
                    const auto amount = integer(st, a.value);
                    if (a.sign == '-') {
                        ++votes.decrements[column];
                        if (amount) ++votes.units[*amount];
                    } else if (amount == 1) {
                        ++votes.bumps[column];
                    }
                    continue;
                }
                if (where.count(column) > 0) ++votes.bumps[column];  // SET v = 4 WHERE ... AND v = 3
                if (a.kind != sql::assignment_kind::value) continue;
                if (read_before && (read_it->second.all || read_it->second.columns.count(column) > 0)) {
                    ++votes.read_and_set[column];
                    counted_read = true;
                }
                if (const auto v = integer(st, a.value)) {
                    auto [it, first] = votes.last.try_emplace({key_text, column}, *v);
                    if (!first) {
                        if (*v < it->second) ++votes.decrements[column];
                        if (*v > it->second) ++votes.bumps[column];
                        it->second = *v;
                    }
                }
            }
            ++votes.writes;
            if (counted_read) {
                ++votes.after_read;
                if (votes.example_read.empty()) votes.example_read = read_it->second.text;
            }
            if (!key.empty()) ++votes.keys[key];
            if (votes.example_write.empty()) votes.example_write = s.text;
            conn.last_write = stock_write{table, where};
        } else if (st.kind == sql::statement_kind::insert) {
            const auto& ins = std::get<sql::insert_statement>(st.body);
            if (!conn.last_write || !ins.has_column_list || ins.row_count() == 0) return;
            const auto table = table_of(st, ins.table);
            if (lower(table) == lower(conn.last_write->table)) return;
            auto& votes = claims_[{table, conn.last_write->table}];
            ++votes.count;
            if (votes.example.empty()) votes.example = s.text;
            std::vector<std::string> valued;
            for (std::size_t c = 0; c < ins.columns.size() && c < ins.row_width; ++c) {
                const auto& value = ins.values[c];
                const auto column = name_of(st, ins.columns[c]);
                if (!is_value(value) || lower(column) == "id" || looks_like_a_time(st.text(value.span))) continue;
                valued.push_back(column);
                for (const auto& [key, key_value] : conn.last_write->key_values)
                    if (st.text(value.span) == key_value) ++votes.mapping[key][column];
            }
            ++votes.columns[valued];
            conn.last_write.reset();  // one claim per write
        }
        // A transaction's end (COMMIT, ROLLBACK) does not end the flow: a pooled app reads in one
        // transaction and writes in the next.
    }

    // One /digests document: its `unlisted:` shapes (a rule's own shapes are the rules already
    // written). Takes first, so that each claim finds the stock table its `after` note names.
    // Returns how many shapes were read; throws on a document that is not /digests' JSON.
    std::size_t add_digests(const nlohmann::json& doc) {
        std::size_t used = 0;
        for (const bool takes : {true, false})
            for (const auto& shape : doc.at("shapes")) {
                const auto rule = shape.at("rule").get<std::string>();
                if (!rule.starts_with(unlisted_prefix)) continue;
                const auto& actions = shape.at("actions");
                const char* action = takes ? "rewritten" : "claimed";
                if (!actions.contains(action)) continue;
                const auto count = actions[action].at("observed").get<std::size_t>();
                std::map<std::string, std::size_t> notes;
                if (shape.contains("notes"))
                    for (const auto& [note, n] : shape["notes"].items()) notes[note] = n.get<std::size_t>();
                const auto text = shape.at("statement").get<std::string>();
                if (takes ? add_digest_take(rule.substr(unlisted_prefix.size()), text, count, notes)
                          : add_digest_claim(text, count, notes))
                    ++used;
            }
        return used;
    }

    void print(std::ostream& out, const std::vector<std::string>& files, const unique_keys_lookup& unique_keys) const {
        out << "# Drafted by `claimguard suggest` from " << statements_ << " statement(s)";
        if (digest_shapes_ == 0)
            out << " on " << connections_.size() << " connection(s)";
        else
            out << " (" << digest_shapes_ << " shape(s) a sidecar's watch_unlisted_tables filed in /digests)";
        if (!files.empty()) {
            out << " (";
            for (std::size_t i = 0; i < files.size(); ++i) out << (i ? ", " : "") << files[i];
            out << ")";
        }
        out << ".\n# Each guess says why. Review them, then: claimguard lint THIS_FILE; claimguard ddl THIS_FILE (the\n"
               "# UNIQUE index each claim rule needs); claimguard check --rules THIS_FILE ... against the database.\n"
               "# It starts in observe: nothing changes on the wire until default_mode is enforce.\n"
               "default_mode: observe\n";
        std::map<std::string, std::string> stock_names;  // table -> rule name
        std::map<std::string, std::vector<std::string>> stock_keys;
        // The key with the most votes (not `except`), and its votes; {} and 0 when none has any.
        const auto most = [](const auto& counts, const auto& except) {
            typename std::decay_t<decltype(counts)>::key_type best{};
            std::size_t votes = 0;
            for (const auto& [column, n] : counts)
                if (n > votes && column != except) {
                    best = column;
                    votes = n;
                }
            return std::pair{best, votes};
        };
        std::set<std::string> names;
        std::vector<std::string> not_proposed;
        bool stock_header = false;
        for (const auto& [table, v] : stocks_) {
            const auto [counter, lowered] = most(v.decrements, std::string());
            if (counter.empty()) {
                if (!v.read_and_set.empty()) not_proposed.push_back(table);
                continue;
            }
            const auto [version, raised] = most(v.bumps, counter);
            std::vector<std::string> key;
            std::size_t key_votes = 0;
            for (const auto& [k, n] : v.keys)
                if (n > key_votes) {
                    key = k;
                    key_votes = n;
                }
            std::erase(key, version);
            if (key.empty()) continue;
            if (!stock_header) {
                out << "\nstock_rules:\n";
                stock_header = true;
            }
            const auto name = unique_name(table, names);
            stock_names[table] = name;
            stock_keys[table] = key;
            if (v.from_digests)
                out << "  # " << table << ": " << v.writes << " write(s) the sidecar filed as takes of " << counter
                    << " (a relative decrement, or a number written right after the same connection read it); "
                    << v.after_read << " came right after such a read (the race a rule closes)\n";
            else
                out << "  # " << table << ": " << v.writes << " write(s) with a WHERE of equalities; " << lowered
                    << " lowered " << counter << " (the counter), " << v.after_read
                    << " wrote a column the same connection had just read (the race a rule closes)\n";
            if (!v.example_read.empty()) out << "  #   read:  " << sql::one_line(v.example_read, 160) << "\n";
            out << "  #   write: " << sql::one_line(v.example_write, 160) << "\n";
            out << "  #   key_columns: the WHERE's equalities in " << key_votes << " of " << v.writes << " write(s)\n";
            std::int64_t units = 1;
            if (const auto [amount, n] = most(v.units, std::int64_t{0}); n > 0) {
                units = amount;
                out << "  #   units: " << units << ", the amount of " << n << " relative decrement(s)\n";
            } else {
                out << "  #   units: 1 assumed (the writes are absolute: what one claim takes is not in what was seen; "
                       "check)\n";
            }
            if (!version.empty())
                out << "  #   version_column: " << raised << " write(s) raised " << version
                    << " or compared it in the WHERE (an optimistic lock)\n";
            out << "  - name: " << name << "\n    table: " << table << "\n    key_columns: [" << join(key)
                << "]\n    counter_column: " << counter << "\n    units: " << units << "\n";
            if (!version.empty()) out << "    version_column: " << version << "\n";
        }
        if (!stock_header)
            out << "\n# No stock table found: no column that writes lowered (SET c = c - n, or a smaller value than\n"
                   "# the row's last write). Is the log of the app's claim path, with more than one claim per key?\n";
        if (!not_proposed.empty())
            out << "\n# Written after a read but never lowered, so not proposed as stock: " << join(not_proposed) << "\n";
        bool claims_header = false;
        std::set<std::string> claim_tables;
        for (const auto& [tables, v] : claims_) {
            const auto& [table, stock_table] = tables;
            if (stock_names.count(stock_table) == 0 || claim_tables.count(lower(table)) > 0 || v.columns.empty())
                continue;
            claim_tables.insert(lower(table));  // one claim rule per table: the most common stock first below
            if (!claims_header) {
                out << "\nclaim_rules:\n";
                claims_header = true;
            }
            const auto columns = std::max_element(v.columns.begin(), v.columns.end(),
                                                  [](const auto& a, const auto& b) { return a.second < b.second; })
                                     ->first;
            out << "  # " << table << ": " << v.count << " INSERT(s) right after a write of " << stock_table
                << " on the same connection\n  #   e.g. " << sql::one_line(v.example, 160) << "\n";
            std::vector<std::pair<std::string, std::string>> mapping;  // claim column -> stock key column
            for (const auto& key : stock_keys.at(stock_table)) {
                const auto it = v.mapping.find(key);
                if (it == v.mapping.end()) {
                    out << "  #   consumes: no column of the INSERT held the value of " << stock_table << "." << key
                        << "; the same name is assumed\n";
                    mapping.emplace_back(key, key);
                    continue;
                }
                const auto best = std::max_element(it->second.begin(), it->second.end(),
                                                   [](const auto& a, const auto& b) { return a.second < b.second; });
                out << "  #   consumes: " << table << "." << best->first << " held the value of " << stock_table << "."
                    << key << " in " << best->second << " of " << v.count << " INSERT(s)\n";
                mapping.emplace_back(best->first, key);
            }
            // An existing UNIQUE index all of whose columns the INSERTs give values already holds the
            // database to one row per tuple: that is the app's own idea of one claim.
            std::vector<std::string> idempotency = columns;
            std::string index_name;
            if (unique_keys) {
                std::set<std::string> valued;
                for (const auto& c : columns) valued.insert(lower(c));
                for (const auto& [name, index_columns] : unique_keys(table)) {
                    const bool covered = !index_columns.empty() &&
                                         std::all_of(index_columns.begin(), index_columns.end(),
                                                     [&](const auto& c) { return valued.count(lower(c)) > 0; });
                    if (covered && (index_name.empty() || index_columns.size() < idempotency.size())) {
                        idempotency = index_columns;
                        index_name = name;
                    }
                }
            }
            if (!index_name.empty()) {
                out << "  #   idempotency_columns: the existing UNIQUE index " << index_name << " ("
                    << join(idempotency)
                    << "), whose every column the INSERT gives a value: the database already keeps one row per\n"
                       "  #   such tuple\n";
            } else {
                if (unique_keys)
                    out << "  #   (no existing UNIQUE index of " << table
                        << " is on columns the INSERT gives values only: proposed below)\n";
                out << "  #   idempotency_columns: the INSERT's columns given values: one claim per such tuple. Keep\n"
                       "  #   only those that name the claimer and what is claimed (not a request id or a time); the\n"
                       "  #   database must hold a UNIQUE index on them (`claimguard ddl` prints it)\n";
            }
            out << "  - name: " << unique_name(table, names) << "\n    table: " << table
                << "\n    idempotency_columns: [" << join(idempotency)
                << "]\n    consumes:\n      rule: " << stock_names.at(stock_table) << "\n      columns:\n";
            for (const auto& [claim_column, key] : mapping) out << "        " << claim_column << ": " << key << "\n";
        }
    }

private:
    static constexpr std::string_view unlisted_prefix = "unlisted:";

    // The value of each `name: value` note, with its count.
    static std::map<std::string, std::size_t> notes_named(const std::map<std::string, std::size_t>& notes,
                                                          std::string_view name) {
        std::map<std::string, std::size_t> out;
        const auto prefix = std::string(name) + ": ";
        for (const auto& [note, n] : notes)
            if (note.starts_with(prefix)) out[note.substr(prefix.size())] += n;
        return out;
    }
    static std::vector<std::string> split_list(const std::string& s) {
        std::vector<std::string> out;
        std::size_t from = 0;
        while (from <= s.size() && !s.empty()) {
            const auto comma = s.find(", ", from);
            out.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
            if (comma == std::string::npos) break;
            from = comma + 2;
        }
        return out;
    }

    // A take the sidecar filed: `qualified` is its "<db>.<table>"; the statement, normalized (`?`).
    bool add_digest_take(const std::string& qualified, const std::string& text, std::size_t count,
                         const std::map<std::string, std::size_t>& notes) {
        const auto st = sql::parse(text, {});
        if (st.kind != sql::statement_kind::update || count == 0) return false;
        const auto table = table_of(st, std::get<sql::update_statement>(st.body).table);
        digest_tables_[lower(qualified)] = table;
        auto& votes = stocks_[table];
        votes.from_digests = true;
        votes.writes += count;
        for (const auto& [counter, n] : notes_named(notes, "counter")) votes.decrements[counter] += n;
        for (const auto& [key, n] : notes_named(notes, "key_columns")) votes.keys[split_list(key)] += n;
        for (const auto& [version, n] : notes_named(notes, "version")) votes.bumps[version] += n;
        for (const auto& [units, n] : notes_named(notes, "units"))
            if (units != "?") {
                try {
                    votes.units[std::stoll(units)] += n;
                } catch (const std::exception&) {
                }
            }
        votes.after_read += notes_named(notes, "after_read")["yes"];
        if (votes.example_write.empty()) votes.example_write = text;
        statements_ += count;
        ++digest_shapes_;
        return true;
    }

    // The INSERT the sidecar filed right after a take (`after: <db>.<table>`).
    bool add_digest_claim(const std::string& text, std::size_t count, const std::map<std::string, std::size_t>& notes) {
        const auto st = sql::parse(text, {});
        if (st.kind != sql::statement_kind::insert || count == 0) return false;
        const auto table = table_of(st, std::get<sql::insert_statement>(st.body).table);
        std::vector<claim_votes*> gave;  // one claim per stock table its `after` names
        for (const auto& [after, n] : notes_named(notes, "after")) {
            const auto stock = digest_tables_.find(lower(after));
            if (stock == digest_tables_.end()) continue;  // its take's table was not kept
            auto& votes = claims_[{table, stock->second}];
            votes.count += n;
            if (votes.example.empty()) votes.example = text;
            gave.push_back(&votes);
        }
        if (gave.empty()) return false;
        // (The notes of a shape are not split by its `after`: each claim it gave gets them all.)
        for (auto* votes : gave) {
            for (const auto& [pair, n] : notes_named(notes, "consumes")) {
                const auto eq = pair.find('=');
                if (eq != std::string::npos) votes->mapping[pair.substr(eq + 1)][pair.substr(0, eq)] += n;
            }
            for (const auto& [columns, n] : notes_named(notes, "columns")) votes->columns[split_list(columns)] += n;
        }
        statements_ += count;
        ++digest_shapes_;
        return true;
    }

    struct read {
        std::string table;
        std::set<std::string> columns;
        bool all = false;
        std::string text;
    };
    struct connection {
        std::map<std::string, read> last_read;  // by lowercased table
        std::optional<stock_write> last_write;
    };

    static std::string join(const std::vector<std::string>& v) {
        std::string out;
        for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
        return out;
    }
    // A rule name from the table (letters, digits, _ - .), unique in this draft.
    static std::string unique_name(const std::string& table, std::set<std::string>& names) {
        std::string base;
        for (char c : table)
            base += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
        if (base.size() > 60) base.resize(60);
        auto name = base;
        for (int i = 2; !names.insert(name).second; ++i) name = base + "_" + std::to_string(i);
        return name;
    }

    std::size_t statements_ = 0;
    std::size_t digest_shapes_ = 0;
    std::map<std::string, std::string> digest_tables_;  // lower "<db>.<table>" -> the table as the app names it
    std::map<std::string, connection> connections_;
    std::map<std::string, stock_votes> stocks_;
    std::map<std::tuple<std::string, std::string>, claim_votes> claims_;  // (claim table, stock table)
};

}  // namespace

namespace {

bool read_file(const std::string& path, std::string& text, std::ostream& err) {
    if (path == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        return true;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err << "claimguard suggest: cannot read " << path << "\n";
        return false;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
}

}  // namespace

int suggest(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err) {
    return suggest(paths, {}, {}, out, err);
}

int suggest(const std::vector<std::string>& paths, const std::vector<std::string>& digests, std::ostream& out,
            std::ostream& err) {
    return suggest(paths, digests, unique_keys_lookup{}, out, err);
}

int suggest(const std::vector<std::string>& paths, const std::vector<std::string>& digests,
            const unique_keys_lookup& unique_keys, std::ostream& out, std::ostream& err) {
    analysis a;
    std::size_t read = 0;
    for (const auto& path : paths) {
        std::string text;
        if (!read_file(path, text, err)) return 2;
        for (const auto& s : read_statements(text)) {
            a.add(s);
            ++read;
        }
    }
    for (const auto& path : digests) {
        std::string text;
        if (!read_file(path, text, err)) return 2;
        try {
            read += a.add_digests(nlohmann::json::parse(text));
        } catch (const std::exception& e) {
            err << "claimguard suggest: " << path << " is not the JSON of GET /digests: " << e.what() << "\n";
            return 2;
        }
    }
    if (read == 0) {
        if (digests.empty())
            err << "claimguard suggest: no statement found in " << (paths.size() == 1 ? paths[0] : "the files") << "\n";
        else
            err << "claimguard suggest: no take or claim of a table no rule names in the digests (is the sidecar's "
                   "watch_unlisted_tables on, and did the app run through it?)\n";
        return 1;
    }
    std::vector<std::string> files = paths;
    files.insert(files.end(), digests.begin(), digests.end());
    std::ostringstream draft;  // printed whole, or not at all when the database cannot be read
    try {
        a.print(draft, files, unique_keys);
    } catch (const std::runtime_error& e) {
        err << "claimguard suggest: reading the claim tables' unique keys: " << e.what() << "\n";
        return 2;
    }
    out << draft.str();
    return 0;
}

}  // namespace claimguard::rules_cli
