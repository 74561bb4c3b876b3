#!/usr/bin/env python3
"""Claim throughput: the naive flow direct, the hand-fixed flow direct, the naive flow through claimguard.

Driven by scripts/bench_claims.sh (which builds the Release binaries). Starts its own MariaDB (legacy schema +
the UNIQUE index migration), Redis and claimguard instances (rules + Redis, rules only, no rules) with
tests/incident/cluster.py, runs claimguard-load for every thread count x cell (cells of one thread count back to
back, so the ratios between them see the same machine), resets the tables before every run, checks what each run
left in the tables, and writes the section between the claims markers of docs/BENCHMARKS.md.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py, which imports tests/integration/servers.py)

import benchdoc  # noqa: E402  (tests/integration, on the path cluster set)

servers = cluster.servers
BEGIN_MARKER = "<!-- claims:begin -->"
END_MARKER = "<!-- claims:end -->"
SECTION_TITLE = "## Claim throughput (issue 4)"
CAMPAIGN = 1
LOAD_GRACE_S = 120            # the load tool gets this long beyond --seconds before we call it hung
SEED = 1
TARGET_RATIO = 0.9            # issue 4: (c) at least 0.9 x (b)
US_PER_S = 1_000_000
SERVER_VARIABLES = ("version", "log_bin", "sync_binlog", "innodb_flush_log_at_trx_commit",
                    "innodb_buffer_pool_size", "innodb_doublewrite", "max_connections")


@dataclasses.dataclass(frozen=True)
class Cell:
    label: str        # how the table names it
    description: str
    flow: str         # claimguard-load --flow
    via: str          # "direct", or the claimguard set-up: "rules_redis", "rules", "relay"
    safe: bool        # whether claimguard's promises are expected to hold


CELLS = {
    "naive_direct": Cell("(a) naive, direct", "the incident's naive flow straight to MariaDB (unsafe)",
                         "naive", "direct", False),
    "fixed_direct": Cell("(b) fixed, direct", "the post-mortem's hand fix (conditional UPDATE + unique index) "
                         "straight to MariaDB", "fixed", "direct", True),
    "naive_claimguard": Cell("(c) naive, claimguard", "the naive flow through one claimguard with "
                             "rules/examples/coupon.yaml and Redis", "naive", "rules_redis", True),
    "naive_claimguard_noredis": Cell("(c') naive, claimguard, no Redis", "the same without Redis (the database "
                                     "guards alone)", "naive", "rules", True),
    "naive_claimguard_noaudit": Cell("(c) without audit log", "diagnostic: (c) with --audit-log off (the audit "
                                     "log writes and flushes one line per rewritten claim)", "naive",
                                     "rules_redis_noaudit", True),
    "naive_relay": Cell("naive, claimguard relay", "diagnostic: the naive flow through claimguard without rules "
                        "(a plain relay, as unsafe as direct)", "naive", "relay", False),
    "fixed_relay": Cell("fixed, claimguard relay", "diagnostic: the hand-fixed flow through claimguard without "
                        "rules", "fixed", "relay", True),
    "fixed_claimguard": Cell("fixed, claimguard", "diagnostic: the hand-fixed flow through claimguard with rules "
                             "and Redis", "fixed", "rules_redis", True),
}
DEFAULT_CELLS = ("naive_direct fixed_direct naive_claimguard naive_claimguard_noredis naive_claimguard_noaudit "
                 "naive_relay fixed_relay fixed_claimguard")
# Statements one claim sends to the database, by flow (a claim that nothing refuses).
STATEMENTS_PER_CLAIM = {"naive": 3, "fixed": 2}
PROXY_SETUPS = ("rules_redis", "rules_redis_noaudit", "rules", "relay")


# --- CPU accounting -------------------------------------------------------------------------------------
def process_cpu_s(pid):
    """utime + stime of pid (all its threads) so far; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "r", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_s():
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat", "r", encoding="ascii") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks[:8]) - idle) / hz, sum(ticks[:8]) / hz


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# --- the servers ----------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.cluster = cluster.Cluster(work)
        self.proxies = {}

    def start(self):
        self.cluster.start_db(unique_index=True)
        self.cluster.start_redis()
        if self.args.flush_log_at_trx_commit is not None:
            self.cluster.db.sql(f"SET GLOBAL innodb_flush_log_at_trx_commit = {self.args.flush_log_at_trx_commit};")

    def proxy_args(self, via):
        extra = ["--threads", str(self.args.claimguard_threads)]
        if via != "relay":
            extra += ["--rules", cluster.EXAMPLE_RULES, "--audit-log",
                      "off" if via.endswith("_noaudit") else os.path.join(self.work, f"audit-{via}.jsonl")]
        if via.startswith("rules_redis"):
            extra += ["--redis", f"{servers.HOST}:{self.cluster.redis.port}"]
        return extra

    def proxy(self, via):
        """The claimguard instance for a set-up, started on first use and kept until the end."""
        if via not in self.proxies:
            p = servers.Claimguard(self.args.claimguard, self.work, f"claimguard-{via}", self.cluster.db.port,
                                   extra_args=self.proxy_args(via), log_level="warn")
            p.start()
            self.proxies[via] = p
        return self.proxies[via]

    def stop(self):
        for p in self.proxies.values():
            p.stop()
        self.cluster.stop()

    def server_variables(self):
        names = ", ".join(f"@@{v}" for v in SERVER_VARIABLES)
        values = self.cluster.db.sql(f"SELECT {names};").rstrip("\n").split("\t")
        return dict(zip(SERVER_VARIABLES, values))

    def reset(self):
        self.cluster.reset({CAMPAIGN: self.args.stock})
        # One audit line per rewritten claim adds up over a long run; claimguard appends (O_APPEND), so
        # emptying the files under it is safe and keeps the disk use bounded.
        for via in self.proxies:
            path = os.path.join(self.work, f"audit-{via}.jsonl")
            if os.path.exists(path):
                os.truncate(path, 0)

    def facts(self):
        out = self.cluster.sql(f"""
            SELECT COUNT(*), COUNT(DISTINCT user_id) FROM coupon_order WHERE campaign_id = {CAMPAIGN};
            SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};""").split()
        rows, users, remain = (int(x) for x in out)
        return {"rows": rows, "duplicate_rows": rows - users, "remain": remain, "consumed": self.args.stock - remain}


# --- one run --------------------------------------------------------------------------------------------
def load_command(args, port, flow, threads, seconds):
    return [args.load, "--target", f"{servers.HOST}:{port}", "--user", cluster.APP_USER,
            "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE, "--threads", str(threads),
            "--first-user", "1", "--users", str(args.users), "--attempts-per-user", "1",
            "--campaign", str(CAMPAIGN), "--protocol", args.protocol, "--flow", flow, "--seconds", str(seconds),
            "--seed", str(SEED), "--json"] + (["--found-rows"] if args.found_rows else [])


def run_load(cmd, seconds):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=seconds + LOAD_GRACE_S, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"claimguard-load exited with {r.returncode}: {r.stderr.decode(errors='replace')}\n"
                           f"{shlex.join(cmd)}")
    return json.loads(r.stdout)


def measure(bench, name, threads):
    """One measured run of a cell: reset, warm up, reset, run; what it cost and what it left behind."""
    args, cell = bench.args, CELLS[name]
    proxy = None if cell.via == "direct" else bench.proxy(cell.via)
    port = bench.cluster.db.port if proxy is None else proxy.port
    if args.warmup > 0:
        bench.reset()
        run_load(load_command(args, port, cell.flow, threads, args.warmup), args.warmup)
    bench.reset()
    pids = {"mariadbd": bench.cluster.db.proc.pid, "redis": bench.cluster.redis.proc.pid}
    if proxy is not None:
        pids["claimguard"] = proxy.proc.pid
    before = {k: process_cpu_s(p) for k, p in pids.items()}
    before_children, before_machine = children_cpu_s(), machine_cpu_s()
    load_before = os.getloadavg()[0]
    s = run_load(load_command(args, port, cell.flow, threads, args.seconds), args.seconds)
    after_machine, after_children = machine_cpu_s(), children_cpu_s()
    after = {k: process_cpu_s(p) for k, p in pids.items()}
    cpu = {k: after[k] - before[k] for k in pids if before[k] is not None and after[k] is not None}
    cpu["load tool"] = after_children - before_children
    ours = sum(cpu.values())
    busy = after_machine[0] - before_machine[0]
    total = after_machine[1] - before_machine[1]
    r = {"cell": name, "threads": threads, "claimed": s["claimed"], "attempts": s["attempts"],
         "sold_out": s["sold_out"], "duplicate": s["duplicate"], "other_errors": s["other_errors"],
         "errors": s["errors"], "elapsed_s": s["elapsed_s"], "claims_per_s": s["claims_per_s"],
         "attempts_per_s": s["attempts_per_s"],
         "p50": s["latency_ms"]["p50"], "p95": s["latency_ms"]["p95"], "p99": s["latency_ms"]["p99"],
         "cpu_s": cpu, "others_cpu_share": max(0.0, busy - ours) / total if total > 0 else 0.0,
         "loadavg": (load_before + os.getloadavg()[0]) / 2}
    r.update(bench.facts())
    return r


def median_run(runs):
    """The run with the median throughput (the middle one; the lower middle for an even count)."""
    ordered = sorted(runs, key=lambda r: r["claims_per_s"])
    best = dict(ordered[(len(ordered) - 1) // 2])
    best["all_claims_per_s"] = [r["claims_per_s"] for r in runs]
    return best


# --- facts about the run --------------------------------------------------------------------------------
def machine_facts(doc):
    """The machine and the tree the binaries were built from (taken before the first run)."""
    model = "unknown"
    with open("/proc/cpuinfo", "r", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", "r", encoding="ascii") as f:
        mem_kib = int(f.readline().split()[1])

    def first_line(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=10,
                                  cwd=REPO).stdout.decode(errors="replace").splitlines()[0].strip()
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"
    # Tracked files changed since the commit, except the document this script rewrites.
    dirty = [line for line in subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        check=False, cwd=REPO).stdout.decode().splitlines()
        if os.path.join(REPO, line[3:]) != os.path.abspath(doc)]
    return {"nproc": os.cpu_count(), "cpu": model, "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
            "kernel": platform.release(), "redis": first_line(["redis-server", "--version"]),
            "commit": first_line(["git", "rev-parse", "--short", "HEAD"]), "dirty_files": len(dirty)}


def claimguard_version():
    with open(os.path.join(REPO, "CMakeLists.txt"), "r", encoding="utf-8") as f:
        for line in f:
            if line.startswith("project(") and " VERSION " in line:
                return line.split(" VERSION ", 1)[1].split()[0]
    return "unknown"


# --- the document ---------------------------------------------------------------------------------------
def fmt_ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def cpu_per_claim(r, who):
    v = cpu_us(r, who) if who in r["cpu_s"] else None
    return f"{v:.0f}" if v is not None else "-"


def invariant_text(r, cell):
    holds = r["rows"] == r["consumed"] == r["claimed"] and r["duplicate_rows"] == 0 and r["remain"] >= 0
    if holds:
        return "holds"
    parts = []
    if r["rows"] > r["consumed"]:
        parts.append(f"over-issue: {r['rows'] - r['consumed']} rows beyond stock consumed")
    if r["rows"] < r["consumed"]:
        parts.append(f"leak: {r['consumed'] - r['rows']} units consumed without a row")
    if r["claimed"] != r["rows"]:
        parts.append(f"app told {r['claimed']} claimed vs {r['rows']} rows")
    if r["duplicate_rows"]:
        parts.append(f"{r['duplicate_rows']} duplicate rows")
    return ("VIOLATED (expected)" if not cell.safe else "VIOLATED") + ": " + "; ".join(parts)


def find(results, name, threads):
    return next((r for r in results if r["cell"] == name and r["threads"] == threads), None)


def cpu_us(r, who=None):
    """CPU microseconds per claim of one process, or of all of ours; None when nothing was claimed."""
    if not r["claimed"]:
        return None
    v = sum(r["cpu_s"].values()) if who is None else r["cpu_s"].get(who, 0.0)
    return v / r["claimed"] * US_PER_S


def analysis(results, thread_counts):
    """Sentences computed from the figures: the target, and where the naive flow through claimguard loses."""
    lines = []
    chain = [("naive_direct", "fixed_direct", "the naive flow's extra SELECT round trip (a / b)"),
             ("naive_relay", "naive_direct", "relaying its 3 statements through claimguard (relay / a)"),
             ("naive_claimguard_noredis", "naive_relay", "the rules' rewrite and checks (c' / relay)"),
             ("naive_claimguard", "naive_claimguard_noredis", "the Redis first filter (c / c')"),
             ("naive_claimguard", "naive_claimguard_noaudit", "the audit log (c / c without audit log)")]
    for t in thread_counts:
        b, c = find(results, "fixed_direct", t), find(results, "naive_claimguard", t)
        if not b or not c or not b["claims_per_s"]:
            continue
        ratio = c["claims_per_s"] / b["claims_per_s"]
        verdict = "met" if ratio >= TARGET_RATIO else (
            f"missed by {TARGET_RATIO * b['claims_per_s'] - c['claims_per_s']:.0f} claims/s "
            f"({(TARGET_RATIO - ratio) * 100:.0f} points of (b))")
        line = f"- {t} threads: (c) / (b) = {ratio:.2f}, target {TARGET_RATIO} {verdict}."
        steps = []
        for num, den, what in chain:
            n, d = find(results, num, t), find(results, den, t)
            if n and d and d["claims_per_s"]:
                steps.append((n["claims_per_s"] / d["claims_per_s"], what))
        if steps:
            line += " Throughput factors: " + "; ".join(f"{what} x{f:.2f}" for f, what in steps) + "."
        cb, cc = cpu_us(b), cpu_us(c)
        if cb and cc:
            extra = {who: cpu_us(c, who) - cpu_us(b, who) for who in ("mariadbd", "claimguard", "redis", "load tool")}
            line += (f" CPU per claim: (c) {cc:.0f} us against (b) {cb:.0f} us (ratio {cb / cc:.2f}); the extra "
                     "is " + ", ".join(f"{who} {v:+.0f} us" for who, v in sorted(extra.items(), key=lambda x: -x[1]))
                     + ".")
        per_statement = []
        for name in ("naive_relay", "fixed_relay", "naive_claimguard_noredis", "naive_claimguard",
                     "fixed_claimguard"):
            r = find(results, name, t)
            if r and cpu_us(r, "claimguard") is not None:
                n = STATEMENTS_PER_CLAIM[CELLS[name].flow]
                per_statement.append(f"{CELLS[name].label} {cpu_us(r, 'claimguard') / n:.0f} us")
        if per_statement:
            line += " claimguard CPU per client statement: " + ", ".join(per_statement) + "."
        lines.append(line)
    return lines


def render(results, args, commands, facts, variables, started, thread_counts, cells):
    lines = [BEGIN_MARKER, "", SECTION_TITLE, ""]
    lines.append("Claims per second and latency of one whole claim attempt (all its statements) for the incident's "
                 "flow, written by `scripts/bench_claims.sh` (helper `scripts/bench_claims.py`). It starts a private "
                 "MariaDB with `sql/legacy_schema.sql` + `sql/migrations/001_claimguard_unique_index.sql`, a Redis "
                 "and claimguard instances, sets the stock so high that nothing sells out and lets every user claim "
                 "once, then runs `claimguard-load` for each thread count and cell, resetting the tables before each "
                 "run. Knobs: `BENCH_CLAIMS_SECONDS`, `BENCH_CLAIMS_WARMUP`, `BENCH_CLAIMS_THREADS`, "
                 "`BENCH_CLAIMS_CELLS`, `BENCH_CLAIMS_ROUNDS`, `BENCH_CLAIMS_STOCK`, `BENCH_CLAIMS_PROTOCOL`, "
                 "`BENCH_CLAIMS_FOUND_ROWS`, `BENCH_CLAIMS_FLUSH_LOG_AT_TRX_COMMIT` (see the script's header). "
                 f"Issue 4's target: (c) at least {TARGET_RATIO} x (b). Speeds are reported, never asserted.")
    lines.append("")
    lines.append(f"Measured {started:%Y-%m-%d %H:%M} UTC, claimguard {claimguard_version()} at commit {facts['commit']}"
                 + (f" plus uncommitted changes in {facts['dirty_files']} tracked files" if facts["dirty_files"]
                    else "")
                 + f", built {args.build_type}; {args.seconds} s per run after a {args.warmup} s warm-up, "
                 f"{args.rounds} round(s) (median shown), {args.protocol} protocol, autocommit, "
                 + ("CLIENT_FOUND_ROWS (as JDBC connects, so the naive app's UPDATE of an unchanged value reports "
                    "1 row and the attempt goes on to its INSERT), " if args.found_rows else
                    "no CLIENT_FOUND_ROWS (a naive UPDATE that writes the value already there reports 0 rows and "
                    "the app answers sold out), ")
                 + f"stock "
                 f"{args.stock:,}, users {args.users:,} claiming once each, claimguard I/O threads "
                 f"{args.claimguard_threads or 'one per core'}.")
    lines.append("")
    lines.append(f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']} RAM, Linux {facts['kernel']}; "
                 f"{facts['redis']}. The load tool, MariaDB, Redis and claimguard share these CPUs with other "
                 "people's builds and tests (the machine is shared and noisy: see the load average and the share of "
                 "CPU taken by processes that are not ours in each row), so compare cells of the same thread count "
                 "(run back to back) rather than absolute numbers.")
    lines.append("")
    durable = variables.get("innodb_flush_log_at_trx_commit") == "1" and variables.get("log_bin") == "1"
    lines.append("Server: " + ", ".join(f"`{k}` = {v}" for k, v in variables.items()) + " (queried from the server "
                 "before the first run). Both flows commit twice per claim (the UPDATE and the INSERT, autocommit). "
                 + ("These settings flush to disk at every commit." if durable else
                    "These settings do not wait for a disk flush at commit, so each commit is cheap and the cost of "
                    "an extra statement or a proxy hop weighs more than it would on a durable server "
                    "(innodb_flush_log_at_trx_commit = 1 with a binary log and sync_binlog = 1)."))
    lines.append("")
    lines.append("Cells: " + "; ".join(f"{CELLS[c].label}: {CELLS[c].description}" for c in cells) + ".")
    lines.append("")
    lines += ["| threads | cell | claims/s | vs (b) | p50 ms | p95 ms | p99 ms | attempts/s | sold out answers | "
              "other errors | load avg | others' CPU |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in thread_counts:
        b = find(results, "fixed_direct", t)
        for c in cells:
            r = find(results, c, t)
            if r is None:
                continue
            spread = ""
            if len(r.get("all_claims_per_s", [])) > 1:
                spread = " (" + ", ".join(f"{x:.0f}" for x in r["all_claims_per_s"]) + ")"
            lines.append(f"| {t} | {CELLS[c].label} | {r['claims_per_s']:.0f}{spread} | "
                         f"{fmt_ratio(r['claims_per_s'], b['claims_per_s']) if b else '-'} | {r['p50']:.2f} | "
                         f"{r['p95']:.2f} | {r['p99']:.2f} | {r['attempts_per_s']:.0f} | {r['sold_out']} | "
                         f"{r['other_errors']} | "
                         f"{r['loadavg']:.1f} | {r['others_cpu_share'] * 100:.0f}% |")
    lines += ["", "Latency is one whole claim attempt (all its statements) as the load tool timed it. Nothing can "
              "sell out (the stock is larger than the attempts), so a \"sold out\" answer is a wrong answer. "
              "\"load avg\" is the 1-minute load average around the run; \"others' CPU\" the share of the machine's "
              "CPU time (from /proc/stat, steal included) that processes other than this benchmark's took during it."
              + (" With several rounds, claims/s lists every round in brackets and the row is the median round."
                 if args.rounds > 1 else ""),
              "", "What each run left in the tables (checked with SQL as root after the run; claimguard's promises: "
              "rows = stock consumed = claims the app was told, no duplicate rows):", "",
              "| threads | cell | app told claimed | coupon_order rows | stock consumed | duplicate rows | "
              "invariants |",
              "|---:|---|---:|---:|---:|---:|---|"]
    for t in thread_counts:
        for c in cells:
            r = find(results, c, t)
            if r is not None:
                lines.append(f"| {t} | {CELLS[c].label} | {r['claimed']} | {r['rows']} | {r['consumed']} | "
                             f"{r['duplicate_rows']} | {invariant_text(r, CELLS[c])} |")
    lines += ["", "CPU microseconds per claim, by process (utime + stime from /proc over the measured run; the load "
              "tool's from getrusage):", "",
              "| threads | cell | load tool | MariaDB | claimguard | Redis | total |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for t in thread_counts:
        for c in cells:
            r = find(results, c, t)
            if r is None:
                continue
            total = cpu_us(r)
            total_text = f"{total:.0f}" if total is not None else "-"
            lines.append(f"| {t} | {CELLS[c].label} | {cpu_per_claim(r, 'load tool')} | "
                         f"{cpu_per_claim(r, 'mariadbd')} | {cpu_per_claim(r, 'claimguard')} | "
                         f"{cpu_per_claim(r, 'redis')} | {total_text} |")
    lines += ["", "Against the target (computed from the tables above; the load tool, MariaDB, Redis and claimguard "
              "compete for the same CPUs, so claims/s follows CPU per claim closely):", ""]
    lines += analysis(results, thread_counts) or ["- (b) or (c) was not measured."]
    lines += ["", "Other errors, if any, by cell: " + ("; ".join(
        f"{CELLS[r['cell']].label} at {r['threads']} threads: " + ", ".join(
            f"{e['statement']} {e['code']} {e['message']} x{e['count']}" for e in r["errors"])
        for r in results if r["errors"]) or "none") + ".", "", "Commands:", "", "```"]
    lines += commands
    lines += ["```", "", END_MARKER]
    return "\n".join(lines) + "\n"


def write_doc(path, block):
    benchdoc.write_block(path, block, BEGIN_MARKER, END_MARKER)


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    # SIGTERM/SIGHUP end the run through main's finally, which stops the servers this run started.
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--load", required=True, help="the claimguard-load binary")
    ap.add_argument("--doc", required=True)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--threads", default="8 32 64")
    ap.add_argument("--cells", default=DEFAULT_CELLS, help=f"of: {' '.join(CELLS)}")
    ap.add_argument("--rounds", type=int, default=1, help="runs per cell; the median is reported")
    ap.add_argument("--stock", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=0, help="0: as many as the stock")
    ap.add_argument("--protocol", choices=["text", "prepared"], default="text")
    ap.add_argument("--found-rows", type=int, choices=[0, 1], default=1,
                    help="1: the load connects with CLIENT_FOUND_ROWS, as JDBC drivers do")
    ap.add_argument("--claimguard-threads", type=int, default=1)
    ap.add_argument("--flush-log-at-trx-commit", type=int, choices=[0, 1, 2], default=None,
                    help="SET GLOBAL innodb_flush_log_at_trx_commit before measuring (default: the server's)")
    ap.add_argument("--build-type", default="unknown")
    ap.add_argument("--invocation", default="", help="the command line that started this, for the document")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    args = ap.parse_args()
    args.users = args.users or args.stock
    cells = args.cells.split()
    unknown = [c for c in cells if c not in CELLS]
    if unknown or args.rounds < 1:
        ap.error(f"unknown cells {unknown} (known: {' '.join(CELLS)})" if unknown else "--rounds must be >= 1")
    thread_counts = [int(t) for t in args.threads.split()]

    started = datetime.datetime.now(datetime.timezone.utc)
    work = tempfile.mkdtemp(prefix="claimguard-bench-claims.")
    bench = Bench(args, work)
    results = []
    try:
        facts = machine_facts(args.doc)
        bench.start()
        variables = bench.server_variables()
        for t in thread_counts:
            runs = {c: [] for c in cells}
            for rnd in range(args.rounds):
                # Each round starts one cell later, so that no cell always runs first (or right after another).
                for c in cells[rnd % len(cells):] + cells[:rnd % len(cells)]:
                    r = measure(bench, c, t)
                    runs[c].append(r)
                    print(f"{t:>3} threads round {rnd + 1} {c:<26} {r['claims_per_s']:8.0f} claims/s  "
                          f"p95 {r['p95']:6.2f} ms  rows {r['rows']} consumed {r['consumed']} told {r['claimed']} "
                          f"sold out {r['sold_out']} dup {r['duplicate_rows']} errors {r['other_errors']}  "
                          f"load {r['loadavg']:.1f} others {r['others_cpu_share']:.0%}", flush=True)
            results += [median_run(runs[c]) for c in cells]
        commands = [args.invocation] if args.invocation else []
        for via in [v for v in PROXY_SETUPS if v in bench.proxies]:
            p = bench.proxies[via]
            commands.append(f"# claimguard for {via} ($WORK: the temporary directory):")
            commands.append(shlex.join(p.command()).replace(work, "$WORK").replace(REPO + os.sep, ""))
        load = load_command(args, "PORT", "FLOW", "N", args.seconds)
        commands.append("# per run, after TRUNCATE coupon_order and remain reset (and a --seconds "
                        f"{args.warmup:g} warm-up run, then the reset again):")
        commands.append(shlex.join(load).replace(REPO + os.sep, "").replace(":PORT", ":$PORT"))
        commands.append("# PORT: MariaDB's or the claimguard's; FLOW naive or fixed; N the threads")
        write_doc(args.doc, render(results, args, commands, facts, variables, started, thread_counts,
                                   cells))
        print(f"wrote {args.doc}")
    finally:
        bench.stop()
        if args.keep:
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
