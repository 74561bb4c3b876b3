// Names of command bytes.
#include "command.hpp"

namespace claimguard::protocol {

std::string_view command_name(std::uint8_t c) {
    switch (c) {
    case com::sleep: return "sleep";
    case com::quit: return "quit";
    case com::init_db: return "init_db";
    case com::query: return "query";
    case com::field_list: return "field_list";
    case com::create_db: return "create_db";
    case com::drop_db: return "drop_db";
    case com::refresh: return "refresh";
    case com::shutdown: return "shutdown";
    case com::statistics: return "statistics";
    case com::process_info: return "process_info";
    case com::process_kill: return "process_kill";
    case com::debug: return "debug";
    case com::ping: return "ping";
    case com::change_user: return "change_user";
    case com::stmt_prepare: return "stmt_prepare";
    case com::stmt_execute: return "stmt_execute";
    case com::stmt_send_long_data: return "stmt_send_long_data";
    case com::stmt_close: return "stmt_close";
    case com::stmt_reset: return "stmt_reset";
    case com::set_option: return "set_option";
    case com::stmt_fetch: return "stmt_fetch";
    case com::reset_connection: return "reset_connection";
    case com::stmt_bulk_execute: return "stmt_bulk_execute";
    default: return "other";
    }
}

bool is_refused_command(std::uint8_t c) {
    switch (c) {
    case com::binlog_dump:
    case com::binlog_dump_gtid:
    case com::register_slave:
    case com::table_dump:
    case com::connect_out:
    case com::multi:
        return true;
    default:
        return false;
    }
}

}  // namespace claimguard::protocol
