// Per-key admission in the session: waiting for a key's turn in the sidecar's admission gate
// (on this session's executor), answering what the gate refused, giving the slots back.
#include <algorithm>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <boost/asio/post.hpp>

#include "claim_metrics.hpp"
#include "session_impl.hpp"

namespace claimguard::session {

using engine::admission;
using engine::verdict;

namespace {

// How often a waiter looks at its ticket even without a wake-up (a safety net: the gate's wake
// is the normal path), and the ERR a waiter gets when its turn does not come.
constexpr std::chrono::milliseconds admission_poll_interval{200};
constexpr std::uint16_t er_lock_wait_timeout = 1205;  // what drivers and ORMs retry
constexpr const char* er_lock_wait_timeout_state = "HY000";

std::string describe_key(const engine::decision& d) {
    std::string out;
    for (std::size_t i = 0; i < d.key.size(); ++i) {
        if (i) out += ", ";
        if (i < d.stock->key_columns.size()) out += d.stock->key_columns[i] + "=";
        else out += "in database ";  // the key's database, after its columns
        out += d.key[i];
    }
    return out;
}

std::string format_ms(std::chrono::milliseconds d) {
    if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
    return std::to_string(d.count()) + "ms";
}

}  // namespace

bool session::admission_applies(const engine::decision& d) const {
    return ctx_.admission && !d.observe && d.stock && d.stock->admission &&
           (d.what == verdict::take || d.what == verdict::track_decrement);
}

awaitable<std::optional<admission>> session::admit(const engine::decision& d) {
    for (const auto& h : admission_held_)
        if (h.rule == d.stock->name && h.key == d.key) co_return admission::admitted;  // its transaction's slot
    if (d.holds_row_lock || !admission_held_.empty()) {
        // Waiting now could close a cycle nobody detects: a holder of this key's slot waiting in
        // InnoDB for the row lock this transaction holds (its locking read), or for a slot this
        // transaction holds (another key). Go at once: a real deadlock is then InnoDB's to find.
        counters_.admission(snapshot_, d.stock->name, admission_count::lock_held).inc();
        co_return admission::bypass;
    }
    auto& gate = *ctx_.admission;
    // The gate wakes the waiter from whichever thread freed its slot: post to this session's
    // executor, where the wait runs; a session already gone is not touched.
    auto wake = [weak = weak_from_this(), ex = client_.get_executor()] {
        asio::post(ex, [weak] {
            if (auto self = weak.lock()) self->admission_timer_.cancel();
        });
    };
    auto entry = gate.enter(d.stock->name, d.key, *d.stock->admission, d.units, std::move(wake));
    if (entry.what == admission::admitted) admission_held_.push_back({d.stock->name, d.key, entry.id});
    if (entry.what != admission::queued) co_return entry.what;

    auto& queued = claim_metrics::get().admission_queued;
    counters_.admission(snapshot_, d.stock->name, admission_count::waits).inc();
    queued.inc();
    watch_client_while_queued();
    const auto deadline = clock_type::now() + d.stock->admission->queue_timeout;
    std::optional<admission> out;
    for (;;) {
        auto what = gate.resolve(entry.id);
        if (what != admission::queued) {
            out = what;
            break;
        }
        if (closed_ || client_gone_ || timed_out_ != deadline_kind::none) {
            gate.abandon(entry.id);
            break;
        }
        admission_timer_.expires_at(std::min(deadline, clock_type::now() + admission_poll_interval));
        co_await admission_timer_.async_wait(nothrow);
    }
    ++client_watch_;  // the hang-up watch's answer, if it comes, is stale now
    if (!closed_) {
        error_code ignored;
        client_.cancel(ignored);  // nothing else waits on the client socket while a command is handled
    }
    queued.inc(-1);
    if (out == admission::admitted) {
        if (closed_ || client_gone_) {
            gate.release(entry.id);
            co_return std::nullopt;
        }
        admission_held_.push_back({d.stock->name, d.key, entry.id});
    }
    co_return out;
}

awaitable<bool> session::admit_deferred(const engine::decision& d) {
    if (!ctx_.admission || d.deferred == engine::deferred_step::none || memory_.deferred.empty() || !snapshot_)
        co_return true;
    // Whatever the gate answers (sold out, timed out), the takes are sent: each is conditional, so
    // the database has the last word; the turn only orders them. Slots are held to the end of the
    // transaction, which follows at once.
    std::vector<engine::decision> takes;
    for (const auto& t : memory_.deferred) {
        if (d.deferred == engine::deferred_step::flush &&
            std::find(d.flush_rules.begin(), d.flush_rules.end(), t.rule) == d.flush_rules.end())
            continue;
        const auto* rule = snapshot_->rules.find_stock(t.rule);
        if (rule == nullptr || !rule->admission) continue;
        engine::decision td;
        td.what = verdict::take;
        td.stock = rule;
        td.key = t.key;
        td.units = t.units;
        td.holds_row_lock = memory_.holds_row_lock(t.rule, t.key);
        takes.push_back(std::move(td));
    }
    for (const auto& td : takes)
        if (!co_await admit(td)) co_return false;
    co_return true;
}

void session::watch_client_while_queued() {
    if (closed_) return;
    const auto generation = ++client_watch_;
    client_.async_wait(client_socket::wait_read, [self = shared_from_this(), generation](error_code ec) {
        if (ec || generation != self->client_watch_ || self->closed_) return;
        // Readable while a command is handled: the client hung up (EOF, reset), or it pipelined its
        // next command (left where it is, read after this one).
        char byte;
        const auto n = ::recv(self->client_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            self->client_gone_ = true;
            self->admission_timer_.cancel();
        }
    });
}

awaitable<session::intercepted> session::answer_not_admitted(admission what, const engine::decision& d,
                                                             const rules::sql::parsed_statement& st,
                                                             engine::claim_operation& op) {
    if (what == admission::sold_out) {
        counters_.admission(snapshot_, d.stock->name, admission_count::sold_out).inc();
        auto act = op.answer_sold_out();
        report_events(op.take_events(), d, st);
        co_return co_await answer(act.answer, act.status, act.ok_rows) ? intercepted::handled : intercepted::failed;
    }
    const auto& limits = *d.stock->admission;
    std::string message;
    if (what == admission::queue_full) {
        counters_.admission(snapshot_, d.stock->name, admission_count::queue_full).inc();
        audit(d, "admission-queue-full", st);
        message = "claimguard: the queue for key " + describe_key(d) + " of rule " + d.stock->name + " is full (" +
                  std::to_string(limits.max_queue) + " statements wait); try again";
    } else {
        counters_.admission(snapshot_, d.stock->name, admission_count::timeouts).inc();
        audit(d, "admission-timeout", st);
        message = "claimguard: waited more than queue_timeout (" + format_ms(limits.queue_timeout) + ") for key " +
                  describe_key(d) + " of rule " + d.stock->name + "; try again";
    }
    spdlog::debug("session {}: {}", id_, message);
    rules::answer a{rules::answer::kind::error, er_lock_wait_timeout, er_lock_wait_timeout_state, std::move(message)};
    co_return co_await answer(a, status_) ? intercepted::handled : intercepted::failed;
}

void session::note_admission_events(const std::vector<engine::event>& events, const engine::decision& d) {
    if (!ctx_.admission || !d.stock || !d.stock->admission || d.observe) return;
    for (auto e : events) {
        if (e == engine::event::exhausted)
            ctx_.admission->note_sold_out(d.stock->name, d.key, d.units);
        else if (e == engine::event::took || e == engine::event::tracked || e == engine::event::restocked)
            ctx_.admission->note_available(d.stock->name, d.key);
    }
}

void session::release_admission() {
    if (!ctx_.admission) return;
    for (const auto& h : admission_held_) ctx_.admission->release(h.id);
    admission_held_.clear();
}

}  // namespace claimguard::session
