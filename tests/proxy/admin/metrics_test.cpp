// Tests of the Prometheus registry: exact text rendering, label escaping, validation, concurrency.
#include "proxy/admin/metrics.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace claimguard::admin {
namespace {

TEST(metrics_render, empty_registry_renders_nothing) {
    registry r;
    EXPECT_EQ(r.render(), "");
}

TEST(metrics_render, unlabeled_counter) {
    registry r;
    counter& c = r.add_counter("requests_total", "Requests served.");
    c.inc();
    c.inc(41);
    EXPECT_EQ(c.value(), 42u);
    EXPECT_EQ(r.render(),
              "# HELP requests_total Requests served.\n"
              "# TYPE requests_total counter\n"
              "requests_total 42\n");
}

TEST(metrics_render, gauge_goes_up_down_and_negative) {
    registry r;
    gauge& g = r.add_gauge("open_things", "Things open now.");
    g.inc(5);
    g.dec(2);
    EXPECT_EQ(g.value(), 3);
    g.set(-7);
    EXPECT_EQ(r.render(),
              "# HELP open_things Things open now.\n"
              "# TYPE open_things gauge\n"
              "open_things -7\n");
}

TEST(metrics_render, histogram_buckets_are_cumulative_and_le_is_inclusive) {
    registry r;
    const std::array<double, 2> bounds{0.5, 1.0};
    histogram& h = r.add_histogram("latency_seconds", "Latency.", bounds);
    // 0.25 and 0.5 (on the bound) in le=0.5; 0.75 in le=1; 4 only in +Inf. Sum is exact in binary.
    for (const double v : {0.25, 0.5, 0.75, 4.0})
        h.observe(v);
    EXPECT_EQ(r.render(),
              "# HELP latency_seconds Latency.\n"
              "# TYPE latency_seconds histogram\n"
              "latency_seconds_bucket{le=\"0.5\"} 2\n"
              "latency_seconds_bucket{le=\"1\"} 3\n"
              "latency_seconds_bucket{le=\"+Inf\"} 4\n"
              "latency_seconds_sum 5.5\n"
              "latency_seconds_count 4\n");
}

TEST(metrics_render, histogram_observes_durations_in_seconds) {
    registry r;
    const std::array<double, 1> bounds{0.001};
    histogram& h = r.add_histogram("d_seconds", "D.", bounds);
    h.observe(std::chrono::microseconds(500));
    h.observe(std::chrono::milliseconds(2));
    const histogram::snapshot s = h.collect();
    EXPECT_EQ(s.cumulative, (std::vector<std::uint64_t>{1, 2}));
    EXPECT_EQ(s.count, 2u);
    EXPECT_DOUBLE_EQ(s.sum, 0.0025);
}

TEST(metrics_render, labeled_histogram_puts_le_last) {
    registry r;
    const std::array<double, 1> bounds{0.00005};
    auto& f = r.histogram_family("cmd_seconds", "Per command.", {"command"}, bounds);
    f.with("query").observe(0.00005);
    EXPECT_EQ(r.render(),
              "# HELP cmd_seconds Per command.\n"
              "# TYPE cmd_seconds histogram\n"
              "cmd_seconds_bucket{command=\"query\",le=\"5e-05\"} 1\n"
              "cmd_seconds_bucket{command=\"query\",le=\"+Inf\"} 1\n"
              "cmd_seconds_sum{command=\"query\"} 5e-05\n"
              "cmd_seconds_count{command=\"query\"} 1\n");
}

TEST(metrics_render, children_sorted_by_label_values_and_families_in_registration_order) {
    registry r;
    auto& errors = r.counter_family("errors_total", "Errors.", {"kind", "side"});
    r.add_gauge("a_gauge", "Registered second, rendered second.").set(1);
    errors.with("timeout", "client").inc(2);
    errors.with("io", "backend").inc();
    errors.with("io", "client").inc(3);
    EXPECT_EQ(r.render(),
              "# HELP errors_total Errors.\n"
              "# TYPE errors_total counter\n"
              "errors_total{kind=\"io\",side=\"backend\"} 1\n"
              "errors_total{kind=\"io\",side=\"client\"} 3\n"
              "errors_total{kind=\"timeout\",side=\"client\"} 2\n"
              "# HELP a_gauge Registered second, rendered second.\n"
              "# TYPE a_gauge gauge\n"
              "a_gauge 1\n");
}

TEST(metrics_render, family_without_children_is_not_rendered) {
    registry r;
    r.counter_family("rule_hits_total", "Hits per rule.", {"rule"});
    EXPECT_EQ(r.render(), "");
}

struct escape_case {
    const char* name;
    std::string raw;
    std::string rendered;
};

class label_escaping : public testing::TestWithParam<escape_case> {};

TEST_P(label_escaping, renders_escaped_value) {
    registry r;
    r.counter_family("x_total", "X.", {"v"}).with(GetParam().raw).inc();
    EXPECT_EQ(r.render(), "# HELP x_total X.\n# TYPE x_total counter\nx_total{v=\"" + GetParam().rendered + "\"} 1\n");
}

INSTANTIATE_TEST_SUITE_P(
    cases, label_escaping,
    testing::Values(escape_case{"plain", "coupon_stock", "coupon_stock"},
                    escape_case{"backslash", "a\\b", "a\\\\b"},
                    escape_case{"double_quote", "say \"hi\"", "say \\\"hi\\\""},
                    escape_case{"newline", "two\nlines", "two\\nlines"},
                    escape_case{"all_three", "\\\"\n", "\\\\\\\"\\n"},
                    escape_case{"utf8_kept", "caf\xc3\xa9", "caf\xc3\xa9"},
                    escape_case{"empty", "", ""}),
    [](const testing::TestParamInfo<escape_case>& info) { return std::string(info.param.name); });

TEST(metrics_render, help_escapes_backslash_and_newline_but_not_quotes) {
    registry r;
    r.add_counter("h_total", "a \\ b\nc \"d\"").inc();
    EXPECT_EQ(r.render(), "# HELP h_total a \\\\ b\\nc \"d\"\n# TYPE h_total counter\nh_total 1\n");
}

struct non_finite_case {
    const char* name;
    double value;
    const char* rendered;
};

class metrics_non_finite : public testing::TestWithParam<non_finite_case> {};

TEST_P(metrics_non_finite, counts_in_inf_bucket_and_uses_the_format_spelling) {
    registry r;
    const std::array<double, 1> bounds{1.0};
    r.add_histogram("n_seconds", "N.", bounds).observe(GetParam().value);
    EXPECT_EQ(r.render(), std::string("# HELP n_seconds N.\n# TYPE n_seconds histogram\n"
                                      "n_seconds_bucket{le=\"1\"} 0\n"
                                      "n_seconds_bucket{le=\"+Inf\"} 1\n"
                                      "n_seconds_sum ") +
                              GetParam().rendered + "\nn_seconds_count 1\n");
}

INSTANTIATE_TEST_SUITE_P(cases, metrics_non_finite,
                         testing::Values(non_finite_case{"positive_infinity", INFINITY, "+Inf"},
                                         non_finite_case{"nan", NAN, "NaN"}),
                         [](const testing::TestParamInfo<non_finite_case>& info) {
                             return std::string(info.param.name);
                         });

TEST(metrics_registry, same_definition_returns_the_same_family) {
    registry r;
    auto& a = r.counter_family("same_total", "First help.", {"rule"});
    auto& b = r.counter_family("same_total", "Second help is ignored.", {"rule"});
    EXPECT_EQ(&a, &b);
    EXPECT_EQ(&a.with("r1"), &b.with("r1"));
    EXPECT_NE(&a.with("r1"), &a.with("r2"));
}

struct bad_registration {
    const char* name;
    void (*register_it)(registry&);
};

class metrics_registry_rejects : public testing::TestWithParam<bad_registration> {};

TEST_P(metrics_registry_rejects, with_invalid_argument) {
    registry r;
    r.counter_family("taken_total", "Taken.", {"rule"});
    EXPECT_THROW(GetParam().register_it(r), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(
    cases, metrics_registry_rejects,
    testing::Values(
        bad_registration{"empty_name", [](registry& r) { r.add_counter("", "H."); }},
        bad_registration{"name_starting_with_digit", [](registry& r) { r.add_counter("1abc", "H."); }},
        bad_registration{"name_with_dash", [](registry& r) { r.add_counter("a-b", "H."); }},
        bad_registration{"label_with_colon", [](registry& r) { r.counter_family("ok_total", "H.", {"a:b"}); }},
        bad_registration{"reserved_label_prefix", [](registry& r) { r.counter_family("ok_total", "H.", {"__x"}); }},
        bad_registration{"le_label", [](registry& r) { r.counter_family("ok_total", "H.", {"le"}); }},
        bad_registration{"duplicate_label", [](registry& r) { r.counter_family("ok_total", "H.", {"a", "a"}); }},
        bad_registration{"same_name_other_type", [](registry& r) { r.gauge_family("taken_total", "H.", {"rule"}); }},
        bad_registration{"same_name_other_labels",
                         [](registry& r) { r.counter_family("taken_total", "H.", {"kind"}); }},
        bad_registration{"wrong_label_count",
                         [](registry& r) { r.counter_family("taken_total", "H.", {"rule"}).with("a", "b"); }},
        bad_registration{"unsorted_bounds",
                         [](registry& r) {
                             const std::array<double, 2> b{1.0, 0.5};
                             r.add_histogram("h_seconds", "H.", b);
                         }},
        bad_registration{"infinite_bound",
                         [](registry& r) {
                             const std::array<double, 1> b{INFINITY};
                             r.add_histogram("h_seconds", "H.", b);
                         }}),
    [](const testing::TestParamInfo<bad_registration>& info) { return std::string(info.param.name); });

TEST(metrics_concurrency, increments_from_threads_sum_exactly) {
    constexpr int threads = 4;
    constexpr int per_thread = 100000;
    registry r;
    counter& c = r.add_counter("c_total", "C.");
    gauge& g = r.add_gauge("g", "G.");
    const std::array<double, 1> bounds{1.0};
    histogram& h = r.add_histogram("h_seconds", "H.", bounds);
    auto& fam = r.counter_family("f_total", "F.", {"t"});

    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            counter& mine = fam.with(t % 2 == 0 ? "even" : "odd");  // concurrent first use of a child
            for (int i = 0; i < per_thread; ++i) {
                c.inc();
                g.inc(2);
                g.dec();
                h.observe(i % 2 == 0 ? 0.5 : 2.0);
                mine.inc();
            }
        });
    }
    for (auto& w : workers)
        w.join();

    const std::uint64_t total = std::uint64_t{threads} * per_thread;
    EXPECT_EQ(c.value(), total);
    EXPECT_EQ(g.value(), static_cast<std::int64_t>(total));
    const histogram::snapshot s = h.collect();
    EXPECT_EQ(s.count, total);
    EXPECT_EQ(s.cumulative[0], total / 2);
    EXPECT_DOUBLE_EQ(s.sum, 0.5 * static_cast<double>(total / 2) + 2.0 * static_cast<double>(total / 2));
    EXPECT_EQ(fam.with("even").value() + fam.with("odd").value(), total);
    EXPECT_EQ(fam.with("even").value(), total / 2);
}

}  // namespace
}  // namespace claimguard::admin
