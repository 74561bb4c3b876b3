// The proxy's own metric families (connections, commands, bytes, errors, latency, build info).
#include "proxy/admin/metrics.hpp"

#include "proxy/protocol/command.hpp"

#include <chrono>

#ifndef CLAIMGUARD_VERSION
#error "CLAIMGUARD_VERSION must be defined by the build (project version)"
#endif

namespace claimguard::admin {

namespace {

family<counter>& bytes_family(registry& r) {
    return r.counter_family("claimguard_bytes_total", "Bytes relayed between clients and the backend.",
                            {"direction"});
}

gauge& build_info_gauge(registry& r) {
    gauge& g = r.gauge_family("claimguard_build_info", "Build information; the value is always 1.", {"version"})
                   .with(CLAIMGUARD_VERSION);
    g.set(1);
    return g;
}

gauge& start_time_gauge(registry& r) {
    gauge& g = r.add_gauge("claimguard_process_start_time_seconds",
                           "Start time of the process since the unix epoch, in seconds.");
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    g.set(std::chrono::duration_cast<std::chrono::seconds>(now).count());
    return g;
}

}  // namespace

template <std::size_t N>
counter& proxy_metrics::known_children<N>::get(std::span<const std::string_view, N> known, std::string_view value) {
    for (std::size_t i = 0; i < N; ++i)
        if (known[i] == value)
            return *children[i];
    return fam->with(value);
}

proxy_metrics::proxy_metrics(registry& r)
    : client_connections(r.add_gauge("claimguard_client_connections", "Client connections currently open.")),
      // Not claimguard_client_connections_total: in OpenMetrics that counter's family name would be
      // claimguard_client_connections, the gauge's.
      client_connections_accepted(
          r.add_counter("claimguard_client_connections_accepted_total", "Client connections accepted since start.")),
      backend_connections(r.add_gauge("claimguard_backend_connections",
                                      "Connections to the database open now (sessions' and claimguard's own).")),
      max_connections(r.add_gauge("claimguard_max_connections",
                                  "The max_connections setting: client connections beyond it get ERR 1040.")),
      bytes_client_to_backend(bytes_family(r).with("client_to_backend")),
      bytes_backend_to_client(bytes_family(r).with("backend_to_client")),
      command_duration(r.add_histogram("claimguard_command_duration_seconds",
                                       "Time from a client command to the end of its answer, in seconds.",
                                       command_duration_buckets)),
      build_info(build_info_gauge(r)),
      process_start_time_seconds(start_time_gauge(r)),
      orphans_pending(r.add_gauge("claimguard_orphans_pending",
                                  "Backend transactions orphaned by a lost link, waiting for KILL CONNECTION.")),
      client_lingering(r.add_gauge("claimguard_client_lingering",
                                   "Client sessions in their lingering close after a protocol error's ERR.")) {
    auto& refused = r.counter_family("claimguard_connections_refused_total",
                                     "Client connections refused by the proxy, by reason.", {"reason"});
    auto& commands = r.counter_family("claimguard_commands_total", "Client commands received, by command.",
                                      {"command"});
    auto& backend = r.counter_family("claimguard_backend_errors_total",
                                     "Errors on backend (MySQL) connections, by kind.", {"kind"});
    auto& client = r.counter_family("claimguard_client_errors_total", "Errors on client connections, by kind.",
                                    {"kind"});

    // Bytes without a name share the "other" child: 256 slots, about 25 distinct counters.
    for (std::size_t c = 0; c < commands_.size(); ++c)
        commands_[c] = &commands.with(protocol::command_name(static_cast<std::uint8_t>(c)));

    const auto fill = [](auto& cache, family<counter>& fam, const auto& known) {
        cache.fam = &fam;
        for (std::size_t i = 0; i < known.size(); ++i)
            cache.children[i] = &fam.with(known[i]);
    };
    fill(refused_, refused, refuse_reasons);
    fill(backend_errors_, backend, backend_error_kinds);
    fill(client_errors_, client, client_error_kinds);
    fill(orphans_,
         r.counter_family("claimguard_orphans_total",
                          "Backend transactions orphaned by a lost link (the server kept them open), by what became "
                          "of them: killed, gone, failed, expired, dropped.",
                          {"result"}),
         orphan_results);
    fill(lingers_,
         r.counter_family("claimguard_client_lingers_total",
                          "Lingering closes after a client protocol error's ERR, by how they ended: eof, timeout, "
                          "bytes, error, drain, full (closed at once).",
                          {"end"}),
         linger_ends);
    add_process_collector(r);
}

counter& proxy_metrics::connections_refused(std::string_view reason) {
    return refused_.get(refuse_reasons, reason);
}

counter& proxy_metrics::backend_errors(std::string_view kind) {
    return backend_errors_.get(backend_error_kinds, kind);
}

counter& proxy_metrics::client_errors(std::string_view kind) {
    return client_errors_.get(client_error_kinds, kind);
}

counter& proxy_metrics::orphans(std::string_view result) { return orphans_.get(orphan_results, result); }

counter& proxy_metrics::client_lingers(std::string_view end) { return lingers_.get(linger_ends, end); }

proxy_metrics& metrics() {
    static proxy_metrics m(default_registry());
    return m;
}

}  // namespace claimguard::admin
