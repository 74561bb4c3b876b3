// Tests of the proxy's metric families: names, labels and the lock-free accessors.
#include "proxy/admin/metrics.hpp"

#include "proxy/protocol/command.hpp"

#include <gtest/gtest.h>

#include <string>

namespace claimguard::admin {
namespace {

bool has_line(const std::string& text, const std::string& line) {
    return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(proxy_metrics, commands_uses_one_child_per_command_name) {
    registry r;
    proxy_metrics m(r);
    auto& family = r.counter_family("claimguard_commands_total", "", {"command"});
    for (int c = 0; c < 256; ++c) {
        const auto byte = static_cast<std::uint8_t>(c);
        EXPECT_EQ(&m.commands(byte), &family.with(protocol::command_name(byte))) << "command byte " << c;
    }
    m.commands(protocol::com::query).inc(3);
    m.commands(protocol::com::stmt_execute).inc();
    m.commands(0x13).inc();  // table_dump has no name: "other"
    m.commands(0xEE).inc();  // unknown byte: "other"
    const std::string text = r.render();
    EXPECT_TRUE(has_line(text, "claimguard_commands_total{command=\"query\"} 3")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_commands_total{command=\"stmt_execute\"} 1")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_commands_total{command=\"other\"} 2")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_commands_total{command=\"ping\"} 0")) << text;
}

struct labeled_case {
    const char* name;
    counter& (*get)(proxy_metrics&, std::string_view);
    const char* value;
    const char* line;  // the sample line after one inc()
};

class proxy_metrics_labeled : public testing::TestWithParam<labeled_case> {};

TEST_P(proxy_metrics_labeled, accessor_increments_the_named_series) {
    registry r;
    proxy_metrics m(r);
    counter& c = GetParam().get(m, GetParam().value);
    EXPECT_EQ(&c, &GetParam().get(m, GetParam().value));  // stable: callers may cache it
    c.inc();
    const std::string text = r.render();
    EXPECT_TRUE(has_line(text, GetParam().line)) << text;
}

counter& refused(proxy_metrics& m, std::string_view v) { return m.connections_refused(v); }
counter& backend(proxy_metrics& m, std::string_view v) { return m.backend_errors(v); }
counter& client(proxy_metrics& m, std::string_view v) { return m.client_errors(v); }
counter& orphan(proxy_metrics& m, std::string_view v) { return m.orphans(v); }
counter& linger(proxy_metrics& m, std::string_view v) { return m.client_lingers(v); }

INSTANTIATE_TEST_SUITE_P(
    cases, proxy_metrics_labeled,
    testing::Values(
        labeled_case{"refused_max_connections", refused, "max_connections",
                     "claimguard_connections_refused_total{reason=\"max_connections\"} 1"},
        labeled_case{"refused_new_reason", refused, "shutting_down",
                     "claimguard_connections_refused_total{reason=\"shutting_down\"} 1"},
        labeled_case{"backend_connect", backend, "connect", "claimguard_backend_errors_total{kind=\"connect\"} 1"},
        labeled_case{"backend_closed", backend, "closed", "claimguard_backend_errors_total{kind=\"closed\"} 1"},
        labeled_case{"backend_tls", backend, "tls", "claimguard_backend_errors_total{kind=\"tls\"} 1"},
        labeled_case{"backend_new_kind", backend, "dns", "claimguard_backend_errors_total{kind=\"dns\"} 1"},
        labeled_case{"client_too_large", client, "packet_too_large",
                     "claimguard_client_errors_total{kind=\"packet_too_large\"} 1"},
        labeled_case{"client_timeout", client, "timeout", "claimguard_client_errors_total{kind=\"timeout\"} 1"},
        labeled_case{"orphan_killed", orphan, "killed", "claimguard_orphans_total{result=\"killed\"} 1"},
        labeled_case{"orphan_expired", orphan, "expired", "claimguard_orphans_total{result=\"expired\"} 1"},
        labeled_case{"linger_timeout", linger, "timeout", "claimguard_client_lingers_total{end=\"timeout\"} 1"},
        labeled_case{"linger_full", linger, "full", "claimguard_client_lingers_total{end=\"full\"} 1"}),
    [](const testing::TestParamInfo<labeled_case>& info) { return std::string(info.param.name); });

TEST(proxy_metrics, known_kinds_render_zero_before_first_use) {
    registry r;
    proxy_metrics m(r);
    const std::string text = r.render();
    for (const std::string_view kind : backend_error_kinds)
        EXPECT_TRUE(has_line(text, "claimguard_backend_errors_total{kind=\"" + std::string(kind) + "\"} 0")) << kind;
    for (const std::string_view kind : client_error_kinds)
        EXPECT_TRUE(has_line(text, "claimguard_client_errors_total{kind=\"" + std::string(kind) + "\"} 0")) << kind;
    EXPECT_TRUE(has_line(text, "claimguard_connections_refused_total{reason=\"max_connections\"} 0")) << text;
    for (const std::string_view result : orphan_results)
        EXPECT_TRUE(has_line(text, "claimguard_orphans_total{result=\"" + std::string(result) + "\"} 0")) << result;
    EXPECT_TRUE(has_line(text, "claimguard_orphans_pending 0")) << text;
    for (const std::string_view end : linger_ends)
        EXPECT_TRUE(has_line(text, "claimguard_client_lingers_total{end=\"" + std::string(end) + "\"} 0")) << end;
    EXPECT_TRUE(has_line(text, "claimguard_client_lingering 0")) << text;
}

TEST(proxy_metrics, unlabeled_series_and_build_info) {
    registry r;
    proxy_metrics m(r);
    m.client_connections.inc();
    m.client_connections.inc();
    m.client_connections.dec();
    m.client_connections_accepted.inc(2);
    m.backend_connections.inc();
    m.max_connections.set(1024);
    m.bytes_client_to_backend.inc(100);
    m.bytes_backend_to_client.inc(2048);
    m.command_duration.observe(0.0003);  // between the 0.00025 and 0.0005 bounds
    const std::string text = r.render();
    EXPECT_TRUE(has_line(text, "# TYPE claimguard_client_connections gauge")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_client_connections 1")) << text;
    // Issue 22: no counter whose OpenMetrics family name (without _total) is the gauge's.
    EXPECT_EQ(text.find("claimguard_client_connections_total"), std::string::npos) << text;
    EXPECT_TRUE(has_line(text, "# TYPE claimguard_client_connections_accepted_total counter")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_client_connections_accepted_total 2")) << text;
    EXPECT_TRUE(has_line(text, "# TYPE claimguard_backend_connections gauge")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_backend_connections 1")) << text;
    EXPECT_TRUE(has_line(text, "# TYPE claimguard_max_connections gauge")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_max_connections 1024")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_bytes_total{direction=\"client_to_backend\"} 100")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_bytes_total{direction=\"backend_to_client\"} 2048")) << text;
    EXPECT_TRUE(has_line(text, "# TYPE claimguard_command_duration_seconds histogram")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_command_duration_seconds_bucket{le=\"0.00025\"} 0")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_command_duration_seconds_bucket{le=\"0.0005\"} 1")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_command_duration_seconds_bucket{le=\"10\"} 1")) << text;
    EXPECT_TRUE(has_line(text, "claimguard_command_duration_seconds_count 1")) << text;
    EXPECT_TRUE(has_line(text, std::string("claimguard_build_info{version=\"") + CLAIMGUARD_VERSION + "\"} 1")) << text;
    EXPECT_GT(m.process_start_time_seconds.value(), 0);
}

TEST(proxy_metrics, duration_buckets_increase_from_50us_to_10s) {
    EXPECT_DOUBLE_EQ(command_duration_buckets.front(), 50e-6);
    EXPECT_DOUBLE_EQ(command_duration_buckets.back(), 10.0);
    for (std::size_t i = 1; i < command_duration_buckets.size(); ++i) {
        const double step = command_duration_buckets[i] / command_duration_buckets[i - 1];
        EXPECT_GE(step, 2.0 - 1e-9) << i;
        EXPECT_LE(step, 2.5 + 1e-9) << i;
    }
}

TEST(proxy_metrics, process_wide_instance_lives_in_the_default_registry) {
    proxy_metrics& m = metrics();
    EXPECT_EQ(&m, &metrics());
    m.client_errors("io").inc();
    const std::string text = default_registry().render();
    EXPECT_NE(text.find("claimguard_client_errors_total{kind=\"io\"} "), std::string::npos);
    EXPECT_NE(text.find("claimguard_process_start_time_seconds "), std::string::npos);
}

// The process_* series of the Prometheus client libraries, read from /proc at each render.
TEST(proxy_metrics, process_metrics_from_proc) {
    registry r;
    proxy_metrics m(r);
    const std::string text = r.render();
    const auto value = [&](const std::string& name) {
        const auto at = text.find("\n" + name + " ");
        if (at == std::string::npos) return -1.0;
        return std::stod(text.substr(at + name.size() + 2));
    };
    for (const char* type : {"# TYPE process_cpu_seconds_total counter", "# TYPE process_resident_memory_bytes gauge",
                             "# TYPE process_open_fds gauge", "# TYPE process_start_time_seconds gauge"})
        EXPECT_TRUE(has_line(text, type)) << type << "\n" << text;
    EXPECT_GE(value("process_cpu_seconds_total"), 0.0);
    EXPECT_GT(value("process_resident_memory_bytes"), 1024.0 * 1024);  // a test binary holds more than 1 MiB
    EXPECT_GT(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
    EXPECT_GE(value("process_open_fds"), 3.0);  // stdin, stdout, stderr at least
    EXPECT_GE(value("process_max_fds"), value("process_open_fds"));
    // Within a minute of the start time the proxy records itself (both count from the epoch).
    const auto own = static_cast<double>(m.process_start_time_seconds.value());
    EXPECT_NEAR(value("process_start_time_seconds"), own, 60.0);
}

TEST(registry, clear_drops_children_of_an_info_family) {
    registry r;
    auto& info = r.gauge_family("x_info", "x", {"version"});
    info.with("a").set(1);
    info.clear();
    info.with("b").set(1);
    const std::string text = r.render();
    EXPECT_EQ(text.find("version=\"a\""), std::string::npos) << text;
    EXPECT_TRUE(has_line(text, "x_info{version=\"b\"} 1")) << text;
}

}  // namespace
}  // namespace claimguard::admin
