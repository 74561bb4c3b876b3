// A COM_QUERY of several statements (CLIENT_MULTI_STATEMENTS: MyBatis <foreach> with allowMultiQueries,
// `UPDATE ...; INSERT ...`) that names a protected table: the server would run the statements in order
// and stop at the first error, answering one result per statement, each but the last flagged
// SERVER_MORE_RESULTS_EXISTS. The session does the same: each statement is recognised, decided and
// carried out as a query of its own (rewritten, answered, claimed, or sent as written), its end
// settled (a COMMIT among them ends the transaction there), and its reply stitched into the one the
// client reads (client_link::stitch). After a statement that ends in an ERR nothing more is run or sent.
#include "proxy/engine/several_statements.hpp"

#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

namespace com = proto::com;

bool session::multi_statements() const {
    return multi_statements_option_ ? *multi_statements_option_ : (caps_ & proto::cap::multi_statements) != 0;
}

awaitable<session::intercepted> session::intercept_several(const proto::packet_span& packet,
                                                           const std::vector<std::string_view>& statements) {
    const auto started = clock_type::now();
    std::uint8_t seq = proto::reply_seq(packet.last_seq);
    for (std::size_t i = 0; i < statements.size(); ++i) {
        if (i > 0) memory_.next_command();  // a read is evidence for the statement that comes next
        const bool was_in_transaction = status_ & proto::status::in_trans;
        command_.failed = false;
        command_.error = 0;
        command_.answered = false;  // each statement's answer for its audit lines
        command_.forwarded_statement = false;
        client_.stitch(seq, i + 1 < statements.size());
        const auto done = co_await run_one_of_several(statements[i]);
        const auto stitched = client_.stitched();
        client_.stop_stitching();
        if (done == intercepted::failed) co_return intercepted::failed;
        seq = stitched.next_seq;
        if (!end_command_now(was_in_transaction, started) && !co_await end_command(started))
            co_return intercepted::failed;
        if (stitched.err) break;  // the server runs nothing after an error
    }
    command_.ended = true;
    co_return intercepted::handled;
}

awaitable<session::intercepted> session::run_one_of_several(std::string_view sql) {
    // The statement as a COM_QUERY of its own: what goes to the server when it is sent as written.
    proto::byte_buffer payload, frame;
    proto::serialize_query(sql, payload);
    std::uint8_t frame_seq = 0;
    proto::write_packet(frame, frame_seq, payload);
    command_.seq = 0;
    engine::recognised_statement rs;
    auto step = connection_state_.recognise_query(sql, engine_inputs(), rs);
    if (step == engine::recognition::needs_columns || step == engine::recognition::needs_sql_mode) {
        const auto looked_up = co_await look_up_columns(rs, step);
        if (!looked_up) co_return intercepted::failed;
        step = *looked_up;
    }
    if (step != engine::recognition::forward) {
        const auto result = co_await apply(rs.decided, rs.parsed, com::query, frame, 0, nullptr, nullptr);
        if (result != intercepted::forward) co_return result;
    }
    auto reply = co_await backend_.roundtrip(frame, com::query, 0);
    if (!reply) co_return intercepted::failed;
    command_.forwarded_statement = true;
    co_return co_await client_.write(reply->raw) ? intercepted::handled : intercepted::failed;
}

}  // namespace claimguard::session
