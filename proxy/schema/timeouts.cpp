// Advice on the server timeouts that bound an orphaned transaction's row locks.
#include "proxy/schema/timeouts.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <charconv>

namespace claimguard::schema {
namespace {

std::string seconds(double v) { return fmt::format("{:g}", v); }

std::string shown(const std::optional<double>& v) {
    if (!v) return "not on this server";
    return *v == 0 ? "0 (off)" : seconds(*v);
}

}  // namespace

bool set_timeout(server_timeouts& t, std::string_view name, std::string_view value) {
    double v = 0;
    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || p != value.data() + value.size() || v < 0) return false;
    if (name == "wait_timeout")
        t.wait_timeout = v;
    else if (name == "idle_transaction_timeout")
        t.idle_transaction_timeout = v;
    else if (name == "idle_write_transaction_timeout")
        t.idle_write_transaction_timeout = v;
    else if (name == "innodb_lock_wait_timeout")
        t.innodb_lock_wait_timeout = v;
    return true;
}

std::optional<double> orphan_lock_bound_s(const server_timeouts& t) {
    std::optional<double> bound;
    for (const auto& v : {t.idle_write_transaction_timeout, t.idle_transaction_timeout, t.wait_timeout})
        if (v && *v > 0) bound = bound ? std::min(*bound, *v) : *v;
    return bound;
}

std::vector<timeout_advice> advise_timeouts(const server_timeouts& t) {
    std::vector<timeout_advice> out;
    const auto bound = orphan_lock_bound_s(t);
    const bool bounded = bound && *bound <= max_orphan_lock_s;
    const std::string recommended = seconds(recommended_idle_write_transaction_timeout_s);

    // idle_write_transaction_timeout: the one that ends an orphan holding row locks.
    timeout_advice w{"idle_write_transaction_timeout", t.idle_write_transaction_timeout, true, {}};
    if (!w.value) {
        w.advice =
            "this server has no idle transaction timeout (MySQL): claimguard's orphan_kill and wait_timeout "
            "are what end a transaction whose client is gone";
    } else if (*w.value == 0 || *w.value > max_orphan_lock_s) {
        w.ok = false;
        w.advice = fmt::format(
            "RECOMMENDED {}: an orphaned write transaction keeps the hot row locked {}; set it "
            "above the longest pause your app makes inside a write transaction",
            recommended, *w.value == 0 ? "until wait_timeout" : "for " + seconds(*w.value) + "s");
    } else {
        w.advice = "ends an idle write transaction, and its row locks, after this";
    }
    out.push_back(std::move(w));

    timeout_advice i{"idle_transaction_timeout", t.idle_transaction_timeout, true, {}};
    if (!i.value)
        i.advice = "not on this server (MySQL)";
    else if (*i.value == 0)
        i.advice =
            "it would also end idle read-only transactions, so idle_write_transaction_timeout is the "
            "one to set";
    else
        i.advice = "ends any idle transaction after this";
    out.push_back(std::move(i));

    timeout_advice wt{"wait_timeout", t.wait_timeout, true, {}};
    if (wt.value && *wt.value > long_wait_timeout_s && !bounded) {
        wt.ok = false;
        wt.advice = fmt::format(
            "nothing shorter ends an orphaned transaction: its row locks stay for up to {}s "
            "unless claimguard's orphan_kill ends it; set idle_write_transaction_timeout "
            "(MariaDB), or lower this below your pools' idle limits",
            seconds(*wt.value));
    } else {
        wt.advice = "closes connections idle this long (keep your pools' idle limits below it)";
    }
    out.push_back(std::move(wt));

    timeout_advice l{"innodb_lock_wait_timeout", t.innodb_lock_wait_timeout, true, {}};
    l.advice = "each claim queued behind a held row waits up to this, then fails with 1205";
    out.push_back(std::move(l));
    return out;
}

std::vector<std::string> timeout_lines(const server_timeouts& t) {
    std::vector<std::string> lines;
    for (const auto& a : advise_timeouts(t))
        lines.push_back(fmt::format("{} = {}: {}{}", a.variable, shown(a.value), a.ok ? "" : "WARNING: ", a.advice));
    const auto bound = orphan_lock_bound_s(t);
    lines.push_back(bound ? fmt::format("An orphaned transaction (its client gone, the server not told) keeps its "
                                        "row locks for up to {}s on this server, unless claimguard's orphan_kill "
                                        "ends it first.",
                                        seconds(*bound))
                          : std::string("Nothing on this server ends an orphaned transaction: only claimguard's "
                                        "orphan_kill does."));
    return lines;
}

}  // namespace claimguard::schema
