// The prepared statements of one backend connection the engine keeps track of: the client's that a
// rule may concern (by the server's id, with the types the server has seen), and the proxy's own
// (claim statements run with the client's bound values, by SQL), with the frames that run them.
// Protocol state only: the session sends the frames and feeds back the server's answers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "connection_state.hpp"
#include "proxy/protocol/errors.hpp"
#include "proxy/protocol/prepared.hpp"
#include "rules/match/rewriter.hpp"

namespace claimguard::engine {

struct rules_snapshot;

// What the proxy keeps about a client's prepared statement that a rule may concern.
struct prepared_statement {
    std::unique_ptr<std::string> sql;                // owns the text the parse and the facts view
    recognised_statement statement;                  // parsed and matched at prepare time
    std::shared_ptr<const rules_snapshot> snapshot;  // keeps the facts' rules alive
    std::uint16_t params = 0;
    std::vector<protocol::value_type> types;  // bound by the last execute
    // The server has seen parameter types for it. An execute the proxy answered itself never
    // reached the server, so a later execute without types must get them added.
    bool server_has_types = false;

    // An execute of it came: the types it binds are the ones in force from now on.
    void bind(const protocol::stmt_execute& e);
    // The frames to send instead of the client's execute (sequence ids from `first_seq`): the
    // execute re-encoded with its types when the server has not seen them yet (it would answer ERR
    // 1210), else empty (the client's bytes go as they came).
    [[nodiscard]] protocol::byte_buffer frames_for_server(const protocol::stmt_execute& e,
                                                          std::uint8_t first_seq) const;
    // The execute reached the server, `re_encoded` (frames_for_server) or as it came.
    void reached_server(const protocol::stmt_execute& e, bool re_encoded);
};

// A command that carries a prepared statement's rows where the engine cannot read them.
enum class unread_rows : std::uint8_t {
    large_execute,      // a COM_STMT_EXECUTE of 16 MiB or more
    bulk_execute,       // COM_STMT_BULK_EXECUTE (MariaDB's array binding) other than a claim INSERT's (bulk_claims.hpp)
    long_data_execute,  // an execute whose values came by COM_STMT_SEND_LONG_DATA
};
// The decision for such a command: the unmodeled policy of the rules whose protected tables the
// statement writes; empty when it writes none (the command goes as it came). `facts` holds what the
// decision views: the caller keeps it while it uses the decision.
[[nodiscard]] std::optional<decision> decide_unread_rows(const prepared_statement& ps, unread_rows why,
                                                         const rules::rule_set& rules, const connection_state& state,
                                                         session_memory& memory, rules::match::match_result& facts);

// The client's prepared statements a rule may concern, by the server's statement id.
class prepared_statements {
public:
    // Never forget one: an execute of a statement the session no longer knows would pass unseen.
    static constexpr std::size_t max_tracked = 4096;
    // MariaDB: an execute naming this id means "the statement just prepared".
    static constexpr std::uint32_t last_prepared = 0xFFFFFFFF;

    // ERR 1461 (ER_MAX_PREPARED_STMT_COUNT_REACHED) for a prepare past max_tracked, after the
    // COM_STMT_CLOSE (close_frames, no reply comes) that undoes it on the server.
    static constexpr std::uint16_t too_many_code = 1461;
    [[nodiscard]] static rules::answer too_many();
    [[nodiscard]] static protocol::byte_buffer close_frames(std::uint32_t id);

    // The statement an execute (or bulk execute) names; null when it is not tracked.
    [[nodiscard]] prepared_statement* find(std::uint32_t id);
    // The server prepared it as `id`. False when max_tracked are tracked already: it is not kept
    // (the session closes it on the server and refuses the prepare).
    [[nodiscard]] bool add(std::uint32_t id, std::unique_ptr<prepared_statement> ps);
    // The server prepared a statement no rule concerns (relayed untracked): an execute naming
    // last_prepared means that one, which is not tracked.
    void relayed(std::uint32_t id) { last_prepared_id_ = id; }
    // COM_STMT_CLOSE.
    void close(std::uint32_t id) { by_id_.erase(id); }
    // The server dropped them all (COM_RESET_CONNECTION, COM_CHANGE_USER).
    void clear();
    [[nodiscard]] std::size_t size() const { return by_id_.size(); }

private:
    std::unordered_map<std::uint32_t, std::unique_ptr<prepared_statement>> by_id_;
    std::uint32_t last_prepared_id_ = 0;
};

// The proxy's own prepared statements on this backend connection: a rewritten statement run with
// the client's bound values (user data never enters SQL text), prepared once per SQL.
class own_statements {
public:
    // Prepared at most; one more closes the first by SQL.
    static constexpr std::size_t max_statements = 64;

    // What to send next for one statement: `frames` (sequence ids from 0, as the client's
    // commands) of `command`; done when the statement's reply is the answer.
    struct step {
        std::uint8_t command = 0;
        protocol::byte_buffer frames;
    };
    // The first frames that run `sql`: a COM_QUERY when it has no parameters (or no values
    // came), a COM_STMT_EXECUTE of the statement prepared before, or — none yet — its
    // COM_STMT_PREPARE (then prepared()). An error when the values cannot be encoded.
    [[nodiscard]] protocol::result<step> start(const rules::match::rewritten_sql& sql,
                                               const std::vector<protocol::binary_value>* params,
                                               const std::vector<protocol::value_type>* types) const;

    // The server prepared `sql` as `id`: the COM_STMT_CLOSE of the statement it evicts (empty
    // when none, COM_STMT_CLOSE has no reply) and then the execute.
    struct after_prepare {
        protocol::byte_buffer close;
        protocol::result<step> execute;
    };
    [[nodiscard]] after_prepare prepared(const rules::match::rewritten_sql& sql, std::uint32_t id,
                                         const std::vector<protocol::binary_value>& params,
                                         const std::vector<protocol::value_type>& types);
    // The server dropped them all (COM_RESET_CONNECTION, COM_CHANGE_USER).
    void clear() { by_sql_.clear(); }
    [[nodiscard]] std::size_t size() const { return by_sql_.size(); }

private:
    std::map<std::string, std::uint32_t> by_sql_;
};

}  // namespace claimguard::engine
