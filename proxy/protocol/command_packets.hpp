// Command packets that carry one string: COM_QUERY (SQL), COM_STMT_PREPARE (SQL),
// COM_INIT_DB (schema name). Views point into the payload.
#pragma once

#include <string_view>

#include "wire.hpp"

namespace claimguard::protocol {

// The SQL text of COM_QUERY. CLIENT_QUERY_ATTRIBUTES would put a parameter block
// before it; the proxy never offers that capability.
[[nodiscard]] result<std::string_view> parse_query(bytes_view payload);
[[nodiscard]] result<std::string_view> parse_stmt_prepare(bytes_view payload);
[[nodiscard]] result<std::string_view> parse_init_db(bytes_view payload);

void serialize_query(std::string_view sql, byte_buffer& out);
void serialize_stmt_prepare(std::string_view sql, byte_buffer& out);
void serialize_init_db(std::string_view schema, byte_buffer& out);

}  // namespace claimguard::protocol
