// Prometheus metrics: lock-free counters, gauges and histograms, labeled families, text format 0.0.4.
#pragma once

// Kept light on purpose (no Asio): the session hot path includes this header.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace claimguard::admin {

// Content type of the text exposition format rendered by registry::render().
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

// A monotonically increasing count. inc() is one relaxed atomic add.
class counter {
public:
    void inc(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
    [[nodiscard]] std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down (connections, timestamps in seconds). Integer valued.
class gauge {
public:
    void inc(std::int64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
    void dec(std::int64_t n = 1) noexcept { value_.fetch_sub(n, std::memory_order_relaxed); }
    void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
    [[nodiscard]] std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::int64_t> value_{0};
};

// Observations counted into fixed buckets; rendered cumulative with _sum and _count.
class histogram {
public:
    // upper_bounds: finite, strictly increasing (throws std::invalid_argument otherwise).
    // The +Inf bucket is implicit.
    explicit histogram(std::span<const double> upper_bounds);

    // A value equal to a bound falls into that bound's bucket (Prometheus "le").
    void observe(double value) noexcept;

    template <class Rep, class Period>
    void observe(std::chrono::duration<Rep, Period> d) noexcept {
        observe(std::chrono::duration<double>(d).count());
    }

    struct snapshot {
        std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf (== count)
        double sum = 0;
        std::uint64_t count = 0;
    };
    [[nodiscard]] snapshot collect() const;
    [[nodiscard]] std::span<const double> upper_bounds() const noexcept { return bounds_; }

private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
    std::atomic<double> sum_{0};
};

enum class metric_type { counter, gauge, histogram };

// The name, help and label names shared by all children of a family.
class family_base {
public:
    family_base(metric_type type, std::string name, std::string help, std::vector<std::string> label_names,
                std::vector<double> bounds);
    virtual ~family_base() = default;
    family_base(const family_base&) = delete;
    family_base& operator=(const family_base&) = delete;

    [[nodiscard]] metric_type type() const noexcept { return type_; }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] const std::string& help() const noexcept { return help_; }
    [[nodiscard]] const std::vector<std::string>& label_names() const noexcept { return label_names_; }
    [[nodiscard]] const std::vector<double>& bounds() const noexcept { return bounds_; }

    // Appends HELP, TYPE and one sample line per child (children sorted by label values).
    // Appends nothing when the family has no child yet.
    virtual void render(std::string& out) const = 0;

private:
    metric_type type_;
    std::string name_;
    std::string help_;
    std::vector<std::string> label_names_;
    std::vector<double> bounds_;  // histograms only
};

// One metric per distinct tuple of label values, created on first use.
template <class Metric>
class family final : public family_base {
public:
    using family_base::family_base;

    // The child for these label values (one per label name, in order). Takes a mutex:
    // callers on a hot path look the child up once and keep the reference (children never move).
    // Throws std::invalid_argument if the number of values differs from the number of labels.
    template <class... Values>
    Metric& with(const Values&... values) {
        const std::array<std::string_view, sizeof...(Values)> v{std::string_view(values)...};
        return with_values(v);
    }
    Metric& with_values(std::span<const std::string_view> values);

    // Drops every child. Only for families whose children nobody keeps a reference to (an info
    // metric whose labels change on reload, e.g. claimguard_rules_info).
    void clear();

    void render(std::string& out) const override;

private:
    mutable std::mutex mutex_;
    std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

extern template class family<counter>;
extern template class family<gauge>;
extern template class family<histogram>;

// All families of a process, rendered in registration order.
class registry {
public:
    registry();
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    // Get-or-create: registering the same name again with the same type, label names (and
    // bounds) returns the existing family, so a rules reload can re-register its metrics.
    // Throws std::invalid_argument on a bad name or a conflicting earlier registration.
    family<counter>& counter_family(std::string_view name, std::string_view help,
                                    std::initializer_list<std::string_view> label_names);
    family<gauge>& gauge_family(std::string_view name, std::string_view help,
                                std::initializer_list<std::string_view> label_names);
    family<histogram>& histogram_family(std::string_view name, std::string_view help,
                                        std::initializer_list<std::string_view> label_names,
                                        std::span<const double> bounds);

    // Unlabeled metrics: a family without labels and its single child.
    counter& add_counter(std::string_view name, std::string_view help);
    gauge& add_gauge(std::string_view name, std::string_view help);
    histogram& add_histogram(std::string_view name, std::string_view help, std::span<const double> bounds);

    // Text appended after the families at each render (HELP, TYPE and samples of metrics read
    // when scraped, e.g. process_* from /proc). Called under the registry's mutex.
    void add_collector(std::function<void(std::string&)> collector);

    // The whole registry in Prometheus text exposition format 0.0.4.
    [[nodiscard]] std::string render() const;

private:
    family_base& add(metric_type type, std::string_view name, std::string_view help,
                     std::initializer_list<std::string_view> label_names, std::span<const double> bounds);

    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<family_base>> families_;
    std::vector<std::function<void(std::string&)>> collectors_;
};

// The standard process metrics of the Prometheus client libraries, read from /proc at each
// render: process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds. Nothing where /proc is absent.
void add_process_collector(registry& r);
// The same text, for tests and other servers.
void render_process_metrics(std::string& out);

// The registry rendered on the admin server's /metrics.
registry& default_registry();

// Command latency buckets, 50 µs to 10 s in x2 / x2.5 steps.
inline constexpr std::array<double, 17> command_duration_buckets{
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0};

// Values of the "kind" / "reason" labels that exist from start-up (rendered as 0 until used).
inline constexpr std::array<std::string_view, 1> refuse_reasons{"max_connections"};
inline constexpr std::array<std::string_view, 6> backend_error_kinds{"connect", "io",     "protocol",
                                                                     "timeout", "closed", "tls"};
inline constexpr std::array<std::string_view, 4> client_error_kinds{"protocol", "timeout", "packet_too_large",
                                                                    "io"};
// What became of a backend transaction orphaned by a lost link (proxy/session/orphans.hpp).
inline constexpr std::array<std::string_view, 5> orphan_results{"killed", "gone", "failed", "expired", "dropped"};
// How a lingering close after a client protocol error ended (proxy/session/linger.hpp).
inline constexpr std::array<std::string_view, 6> linger_ends{"eof", "timeout", "bytes", "error", "drain", "full"};

// The proxy's own metrics. Unlabeled members and commands() are lock-free; the string-keyed
// accessors are lock-free for the kinds listed above and take the family mutex otherwise.
class proxy_metrics {
public:
    // Registers every family in `r` (tests use a fresh registry; the process uses metrics()).
    explicit proxy_metrics(registry& r);

    gauge& client_connections;             // claimguard_client_connections (open now)
    counter& client_connections_accepted;  // claimguard_client_connections_accepted_total
    gauge& backend_connections;            // claimguard_backend_connections (open now)
    gauge& max_connections;                // claimguard_max_connections (the limit; set at start-up)
    counter& bytes_client_to_backend;   // claimguard_bytes_total{direction="client_to_backend"}
    counter& bytes_backend_to_client;   // claimguard_bytes_total{direction="backend_to_client"}
    histogram& command_duration;        // claimguard_command_duration_seconds
    gauge& build_info;                  // claimguard_build_info{version="..."} 1
    gauge& process_start_time_seconds;  // claimguard_process_start_time_seconds (unix time)
    gauge& orphans_pending;             // claimguard_orphans_pending
    gauge& client_lingering;            // claimguard_client_lingering (lingering closes now)

    // claimguard_commands_total{command="query"}: an array lookup, no lock.
    counter& commands(std::uint8_t command) noexcept { return *commands_[command]; }
    // claimguard_connections_refused_total{reason=...}
    counter& connections_refused(std::string_view reason);
    // claimguard_backend_errors_total{kind=...}: connect, io, protocol, timeout, closed, tls
    counter& backend_errors(std::string_view kind);
    // claimguard_client_errors_total{kind=...}: protocol, timeout, packet_too_large, io
    counter& client_errors(std::string_view kind);
    // claimguard_orphans_total{result=...}: killed, gone, failed, expired, dropped
    counter& orphans(std::string_view result);
    // claimguard_client_lingers_total{end=...}: eof, timeout, bytes, error, drain, full
    counter& client_lingers(std::string_view end);

private:
    template <std::size_t N>
    struct known_children {
        family<counter>* fam = nullptr;
        std::array<counter*, N> children{};
        counter& get(std::span<const std::string_view, N> known, std::string_view value);
    };

    std::array<counter*, 256> commands_{};
    known_children<refuse_reasons.size()> refused_;
    known_children<backend_error_kinds.size()> backend_errors_;
    known_children<client_error_kinds.size()> client_errors_;
    known_children<orphan_results.size()> orphans_;
    known_children<linger_ends.size()> lingers_;
};

// The process-wide proxy metrics, registered in default_registry() on first call.
// Call it once at start-up: claimguard_process_start_time_seconds is that moment.
proxy_metrics& metrics();

}  // namespace claimguard::admin
