// The two links of a session (client_link.hpp, backend_link.hpp) and the deadline they share
// (deadline.hpp): socket I/O, the replies the proxy reads for itself, the idle and hang-up watches.
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <optional>

#include "backend_link.hpp"
#include "client_link.hpp"
#include "proxy/admin/metrics.hpp"
#include "proxy/protocol/answers.hpp"
#include "proxy/protocol/command.hpp"
#include "proxy/protocol/command_packets.hpp"
#include "proxy/protocol/compression.hpp"
#include "proxy/protocol/packets.hpp"
#include "rules/model/rules.hpp"

namespace claimguard::session {

namespace {

// The ERR a client gets for a client-side protocol error.
std::pair<std::uint16_t, const char*> client_error_answer(error_code ec) {
    if (ec == proto::errc::packet_too_large) return {er::packet_too_large, "08S01"};
    if (ec == proto::errc::bad_sequence) return {er::packets_out_of_order, "08S01"};
    if (ec == proto::errc::bad_compression) return {er::uncompress_error, "08S01"};
    return {er::malformed_packet, "HY000"};
}

// What is at the front of `in`: a whole packet, or an error; nullopt when more must be read first.
std::optional<packet_read> front_packet(packet_buffer& in, std::size_t max_packet_bytes) {
    auto scan = proto::scan_packet(in.readable(), max_packet_bytes);
    if (!scan) return packet_read{error_code(scan.error()), proto::packet_span{}};
    if (scan->raw_size) return packet_read{error_code{}, *scan};
    return std::nullopt;
}

}  // namespace

// ---- the deadline -------------------------------------------------------------------------------

void link_deadline::set(deadline_kind kind, clock_type::duration after) {
    kind_ = kind;
    deadline_ =
        kind == deadline_kind::none || after.count() <= 0 ? clock_type::time_point::max() : clock_type::now() + after;
    if (deadline_ < armed_) timer_.cancel();  // an earlier deadline: wake the watchdog
}

awaitable<void> link_deadline::watch(client_link& client, backend_link& backend) {
    while (!closed_) {
        armed_ = deadline_;
        timer_.expires_at(deadline_);
        co_await timer_.async_wait(nothrow);
        if (closed_) co_return;
        if (kind_ != deadline_kind::none && clock_type::now() >= deadline_) {
            timed_out_ = kind_;
            deadline_ = clock_type::time_point::max();
            kind_ = deadline_kind::none;
            client.cancel();
            backend.cancel();
        }
    }
}

// ---- the client ---------------------------------------------------------------------------------

client_link::client_link(client_socket socket, std::uint64_t session_id, link_deadline& deadline,
                         const config::proxy_options& opt)
    : socket_(std::move(socket)), deadline_(deadline), opt_(opt), session_id_(session_id) {
    peer_ = client_peer(socket_, is_unix_);
}

awaitable<packet_read> client_link::read_packet(bool between_commands) {
    // A command restarts the compressed sequence ids, as the server does (its reply continues them).
    if (compressed_ && between_commands) compressed_->seq = 0;
    for (;;) {
        if (compressed_) {
            if (auto front = inflate_front()) co_return *front;
        } else if (auto front = front_packet(in_, opt_.max_packet_bytes)) {
            co_return *front;
        }
        // The first read of a packet goes to a small buffer (an idle connection waits with no more: most
        // commands fit, in one read as before); the rest of a larger one to a buffer of at least
        // read_chunk_bytes, twice what it holds beyond that.
        packet_buffer& into = compressed_ ? compressed_->raw : in_;
        const std::size_t room =
            into.size() == 0 ? packet_buffer::small_bytes : std::max(read_chunk_bytes, 2 * into.size()) - into.size();
        auto space = into.prepare(room);
        const bool idle = between_commands && in_.size() == 0 && into.size() == 0;
        deadline_.set(idle ? deadline_kind::idle : deadline_kind::packet,
                      idle ? clock_type::duration(opt_.idle_timeout) : clock_type::duration(opt_.packet_timeout));
        waiting_idle_ = idle;
        auto [ec, n] = co_await socket_.async_read_some(asio::buffer(space.data(), space.size()), nothrow);
        waiting_idle_ = false;
        deadline_.clear();
        if (ec) co_return packet_read{ec, proto::packet_span{}};
        into.commit(n);
    }
}

std::optional<packet_read> client_link::inflate_front() {
    auto& z = *compressed_;
    for (;;) {
        proto::renumber_continuations(in_.writable());
        if (auto front = front_packet(in_, opt_.max_packet_bytes)) return front;
        // One frame carries at most one whole packet and its header, when the client does not pipeline.
        auto frame =
            proto::scan_compressed_frame(z.raw.readable(), z.seq, opt_.max_packet_bytes + proto::frame_header_size);
        if (!frame) return packet_read{error_code(frame.error()), proto::packet_span{}};
        if (frame->raw_size == 0) return std::nullopt;
        auto room = in_.prepare(frame->payload_size).first(frame->payload_size);
        if (auto inflated = proto::inflate_frame(z.raw.readable().first(frame->raw_size), *frame, room); !inflated)
            return packet_read{error_code(inflated.error()), proto::packet_span{}};
        in_.commit(frame->payload_size);
        z.raw.consume(frame->raw_size);
        z.raw.shrink_if_idle(idle_buffer_bytes);
        ++z.seq;
    }
}

void client_link::start_compression() {
    compressed_ = std::make_unique<compressed_stream>();
    // Bytes the client sent after its handshake (none, as it waits for the OK) are compressed already.
    if (in_.size() > 0) {
        auto bytes = in_.readable();
        auto space = compressed_->raw.prepare(bytes.size());
        std::copy(bytes.begin(), bytes.end(), space.begin());
        compressed_->raw.commit(bytes.size());
        in_.consume(bytes.size());
    }
}

awaitable<bool> client_link::write(proto::bytes_view bytes) {
    if (stitching_) {
        auto stitched = proto::stitch_reply(bytes, stitched_.next_seq, more_results_);
        stitched_.next_seq = stitched.next_seq;
        stitched_.err = stitched.err;
        stitched_.ok = stitched.ok;
        stitching_ = false;  // the stitched bytes go as they are
        const bool ok = co_await write(stitched.raw);
        stitching_ = true;
        co_return ok;
    }
    if (!compressed_) co_return co_await send(bytes);
    auto& out = compressed_->out;
    out.clear();
    proto::write_compressed(out, compressed_->seq, bytes);
    const bool ok = co_await send(out);
    if (out.capacity() > packet_buffer::small_bytes) out = {};  // after a large reply: idle sessions stay small
    co_return ok;
}

awaitable<bool> client_link::send(proto::bytes_view bytes) {
    // Asynchronous on purpose (unlike backend_link::write's direct send): the trip through the scheduler
    // gives the client time to send its next command before the session reads, so the next read
    // seldom comes back empty (measured: a direct send here added 0.4 EAGAIN reads per statement).
    auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()), nothrow);
    admin::metrics().bytes_backend_to_client.inc(n);
    if (ec) {
        admin::metrics().client_errors("io").inc();
        spdlog::debug("session {} from {}: client write failed: {}", session_id_, peer_, ec.message());
    }
    co_return !ec;
}

awaitable<void> client_link::answer_error(std::uint8_t seq, std::uint16_t code, std::string_view sql_state,
                                          std::string_view message) {
    auto frame = proto::make_err_frame(seq, code, sql_state, message);
    co_await write(frame);
}

awaitable<bool> client_link::answer(const rules::answer& a, std::uint8_t seq, std::uint16_t status, std::uint32_t caps,
                                    std::uint64_t ok_rows) {
    if (a.type == rules::answer::kind::error)
        co_return co_await write(proto::make_err_frame(seq, a.code, a.sql_state, a.message));
    co_return co_await write(proto::make_ok_frame(seq, ok_rows, status, caps));
}

awaitable<void> client_link::read_failed(error_code ec, std::uint8_t seq) {
    if (ec == asio::error::eof || ec == asio::error::connection_reset) co_return;  // client left
    if (deadline_.timed_out() == deadline_kind::idle) {
        admin::metrics().client_errors("idle_timeout").inc();
        spdlog::info("session {} from {}: closed after {}s idle", session_id_, peer_, opt_.idle_timeout.count());
        co_return;
    }
    if (deadline_.timed_out() == deadline_kind::packet) {
        admin::metrics().client_errors("timeout").inc();
        co_await answer_error(seq, er::read_timeout, "08S01", "Got timeout reading communication packets");
        co_return;
    }
    if (ec.category() == proto::protocol_category()) {
        admin::metrics().client_errors(ec == proto::errc::packet_too_large ? "packet_too_large" : "protocol").inc();
        spdlog::warn("session {} from {}: bad packet from the client: {}", session_id_, peer_, ec.message());
        auto [code, state] = client_error_answer(ec);
        // Named, never a temporary inside co_await: GCC 12 can destroy such temporaries twice.
        const std::string message = "claimguard: " + ec.message();
        co_await answer_error(seq, code, state, message);
        linger_ = true;  // the rest of the bad packet may still be arriving: see linger.hpp
        co_return;
    }
    admin::metrics().client_errors("io").inc();
}

void client_link::watch_while_queued(std::shared_ptr<void> keep, asio::steady_timer& wake) {
    if (closed_) return;
    const auto generation = ++watch_generation_;
    socket_.async_wait(client_socket::wait_read, [this, &wake, keep = std::move(keep), generation](error_code ec) {
        if (ec || generation != watch_generation_ || closed_) return;
        // Readable while a command is handled: the client hung up (EOF, reset), or it pipelined its
        // next command (left where it is, read after this one).
        char byte;
        const auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            hung_up_ = true;
            wake.cancel();
        }
    });
}

void client_link::stop_watching() {
    ++watch_generation_;
    if (!closed_) cancel();  // nothing else waits on the client socket while a command is handled
}

void client_link::close() {
    closed_ = true;
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
}

// ---- the database -------------------------------------------------------------------------------

awaitable<packet_read> backend_link::read_packet() {
    for (;;) {
        if (auto front = front_packet(in_, opt_.max_packet_bytes)) co_return *front;
        if (auto ec = co_await read_more()) co_return packet_read{ec, proto::packet_span{}};
    }
}

awaitable<error_code> backend_link::read_more() {
    packet_buffer& into = compressed_ ? compressed_->raw : in_;
    auto space = into.prepare(std::max(read_chunk_bytes, into.size()));
    auto [ec, n] = co_await stream_.read_some(asio::buffer(space.data(), space.size()));
    if (ec) co_return ec;
    into.commit(n);
    if (!compressed_) co_return error_code{};
    auto& z = *compressed_;
    for (;;) {
        // The server's compressed ids are not checked (libmariadb does not either): the next write
        // continues from the last one read, which is what the server checks.
        const auto raw = z.raw.readable();
        if (raw.size() < proto::compressed_header_size) break;
        auto frame = proto::scan_compressed_frame(raw, raw[3], opt_.max_packet_bytes + proto::frame_header_size);
        if (!frame) co_return frame.error();
        if (frame->raw_size == 0) break;
        auto room = in_.prepare(frame->payload_size).first(frame->payload_size);
        if (auto inflated = proto::inflate_frame(raw.first(frame->raw_size), *frame, room); !inflated)
            co_return inflated.error();
        z.renumber.apply(room);
        in_.commit(frame->payload_size);
        z.raw.consume(frame->raw_size);
        z.seq = static_cast<std::uint8_t>(frame->seq + 1);
    }
    z.raw.shrink_if_idle(idle_buffer_bytes);
    co_return error_code{};
}

awaitable<bool> backend_link::write(proto::bytes_view bytes) {
    proto::bytes_view wire = bytes;
    if (compressed_) {
        auto& z = *compressed_;
        // A command (its first packet numbered 0) restarts the compressed ids: the server expects 0.
        if (bytes.size() >= proto::frame_header_size && bytes[3] == 0) z.seq = 0;
        // The reply is numbered on from what was written, as the uncompressed server numbers it.
        z.renumber.restart(proto::next_sequence_id(bytes));
        z.out.clear();
        proto::write_compressed(z.out, z.seq, bytes);
        wire = z.out;
    }
    auto [ec, n] = co_await stream_.write(asio::buffer(wire.data(), wire.size()));
    if (compressed_ && compressed_->out.capacity() > packet_buffer::small_bytes) compressed_->out = {};
    admin::metrics().bytes_client_to_backend.inc(n);
    if (ec) {
        admin::metrics().backend_errors("io").inc();
        spdlog::warn("session {} from {}: write to the database failed: {}", client_.session_id(), client_.peer(),
                     ec.message());
    }
    co_return !ec;
}

awaitable<void> backend_link::failed(error_code ec, std::uint8_t seq) {
    bool protocol = ec.category() == proto::protocol_category();
    // Lost, not ended: our own cancel, a protocol error (we close, the server hears it) and a clean close
    // by the server (it ended the transaction itself) leave no orphan behind; an RST or a timeout may.
    if (!protocol && ec != asio::error::operation_aborted && ec != asio::error::eof) lost_ = true;
    admin::metrics().backend_errors(protocol ? "protocol" : ec == asio::error::eof ? "closed" : "io").inc();
    spdlog::warn("session {} from {}: database connection failed: {}", client_.session_id(), client_.peer(),
                 ec.message());
    // The message is built before the co_await: GCC 12 destroys temporaries of a conditional
    // expression inside a co_await argument twice (a double free, found by it_faults).
    std::string message;
    if (protocol) {
        message = "claimguard: malformed packet from the database: " + ec.message();
    } else {
        message = "Lost connection to the database during query (claimguard: " + ec.message() + ")";
    }
    co_await client_.answer_error(seq, er::backend_gone, er::backend_gone_state, message);
}

awaitable<std::optional<captured_reply>> backend_link::roundtrip(proto::bytes_view raw, std::uint8_t command,
                                                                 std::uint8_t last_seq) {
    if (!co_await write(raw)) {
        co_await failed(asio::error::broken_pipe, static_cast<std::uint8_t>(last_seq + 1));
        co_return std::nullopt;
    }
    captured_reply r;
    r.command = command;
    r.exchange = proto::command_exchange(command, caps_, status_);
    auto step = r.exchange.start(last_seq);
    while (step != proto::next_step::done) {
        if (step == proto::next_step::read_client) {  // never for the statements the engine sends
            co_await failed(proto::errc::unexpected_packet, r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto [ec, packet] = co_await read_packet();
        if (ec) {
            co_await failed(ec, r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto next = r.exchange.on_server_packet(packet);
        if (!next) {
            co_await failed(next.error(), r.exchange.next_seq());
            co_return std::nullopt;
        }
        auto bytes = in_.readable().first(packet.raw_size);
        r.raw.insert(r.raw.end(), bytes.begin(), bytes.end());
        in_.consume(packet.raw_size);
        step = *next;
    }
    // An ERR ends the reply: the statement's own, or one after a result set's column definitions (an
    // INSERT ... RETURNING whose row is a duplicate: Django's create() on MariaDB 10.5+). Either way
    // the statement failed, and if the transaction ended here it ended without a commit.
    if (r.exchange.failed()) {
        r.is_err = true;
        r.err_code = r.exchange.error_code();
        command_.failed = true;
        command_.error = r.err_code;
    }
    r.status = r.exchange.status();
    status_ = r.status;
    co_return r;
}

awaitable<std::optional<captured_reply>> backend_link::run_sql(const rules::match::rewritten_sql& sql,
                                                               const std::vector<proto::binary_value>* params,
                                                               const std::vector<proto::value_type>* types) {
    auto step = own_statements_.start(sql, params, types);
    if (step && step->command == proto::com::stmt_prepare) {
        auto prepared = co_await roundtrip(step->frames, proto::com::stmt_prepare, 0);
        if (!prepared || prepared->is_err) co_return prepared;
        auto next = own_statements_.prepared(sql, prepared->exchange.statement_id(), *params, *types);
        if (!next.close.empty() && !co_await write(next.close)) co_return std::nullopt;  // no reply
        step = std::move(next.execute);
    }
    if (!step) {
        spdlog::warn("session {}: cannot encode an execute for the rewritten statement: {}", client_.session_id(),
                     step.error().message());
        co_return std::nullopt;
    }
    co_return co_await roundtrip(step->frames, step->command, 0);
}

awaitable<std::optional<std::vector<proto::byte_buffer>>> backend_link::own_query(std::string_view sql) {
    proto::byte_buffer payload, frame;
    proto::serialize_query(sql, payload);
    std::uint8_t seq = 0;  // a command of its own: the app's next one starts at 0 again
    proto::write_packet(frame, seq, payload);
    if (!co_await write(frame)) co_return std::nullopt;
    proto::command_exchange exchange(proto::com::query, caps_, status_);
    auto step = exchange.start(0);
    std::vector<proto::byte_buffer> payloads;
    while (step == proto::next_step::read_server) {
        auto [ec, packet] = co_await read_packet();
        if (ec || packet.frames != 1) co_return std::nullopt;
        auto next = exchange.on_server_packet(packet);
        if (!next) co_return std::nullopt;
        payloads.emplace_back(packet.first_payload.begin(), packet.first_payload.end());
        in_.consume(packet.raw_size);  // read and dropped: the app never sees it
        step = *next;
    }
    if (step != proto::next_step::done) co_return std::nullopt;
    own_query_status_ = exchange.status();
    co_return payloads;
}

void backend_link::watch_while_idle(std::shared_ptr<void> keep) {
    if (watch_armed_ || closed_) return;
    watch_armed_ = true;
    // Completes when the socket is readable: normally with the reply to the next command (then it
    // is ignored), or with what the database sent on its own while idle.
    stream_.socket().async_wait(asio::ip::tcp::socket::wait_read, [this, keep = std::move(keep)](error_code ec) {
        watch_armed_ = false;
        if (ec || closed_ || !client_.waiting_idle()) return;
        woke_ = true;
        client_.cancel();
    });
}

awaitable<bool> backend_link::spoke_while_idle() {
    woke_ = false;
    for (;;) {
        auto scan = proto::scan_packet(in_.readable(), opt_.max_packet_bytes);
        if (scan && scan->raw_size) {
            // The only packet a server sends unprompted is an ERR before it closes (MySQL
            // 8.0.24+: 4031 "disconnected by the server because of inactivity"): relay it as is.
            bool err = !scan->first_payload.empty() && scan->first_payload[0] == proto::err_header;
            if (err && !co_await client_.write(in_.readable().first(scan->raw_size))) co_return false;
            in_.consume(scan->raw_size);
            if (!err) {
                admin::metrics().backend_errors("protocol").inc();
                spdlog::warn("session {} from {}: the database sent a packet between commands; closing",
                             client_.session_id(), client_.peer());
                co_return false;
            }
            continue;
        }
        if (!scan) co_return false;
        deadline_.set(deadline_kind::packet, idle_backend_read_timeout);
        auto ec = co_await read_more();
        deadline_.clear();
        if (ec) {
            if (deadline_.timed_out() == deadline_kind::packet && in_.size() == 0) {
                deadline_.time_out(deadline_kind::none);  // no data after all (TLS records): stay open
                co_return true;
            }
            // Closed by the database: close the client too, as a TCP relay would, so the app's
            // pool sees a dead connection now rather than an error on its next query. A reset (not
            // the server's own close) may leave its transaction open there: an orphan (issue 13).
            if (ec != asio::error::eof && ec != asio::error::operation_aborted) lost_ = true;
            admin::metrics().backend_errors("closed").inc();
            spdlog::info("session {} from {}: the database closed the idle connection ({}); closing the client",
                         client_.session_id(), client_.peer(), ec.message());
            co_return false;
        }
    }
}

}  // namespace claimguard::session
