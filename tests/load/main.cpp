// claimguard-load: replays the coupon incident's claim flow from many threads against MySQL or claimguard.
#include <mysql.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "tests/load/attempt_plan.hpp"
#include "tests/load/claim_flow.hpp"
#include "tests/load/load_report.hpp"
#include "tests/load/mysql_session.hpp"

namespace {

using namespace claimguard::load;
using steady = std::chrono::steady_clock;

constexpr unsigned default_threads = 24;
constexpr unsigned max_threads = 1024;
constexpr std::int64_t default_users = 300;
constexpr std::int64_t max_users = 10'000'000;
constexpr unsigned default_attempts_per_user = 3;
constexpr unsigned max_attempts_per_user = 1000;
constexpr std::uint64_t max_attempts = 100'000'000;
constexpr double max_app_work_ms = 60'000;
constexpr unsigned default_io_timeout_s = 30;
constexpr unsigned max_port = 65535;
// Pause after a failed (re)connect, so a dead target is not hammered in a tight loop.
constexpr auto reconnect_backoff = std::chrono::milliseconds(20);
constexpr int usage_error = 2;

target parse_target(const std::string& text) {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
        throw std::invalid_argument("--target must be host:port, not '" + text + "'");
    std::string host = text.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    std::size_t used = 0;
    const unsigned long port = std::stoul(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || port == 0 || port > max_port)
        throw std::invalid_argument("--target has a bad port: '" + text + "'");
    return {host, static_cast<unsigned>(port)};
}

struct shared_plan {
    std::vector<std::int64_t> users;
    std::atomic<std::size_t> next{0};
    steady::time_point started;  // set before the workers are let go
    steady::time_point deadline = steady::time_point::max();
};

// Every thread connects (or fails to) before the clock starts.
struct start_gate {
    explicit start_gate(std::ptrdiff_t threads) : connected(threads) {}
    std::latch connected;
    std::latch go{1};
};

void run_worker(const connect_options& connection, const flow_options& flow, shared_plan& plan, start_gate& gate,
                tally& out) {
    mysql_thread_init();
    {
        mysql_session session(connection);
        (void)session.connect();  // a failure here is retried, and counted, by the first attempt
        gate.connected.count_down();
        gate.go.wait();
        while (steady::now() < plan.deadline) {
            const std::size_t i = plan.next.fetch_add(1, std::memory_order_relaxed);
            if (i >= plan.users.size())
                break;
            const std::int64_t user = plan.users[i];
            const auto began = steady::now();
            attempt_result result;
            if (!session.connected()) {
                ++out.reconnects;
                if (auto c = session.connect(); !c) {
                    result = {answer_kind::error, answer_reason::none, c.error(), "connect"};
                    out.add(result, user, std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - began));
                    std::this_thread::sleep_for(reconnect_backoff);
                    continue;
                }
            }
            result = run_attempt(session, flow, user);
            const auto ended = steady::now();
            out.add(result, user, std::chrono::duration_cast<std::chrono::microseconds>(ended - began),
                    std::chrono::duration_cast<std::chrono::microseconds>(ended - plan.started));
        }
    }
    mysql_thread_end();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"claimguard-load: the coupon incident's claim flow from many threads (DESIGN.md section 1)"};
    std::vector<std::string> target_texts{"127.0.0.1:3306"};
    connect_options connection;
    connection.user = "root";
    flow_options flow;
    unsigned threads = default_threads;
    std::int64_t users = default_users;
    std::int64_t first_user = 1;
    unsigned attempts_per_user = default_attempts_per_user;
    std::uint64_t attempts = 0;
    double app_work_ms = 0;
    std::string protocol = "text", flow_name = "naive";
    double seconds = 0;
    std::uint64_t seed = 1;
    unsigned io_timeout_s = default_io_timeout_s;
    bool json = false, record_claims = false;

    app.add_option("--target", target_texts, "host:port of MySQL or claimguard; repeat it, threads go round-robin")
        ->capture_default_str();
    app.add_option("--user", connection.user, "MySQL user")->capture_default_str();
    app.add_option("--password", connection.password, "MySQL password");
    app.add_option("--database", connection.database, "Database holding coupon_stock and coupon_order")->required();
    app.add_option("--threads", threads, "Client threads, one connection each")
        ->check(CLI::Range(1u, max_threads))
        ->capture_default_str();
    app.add_option("--users", users, "How many users claim (ids first-user .. first-user + N - 1)")
        ->check(CLI::Range(std::int64_t{1}, max_users))
        ->capture_default_str();
    app.add_option("--first-user", first_user, "Smallest user id")->check(CLI::Range(std::int64_t{1}, max_users))
        ->capture_default_str();
    app.add_option("--attempts-per-user", attempts_per_user, "Tries per user (shuffled across threads)")
        ->check(CLI::Range(1u, max_attempts_per_user))
        ->capture_default_str();
    app.add_option("--attempts", attempts,
                   "A herd: this many attempts in all, each by a random user of --users (some repeat); "
                   "0: every user --attempts-per-user times")
        ->check(CLI::Range(std::uint64_t{0}, max_attempts))
        ->capture_default_str();
    app.add_option("--campaign", flow.campaign, "coupon_stock.campaign_id claimed")->capture_default_str();
    app.add_option("--protocol", protocol, "text (mysql_query) or prepared (mysql_stmt_*)")
        ->check(CLI::IsMember({"text", "prepared"}))
        ->capture_default_str();
    app.add_option("--flow", flow_name,
                   "naive (the incident's app) or fixed (the post-mortem's hand fix); naive_tx / fixed_tx: the "
                   "same inside BEGIN ... COMMIT (as --transaction)")
        ->check(CLI::IsMember({"naive", "fixed", "naive_tx", "fixed_tx"}))
        ->capture_default_str();
    app.add_option("--app-work-ms", app_work_ms, "The app's own work, slept between two statements of an attempt")
        ->check(CLI::Range(0.0, max_app_work_ms))
        ->capture_default_str();
    app.add_flag("--transaction", flow.transaction, "BEGIN before, COMMIT after, ROLLBACK on any error");
    app.add_flag("--ignore-affected-rows", flow.ignore_affected_rows,
                 "naive flow: INSERT even when the UPDATE changed no row");
    app.add_flag("--version-column", flow.version_column, "naive flow: read version, write version = <version+1>");
    app.add_flag("--found-rows", connection.found_rows, "Connect with CLIENT_FOUND_ROWS (as JDBC drivers do)");
    app.add_option("--seconds", seconds, "Stop starting attempts after this long (0: run every attempt)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--seed", seed, "Shuffle seed of the attempt order")->capture_default_str();
    app.add_option("--io-timeout-s", io_timeout_s, "Connect/read/write timeout per statement")
        ->check(CLI::Range(1u, 3600u))
        ->capture_default_str();
    app.add_option("--sold-out-code", flow.answers.sold_out_code, "ERR code that means sold out")
        ->capture_default_str();
    app.add_option("--sold-out-message-contains", flow.answers.sold_out_text, "...when its message contains this")
        ->capture_default_str();
    app.add_option("--duplicate-code", flow.answers.duplicate_code, "ERR code that means already claimed")
        ->capture_default_str();
    app.add_option("--duplicate-message-contains", flow.answers.duplicate_text, "...when its message contains this")
        ->capture_default_str();
    app.add_flag("--json", json, "Print a JSON summary instead of the table");
    app.add_flag("--record-claims", record_claims, "JSON: list the user ids whose claim the app believes succeeded");
    CLI11_PARSE(app, argc, argv);

    std::vector<target> targets;
    try {
        for (const auto& t : target_texts) targets.push_back(parse_target(t));
    } catch (const std::exception& e) {
        std::cerr << "claimguard-load: " << e.what() << "\n";
        return usage_error;
    }
    if (targets.empty()) {
        std::cerr << "claimguard-load: give at least one --target\n";
        return usage_error;
    }
    connection.protocol = protocol == "prepared" ? wire_protocol::prepared : wire_protocol::text;
    connection.version_column = flow.version_column;
    connection.io_timeout = std::chrono::seconds(io_timeout_s);
    const auto choice = parse_flow(flow_name);
    if (!choice) {
        std::cerr << "claimguard-load: unknown --flow " << flow_name << "\n";
        return usage_error;
    }
    flow.flow = choice->flow;
    flow.transaction = flow.transaction || choice->transaction;
    flow.app_work =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double, std::milli>(app_work_ms));

    if (mysql_library_init(0, nullptr, nullptr) != 0) {
        std::cerr << "claimguard-load: mysql_library_init failed\n";
        return 1;
    }
    shared_plan plan;
    plan.users = attempts > 0 ? make_herd_plan(first_user, users, attempts, seed)
                              : make_plan(first_user, users, attempts_per_user, seed);
    std::vector<tally> tallies(threads);
    start_gate gate(static_cast<std::ptrdiff_t>(threads));
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (unsigned i = 0; i < threads; ++i) {
        connect_options c = connection;
        c.to = targets[i % targets.size()];
        workers.emplace_back([c, &flow, &plan, &gate, &out = tallies[i]] { run_worker(c, flow, plan, gate, out); });
    }
    gate.connected.wait();
    const auto began = steady::now();
    plan.started = began;
    if (seconds > 0)
        plan.deadline = began + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
    gate.go.count_down();
    for (auto& w : workers) w.join();
    const double elapsed = std::chrono::duration<double>(steady::now() - began).count();
    mysql_library_end();

    run_summary summary;
    summary.tool = "claimguard-load";
    summary.attempts_planned = plan.users.size();
    summary.elapsed_s = elapsed;
    summary.record_claims = record_claims;
    summary.config = {{"targets", target_texts},
                      {"threads", threads},
                      {"users", users},
                      {"first_user", first_user},
                      {"attempts_per_user", attempts_per_user},
                      {"attempts", attempts},
                      {"campaign", flow.campaign},
                      {"protocol", protocol},
                      {"flow", flow_name},
                      {"transaction", flow.transaction},
                      {"app_work_ms", app_work_ms},
                      {"ignore_affected_rows", flow.ignore_affected_rows},
                      {"version_column", flow.version_column},
                      {"found_rows", connection.found_rows},
                      {"seconds", seconds},
                      {"seed", seed}};
    for (auto& t : tallies) summary.totals.merge(std::move(t));
    if (json)
        std::cout << to_json(summary).dump(2) << "\n";
    else
        std::cout << to_table(summary);
    return 0;
}
