// Where each reply ends: the auth and command exchanges.
#include "exchange.hpp"

#include "command.hpp"
#include "prepared.hpp"

namespace claimguard::protocol {

namespace {
// caching_sha2_password's "fast auth success": an OK follows, the client says nothing.
bool is_fast_auth_success(bytes_view p) { return p.size() == 2 && p[0] == 0x01 && p[1] == 0x03; }

// Payload size of a classic EOF packet (0xFE, warnings, status); an OK is never this short.
constexpr std::size_t eof_packet_size = 5;

// Status flags of a packet that ends a result or a reply with an 0xFE header:
// under CLIENT_DEPRECATE_EOF servers send an OK packet with that header (also
// for COM_FIELD_LIST and COM_SET_OPTION), else a classic EOF packet.
result<std::uint16_t> terminator_status(bytes_view p, std::uint32_t caps) {
    if ((caps & cap::deprecate_eof) && p.size() != eof_packet_size) {
        auto ok = parse_ok(p, caps);
        if (!ok) return ok.error();
        return ok->status;
    }
    auto eof = parse_eof(p);
    if (!eof) return eof.error();
    return eof->status;
}

bool is_err(bytes_view p) { return !p.empty() && p[0] == err_header; }

// MariaDB progress report (MARIADB_CLIENT_PROGRESS): an ERR header with error code 0xFFFF,
// sent while a long statement runs, before its reply; no real error has that code.
constexpr std::uint16_t progress_report_code = 0xFFFF;
bool is_progress_report(bytes_view p) {
    return p.size() >= 3 && p[0] == err_header && (p[1] | (p[2] << 8)) == progress_report_code;
}
}  // namespace

result<next_step> auth_exchange::on_server_packet(bytes_view payload) {
    if (payload.empty()) return errc::empty_packet;
    switch (payload[0]) {
    case ok_header:
        succeeded_ = true;
        return next_step::done;
    case err_header:
        return next_step::done;
    case eof_header:  // AuthSwitchRequest: the client answers with the new plugin's data
        return next_step::read_client;
    case 0x01:  // AuthMoreData
        return is_fast_auth_success(payload) ? next_step::read_server : next_step::read_client;
    default:  // dialog-style prompts (MariaDB PAM): the client answers
        return next_step::read_client;
    }
}

command_exchange::command_exchange(std::uint8_t command, std::uint32_t capabilities,
                                   std::uint16_t status)
    : command_(command), caps_(capabilities), status_(status) {}

next_step command_exchange::start(std::uint8_t command_seq) {
    next_seq_ = static_cast<std::uint8_t>(command_seq + 1);
    switch (command_) {
    case com::quit:
    case com::stmt_close:
    case com::stmt_send_long_data:
        return next_step::done;
    case com::query:
    case com::stmt_execute:
    case com::stmt_bulk_execute:
    case com::process_info:
        state_ = state::first;
        break;
    case com::stmt_prepare:
        state_ = state::first;
        break;
    case com::stmt_fetch:
    case com::field_list:
        state_ = state::rows;
        break;
    case com::change_user:
        state_ = state::auth;
        break;
    default:
        state_ = state::single;
        break;
    }
    return next_step::read_server;
}

bool command_exchange::opens_cursor(std::uint16_t eof_status) const {
    return command_ == com::stmt_execute && (eof_status & status::cursor_exists) &&
           !(eof_status & status::more_results_exist);
}

next_step command_exchange::on_error(bytes_view p) {
    failed_ = true;
    // ER_LOCK_DEADLOCK, ER_XA_RBROLLBACK, ER_XA_RBTIMEOUT, ER_XA_RBDEADLOCK: InnoDB rolled the
    // transaction back. (ER_LOCK_WAIT_TIMEOUT rolls back only the statement, unless the server runs
    // with innodb_rollback_on_timeout.)
    auto e = parse_err(p);
    if (e) error_code_ = e->code;
    if (e && (e->code == 1213 || e->code == 1402 || e->code == 1613 || e->code == 1614))
        status_ = static_cast<std::uint16_t>(status_ & ~status::in_trans);
    return next_step::done;
}

result<next_step> command_exchange::end_of_result(std::uint16_t status) {
    status_ = status;
    ++result_sets_;
    if ((status & status::more_results_exist) && command_ != com::stmt_prepare) {
        state_ = state::first;
        return next_step::read_server;
    }
    return next_step::done;
}

result<next_step> command_exchange::on_first(bytes_view p) {
    if (p.empty()) return errc::empty_packet;
    switch (p[0]) {
    case ok_header: {
        if (command_ == com::stmt_prepare) {
            auto prep = parse_prepare_ok(p);
            if (!prep) return prep.error();
            statement_id_ = prep->statement_id;
            prepared_columns_ = prep->column_count;
            params_ = prep->param_count;
            return after_prepare_params_start();
        }
        auto ok = parse_ok(p, caps_);
        if (!ok) return ok.error();
        last_ok_ = *ok;
        return end_of_result(ok->status);
    }
    case err_header:
        return on_error(p);
    case local_infile_header:
        if (command_ != com::query) return errc::unexpected_packet;
        state_ = state::infile;
        return next_step::read_client;
    default: {
        if (command_ == com::stmt_prepare) return errc::unexpected_packet;
        reader r(p);
        columns_left_ = r.lenenc();
        if (!r.ok()) return r.error();
        if (!r.empty()) return errc::unexpected_packet;  // metadata-follows byte: never offered
        if (columns_left_ == 0) return errc::unexpected_packet;
        state_ = state::columns;
        return next_step::read_server;
    }
    }
}

result<next_step> command_exchange::after_prepare_params_start() {
    if (params_ > 0) {
        columns_left_ = params_;
        state_ = state::prepare_params;
        return next_step::read_server;
    }
    return after_prepare_params();
}

result<next_step> command_exchange::after_prepare_params() {
    if (prepared_columns_ > 0) {
        columns_left_ = prepared_columns_;
        state_ = state::prepare_columns;
        return next_step::read_server;
    }
    return next_step::done;
}

result<next_step> command_exchange::on_server_packet(const packet_span& packet) {
    if (packet.first_seq != next_seq_) return errc::bad_sequence;
    next_seq_ = static_cast<std::uint8_t>(packet.last_seq + 1);
    bytes_view p = packet.first_payload;
    bool deprecate_eof = caps_ & cap::deprecate_eof;
    // Progress reports come before a reply's first packet, and between a result set's metadata
    // and its rows (REPAIR TABLE); they are relayed and change nothing.
    if (state_ != state::single && state_ != state::auth && is_progress_report(p)) {
        ++progress_reports_;
        return next_step::read_server;
    }
    switch (state_) {
    case state::first:
        return on_first(p);
    case state::columns:
        if (is_err(p)) return on_error(p);
        if (--columns_left_ > 0) return next_step::read_server;
        state_ = deprecate_eof ? state::rows : state::columns_eof;
        return next_step::read_server;
    case state::columns_eof: {
        if (is_err(p)) return on_error(p);
        auto eof = parse_eof(p);
        if (!eof) return eof.error();
        status_ = eof->status;
        // A cursor was opened: rows come later through COM_STMT_FETCH. (Under
        // CLIENT_DEPRECATE_EOF the server ends the metadata with an 0xFE OK
        // carrying the same flag, which the rows state below handles.) Only an execute
        // opens one, and never for one of several results: the result sets of a CALL
        // whose procedure uses a cursor carry the flag too (with more-results), and
        // their rows follow at once, in text and binary protocol alike.
        if (opens_cursor(eof->status)) return end_of_result(eof->status);
        state_ = state::rows;
        return next_step::read_server;
    }
    case state::rows:
        if (is_err(p)) return on_error(p);
        if (is_eof_packet(p, caps_) && packet.frames == 1) {
            auto st = terminator_status(p, caps_);
            if (!st) return st.error();
            return end_of_result(*st);
        }
        ++rows_;
        return next_step::read_server;
    case state::infile:
        return errc::unexpected_packet;  // the server speaks only after the empty packet
    case state::prepare_params:
        if (is_err(p)) return on_error(p);
        if (--columns_left_ > 0) return next_step::read_server;
        if (!deprecate_eof) {
            state_ = state::prepare_params_eof;
            return next_step::read_server;
        }
        return after_prepare_params();
    case state::prepare_params_eof:
        if (!is_eof_packet(p, caps_)) return errc::unexpected_packet;
        return after_prepare_params();
    case state::prepare_columns:
        if (is_err(p)) return on_error(p);
        if (--columns_left_ > 0) return next_step::read_server;
        if (!deprecate_eof) {
            state_ = state::prepare_columns_eof;
            return next_step::read_server;
        }
        return next_step::done;
    case state::prepare_columns_eof:
        if (!is_eof_packet(p, caps_)) return errc::unexpected_packet;
        return next_step::done;
    case state::auth: {
        auto step = auth_.on_server_packet(p);
        if (!step) return step.error();
        if (*step == next_step::done) {
            failed_ = !auth_.succeeded();
            if (auth_.succeeded()) {
                auto ok = parse_ok(p, caps_);
                if (ok) status_ = ok->status;
            }
        }
        return *step;
    }
    case state::single:
        if (p.empty()) return errc::empty_packet;
        if (p[0] == err_header) {
            failed_ = true;
        } else if (p[0] == ok_header && command_ != com::statistics) {
            auto ok = parse_ok(p, caps_);
            if (ok) {
                status_ = ok->status;
                last_ok_ = *ok;
            }
        } else if (p[0] == eof_header && command_ != com::statistics) {
            auto st = terminator_status(p, caps_);  // COM_SET_OPTION, COM_DEBUG
            if (st) status_ = *st;
        }
        return next_step::done;
    }
    return errc::unexpected_packet;
}

result<next_step> command_exchange::on_client_packet(const packet_span& packet) {
    if (packet.first_seq != next_seq_) return errc::bad_sequence;
    next_seq_ = static_cast<std::uint8_t>(packet.last_seq + 1);
    switch (state_) {
    case state::infile:
        // An empty packet ends the file; the server then answers with OK or ERR
        // (and, in a multi-statement, possibly more results).
        if (packet.payload_size == 0) state_ = state::first;
        return packet.payload_size == 0 ? next_step::read_server : next_step::read_client;
    case state::auth:
        return next_step::read_server;
    default:
        return errc::unexpected_packet;
    }
}

}  // namespace claimguard::protocol
