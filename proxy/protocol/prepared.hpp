// Prepared-statement packets: the COM_STMT_PREPARE OK reply, COM_STMT_EXECUTE,
// and the small COM_STMT_CLOSE / RESET / FETCH / SEND_LONG_DATA requests.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "binary_value.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// COM_STMT_PREPARE_OK.
struct prepare_ok {
    std::uint32_t statement_id = 0;
    std::uint16_t column_count = 0;
    std::uint16_t param_count = 0;
    std::uint16_t warnings = 0;
    // CLIENT_OPTIONAL_RESULTSET_METADATA only (never offered by the proxy).
    std::optional<std::uint8_t> metadata_follows;
};
[[nodiscard]] result<prepare_ok> parse_prepare_ok(bytes_view payload);
void serialize(const prepare_ok& p, byte_buffer& out);

// COM_STMT_EXECUTE flags byte: the cursor type.
namespace cursor_type {
inline constexpr std::uint8_t no_cursor = 0x00;
inline constexpr std::uint8_t read_only = 0x01;
inline constexpr std::uint8_t for_update = 0x02;
inline constexpr std::uint8_t scrollable = 0x04;
}  // namespace cursor_type

// What the caller remembers about a statement between executes; the execute
// packet cannot be decoded without it.
struct execute_context {
    std::uint16_t param_count = 0;                   // from the prepare OK
    std::span<const value_type> previous_types;      // bound by an earlier execute
    std::span<const std::uint16_t> long_data_params; // sent by SEND_LONG_DATA since then
};

// COM_STMT_EXECUTE. `param_types` are the types in force for this execute: read
// from the packet when new_params_bound, else copied from the context. Views in
// `params` point into the payload.
struct stmt_execute {
    std::uint32_t statement_id = 0;
    std::uint8_t flags = cursor_type::no_cursor;
    std::uint32_t iteration_count = 1;
    bool new_params_bound = false;
    std::vector<value_type> param_types;
    std::vector<binary_value> params;  // std::monostate = NULL, long_data_value = sent before
};
[[nodiscard]] result<stmt_execute> parse_stmt_execute(bytes_view payload,
                                                      const execute_context& context);
// Encodes params.size() parameters with param_types (written to the packet only
// when new_params_bound); errc::bad_value when sizes differ or a value does not
// fit its type.
[[nodiscard]] boost::system::error_code serialize(const stmt_execute& e, byte_buffer& out);

// COM_STMT_BULK_EXECUTE (MariaDB's array binding: Connector/C STMT_ATTR_ARRAY_SIZE, Connector/J
// useBulkStmts, the Node connector's batch()): one statement run once per row of values, in one
// command. Layout: 0xFA, statement id<4>, bulk flags<2>, the parameter types (2 bytes each) when
// send_types_to_server, then rows until the end of the packet, each parameter an indicator byte and,
// for bulk_indicator::none, its value.
namespace bulk_flag {
inline constexpr std::uint16_t send_unit_results = 64;      // a result set of per-row results (MariaDB 11.5+)
inline constexpr std::uint16_t send_types_to_server = 128;  // the parameter types follow the flags
}  // namespace bulk_flag
enum class bulk_indicator : std::uint8_t {
    none = 0,      // a value follows
    null = 1,      // NULL
    default_ = 2,  // the column's DEFAULT
    ignore = 3,    // DEFAULT for an INSERT, the column left as it is for an UPDATE
};
struct stmt_bulk_execute {
    std::uint32_t statement_id = 0;
    std::uint16_t flags = 0;
    std::vector<value_type> param_types;  // in force: from the packet when send_types_to_server, else the context's
    // Row after row, param_count values each: values[row * param_count + i] is parameter i of that row
    // (std::monostate unless its indicator is none), and indicators the same way.
    std::vector<binary_value> values;
    std::vector<bulk_indicator> indicators;
    [[nodiscard]] std::size_t rows(std::size_t param_count) const {
        return param_count == 0 ? 0 : values.size() / param_count;
    }
};
// Decodes a bulk execute of a statement with context.param_count parameters (long data does not
// apply: a bulk carries every value). errc::unexpected_packet for a statement without parameters
// (no row can be told from the next) or an unknown indicator; errc::truncated when it ends inside a row;
// errc::missing_param_types when the packet has no types and the context none either;
// errc::too_many_rows past `max_rows`, before the values are held. Views in `values` point into the
// payload.
[[nodiscard]] result<stmt_bulk_execute> parse_stmt_bulk_execute(bytes_view payload, const execute_context& context,
                                                                std::size_t max_rows);
// The packet again (types written when flags say so); errc::bad_value when sizes differ or a value
// does not fit its type.
[[nodiscard]] boost::system::error_code serialize(const stmt_bulk_execute& e, byte_buffer& out);

// COM_STMT_CLOSE and COM_STMT_RESET: the command byte and a statement id.
struct stmt_close {
    std::uint32_t statement_id = 0;
};
struct stmt_reset {
    std::uint32_t statement_id = 0;
};
// COM_STMT_FETCH: rows to read from the statement's open cursor.
struct stmt_fetch {
    std::uint32_t statement_id = 0;
    std::uint32_t rows = 0;
};
// COM_STMT_SEND_LONG_DATA: a chunk of one parameter's value (no reply).
struct stmt_send_long_data {
    std::uint32_t statement_id = 0;
    std::uint16_t param_id = 0;
    bytes_view data;
};
[[nodiscard]] result<stmt_close> parse_stmt_close(bytes_view payload);
[[nodiscard]] result<stmt_reset> parse_stmt_reset(bytes_view payload);
[[nodiscard]] result<stmt_fetch> parse_stmt_fetch(bytes_view payload);
[[nodiscard]] result<stmt_send_long_data> parse_stmt_send_long_data(bytes_view payload);
void serialize(const stmt_close& c, byte_buffer& out);
void serialize(const stmt_reset& c, byte_buffer& out);
void serialize(const stmt_fetch& c, byte_buffer& out);
void serialize(const stmt_send_long_data& c, byte_buffer& out);

// The statement id of any COM_STMT_EXECUTE/CLOSE/RESET/FETCH/SEND_LONG_DATA
// packet, so the caller can look up that statement's execute_context first.
[[nodiscard]] result<std::uint32_t> peek_statement_id(bytes_view payload);

}  // namespace claimguard::protocol
