// A captured reply summarised for the claim engine: one look at the first packet for a plain OK,
// one reply_view for a result set (its rows and its counter).
#include "reply_summary.hpp"

#include "command.hpp"
#include "frame.hpp"
#include "packets.hpp"
#include "reply_view.hpp"

namespace claimguard::protocol {
namespace {

// The counter in the one row of a closed result set (exactly one row: the key pins one counter).
std::optional<std::int64_t> read_counter(const reply_view& reply, const counter_request& at) {
    if (reply.kind() != reply_kind::result_set || reply.column_count() > max_counter_read_columns ||
        reply.end() != rows_end::closed || reply.row_count() != 1)
        return std::nullopt;
    auto columns = reply.columns();
    if (!columns) return std::nullopt;
    const auto index = counter_column(*columns, at.position, at.label);
    if (!index) return std::nullopt;
    if (at.binary) {
        std::vector<value_type> types;
        types.reserve(columns->size());
        for (const auto& c : *columns) types.push_back(value_type_of(c));
        auto values = reply.binary_values(0, types);
        if (!values) return std::nullopt;
        return counter_value((*values)[*index]);
    }
    auto values = reply.text_values(0);
    if (!values || !(*values)[*index]) return std::nullopt;
    return counter_value(*(*values)[*index]);
}

}  // namespace

reply_summary summarize_reply(std::uint8_t command, const command_exchange& exchange, bytes_view raw,
                              std::uint32_t capabilities, std::uint32_t mariadb_capabilities, std::size_t max_payload,
                              const std::optional<counter_request>& counter) {
    reply_summary out;
    out.status = exchange.status();
    // An ERR ends the reply: the statement's own, or one after a result set's column definitions
    // (an INSERT ... RETURNING whose row is a duplicate).
    if (exchange.failed()) {
        out.err = true;
        out.err_code = exchange.error_code();
        return out;
    }
    // A plain OK is the reply's one packet (an OK saying more results follow is not plain).
    if (auto first = scan_packet(raw, max_payload);
        first && first->raw_size == raw.size() && !first->first_payload.empty() &&
        first->first_payload[0] == ok_header && command != com::stmt_prepare) {
        if (auto ok = parse_ok(first->first_payload, capabilities)) {
            out.ok = true;
            out.affected_rows = ok->affected_rows;
            return out;
        }
    }
    auto reply = read_reply(raw, capabilities, mariadb_capabilities, max_payload);
    if (!reply) return out;
    if (reply->kind() == reply_kind::result_set && reply->end() == rows_end::closed) out.rows = reply->row_count();
    if (counter) out.counter = read_counter(*reply, *counter);
    return out;
}

std::optional<std::vector<std::vector<std::optional<std::string>>>> row_values(bytes_view raw,
                                                                               std::uint32_t capabilities,
                                                                               std::uint32_t mariadb_capabilities,
                                                                               std::size_t max_payload, bool binary,
                                                                               std::size_t max_rows) {
    auto reply = read_reply(raw, capabilities, mariadb_capabilities, max_payload);
    if (!reply || reply->kind() != reply_kind::result_set || reply->end() != rows_end::closed ||
        reply->row_count() > max_rows || reply->column_count() > max_counter_read_columns)
        return std::nullopt;
    auto columns = reply->columns();
    if (!columns) return std::nullopt;
    std::vector<value_type> types;
    types.reserve(columns->size());
    for (const auto& c : *columns) types.push_back(value_type_of(c));
    std::vector<std::vector<std::optional<std::string>>> out;
    out.reserve(reply->row_count());
    for (std::size_t i = 0; i < reply->row_count(); ++i) {
        std::vector<std::optional<std::string>> row;
        if (binary) {
            auto values = reply->binary_values(i, types);
            if (!values) return std::nullopt;
            for (const auto& v : *values) {
                if (std::holds_alternative<std::monostate>(v))
                    row.emplace_back();
                else if (const auto* s = std::get_if<std::int64_t>(&v))
                    row.emplace_back(std::to_string(*s));
                else if (const auto* u = std::get_if<std::uint64_t>(&v))
                    row.emplace_back(std::to_string(*u));
                else if (const auto* b = std::get_if<bytes_view>(&v))
                    row.emplace_back(std::string(as_chars(*b)));
                else
                    return std::nullopt;  // a float or a date: not a key claimguard compares
            }
        } else {
            auto values = reply->text_values(i);
            if (!values) return std::nullopt;
            for (const auto& v : *values) {
                if (v)
                    row.emplace_back(std::string(*v));
                else
                    row.emplace_back();
            }
        }
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace claimguard::protocol
