// The prepared statements of one backend connection: the client's a rule may concern, the proxy's own.
#include "prepared_statements.hpp"

#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/frame.hpp"
#include "rules/match/matcher.hpp"

namespace claimguard::engine {

namespace proto = protocol;

namespace {

// One command of the proxy's own: its frames, sequence ids from `seq`.
proto::byte_buffer frames_of(const proto::byte_buffer& payload, std::uint8_t seq = 0) {
    proto::byte_buffer out;
    proto::write_packet(out, seq, payload);
    return out;
}

// COM_STMT_EXECUTE of the proxy's statement `id` with the client's values the rewrite names.
proto::result<own_statements::step> execute_of(std::uint32_t id, const rules::match::rewritten_sql& sql,
                                               const std::vector<proto::binary_value>& params,
                                               const std::vector<proto::value_type>& types) {
    proto::stmt_execute exec;
    exec.statement_id = id;
    exec.new_params_bound = true;
    for (auto index : sql.parameters) {
        if (index >= params.size() || index >= types.size()) return proto::errc::bad_value;
        exec.params.push_back(params[index]);
        exec.param_types.push_back(types[index]);
    }
    proto::byte_buffer payload;
    if (auto ec = proto::serialize(exec, payload)) return ec;
    return own_statements::step{proto::com::stmt_execute, frames_of(payload)};
}

}  // namespace

void prepared_statement::bind(const proto::stmt_execute& e) {
    if (e.new_params_bound) types = e.param_types;
}

proto::byte_buffer prepared_statement::frames_for_server(const proto::stmt_execute& e, std::uint8_t first_seq) const {
    const bool carries_types = e.new_params_bound || params == 0;
    if (carries_types || server_has_types) return {};
    proto::stmt_execute with_types = e;
    with_types.new_params_bound = true;
    proto::byte_buffer payload;
    if (proto::serialize(with_types, payload)) return {};  // cannot encode: sent as it came
    return frames_of(payload, first_seq);
}

void prepared_statement::reached_server(const proto::stmt_execute& e, bool re_encoded) {
    server_has_types = server_has_types || e.new_params_bound || params == 0 || re_encoded;
}

std::optional<decision> decide_unread_rows(const prepared_statement& ps, unread_rows why, const rules::rule_set& rules,
                                           const connection_state& state, session_memory& memory,
                                           rules::match::match_result& facts) {
    switch (why) {
        case unread_rows::large_execute:
            facts = rules::match::as_unmodeled(
                ps.statement.facts, "an execute of 16 MiB or more of a statement that writes the rule's table",
                "large_execute");
            break;
        case unread_rows::bulk_execute:
            facts = rules::match::as_unmodeled(
                ps.statement.facts,
                "COM_STMT_BULK_EXECUTE (MariaDB's array binding: Connector/J useBulkStmts, the MariaDB Node "
                "connector's batch) of a statement that writes the rule's table is modelled only for a plain or "
                "IGNORE claim INSERT (one claim per row); send this batch as one multi-row INSERT (Connector/J: "
                "useBulkStmts=false, rewriteBatchedStatements=true) or one execute per row",
                "bulk_execute");
            break;
        case unread_rows::long_data_execute:
            facts = rules::match::as_unmodeled(ps.statement.facts,
                                               "an execute whose values came by COM_STMT_SEND_LONG_DATA, of a "
                                               "statement that writes the rule's table",
                                               "long_data_execute");
            break;
    }
    if (facts.facts.empty()) return std::nullopt;
    return state.decide(facts, rules, resolve_literal, memory);
}

rules::answer prepared_statements::too_many() {
    return {rules::answer::kind::error, too_many_code, "42000",
            "claimguard: this connection holds " + std::to_string(max_tracked) +
                " prepared statements on protected tables (max_tracked_statements); close some"};
}

proto::byte_buffer prepared_statements::close_frames(std::uint32_t id) {
    proto::byte_buffer payload;
    proto::serialize(proto::stmt_close{id}, payload);
    return frames_of(payload);
}

prepared_statement* prepared_statements::find(std::uint32_t id) {
    auto it = by_id_.find(id == last_prepared ? last_prepared_id_ : id);
    return it == by_id_.end() ? nullptr : it->second.get();
}

bool prepared_statements::add(std::uint32_t id, std::unique_ptr<prepared_statement> ps) {
    last_prepared_id_ = id;
    if (by_id_.size() >= max_tracked) return false;
    by_id_[id] = std::move(ps);
    return true;
}

void prepared_statements::clear() {
    by_id_.clear();
    last_prepared_id_ = 0;
}

proto::result<own_statements::step> own_statements::start(const rules::match::rewritten_sql& sql,
                                                          const std::vector<proto::binary_value>* params,
                                                          const std::vector<proto::value_type>* types) const {
    proto::byte_buffer payload;
    if (sql.parameters.empty() || !params || !types) {
        proto::serialize_query(sql.sql, payload);
        return step{proto::com::query, frames_of(payload)};
    }
    if (auto it = by_sql_.find(sql.sql); it != by_sql_.end()) return execute_of(it->second, sql, *params, *types);
    proto::serialize_stmt_prepare(sql.sql, payload);
    return step{proto::com::stmt_prepare, frames_of(payload)};
}

own_statements::after_prepare own_statements::prepared(const rules::match::rewritten_sql& sql, std::uint32_t id,
                                                       const std::vector<proto::binary_value>& params,
                                                       const std::vector<proto::value_type>& types) {
    proto::byte_buffer close;
    if (by_sql_.size() >= max_statements) {
        close = prepared_statements::close_frames(by_sql_.begin()->second);
        by_sql_.erase(by_sql_.begin());
    }
    by_sql_[sql.sql] = id;
    return {std::move(close), execute_of(id, sql, params, types)};
}

}  // namespace claimguard::engine
