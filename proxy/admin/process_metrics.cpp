// process_* metrics as the Prometheus client libraries export them, read from /proc at scrape time.
#include "proxy/admin/metrics.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <vector>

namespace claimguard::admin {

namespace {

struct process_stat {
    double cpu_seconds = 0;
    double start_time_seconds = 0;
    double virtual_bytes = 0;
    double resident_bytes = 0;
};

// /proc/stat's btime: the boot time in unix seconds (process start times count from it).
bool boot_time(double& out) {
    std::ifstream in("/proc/stat");
    std::string key;
    while (in >> key) {
        if (key == "btime") return static_cast<bool>(in >> out);
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return false;
}

// /proc/self/stat: fields after the command name (which may hold spaces and parentheses).
bool read_stat(process_stat& s) {
    std::ifstream in("/proc/self/stat");
    std::string line;
    if (!std::getline(in, line)) return false;
    const auto close = line.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream fields(line.substr(close + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    constexpr std::size_t utime = 14 - 3, stime = 15 - 3, starttime = 22 - 3, vsize = 23 - 3, rss = 24 - 3;
    if (f.size() <= rss) return false;
    const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
    double boot = 0;
    if (ticks <= 0 || page <= 0 || !boot_time(boot)) return false;
    s.cpu_seconds = (std::stod(f[utime]) + std::stod(f[stime])) / ticks;
    s.start_time_seconds = boot + std::stod(f[starttime]) / ticks;
    s.virtual_bytes = std::stod(f[vsize]);
    s.resident_bytes = std::stod(f[rss]) * page;
    return true;
}

void append(std::string& out, std::string_view name, std::string_view type, std::string_view help, double value) {
    fmt::format_to(std::back_inserter(out), "# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

void render_process_metrics(std::string& out) {
    process_stat s;
    try {
        if (!read_stat(s)) return;
    } catch (const std::exception&) {
        return;  // a malformed /proc line: no process metrics this scrape
    }
    append(out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
           s.cpu_seconds);
    append(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", s.resident_bytes);
    append(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", s.virtual_bytes);
    std::error_code ec;
    std::size_t fds = 0;
    for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
    if (!ec) append(out, "process_open_fds", "gauge", "Number of open file descriptors.", static_cast<double>(fds));
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        append(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
               static_cast<double>(limit.rlim_cur));
    append(out, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
           s.start_time_seconds);
}

void add_process_collector(registry& r) { r.add_collector(render_process_metrics); }

}  // namespace claimguard::admin
