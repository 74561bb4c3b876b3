// A counter read of a stock rule with read_cache, as the read cache keys and keeps it: the shape its
// reply is kept under (protocol, charset, database, the statement with its keys as ?), whether a
// cursor is asked for, the server's reply as a template, and where a reply's counter is. Pure: the
// session passes what it knows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "decide.hpp"
#include "proxy/protocol/counter_reply.hpp"
#include "proxy/protocol/reply_summary.hpp"
#include "proxy/protocol/wire.hpp"
#include "rules/model/rules.hpp"
#include "rules/sql/parser.hpp"
#include "statement_operation.hpp"

namespace claimguard::engine {

// What the session knows of the command a counter read came in.
struct read_origin {
    std::uint8_t command = 0;                // COM_QUERY or COM_STMT_EXECUTE
    protocol::bytes_view payload;            // the command's payload as sent to the server
    std::uint32_t caps = 0;                  // the capabilities both sides agreed on
    std::uint32_t mariadb_caps = 0;          // ... MariaDB's extended ones
    int charset = 0;                         // the connection's character set (rules::sql::charset)
    std::string_view database;               // the current database
    std::uint16_t status = 0;                // the server's status flags before the command
    const rules::rule_set* rules = nullptr;  // the command's rules (the rule's mode)
};

// The read as the cache sees it; empty when the decision is no cacheable counter read (not a
// remember_read of a rule with read_cache, deferred takes first, no rules).
[[nodiscard]] std::optional<cached_read> cached_read_of(const decision& d, const rules::sql::parsed_statement& st,
                                                        const read_origin& o);

// The statement with its key values as "?" (prepared statements have them already): reads of
// different keys in one form share nothing, but the text says what the reply's columns are.
[[nodiscard]] std::string normalised_text(const rules::sql::parsed_statement& st, const rules::match::counter_read& r);

// The server's whole reply to the read (`raw`, every frame) as a template, or null when it
// cannot be one: an ERR, not a counter read, what parse_counter_reply refuses (an OK among them).
[[nodiscard]] std::shared_ptr<const protocol::counter_reply> read_template(const decision& d, protocol::bytes_view raw,
                                                                           bool is_err, std::uint32_t caps,
                                                                           std::uint32_t mariadb_caps, bool binary);

// Where the counter is in a reply the claim engine reads it from (action::read_counter): the first
// column of the proxy's own statement (`own`), else where the client's counter read's select
// list says; empty when the decision is on no counter read. `binary`: rows of COM_STMT_EXECUTE.
[[nodiscard]] std::optional<protocol::counter_request> counter_column(const decision& d, bool own, bool binary);

}  // namespace claimguard::engine
