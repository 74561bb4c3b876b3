// What the claim engine needs of a server's reply to a statement the session sent for it (the
// engine's reply_summary): OK and its rows, ERR and its code, the status flags after it, how many
// rows a result set held, and a counter read's counter. Decoded from the captured frames and the
// command exchange that followed them; pure, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exchange.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// A counter read's counter in a reply (counter_column): where it is, and how the rows are encoded.
struct counter_request {
    std::optional<std::uint32_t> position;  // the column, when the select list says
    std::string_view label;                 // else the column this names
    bool binary = false;                    // rows in the binary protocol (COM_STMT_EXECUTE)
};

struct reply_summary {
    bool ok = false;   // a plain OK: the reply's one packet (not a prepare's OK)
    bool err = false;  // the statement failed: an ERR first, or one after a result set's definitions
    std::uint16_t err_code = 0;
    std::uint64_t affected_rows = 0;      // ok: the OK's rows
    std::uint16_t status = 0;             // the status flags after the reply (the exchange's)
    std::optional<std::uint64_t> rows;    // neither OK nor ERR: the rows of a closed result set
    std::optional<std::int64_t> counter;  // asked for, no ERR: the counter of the one row returned
    // asked for (row_values): every row's values as text (integers in decimal, strings as their bytes,
    // nullopt for NULL); empty when not asked for, or the rows could not all be read
    std::optional<std::vector<std::vector<std::optional<std::string>>>> values;
};

// Most result columns a counter read's reply may have for its counter to be read.
inline constexpr std::size_t max_counter_read_columns = 4096;

// The reply to `command` whose frames are `raw` (headers included, as the server sent them) and
// which `exchange` followed to its end. `counter`: read the counter of the reply's one row.
[[nodiscard]] reply_summary summarize_reply(std::uint8_t command, const command_exchange& exchange, bytes_view raw,
                                            std::uint32_t capabilities, std::uint32_t mariadb_capabilities,
                                            std::size_t max_payload, const std::optional<counter_request>& counter);

// Every row of a closed result set as text, for the claim engine's own reads (the claim rows a
// cancellation is about to delete): integers in decimal, strings and decimals as their bytes, NULL as
// nullopt. nullopt when the reply is not such a result set, holds more than `max_rows` rows, or a
// value is of another kind (a float, a date). `binary`: rows in the binary protocol (COM_STMT_EXECUTE).
[[nodiscard]] std::optional<std::vector<std::vector<std::optional<std::string>>>> row_values(
    bytes_view raw, std::uint32_t capabilities, std::uint32_t mariadb_capabilities, std::size_t max_payload,
    bool binary, std::size_t max_rows);

}  // namespace claimguard::protocol
