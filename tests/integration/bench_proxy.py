#!/usr/bin/env python3
"""Pass-through cost of claimguard: sysbench against MariaDB directly, through claimguard, through HAProxy.

Driven by scripts/bench_proxy.sh (which builds the Release binary). Starts its own MariaDB, claimguard and
HAProxy (TCP mode) in a temporary directory, runs every workload x ps-mode x thread count against the three
targets in turn, and writes a markdown table between the markers in docs/BENCHMARKS.md.
"""

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdoc  # noqa: E402
import servers  # noqa: E402

BEGIN_MARKER = "<!-- bench_proxy:begin (written by scripts/bench_proxy.sh; do not edit by hand) -->"
END_MARKER = "<!-- bench_proxy:end -->"
SECTION_TITLE = "## Wire proxy (issue 2)"
HAPROXY_START_TIMEOUT_S = 15.0
SYSBENCH_GRACE_S = 60          # sysbench gets this long beyond --time before we give up on it
CPU_PER_QUERIES = 100_000      # CPU seconds are reported per this many queries

# maxconn: far above the benchmark's 32 sessions, yet low enough for the default open-files limit
# (HAProxy needs about two descriptors per connection).
# nbthread: HAProxy starts one thread per CPU unless told; it gets as many as claimguard's I/O threads, so the
# two relays compare with the same CPU parallelism.
HAPROXY_CFG = """global
    maxconn 4000
    nbthread {threads}
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend mysql
    bind {host}:{port}
    maxconn 4000
    default_backend db
backend db
    server db1 {host}:{backend_port}
"""


class HAProxy:
    def __init__(self, work, backend_port, threads):
        self.port = servers.free_port()
        self.cfg = os.path.join(work, "haproxy.cfg")
        self.log = os.path.join(work, "haproxy.log")
        with open(self.cfg, "w", encoding="ascii") as f:
            f.write(HAPROXY_CFG.format(host=servers.HOST, port=self.port, backend_port=backend_port, threads=threads))
        self.proc = None

    def start(self):
        with open(self.log, "ab") as out:
            # -db: stay in the foreground so that the pid we hold is haproxy's own.
            self.proc = subprocess.Popen(["haproxy", "-db", "-f", self.cfg], stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        servers.wait_mysql_greeting(self.port, HAPROXY_START_TIMEOUT_S, self.proc, self.log)
        return self

    def cpu_seconds(self):
        return process_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=servers.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def process_cpu_seconds(pid):
    """utime + stime of pid and its threads so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", "r", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sysbench_base(workload, port, args):
    return ["sysbench", workload, "--db-driver=mysql", f"--mysql-host={servers.HOST}", f"--mysql-port={port}",
            f"--mysql-user={servers.NATIVE_USER}", f"--mysql-password={servers.NATIVE_PASSWORD}",
            f"--mysql-db={servers.DATABASE}", f"--tables={args.tables}", f"--table-size={args.table_size}"]


def run_sysbench(cmd, timeout_s):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    out = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"sysbench failed ({r.returncode}): {shlex.join(cmd)}\n{out[-3000:]}")
    return out


def histogram_percentile(out, pct):
    """The pct-th percentile latency in ms from sysbench's --histogram output."""
    buckets = []
    for m in re.finditer(r"^\s*([0-9.]+)\s+\|\**\s+(\d+)\s*$", out, re.M):
        buckets.append((float(m.group(1)), int(m.group(2))))
    total = sum(c for _, c in buckets)
    if total == 0:
        return None
    need = total * pct / 100.0
    seen = 0
    for value, count in buckets:
        seen += count
        if seen >= need:
            return value
    return buckets[-1][0]


def parse_run(out):
    def number(pattern):
        m = re.search(pattern, out, re.M)
        return float(m.group(1)) if m else None
    return {
        "tps": number(r"transactions:\s+\d+\s+\(([0-9.]+) per sec"),
        "qps": number(r"queries:\s+\d+\s+\(([0-9.]+) per sec"),
        "queries": number(r"queries:\s+(\d+)\s"),
        "p95": number(r"95th percentile:\s+([0-9.]+)"),
        "p50": histogram_percentile(out, 50),
        "errors": number(r"errors:\s+(\d+)"),
    }


def measure(workload, port, cpu, ps_mode, threads, args):
    """One warm-up and one measured sysbench run; the proxy's CPU seconds per 100k queries when cpu is given."""
    base = sysbench_base(workload, port, args) + [f"--db-ps-mode={ps_mode}", f"--threads={threads}"]
    if args.warmup > 0:
        run_sysbench(base + [f"--time={args.warmup}", "run"], args.warmup + SYSBENCH_GRACE_S)
    cmd = base + [f"--time={args.duration}", "--percentile=95", "--histogram=on", "run"]
    before = cpu() if cpu else None
    out = run_sysbench(cmd, args.duration + SYSBENCH_GRACE_S)
    after = cpu() if cpu else None
    r = parse_run(out)
    if cpu and r["queries"]:
        r["cpu_per_100k"] = (after - before) / r["queries"] * CPU_PER_QUERIES
    return r


def median_run(runs):
    """The run with the median tps (the lower middle one for an even count), with every round's tps."""
    ranked = sorted(runs, key=lambda r: r["tps"] or 0.0)
    r = dict(ranked[(len(ranked) - 1) // 2])
    r["all_tps"] = [x["tps"] for x in runs]
    return r


def machine_facts():
    model = "unknown"
    with open("/proc/cpuinfo", "r", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", "r", encoding="ascii") as f:
        mem_kib = int(f.readline().split()[1])

    def version(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
                                  timeout=10).stdout.decode(errors="replace").splitlines()[0].strip()
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "mariadb": version(["mariadbd", "--version"]),
        "sysbench": version(["sysbench", "--version"]),
        "haproxy": version(["haproxy", "-v"]),
    }


def render(results, args, commands, facts, started):
    lines = [BEGIN_MARKER, ""]
    lines.append(f"Measured {started:%Y-%m-%d %H:%M} UTC by `scripts/bench_proxy.sh` "
                 f"({args.duration} s per run, {args.warmup} s warm-up before each run, {args.rounds} round(s) "
                 f"with the targets interleaved, median shown; claimguard built "
                 f"{args.build_type}, I/O threads: {args.claimguard_threads or 'one per core'}, HAProxy the same (nbthread)"
                 f"{', rules: ' + os.path.basename(args.rules) if args.rules else ', no rules'}).")
    lines.append("")
    lines.append(f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']} RAM, Linux {facts['kernel']}; "
                 f"{facts['mariadb']}; {facts['sysbench']}; {facts['haproxy']}. sysbench, MariaDB and the proxy "
                 f"share these CPUs, so absolute numbers are low and the proxy competes with the load generator.")
    lines.append("")
    lines.append("| workload | ps mode | threads | target | tps (every round) | qps | p50 ms | p95 ms | tps vs direct | "
                 "tps vs HAProxy | p50 added vs direct | proxy CPU s / 100k queries | errors |")
    lines.append("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        direct = next(x for x in results if x["workload"] == r["workload"] and x["ps_mode"] == r["ps_mode"]
                      and x["threads"] == r["threads"] and x["target"] == "direct")
        ratio = f"{100.0 * r['tps'] / direct['tps']:.1f}%" if direct["tps"] else "-"
        haproxy = next((x for x in results if x["workload"] == r["workload"] and x["ps_mode"] == r["ps_mode"]
                        and x["threads"] == r["threads"] and x["target"] == "haproxy"), None)
        vs_haproxy = (f"{100.0 * r['tps'] / haproxy['tps']:.1f}%"
                      if haproxy and haproxy["tps"] and r["target"] != "direct" else "-")
        added = (f"{1000.0 * (r['p50'] - direct['p50']):+.0f} us"
                 if r["target"] != "direct" and r["p50"] is not None and direct["p50"] is not None else "-")
        every = ", ".join(f"{t:.0f}" for t in r.get("all_tps", []) if t is not None)
        tps = f"{r['tps']:.0f} ({every})" if len(r.get("all_tps", [])) > 1 else f"{r['tps']:.0f}"
        cpu = f"{r['cpu_per_100k']:.3f}" if r.get("cpu_per_100k") is not None else "-"
        p50 = f"{r['p50']:.2f}" if r["p50"] is not None else "-"
        lines.append(f"| {r['workload']} | {r['ps_mode']} | {r['threads']} | {r['target']} | {tps} | "
                     f"{r['qps']:.0f} | {p50} | {r['p95']:.2f} | {ratio} | {vs_haproxy} | {added} | {cpu} | "
                     f"{r['errors']:.0f} |")
    lines += ["", "p50 is read from sysbench's latency histogram (bucket upper bound); p95 is sysbench's own. "
              "Proxy CPU is utime+stime of the claimguard or haproxy process over the run "
              "(/proc/PID/stat) divided by the queries sysbench counted.", "", "Commands:", "", "```"]
    lines += commands
    lines += ["```", "", "HAProxy configuration:", "", "```",
              HAPROXY_CFG.format(host=servers.HOST, port="PORT", backend_port="MARIADB_PORT",
                                threads=args.claimguard_threads or "N").rstrip(), "```", "",
              END_MARKER]
    return "\n".join(lines) + "\n"


def write_doc(path, block):
    benchdoc.write_block(path, block, BEGIN_MARKER, END_MARKER, SECTION_TITLE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", default="1 8 32")
    ap.add_argument("--workloads", default="oltp_point_select oltp_read_only")
    ap.add_argument("--ps-modes", default="auto disable")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--claimguard-threads", type=int, default=1)
    ap.add_argument("--build-type", default="unknown", help="CMAKE_BUILD_TYPE of the claimguard binary")
    ap.add_argument("--rounds", type=int, default=1, help="runs per cell (targets interleaved); the median is shown")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    ap.add_argument("--rules", default="", help="rules file claimguard loads (its statements need not match)")
    ap.add_argument("--baseline", default="",
                    help="a second claimguard binary (e.g. before a change), run as one more interleaved target")
    args = ap.parse_args()

    started = datetime.datetime.now(datetime.timezone.utc)
    work = tempfile.mkdtemp(prefix="claimguard-bench.")
    db = servers.MariaDB(os.path.join(work, "mariadb"))
    os.makedirs(db.dir)
    proxy = haproxy = baseline = None
    results = []
    try:
        db.install()
        db.start()
        db.create_test_users()
        # The sysbench user may open many connections; nothing else about the server changes.
        proxy_args = ["--threads", str(args.claimguard_threads)]
        if args.rules:
            proxy_args += ["--rules", args.rules]
        proxy = servers.Claimguard(args.claimguard, work, "claimguard", db.port, extra_args=proxy_args,
                                   log_level="warn")
        proxy.start()
        haproxy = HAProxy(work, db.port, args.claimguard_threads or os.cpu_count() or 1).start()
        targets = [("direct", db.port, None), ("claimguard", proxy.port, proxy.cpu_seconds),
                   ("haproxy", haproxy.port, haproxy.cpu_seconds)]
        commands = [f"{shlex.join(proxy.command())}", f"haproxy -db -f haproxy.cfg"]
        if args.baseline:
            baseline = servers.Claimguard(args.baseline, work, "baseline", db.port, extra_args=proxy_args,
                                          log_level="warn").start()
            targets.append(("baseline", baseline.port, baseline.cpu_seconds))
            commands.append(f"{shlex.join(baseline.command())}   # the baseline binary")
        for workload in args.workloads.split():
            prepare = sysbench_base(workload, db.port, args) + ["prepare"]
            commands.append(shlex.join(sysbench_base(workload, "MARIADB_PORT", args) + ["prepare"]))
            run_sysbench(prepare, args.duration * 10 + SYSBENCH_GRACE_S)
            commands.append(shlex.join(sysbench_base(workload, "PORT", args) + [
                "--db-ps-mode=MODE", "--threads=N", f"--time={args.duration}", "--percentile=95", "--histogram=on",
                "run"]) + f"   # after a --time={args.warmup} warm-up run")
            for ps_mode in args.ps_modes.split():
                for threads in [int(t) for t in args.threads.split()]:
                    runs = {name: [] for name, _, _ in targets}
                    for rnd in range(args.rounds):
                        # Each round starts with a different target, so that drift in the machine's load
                        # does not always favour the same one.
                        order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
                        for name, port, cpu in order:
                            r = measure(workload, port, cpu, ps_mode, threads, args)
                            runs[name].append(r)
                            print(f"{workload} ps={ps_mode} threads={threads} {name} round {rnd + 1}: "
                                  f"tps={r['tps']} p50={r['p50']} p95={r['p95']} "
                                  f"cpu/100k={r.get('cpu_per_100k')}", flush=True)
                    for name, _, _ in targets:
                        r = median_run(runs[name])
                        r.update(workload=workload, ps_mode=ps_mode, threads=threads, target=name)
                        results.append(r)
            cleanup = sysbench_base(workload, db.port, args) + ["cleanup"]
            run_sysbench(cleanup, SYSBENCH_GRACE_S)
        commands.append("# PORT: MariaDB's, claimguard's or haproxy's port; MODE and N as in each row; "
                        "then sysbench ... cleanup")
        write_doc(args.doc, render(results, args, commands, machine_facts(), started))
        print(f"wrote {args.doc}")
    finally:
        if haproxy is not None:
            haproxy.stop()
        if proxy is not None:
            proxy.stop()
        if baseline is not None:
            baseline.stop()
        db.stop()
        if args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
