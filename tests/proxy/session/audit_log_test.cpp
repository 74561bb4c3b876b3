// The audit log writer: every queued line arrives whole and in order, a stuck reader makes it
// drop (and count) lines instead of blocking the caller, and lines carry only what they are given.
#include "proxy/session/audit_log.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "rules/sql/parser.hpp"

namespace claimguard::session {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
    auto dir = fs::temp_directory_path() / ("claimguard-audit-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto p = dir / name;
    fs::remove(p);
    return p;
}

std::vector<nlohmann::json> read_lines(const fs::path& p) {
    std::vector<nlohmann::json> out;
    std::ifstream in(p);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
}

audit_event event(std::uint64_t session, std::string_view action) {
    audit_event e;
    e.session = session;
    e.client = "10.0.0.7:5000";
    e.user = "app";
    e.rule = "coupon_stock";
    e.action = action;
    e.keys = {{"campaign_id", "7"}};
    e.digest = "0123456789abcdef";
    return e;
}

TEST(audit_log, every_line_from_many_threads_arrives_whole_and_in_order_per_thread) {
    const auto path = temp_file("many.jsonl");
    constexpr int threads = 4;
    constexpr int per_thread = 2000;
    {
        audit_log log(path.string());
        ASSERT_TRUE(log.enabled());
        std::vector<std::thread> writers;
        for (int t = 0; t < threads; ++t)
            writers.emplace_back([&log, t] {
                for (int i = 0; i < per_thread; ++i) {
                    auto e = event(static_cast<std::uint64_t>(t), "rewritten");
                    e.keys = {{"campaign_id", std::to_string(i)}};
                    log.write(e);
                }
            });
        for (auto& w : writers) w.join();
        EXPECT_EQ(log.dropped(), 0u);
    }  // the destructor writes what is still queued
    auto lines = read_lines(path);
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(threads * per_thread));
    std::vector<int> next(threads, 0);
    for (const auto& j : lines) {
        auto t = j.at("session").get<int>();
        ASSERT_GE(t, 0);
        ASSERT_LT(t, threads);
        EXPECT_EQ(j.at("keys").at("campaign_id").get<std::string>(), std::to_string(next[t]));
        ++next[t];
        EXPECT_EQ(j.at("action"), "rewritten");
        EXPECT_EQ(j.at("rule"), "coupon_stock");
    }
}

// Lines reach the file while the log stays open (the writer lingers to batch them, it does not
// keep them until shutdown): one line alone, then a burst of more than one batch. Bounded waits
// only, no timing assertion; the batches are counted and never more than the lines.
TEST(audit_log, lines_reach_the_file_while_the_log_stays_open) {
    const auto path = temp_file("open.jsonl");
    audit_log log(path.string());
    auto wait_lines = [&](std::size_t n) {
        for (int i = 0; i < 1000 && read_lines(path).size() < n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return read_lines(path).size();
    };
    log.write(event(1, "rewritten"));
    EXPECT_EQ(wait_lines(1), 1u);
    constexpr std::size_t burst = 2000;  // about 200 bytes each: several batch_wake_bytes
    for (std::size_t i = 0; i < burst; ++i) log.write(event(2, "exhausted"));
    EXPECT_EQ(wait_lines(1 + burst), 1 + burst);
    EXPECT_EQ(log.dropped(), 0u);
    EXPECT_GE(log.batches(), 2u);
    EXPECT_LE(log.batches(), 1 + burst);
}

TEST(audit_log, appends_to_an_existing_file) {
    const auto path = temp_file("append.jsonl");
    { std::ofstream(path) << "{\"earlier\":1}\n"; }
    {
        audit_log log(path.string());
        log.write(event(1, "exhausted"));
    }
    auto lines = read_lines(path);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].at("earlier"), 1);
    EXPECT_EQ(lines[1].at("action"), "exhausted");
}

TEST(audit_log, off_writes_nothing_and_a_bad_path_is_an_error) {
    audit_log off("off");
    EXPECT_FALSE(off.enabled());
    off.write(event(1, "rewritten"));  // no effect, no crash
    EXPECT_THROW(audit_log("/nonexistent-dir/claimguard/audit.jsonl"), std::runtime_error);
}

// A pipe nobody reads: the writer thread blocks once the pipe is full, the queue fills up to
// its limit, and then write() drops lines (counted) instead of blocking the caller.
TEST(audit_log, a_stuck_reader_makes_it_drop_and_count_never_block) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    constexpr std::size_t limit = 16 * 1024;
    std::atomic<std::uint64_t> reported{0};
    std::uint64_t accepted = 0;
    std::string received;
    std::optional<audit_log> log;
    log.emplace("/proc/self/fd/" + std::to_string(fds[1]), limit, [&reported] { ++reported; });
    ASSERT_TRUE(log->enabled());
    // The pipe holds 64 KiB, the queue 16 KiB, a line about 200 bytes: 2,000 lines overflow both.
    for (int i = 0; i < 2000; ++i) {
        auto before = log->dropped();
        log->write(event(static_cast<std::uint64_t>(i), "rewritten"));
        if (log->dropped() == before) ++accepted;
    }
    EXPECT_GT(log->dropped(), 0u);
    EXPECT_EQ(reported.load(), log->dropped());
    EXPECT_EQ(accepted + log->dropped(), 2000u);
    // Unblock the writer: read everything while the destructor flushes the queue.
    std::thread reader([&] {
        char buf[4096];
        for (;;) {
            auto n = ::read(fds[0], buf, sizeof buf);
            if (n <= 0) break;
            received.append(buf, static_cast<std::size_t>(n));
        }
    });
    log.reset();      // flushes, then closes the log's own descriptor of the pipe
    ::close(fds[1]);  // the last writer gone: the reader sees the end
    reader.join();
    ::close(fds[0]);
    std::size_t lines = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < received.size(); ++i) {
        if (received[i] != '\n') continue;
        auto j = nlohmann::json::parse(received.substr(start, i - start));  // whole lines only
        EXPECT_EQ(j.at("action"), "rewritten");
        ++lines;
        start = i + 1;
    }
    EXPECT_EQ(start, received.size()) << "a partial line at the end";
    EXPECT_EQ(lines, accepted);
}

TEST(audit_log, digest_ignores_literal_values_but_not_the_shape) {
    auto digest = [](std::string_view sql) { return statement_digest(rules::sql::parse(sql, {})); };
    const auto a = digest("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7");
    EXPECT_EQ(a, digest("update coupon_stock set remain = 5 where campaign_id = 'x'"));
    EXPECT_NE(a, digest("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7 AND remain > 0"));
    EXPECT_EQ(a.size(), 16u);
}

TEST(audit_log, normalized_statement_shows_the_shape_without_values) {
    auto shown = [](std::string_view sql, std::size_t max = max_audit_statement_bytes) {
        return normalized_statement(rules::sql::parse(sql, {}), max);
    };
    EXPECT_EQ(shown("UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 'SALE-7'"),
              "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?");
    EXPECT_EQ(shown("INSERT INTO coupon_order(user_id,campaign_id)\n  VALUES (?, 0x1F) /* from the app */"),
              "INSERT INTO coupon_order(user_id,campaign_id) VALUES (?, ?)");
    EXPECT_EQ(shown("select  remain from `coupon_stock` -- the read\n where campaign_id=-7.5e3"),
              "select remain from `coupon_stock` where campaign_id=-?");
    const auto cut = shown("UPDATE coupon_stock SET remain = 1 WHERE campaign_id = 2", 20);
    EXPECT_EQ(cut, "UPDATE coupon_stock...");
}

TEST(audit_log, a_line_carries_its_context_when_given) {
    auto e = event(3, "rewritten");
    auto bare = nlohmann::json::parse(audit_line(e));
    for (const char* absent : {"statement", "rules_version", "host", "database", "backend_thread"})
        EXPECT_FALSE(bare.contains(absent)) << absent;
    e.statement = "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?";
    e.rules_version = "0e1159df282be433";
    e.host = "api-0";
    e.database = "shop";
    e.backend_thread = 1187;
    auto full = nlohmann::json::parse(audit_line(e));
    EXPECT_EQ(full.at("statement"), e.statement);
    EXPECT_EQ(full.at("rules_version"), "0e1159df282be433");
    EXPECT_EQ(full.at("host"), "api-0");
    EXPECT_EQ(full.at("database"), "shop");
    EXPECT_EQ(full.at("backend_thread"), 1187);
}

// Issue 21 item 6: the answer the client got, added once the command ended (the line is made before).
TEST(audit_log, a_line_carries_the_answer_the_client_got) {
    const auto line = audit_line(event(3, "exhausted"));
    EXPECT_FALSE(nlohmann::json::parse(line).contains("answer"));
    auto ok = nlohmann::json::parse(with_answer(line, 0));
    EXPECT_EQ(ok.at("answer"), "ok");
    EXPECT_EQ(ok.at("action"), "exhausted") << "the rest of the line as it was";
    EXPECT_EQ(nlohmann::json::parse(with_answer(line, 1644)).at("answer"), 1644);
    const auto path = temp_file("answer.jsonl");
    {
        audit_log log(path.string());
        log.write_line(with_answer(line, 1205));
    }
    const auto lines = read_lines(path);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].at("answer"), 1205);
}

TEST(audit_log, reopen_starts_a_new_file_after_logrotate_moved_the_old_one) {
    const auto path = temp_file("rotate.jsonl");
    const auto rotated = fs::path(path.string() + ".1");
    fs::remove(rotated);
    {
        audit_log log(path.string());
        EXPECT_FALSE(log.host().empty());
        log.write(event(1, "rewritten"));
        // Wait for the line to reach the file before moving it, as logrotate finds it.
        for (int i = 0; i < 500 && read_lines(path).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        fs::rename(path, rotated);
        log.write(event(2, "rewritten"));  // may reach the old file (it is still open) or the new one
        log.reopen();
        for (int i = 0; i < 500 && !fs::exists(path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        log.write(event(3, "exhausted"));
    }
    const auto old_lines = read_lines(rotated);
    const auto new_lines = read_lines(path);
    ASSERT_GE(old_lines.size(), 1u);
    ASSERT_GE(new_lines.size(), 1u);
    EXPECT_EQ(old_lines.front().at("session"), 1);
    EXPECT_EQ(new_lines.back().at("session"), 3);
    EXPECT_EQ(old_lines.size() + new_lines.size(), 3u);  // nothing lost, nothing twice
}

}  // namespace
}  // namespace claimguard::session
