// The front of the statement pipeline, per client connection (see connection_state.hpp).
#include "connection_state.hpp"

#include <algorithm>
#include <cctype>
#include <variant>

#include "proxy/protocol/capabilities.hpp"
#include "rules/match/matcher.hpp"
#include "rules/sql/parser.hpp"
#include "rules/sql/prefilter.hpp"
#include "rules/sql/text.hpp"
#include "rules/sql/values.hpp"

namespace claimguard::engine {

namespace match = rules::match;
namespace sqlns = rules::sql;
namespace proto = protocol;

namespace {

// The two readings cut the text into the same tokens of the same kinds.
bool same_tokens(const sqlns::token_vector& a, const sqlns::token_vector& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].offset != b[i].offset || a[i].length != b[i].length || a[i].kind != b[i].kind) return false;
    return true;
}

// The text names sql_mode anywhere (ASCII case-insensitive; inside a string or a comment too).
// Runs on every statement the pre-filter lets through: it looks only around each '_' (memchr speed).
bool names_sql_mode(std::string_view sql) {
    static constexpr std::string_view name = "sql_mode";
    static constexpr std::size_t underscore = 3;  // name[3]
    for (auto at = sql.find('_', underscore); at != std::string_view::npos; at = sql.find('_', at + 1))
        if (at + name.size() - underscore <= sql.size() &&
            sqlns::iequals(sql.substr(at - underscore, name.size()), name))
            return true;
    return false;
}

}  // namespace

void connection_state::server_greeted(bool mariadb, std::uint32_t server_version) {
    lexer_.mariadb = mariadb;
    lexer_.server_version = server_version;
}

void connection_state::logged_in(std::string database, sqlns::charset client_charset) {
    database_ = std::move(database);
    lexer_.client_charset = client_charset;
}

void connection_state::reset() {
    sql_prepared_.clear();
    table_columns_.clear();
}

void connection_state::forget_sql_mode() { sql_mode_ = mode_state::unknown; }

void connection_state::command_ended(bool failed) {
    if (failed && sql_mode_set_) forget_sql_mode();  // e.g. ERR 1231: a mode this server does not have
    sql_mode_set_ = false;
}

recognition connection_state::sql_mode_arrived(const proto::reply_view* reply, const statement_inputs& in,
                                               recognised_statement& out) {
    sql_mode_ = mode_state::unavailable;
    if (reply != nullptr && reply->kind() == proto::reply_kind::result_set && reply->row_count() == 1)
        if (auto values = reply->text_values(0); values && !values->empty() && (*values)[0]) {
            lexer_.ansi_quotes = sqlns::parse_sql_mode(*(*values)[0]).ansi_quotes;
            sql_mode_ = mode_state::known;
        }
    const std::string_view sql = out.parsed.sql;
    const auto r = out.from == recognised_statement::command::prepare ? recognise_prepare(sql, in, out)
                                                                      : recognise_query(sql, in, out);
    // No answer (e.g. ERR 1399 inside an XA transaction after XA END): this statement was read without
    // it, and the next one that needs it asks again.
    if (sql_mode_ == mode_state::unavailable) sql_mode_ = mode_state::unknown;
    return r;
}

bool connection_state::must_ask_sql_mode(std::string_view sql, const statement_inputs& in) const {
    // Only `"` reads differently with ANSI_QUOTES (a string, or a name); `||` reads the same way in
    // both PIPES_AS_CONCAT modes (rules/sql/values.hpp).
    if (sql_mode_ != mode_state::unknown || sql.find('"') == std::string_view::npos) return false;
    const auto verdict = in.index.filter().classify(sql);
    if (verdict == sqlns::prefilter_verdict::candidate) return true;
    if (verdict != sqlns::prefilter_verdict::session) return false;
    // A session statement naming a protected table (`/*!40101 UPDATE ... */`), and USE: "shop" is a
    // database only with ANSI_QUOTES. The others mean the same either way (SET NAMES "gbk") or do not
    // matter to the rules (XA PREPARE "x1").
    if (in.index.filter().names_protected(sql)) return true;
    const auto st = sqlns::parse(sql, lexer_options(in.status));
    return !st.tokens.empty() && sqlns::iequals(st.text(0), "USE");
}

sqlns::parsed_statement connection_state::parse(std::string_view sql, const statement_inputs& in) {
    auto st = sqlns::parse(sql, lexer_options(in.status));
    if (sql_mode_ == mode_state::known || sql.find('"') == std::string_view::npos) return st;
    auto other = lexer_options(in.status);
    other.ansi_quotes = !other.ansi_quotes;
    if (same_tokens(sqlns::parse(sql, other).tokens, st.tokens)) return st;
    // Asked, and not answered, and the text reads two ways. A guess could read `WHERE k = "k"` as a
    // key where the server sees a column compared with itself: a statement naming a protected table
    // is not ours. `USE "shop"` may have changed the database: not known any more (every rule with a
    // schema matches then: more protection, never less). Other session statements keep the guess:
    // `SET NAMES "gbk"` names the same character set either way.
    const auto verdict = in.index.filter().classify(sql);
    if (verdict == sqlns::prefilter_verdict::candidate || in.index.filter().names_protected(sql)) {
        st.kind = sqlns::statement_kind::not_ours;
        st.reason = sqlns::not_ours_reason::sql_mode_unknown;
        st.body = std::monostate{};
    } else if (!st.tokens.empty() && sqlns::iequals(st.text(0), "USE")) {
        database_.clear();
    }
    return st;
}

void connection_state::note_sql_mode_change(const sqlns::parsed_statement& st) {
    // What may change the session's sql_mode without a literal SET the matcher decodes: any text
    // naming sql_mode (SET ... = CONCAT(@@sql_mode, ...), a multi-statement query, BEGIN NOT ATOMIC,
    // EXECUTE IMMEDIATE, SET GLOBAL too, conservatively), and EXECUTE of a SQL-level prepared
    // statement, whose text went by earlier. A stored routine runs with its own sql_mode and gives
    // the caller's back on exit, so CALL does not. A literal SET is learned right after
    // (learn_session_changes), and the rest is asked before the next statement it matters to.
    if (names_sql_mode(st.sql) || (!st.tokens.empty() && sqlns::iequals(st.text(0), "EXECUTE"))) forget_sql_mode();
}

sqlns::lexer_options connection_state::lexer_options(std::uint16_t status) const {
    auto o = lexer_;
    o.no_backslash_escapes = (status & proto::status::no_backslash_escapes) != 0;
    return o;
}

const std::vector<std::string>* connection_state::sql_prepared(std::string_view name) const {
    auto it = sql_prepared_.find(std::string(name));
    return it == sql_prepared_.end() ? nullptr : &it->second;
}

// ---- the front of the pipeline ----------------------------------------------------------------------

namespace {

// A statement that can only read: one SELECT (no `;` that could start a second statement). A
// trusted user's such statements are not looked at, as before trusted writes were followed.
bool only_reads(std::string_view sql) {
    if (sql.find(';') != std::string_view::npos) return false;
    const auto start = sql.find_first_not_of(" \t\r\n(");
    if (start == std::string_view::npos) return true;
    const auto word = sql.substr(start, 6);
    return sqlns::iequals(word, "SELECT") &&
           (sql.size() == start + 6 || !(std::isalnum(static_cast<unsigned char>(sql[start + 6])) ||
                                         sql[start + 6] == '_' || sql[start + 6] == '$'));
}

}  // namespace

bool connection_state::passes_untouched(std::string_view sql, const statement_inputs& in, bool deferred) {
    const auto verdict = in.index.filter().classify(sql);
    if (!deferred && verdict == sqlns::prefilter_verdict::irrelevant) return true;
    if (!in.rules.is_trusted(in.user)) return false;
    // A trusted user: forwarded unchanged whatever it is, but a write naming a protected table is
    // read to be audited, counted and followed by the read cache (decide_trusted).
    return verdict != sqlns::prefilter_verdict::candidate || only_reads(sql);
}

recognition connection_state::recognise_query(std::string_view sql, const statement_inputs& in,
                                              recognised_statement& out) {
    out.from = recognised_statement::command::query;
    // Deferred takes pending (defer_decrement): a statement on another table may still commit
    // implicitly (DDL), so every statement is looked at until they are sent or dropped.
    out.deferred = !in.memory.deferred.empty();
    if (passes_untouched(sql, in, out.deferred)) {
        // A DEALLOCATE, or a PREPARE that reuses a tracked name, names no protected table but ends
        // what the name reached: looked at while this connection tracks any (rare), else an EXECUTE
        // of the name's new statement would get the old one's policy.
        if (sql_prepared_.empty()) return recognition::forward;
        out.parsed = sqlns::parse(sql, lexer_options(in.status));
        if (trusted_execute(out.parsed, in, out.decided)) return recognition::decided;
        (void)learn_sql_prepared(out.parsed, out.facts, out.decided);
        return recognition::forward;
    }
    if (must_ask_sql_mode(sql, in)) {
        out.parsed.sql = sql;  // read again from here when the answer comes
        return recognition::needs_sql_mode;
    }
    out.parsed = parse(sql, in);
    note_sql_mode_change(out.parsed);
    out.facts = match(out.parsed, in.index, out.lookup);
    if (out.lookup && !in.rules.is_trusted(in.user)) return recognition::needs_columns;  // a trusted user's: not needed
    return after_match(in, out);
}

recognition connection_state::recognise_prepare(std::string_view sql, const statement_inputs& in,
                                                recognised_statement& out) {
    out.from = recognised_statement::command::prepare;
    // The server prepares it with the sql_mode in force now; its executes keep that reading.
    if (must_ask_sql_mode(sql, in)) {
        out.parsed.sql = sql;
        return recognition::needs_sql_mode;
    }
    out.parsed = parse(sql, in);
    out.facts = match(out.parsed, in.index, out.lookup);
    if (out.lookup && !in.rules.is_trusted(in.user)) return recognition::needs_columns;  // a trusted user's: not needed
    return after_match(in, out);
}

recognition connection_state::columns_arrived(const proto::reply_view* reply, const statement_inputs& in,
                                              recognised_statement& out) {
    if (!out.lookup) return after_match(in, out);
    learn_columns(std::move(out.lookup->key), column_names(reply));
    out.lookup.reset();
    out.facts = match_now(out.parsed, in.index);
    return after_match(in, out);
}

recognition connection_state::after_match(const statement_inputs& in, recognised_statement& out) {
    if (in.rules.is_trusted(in.user)) {
        // Never a columns lookup, a refusal or a take: only whether it writes a stock table.
        out.lookup.reset();
        // PREPARE name FROM '<a write of a stock table>': its EXECUTEs are the writes (trusted_execute).
        if (out.from == recognised_statement::command::query &&
            match::sql_prepared_of(out.parsed).what == match::sql_prepared_use::kind::prepare)
            out.sql_prepared_full = learn_sql_prepared(out.parsed, out.facts, decision{});
        out.decided = decide_trusted(out.parsed, out.facts, in.index, resolve_literal, in.memory);
        if (!out.decided.trusted_write) return recognition::forward;
        // Prepared: its executes are decided with their values (the key a `?` pins).
        return out.from == recognised_statement::command::prepare ? recognition::keep_prepared : recognition::decided;
    }
    if (out.from == recognised_statement::command::prepare) {
        // Kept without facts too (a SELECT * of a protected table): its execute sends the
        // transaction's deferred takes of that table first.
        const auto& stocks = in.rules.stocks;
        const bool any_deferred =
            std::any_of(stocks.begin(), stocks.end(), [](const auto& r) { return r.defer_decrement; });
        // ... and one that may change the sql_mode without a literal (SET sql_mode = (SELECT ...)):
        // its executes make the mode asked again (decide_statement).
        if (out.facts.facts.empty() && !any_deferred && !names_sql_mode(out.parsed.sql))
            return recognition::forward;
        // A statement the rules do not model: its policy applies at prepare time (refused, it never
        // gets a statement id; forwarded, it is counted at each execute).
        // So is a DELETE the rules refuse whatever its values (a stock row's, every claim row).
        const bool only_unmodeled = std::all_of(out.facts.facts.begin(), out.facts.facts.end(), [](const auto& f) {
            return std::holds_alternative<rules::match::unmodeled>(f);
        });
        if (out.parsed.kind == sqlns::statement_kind::not_ours ||
            (out.parsed.kind == sqlns::statement_kind::delete_ && only_unmodeled)) {
            out.decided = decide(out.facts, in.rules, resolve_literal, in.memory);
            if (out.decided.what == verdict::refuse && !out.decided.observe) return recognition::decided;
        }
        return recognition::keep_prepared;
    }
    if (out.facts.facts.empty() && !out.deferred) {
        (void)learn_sql_prepared(out.parsed, out.facts, out.decided);  // a PREPARE of a read replaces the name
        return recognition::forward;
    }
    out.decided = decide_statement(out.parsed, out.facts, in.rules, resolve_literal, in.memory, in.transaction);
    out.sql_prepared_full = learn_sql_prepared(out.parsed, out.facts, out.decided);
    return recognition::decided;
}

// ---- steps --------------------------------------------------------------------------------------------

void connection_state::learn_session_changes(const match::match_result& facts, transaction_tracker& transaction) {
    transaction.expect(facts);
    for (const auto& f : facts.facts) {
        if (const auto* c = std::get_if<match::session_change>(&f)) {
            switch (c->setting) {
                case match::session_setting::sql_mode:
                    if (c->sql_mode) {
                        lexer_.ansi_quotes = c->sql_mode->ansi_quotes;
                        sql_mode_ = mode_state::known;
                        sql_mode_set_ = true;  // ... unless the server refuses the SET (command_ended)
                    } else {
                        forget_sql_mode();  // CONCAT(@@sql_mode, ...), @saved, DEFAULT, a `?`: ask the server
                    }
                    break;
                case match::session_setting::client_charset:
                    if (c->charset) lexer_.client_charset = *c->charset;
                    break;
                case match::session_setting::database: database_ = sqlns::unquote_identifier(c->database); break;
            }
        }
    }
}

decision connection_state::decide(const match::match_result& facts, const rules::rule_set& rules,
                                  const value_resolver& values, session_memory& memory) const {
    memory.database = database_;
    return engine::decide(facts, rules, values, memory);
}

decision connection_state::decide_trusted(const sqlns::parsed_statement& st, const match::match_result& facts,
                                          const match::rule_index& index, const value_resolver& values,
                                          session_memory& memory) const {
    memory.database = database_;
    return engine::decide_trusted(st, facts, index, values, memory);
}

decision connection_state::decide_statement(const sqlns::parsed_statement& st, const match::match_result& facts,
                                            const rules::rule_set& rules, const value_resolver& values,
                                            session_memory& memory, transaction_tracker& transaction) {
    note_sql_mode_change(st);  // a prepared statement's execute (a COM_QUERY was noted when recognised)
    learn_session_changes(facts, transaction);
    auto d = decide(facts, rules, values, memory);
    plan_deferred(d, facts, st.sql, memory);
    return d;
}

bool connection_state::trusted_execute(const sqlns::parsed_statement& st, const statement_inputs& in,
                                       decision& out) const {
    if (!in.rules.is_trusted(in.user)) return false;
    const auto use = match::sql_prepared_of(st);
    if (use.what != match::sql_prepared_use::kind::execute) return false;
    const auto* reached = sql_prepared(use.name);
    if (reached == nullptr) return false;
    for (const auto& rule : in.rules.stocks)
        if (std::find(reached->begin(), reached->end(), rule.name) != reached->end()) {
            out = decision{};
            out.stock = &rule;
            out.trusted_write = true;  // key left empty: EXECUTE ... USING @v's values are not read
            out.note = "a trusted user's EXECUTE of a write of a stock table prepared in SQL: forwarded unchanged";
            return true;
        }
    return false;
}

bool connection_state::learn_sql_prepared(const sqlns::parsed_statement& st, const match::match_result& facts,
                                          const decision& d) {
    const auto use = match::sql_prepared_of(st);
    if (use.what == match::sql_prepared_use::kind::none || use.what == match::sql_prepared_use::kind::execute)
        return false;
    sql_prepared_.erase(use.name);  // DEALLOCATE, or a PREPARE replacing the name
    if (use.what != match::sql_prepared_use::kind::prepare || (d.what == verdict::refuse && !d.observe)) return false;
    std::vector<std::string> reached;
    for (const auto& f : facts.facts)
        if (const auto* u = std::get_if<match::unmodeled>(&f); u && !u->prepared_name.empty())
            reached.emplace_back(u->claim ? u->claim->name : u->stock->name);
    if (reached.empty()) return false;
    bool full = false;
    if (sql_prepared_.size() >= max_sql_prepared) {
        // Past the server's own default limit (max_prepared_stmt_count): it refuses the PREPARE.
        sql_prepared_.erase(sql_prepared_.begin());
        full = true;
    }
    sql_prepared_[use.name] = std::move(reached);
    return full;
}

match::match_result connection_state::match(const sqlns::parsed_statement& st, const match::rule_index& index,
                                            std::optional<columns_lookup>& lookup) const {
    lookup.reset();
    auto facts = match_now(st, index);
    const match::claim_insert* unresolved = nullptr;
    for (const auto& f : facts.facts)
        if (const auto* ci = std::get_if<match::claim_insert>(&f); ci && !ci->columns_known) unresolved = ci;
    if (unresolved == nullptr) return facts;
    auto key = columns_key(*unresolved->rule, unresolved->table.schema);
    if (table_columns_.contains(key)) return facts;  // looked up before: not known
    lookup = columns_lookup{std::move(key), columns_query(*unresolved->rule, unresolved->table.schema)};
    return facts;
}

void connection_state::learn_columns(std::string key, std::vector<std::string> columns) {
    if (table_columns_.size() >= max_known_tables) table_columns_.erase(table_columns_.begin());
    table_columns_[std::move(key)] = std::move(columns);
}

match::rewritten_sql connection_state::columns_query(const rules::claim_rule& rule, std::string_view schema) {
    // The table's columns in order, asked of this connection's database. The names are the rule's
    // (validated identifiers), sent as hex literals so nothing is spliced into the SQL as text.
    auto hex = [](std::string_view v) {
        static constexpr char digits[] = "0123456789ABCDEF";
        std::string out = "CONVERT(0x";
        for (unsigned char c : v) {
            out.push_back(digits[c >> 4]);
            out.push_back(digits[c & 15]);
        }
        return out + " USING utf8mb4)";
    };
    const auto& table = rule.table;
    // The database of the table the statement writes: its qualifier (`INSERT INTO shop.orders`, from a
    // session in another database or in none), else the rule's, else the session's.
    const std::string in = !schema.empty() ? sqlns::unquote_identifier(schema) : table.schema;
    match::rewritten_sql q;
    q.sql = "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = " +
            (in.empty() ? std::string("DATABASE()") : hex(in)) + " AND TABLE_NAME = " + hex(table.name) +
            " ORDER BY ORDINAL_POSITION";
    return q;
}

std::vector<std::string> connection_state::column_names(const proto::reply_view* reply) {
    std::vector<std::string> columns;
    if (reply == nullptr || reply->kind() != proto::reply_kind::result_set) return columns;
    for (std::size_t i = 0; i < reply->row_count(); ++i) {
        auto values = reply->text_values(i);
        if (!values || !(*values)[0]) break;
        columns.emplace_back(*(*values)[0]);
    }
    return columns;
}

match::match_result connection_state::match_now(const sqlns::parsed_statement& st,
                                                const match::rule_index& index) const {
    match::match_context mctx;
    if (!database_.empty()) mctx.current_database = database_;
    mctx.table_columns = &connection_state::columns_of;
    mctx.table_columns_owner = this;
    mctx.sql_prepared = &connection_state::sql_prepared_of;
    return match::match(st, index, mctx);
}

std::string connection_state::columns_key(const rules::claim_rule& rule, std::string_view schema) const {
    // A qualified table is the same table from any database; an unqualified one is the session's.
    if (!schema.empty()) return rule.name + "\n." + sqlns::unquote_identifier(schema);
    return rule.name + "\n" + database_;
}

const std::vector<std::string>* connection_state::columns_of(const void* self, const rules::claim_rule& rule,
                                                             std::string_view schema) {
    const auto* s = static_cast<const connection_state*>(self);
    auto it = s->table_columns_.find(s->columns_key(rule, schema));
    return it == s->table_columns_.end() || it->second.empty() ? nullptr : &it->second;
}

const std::vector<std::string>* connection_state::sql_prepared_of(const void* self, std::string_view name) {
    return static_cast<const connection_state*>(self)->sql_prepared(name);
}

}  // namespace claimguard::engine
