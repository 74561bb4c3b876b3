// Sans-I/O state machines that find where a server's answer ends: the
// authentication exchange and the reply to each command.
#pragma once

#include <cstdint>
#include <optional>

#include "frame.hpp"
#include "packets.hpp"

namespace claimguard::protocol {

// What the session must do next to move an exchange forward.
enum class next_step {
    read_server,  // read one more packet from the server and forward it
    read_client,  // read one packet from the client and forward it
    done,         // the exchange is over: back to reading the next command
};

// The authentication exchange (after the handshake response or COM_CHANGE_USER):
// server packets until OK or ERR, with client answers in between.
class auth_exchange {
public:
    // Feed each server packet; tells whether the client answers it.
    [[nodiscard]] result<next_step> on_server_packet(bytes_view payload);
    [[nodiscard]] bool succeeded() const { return succeeded_; }

private:
    bool succeeded_ = false;
};

// Follows the reply to one command packet to its end, whatever its shape: OK,
// ERR, result sets (text or binary, with or without EOF packets, several in a
// row), LOCAL INFILE round trips, prepared statement metadata, cursor fetches,
// the change-user auth exchange. It only looks at packet heads and terminators;
// rows and column definitions are counted, never copied.
class command_exchange {
public:
    command_exchange(std::uint8_t command, std::uint32_t capabilities, std::uint16_t status);

    // After the command packet is forwarded: what the reply looks like.
    [[nodiscard]] next_step start(std::uint8_t command_seq);
    [[nodiscard]] result<next_step> on_server_packet(const packet_span& packet);
    [[nodiscard]] result<next_step> on_client_packet(const packet_span& packet);

    // Status flags from the last OK/EOF seen (the previous status when none was).
    [[nodiscard]] std::uint16_t status() const { return status_; }
    [[nodiscard]] bool failed() const { return failed_; }
    // The ERR's code when failed() (0 when it could not be parsed).
    [[nodiscard]] std::uint16_t error_code() const { return error_code_; }
    // The last OK packet of a plain OK reply (valid until the packet's buffer moves).
    [[nodiscard]] const std::optional<ok_packet>& last_ok() const { return last_ok_; }
    // For COM_STMT_PREPARE: the statement id and counts of a successful prepare.
    [[nodiscard]] std::uint32_t statement_id() const { return statement_id_; }
    [[nodiscard]] std::uint16_t param_count() const { return params_; }
    [[nodiscard]] std::uint16_t column_count() const { return prepared_columns_; }
    [[nodiscard]] std::uint64_t result_sets() const { return result_sets_; }
    [[nodiscard]] std::uint64_t rows() const { return rows_; }
    [[nodiscard]] std::uint8_t next_seq() const { return next_seq_; }
    // MariaDB progress reports relayed before the reply.
    [[nodiscard]] std::uint64_t progress_reports() const { return progress_reports_; }

private:
    enum class state {
        first,          // first packet of a (next) result
        columns,        // column definitions left to read
        columns_eof,    // the EOF after column definitions
        rows,           // rows until EOF/OK/ERR
        infile,         // client streams a file until an empty packet
        prepare_params, // parameter definitions after COM_STMT_PREPARE OK
        prepare_params_eof,
        prepare_columns,
        prepare_columns_eof,
        auth,           // COM_CHANGE_USER
        single,         // any one packet ends the reply
    };
    result<next_step> end_of_result(std::uint16_t status);
    // An ERR ends the reply. One that rolled the whole transaction back (a deadlock) ends it: an
    // ERR carries no status flags, so the session would otherwise believe it still open.
    next_step on_error(bytes_view p);
    [[nodiscard]] bool opens_cursor(std::uint16_t eof_status) const;
    result<next_step> on_first(bytes_view payload);
    result<next_step> after_prepare_params_start();
    result<next_step> after_prepare_params();
    result<next_step> after_prepare_columns();

    std::uint8_t command_;
    std::uint32_t caps_;
    std::uint16_t status_;
    state state_ = state::single;
    std::uint64_t columns_left_ = 0;
    std::uint16_t params_ = 0;
    std::uint16_t prepared_columns_ = 0;
    std::uint32_t statement_id_ = 0;
    std::uint64_t result_sets_ = 0;
    std::uint64_t rows_ = 0;
    std::uint8_t next_seq_ = 0;
    std::uint64_t progress_reports_ = 0;
    bool failed_ = false;
    std::uint16_t error_code_ = 0;
    std::optional<ok_packet> last_ok_;
    auth_exchange auth_;
};

}  // namespace claimguard::protocol
