// One whole server reply to a command read without I/O: OK, ERR or a result set (its column
// definitions, rows in text or binary, how the rows ended), and the one column lookup by name.
// A view: it indexes the caller's packets and decodes only what is asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "binary_row.hpp"
#include "column.hpp"
#include "text_row.hpp"
#include "wire.hpp"

namespace claimguard::protocol {

// One packet of a reply. A packet of 16 MiB or more spans several frames; `payload` is then its
// first frame only and the packet is never decoded (its first byte still says what it is).
struct reply_packet {
    bytes_view payload;
    bool whole = true;
};

enum class reply_kind {
    ok,            // OK: the statement returned no rows
    err,           // ERR (a progress report, 0xFFFF, is an ERR too: the proxy's own commands get none)
    local_infile,  // the server asks for a file (LOAD DATA LOCAL)
    result_set,    // a column count: definitions and rows follow
    malformed,     // none of these (empty, or not a column count)
};

// How a result set's rows ended.
enum class rows_end {
    closed,      // by the closing EOF (or OK with the EOF header under CLIENT_DEPRECATE_EOF)
    error,       // by an ERR: the statement failed while sending rows
    incomplete,  // the packets ran out first (a cursor was opened: its rows come by COM_STMT_FETCH)
    malformed,   // an empty packet, or packets missing before the rows
};

// How a statement's name for a column matches a column definition (the one rule, for every
// lookup): `name` is as the statement wrote it, bare or quoted (`remain`, "remain", 'remain': a
// doubled quote inside is one, backslash escapes are not undone), and it matches a column whose
// name (the alias the client sees) or org_name (the table's column) is equal ignoring ASCII case,
// as MySQL compares column names and aliases.
[[nodiscard]] bool column_name_matches(const column_definition& column, std::string_view name);

// The first column `name` matches (column_name_matches), or nullopt.
[[nodiscard]] std::optional<std::size_t> column_index(std::span<const column_definition> columns,
                                                      std::string_view name);

// A counter read's counter column (the one lookup, for the claim engine's reads and the read
// cache's templates): the column at `position` when the statement's select list says where it is,
// else the first one `label` names (column_index); nullopt when that is past the columns or none.
[[nodiscard]] std::optional<std::size_t> counter_column(std::span<const column_definition> columns,
                                                        std::optional<std::uint32_t> position, std::string_view label);

// A counter's value as a row carries it: text in decimal, or a binary value (an integer, or a
// DECIMAL's text); nullopt for anything else (NULL, not an integer, past int64).
[[nodiscard]] std::optional<std::int64_t> counter_value(std::string_view text);
[[nodiscard]] std::optional<std::int64_t> counter_value(const binary_value& value);

class reply_view {
public:
    // `packets` in the order the server sent them, every one of the reply (a result set's closing
    // EOF included); what follows it (more result sets) is kept and counted by packets_after().
    reply_view(std::vector<reply_packet> packets, std::uint32_t capabilities, std::uint32_t mariadb_capabilities);
    // Whole payloads, as the proxy's own queries collect them.
    reply_view(std::span<const byte_buffer> payloads, std::uint32_t capabilities, std::uint32_t mariadb_capabilities);

    [[nodiscard]] reply_kind kind() const { return kind_; }
    // The reply's first packet: the OK or ERR itself, or the column count (empty without packets).
    [[nodiscard]] bytes_view first() const { return packets_.empty() ? bytes_view{} : packets_[0].payload; }

    // Result set only (0 otherwise).
    [[nodiscard]] std::size_t column_count() const { return columns_; }
    [[nodiscard]] result<column_definition> column(std::size_t i) const;
    [[nodiscard]] result<std::vector<column_definition>> columns() const;
    [[nodiscard]] result<std::vector<value_type>> column_types() const;
    // column_index over this reply's definitions; nullopt too when one does not decode.
    [[nodiscard]] std::optional<std::size_t> column_index(std::string_view name) const;

    // The packets before the rows: column count, definitions, and the EOF after them.
    [[nodiscard]] std::span<const reply_packet> metadata() const;
    // The EOF after the definitions; nullopt under CLIENT_DEPRECATE_EOF (or without a result set).
    [[nodiscard]] std::optional<bytes_view> metadata_eof() const;

    [[nodiscard]] rows_end end() const { return end_; }
    // Rows before the end (counted however the rows ended).
    [[nodiscard]] std::size_t row_count() const { return row_count_; }
    [[nodiscard]] const reply_packet& row(std::size_t i) const { return packets_[rows_at_ + i]; }
    // A row decoded; errc::truncated for a packet of several frames.
    [[nodiscard]] result<text_row> text_values(std::size_t i) const;
    [[nodiscard]] result<binary_row> binary_values(std::size_t i, std::span<const value_type> types) const;
    // The packet that ended the rows (closed or error); empty otherwise.
    [[nodiscard]] bytes_view closing() const;
    // Packets after the closing one (the next result sets of a multi-result reply).
    [[nodiscard]] std::size_t packets_after() const;

private:
    void index();

    std::vector<reply_packet> packets_;
    std::uint32_t capabilities_ = 0;
    std::uint32_t mariadb_capabilities_ = 0;
    reply_kind kind_ = reply_kind::malformed;
    rows_end end_ = rows_end::malformed;
    std::size_t columns_ = 0;
    std::size_t rows_at_ = 0;
    std::size_t row_count_ = 0;
};

// A captured reply (frames with their headers, as relayed) split into packets; an error when the
// bytes do not frame (a packet over `max_payload`, cut short, a broken sequence in a packet's frames).
[[nodiscard]] result<reply_view> read_reply(bytes_view raw, std::uint32_t capabilities,
                                            std::uint32_t mariadb_capabilities, std::size_t max_payload);

}  // namespace claimguard::protocol
