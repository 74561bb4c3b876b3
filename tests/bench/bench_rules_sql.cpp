// Google Benchmark: the pre-filter on irrelevant statements and the incident's full recognition.
#include <benchmark/benchmark.h>

#include "proxy/engine/unlisted_watch.hpp"
#include "proxy/session/audit_log.hpp"
#include "proxy/session/statement_digests.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/parser.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace {

using namespace claimguard::rules;

const rule_set& rules() {
    static const rule_set r = match::test::make_rules();
    return r;
}

const match::rule_index& index() {
    static const match::rule_index i(rules());
    return i;
}

constexpr std::string_view incident = "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7";

void prefilter(benchmark::State& state, std::string_view sql) {
    const auto& f = index().filter();
    for (auto _ : state) {
        auto v = f.classify(sql);
        benchmark::DoNotOptimize(v);
    }
}

BENCHMARK_CAPTURE(prefilter, irrelevant_select, std::string_view("SELECT id, name, email FROM users WHERE id = 42"));
BENCHMARK_CAPTURE(prefilter, irrelevant_update,
                  std::string_view("UPDATE users SET last_login = NOW(), login_count = login_count + 1 WHERE id = 42"));
BENCHMARK_CAPTURE(prefilter, irrelevant_insert_200b,
                  std::string_view("INSERT INTO audit_log (user_id, action, detail, created_at) VALUES (42, 'login', "
                                   "'{\"ip\":\"10.0.0.1\",\"agent\":\"Mozilla/5.0 (X11; Linux x86_64)\"}', NOW())"));
BENCHMARK_CAPTURE(prefilter, irrelevant_show, std::string_view("SHOW WARNINGS"));
BENCHMARK_CAPTURE(prefilter, session_commit, std::string_view("COMMIT"));
BENCHMARK_CAPTURE(prefilter, candidate_incident, incident);

// What the session does with a statement the pre-filter lets through untouched, with
// watch_unlisted_tables off (0: the setting's test only) and on (N): the first-word screen, and for
// SELECT / UPDATE / INSERT the parse, the watcher and, for a shape it files, the /digests record.
// One connection's flow of the incident on tables no rule names, statement by statement.
void relay_decision(benchmark::State& state, std::string_view sql, std::size_t watch_tables) {
    const auto& f = index().filter();
    claimguard::engine::unlisted_watch watch;
    claimguard::session::statement_digests digests;
    (void)watch.observe(sql::parse("SELECT remain FROM stock2 WHERE id = 1", {}), "shop");  // read before
    for (auto _ : state) {
        if (f.classify(sql) != sql::prefilter_verdict::irrelevant) continue;
        if (watch_tables == 0 || !claimguard::engine::may_watch(sql)) continue;
        const auto st = sql::parse(sql, {});
        if (auto shape = watch.observe(st, "shop"))
            digests.record_unlisted(shape->table, claimguard::session::statement_digest(st),
                                    claimguard::session::normalized_statement(st), shape->action, shape->notes,
                                    watch_tables);
    }
}
constexpr std::string_view unlisted_read = "SELECT remain FROM stock2 WHERE id = 7";
constexpr std::string_view unlisted_take = "UPDATE stock2 SET remain = 99 WHERE id = 7";
constexpr std::string_view other_statement = "SHOW WARNINGS";
BENCHMARK_CAPTURE(relay_decision, off_select, unlisted_read, 0);
BENCHMARK_CAPTURE(relay_decision, off_update, unlisted_take, 0);
BENCHMARK_CAPTURE(relay_decision, off_show, other_statement, 0);
BENCHMARK_CAPTURE(relay_decision, on_select, unlisted_read, 16);
BENCHMARK_CAPTURE(relay_decision, on_update_filed, unlisted_take, 16);
BENCHMARK_CAPTURE(relay_decision, on_show, other_statement, 16);

void parse_only(benchmark::State& state) {
    for (auto _ : state) {
        auto st = sql::parse(incident, {});
        benchmark::DoNotOptimize(st);
    }
}
BENCHMARK(parse_only);

void parse_match_rewrite(benchmark::State& state) {
    for (auto _ : state) {
        const auto st = sql::parse(incident, {});
        const auto m = match::match(st, index());
        const auto& w = std::get<match::counter_write>(m.facts.front());
        auto out = match::rewrite_write(st, w, 1);
        benchmark::DoNotOptimize(out);
    }
}
BENCHMARK(parse_match_rewrite);

void prefilter_parse_match_rewrite(benchmark::State& state) {
    for (auto _ : state) {
        if (index().filter().classify(incident) == sql::prefilter_verdict::irrelevant) continue;
        const auto st = sql::parse(incident, {});
        const auto m = match::match(st, index());
        const auto& w = std::get<match::counter_write>(m.facts.front());
        auto out = match::rewrite_write(st, w, 1);
        benchmark::DoNotOptimize(out);
    }
}
BENCHMARK(prefilter_parse_match_rewrite);

void not_ours_join(benchmark::State& state) {
    constexpr std::string_view sql =
        "SELECT s.remain, c.name FROM coupon_stock s JOIN campaign c ON c.id = s.campaign_id WHERE c.active = 1";
    for (auto _ : state) {
        const auto st = sql::parse(sql, {});
        auto m = match::match(st, index());
        benchmark::DoNotOptimize(m);
    }
}
BENCHMARK(not_ours_join);

void claim_insert(benchmark::State& state) {
    constexpr std::string_view sql =
        "INSERT INTO coupon_order (user_id, campaign_id, request_id, created_at) VALUES (42, 7, 'r-8f2c', NOW())";
    for (auto _ : state) {
        const auto st = sql::parse(sql, {});
        auto m = match::match(st, index());
        benchmark::DoNotOptimize(m);
    }
}
BENCHMARK(claim_insert);

}  // namespace
