// The front of the statement pipeline, per client connection: what earlier statements set up for
// the ones after them (the lexer's sql_mode and character set, the current database, SQL-level
// prepared statements on protected tables, the claim tables' columns), and the steps from a
// statement's text to a decision (screen, parse, match, learn, decide). Pure: the one query it
// needs (a claim table's columns) the session sends, and it feeds the reply back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "decide.hpp"
#include "memory.hpp"
#include "proxy/protocol/reply_view.hpp"
#include "rules/match/facts.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/match/rule_index.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/charset.hpp"
#include "rules/sql/statement.hpp"
#include "transaction_tracker.hpp"

namespace claimguard::engine {

// What the session knows when a command comes: the command's rules, who is connected, the
// server's status flags before it, and the engine state the statement may change.
struct statement_inputs {
    const rules::rule_set& rules;
    const rules::match::rule_index& index;  // views `rules`
    std::string_view user;                  // the connection's current user (trusted users pass untouched)
    std::uint16_t status = 0;               // NO_BACKSLASH_ESCAPES is read from here
    session_memory& memory;
    transaction_tracker& transaction;
};

// The columns of a claim table, to be asked of this connection's database (once per connection,
// rule and database) before an INSERT without a column list can be matched.
struct columns_lookup {
    std::string key;                  // the rule's name and the database it was asked in
    rules::match::rewritten_sql sql;  // information_schema.COLUMNS, the names as hex literals
};

// What the front did with a statement.
enum class recognition : std::uint8_t {
    forward,         // nothing to decide: the statement goes as the client wrote it
    needs_columns,   // send recognised_statement::lookup, then call columns_arrived()
    needs_sql_mode,  // send connection_state::sql_mode_question, then call sql_mode_arrived()
    decided,         // carry out recognised_statement::decided
    keep_prepared,   // COM_STMT_PREPARE: prepare it on the server and keep parsed and facts for its executes
};

// One statement through the front. Stays where it is from the first step on: the facts view the
// parse, the decision views the facts (each in inline storage).
struct recognised_statement {
    enum class command : std::uint8_t { query, prepare };
    command from = command::query;
    bool deferred = false;  // the transaction held deferred takes when the statement came
    rules::sql::parsed_statement parsed;
    rules::match::match_result facts;
    decision decided;                      // recognition::decided
    std::optional<columns_lookup> lookup;  // recognition::needs_columns
    bool sql_prepared_full = false;        // a tracked SQL-level prepared statement (the first by name) was forgotten for this one

    recognised_statement() = default;
    recognised_statement(const recognised_statement&) = delete;
    recognised_statement& operator=(const recognised_statement&) = delete;
};

class connection_state {
public:
    // Claim tables whose columns one connection remembers (rule and database); past it, the first by name goes.
    static constexpr std::size_t max_known_tables = 64;
    // SQL-level prepared statements on protected tables one connection tracks; past it, the first by name goes.
    static constexpr std::size_t max_sql_prepared = 16384;  // the server's max_prepared_stmt_count is 16382

    // ---- the connection phase and commands that are not statements -------------------------------
    // The server's greeting: which versioned comments it executes.
    void server_greeted(bool mariadb, std::uint32_t server_version);
    // The client's handshake response: its database and character set.
    void logged_in(std::string database, rules::sql::charset client_charset);
    // COM_INIT_DB.
    void use_database(std::string database) { database_ = std::move(database); }
    // COM_RESET_CONNECTION, COM_CHANGE_USER: the server dropped the SQL-level prepared statements;
    // the claim tables' columns are asked again.
    void reset();

    // ---- the session's sql_mode ----------------------------------------------------------------
    // NO_BACKSLASH_ESCAPES is in every reply's status flags; ANSI_QUOTES is in none. So the session's
    // ANSI_QUOTES is asked of the server (on the client's own connection) when it is not known and a
    // statement naming a protected table has a `"`, the one byte whose reading it changes: once per
    // connection, and again after anything that may change it without a literal the engine reads
    // (SET sql_mode = CONCAT(...), EXECUTE, a failed SET, ...). Never a round trip per statement.
    static constexpr std::string_view sql_mode_question = "SELECT @@SESSION.sql_mode";
    // The session's sql_mode is whatever the server has: after the handshake (the server's default,
    // or init_connect's), COM_RESET_CONNECTION, COM_CHANGE_USER. A connection_state nobody calls this
    // on reads with the default sql_mode until a literal SET says otherwise (claimguard explain).
    void forget_sql_mode();
    [[nodiscard]] bool sql_mode_known() const { return sql_mode_ == mode_state::known; }
    // The end of each client command: a SET of sql_mode the server refused left the mode as it was,
    // not as the engine learned it.
    void command_ended(bool failed);
    // The reply to sql_mode_question (null: none that reads), and on with the statement from the start.
    // Never `needs_sql_mode` again for it: with no answer, a statement that reads differently with
    // ANSI_QUOTES and names a protected table gets its rules' unmodeled policy (sql_mode_unknown), and
    // the next statement that needs the mode asks again.
    [[nodiscard]] recognition sql_mode_arrived(const protocol::reply_view* reply, const statement_inputs& in,
                                               recognised_statement& out);

    [[nodiscard]] const rules::sql::lexer_options& lexer() const { return lexer_; }
    [[nodiscard]] const std::string& database() const { return database_; }
    // How to read a statement sent with the server's status flags `status`.
    [[nodiscard]] rules::sql::lexer_options lexer_options(std::uint16_t status) const;
    [[nodiscard]] std::size_t known_tables() const { return table_columns_.size(); }
    [[nodiscard]] std::size_t sql_prepared_count() const { return sql_prepared_.size(); }
    // The rules a SQL-level prepared statement reaches (name unquoted, lower case); null: none.
    [[nodiscard]] const std::vector<std::string>* sql_prepared(std::string_view name) const;

    // ---- the front of the pipeline ------------------------------------------------------------------
    // Nothing to look at: the pre-filter says the text names no rule's table (and the transaction
    // holds no deferred takes, `deferred`); or the user is trusted and the text is no write naming
    // one (a trusted user's reads cost what they did: only a possible restock is read, see
    // decide_trusted).
    [[nodiscard]] static bool passes_untouched(std::string_view sql, const statement_inputs& in, bool deferred);
    // COM_QUERY: recognise_query() would forward it without a look (passes_untouched, and no
    // SQL-level prepared name to forget): the session need not build a recognised_statement.
    [[nodiscard]] bool query_passes_untouched(std::string_view sql, const statement_inputs& in) const {
        return sql_prepared_.empty() && passes_untouched(sql, in, !in.memory.deferred.empty());
    }
    // COM_QUERY: screen (passes_untouched), parse, match, learn the session changes,
    // decide, plan deferred takes, learn SQL-level PREPARE / DEALLOCATE. Never `keep_prepared`.
    [[nodiscard]] recognition recognise_query(std::string_view sql, const statement_inputs& in,
                                              recognised_statement& out);
    // COM_STMT_PREPARE, once passes_untouched(sql, in, false) said no (the session screens it before
    // it copies the text): parse, match; a statement the rules do not model gets its policy
    // now (refused: `decided`); `keep_prepared` otherwise. Never `decided` with a forward.
    [[nodiscard]] recognition recognise_prepare(std::string_view sql, const statement_inputs& in,
                                                recognised_statement& out);
    // The lookup's reply (null: not one that reads), and on from where the statement stopped.
    // Never `needs_columns` again: a table whose columns did not come stays unmodeled.
    [[nodiscard]] recognition columns_arrived(const protocol::reply_view* reply, const statement_inputs& in,
                                              recognised_statement& out);

    // ---- steps, also used for prepared statements' executes ---------------------------------------
    // The statement sets the session's sql_mode, character set or database, and what it does to
    // the transaction (for the end of the command).
    void learn_session_changes(const rules::match::match_result& facts, transaction_tracker& transaction);
    // decide() with the session's current database.
    [[nodiscard]] decision decide(const rules::match::match_result& facts, const rules::rule_set& rules,
                                  const value_resolver& values, session_memory& memory) const;
    // engine::decide_trusted() with the session's current database: a trusted user's statement.
    [[nodiscard]] decision decide_trusted(const rules::sql::parsed_statement& st,
                                          const rules::match::match_result& facts,
                                          const rules::match::rule_index& index, const value_resolver& values,
                                          session_memory& memory) const;
    // learn_session_changes, decide, plan_deferred: a statement the session is about to carry out.
    [[nodiscard]] decision decide_statement(const rules::sql::parsed_statement& st,
                                            const rules::match::match_result& facts, const rules::rule_set& rules,
                                            const value_resolver& values, session_memory& memory,
                                            transaction_tracker& transaction);
    // SQL-level PREPARE / DEALLOCATE PREPARE: which names reach protected tables (for EXECUTE). True
    // when a tracked name (the first by name) was forgotten to make room (max_sql_prepared).
    bool learn_sql_prepared(const rules::sql::parsed_statement& st, const rules::match::match_result& facts,
                            const decision& d);
    // A trusted user's EXECUTE of a name whose PREPARE wrote a stock table: `out` becomes that rule's
    // trusted write (audited, counted, the read cache and the gate told of every key: the values of
    // USING are not read), and true. False for anything else.
    [[nodiscard]] bool trusted_execute(const rules::sql::parsed_statement& st, const statement_inputs& in,
                                       decision& out) const;
    // The matcher's facts; `lookup` set when a claim INSERT without a column list needs the table's
    // columns not asked yet on this connection.
    [[nodiscard]] rules::match::match_result match(const rules::sql::parsed_statement& st,
                                                   const rules::match::rule_index& index,
                                                   std::optional<columns_lookup>& lookup) const;
    // The columns a lookup found (empty: none; the table stays unmodeled on this connection).
    void learn_columns(std::string key, std::vector<std::string> columns);
    // The query that asks this connection's database for a claim table's columns in order.
    // `schema`: the statement's qualifier of the claim table as written (empty: unqualified).
    [[nodiscard]] static rules::match::rewritten_sql columns_query(const rules::claim_rule& rule,
                                                                   std::string_view schema = {});
    // The column names in a lookup's reply (one column, a row each).
    [[nodiscard]] static std::vector<std::string> column_names(const protocol::reply_view* reply);

private:
    [[nodiscard]] rules::match::match_result match_now(const rules::sql::parsed_statement& st,
                                                       const rules::match::rule_index& index) const;
    // known: lexer_.ansi_quotes is the session's. unknown: ask before a statement it changes.
    // unavailable: asked for the statement being read, and no answer came (unknown again after it).
    enum class mode_state : std::uint8_t { known, unknown, unavailable };
    // The sql_mode must be asked before `sql` (naming a protected table) is read.
    [[nodiscard]] bool must_ask_sql_mode(std::string_view sql, const statement_inputs& in) const;
    // The parse of a statement, as the server reads it when the sql_mode is known. When it is not and
    // the text reads two ways: not ours (sql_mode_unknown) if it names a protected table; a USE
    // makes the database unknown.
    [[nodiscard]] rules::sql::parsed_statement parse(std::string_view sql, const statement_inputs& in);
    // After the statement: what it may have done to the sql_mode that no literal SET says.
    void note_sql_mode_change(const rules::sql::parsed_statement& st);
    [[nodiscard]] recognition after_match(const statement_inputs& in, recognised_statement& out);
    [[nodiscard]] std::string columns_key(const rules::claim_rule& rule, std::string_view schema) const;
    static const std::vector<std::string>* columns_of(const void* self, const rules::claim_rule& rule,
                                                      std::string_view schema);
    static const std::vector<std::string>* sql_prepared_of(const void* self, std::string_view name);

    rules::sql::lexer_options lexer_;
    mode_state sql_mode_ = mode_state::known;
    bool sql_mode_set_ = false;  // the command being handled set the sql_mode to a literal (command_ended)
    std::string database_;
    std::map<std::string, std::vector<std::string>> sql_prepared_;   // by lower case name: the rules reached
    std::map<std::string, std::vector<std::string>> table_columns_;  // claim table columns, by rule and database
};

}  // namespace claimguard::engine
