#!/usr/bin/env python3
"""Flash-sale benchmarks of issue 11 (herd, hot row in transactions, autocommit), side by side in one run.

Driven by `scripts/bench_claims.sh flash` (which builds the Release binaries and passes them here). Starts its own
MariaDB with production durability (log_bin, sync_binlog = 1, innodb_flush_log_at_trx_commit = 1), a Redis and
one claimguard per rules set-up, reusing scripts/bench_claims.py (Bench, CPU accounting, machine facts) and
tests/incident/cluster.py. A cell is a flow, a target and, for claimguard, the features whose stock-rule lines
are appended to the coupon_stock rule of rules/examples/coupon.yaml:

    naive_direct  fixed_direct  naive_tx_direct  fixed_tx_direct     the app straight to MariaDB
    naive_claimguard[+FEATURE...]  naive_tx_claimguard[+FEATURE...]  through claimguard (features: FEATURES)

A cell whose claimguard does not start (a binary that does not know a feature's rule field) is reported as not
run; the others go on. Writes the block between the flash markers of docs/BENCHMARKS.md. Speeds are reported,
never asserted.
"""

import argparse
import dataclasses
import datetime
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time

import bench_claims as bc  # scripts/bench_claims.py, beside this file

cluster, servers = bc.cluster, bc.servers
BEGIN_MARKER = "<!-- flash:begin -->"
END_MARKER = "<!-- flash:end -->"
SECTION_TITLE = "## Flash sale (issue 11)"
# With --fsync-delay-us the results go to a block of their own, so both storage settings stay in the document.
SLOW_BEGIN_MARKER = "<!-- flash-slow-storage:begin -->"
SLOW_END_MARKER = "<!-- flash-slow-storage:end -->"
SLOW_SECTION_TITLE = "## Flash sale with slow storage (issue 20)"
CAMPAIGN = bc.CAMPAIGN
SEED = bc.SEED
US_PER_S = bc.US_PER_S
# The stock-rule lines each feature adds (override with --rule-lines FEATURE='yaml; yaml').
FEATURES = {
    "read_cache": ["read_cache: 50ms"],
    "admission": ["admission: {max_in_flight: 4, queue_timeout: 2s}"],
    "defer": ["defer_decrement: true"],
}
FLOWS = ("naive", "fixed", "naive_tx", "fixed_tx")
# SHOW GLOBAL STATUS counters that count a client's statements (text protocol); Com_stmt_execute is shown apart,
# as MariaDB counts an executed prepared statement under it and under its command's counter.
STATEMENT_COUNTERS = ("Com_select", "Com_update", "Com_insert", "Com_delete", "Com_begin", "Com_commit",
                      "Com_rollback")
PREPARED_COUNTER = "Com_stmt_execute"
# Issue 11's goals.
HERD_GOAL_STATEMENTS = 0.1
HERD_GOAL_REJECTED = 0.001      # issue 20: database statements per rejected attempt in a herd
FLUSH_CHECK_COMMITS = 100       # serial durable commits timed by FlashBench.flush_check
SOLD_OUT_ATTEMPTS = 2_000       # the herd's after-sale phase: attempts on the sold-out stock, measured alone      # database statements per attempt through claimguard
HOTROW_GOAL_RATIO = 5.0         # claims/s through claimguard vs the hand fix directly
AUTOCOMMIT_GOAL_RATIO = 1.0
HOT_STOCK = 1_000_000           # hot row and autocommit: nothing sells out
DURABLE_FLAGS = ("--sync-binlog=1", "--innodb-flush-log-at-trx-commit=1", "--server-id=1",
                 "--binlog-format=ROW")
UNDURABLE_FLAGS = ("--skip-log-bin", "--innodb-flush-log-at-trx-commit=2")
SUITES = ("herd", "hotrow", "autocommit")


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str
    flow: str                 # claimguard-load --flow
    via: str                  # "direct", or the claimguard set-up: "rules_redis[+feature...]"
    features: tuple

    @property
    def safe(self):
        return self.via != "direct" or self.flow.startswith("fixed")


def parse_cell(name):
    """naive_direct, fixed_tx_direct, naive_claimguard+read_cache+admission, ... -> Cell; ValueError if bad."""
    base, *features = name.split("+")
    flow, _, target = base.rpartition("_")
    if flow not in FLOWS or target not in ("direct", "claimguard"):
        raise ValueError(f"bad cell {name!r}: FLOW_direct or FLOW_claimguard[+FEATURE...], FLOW of {FLOWS}")
    unknown = [f for f in features if f not in FEATURES]
    if unknown or (features and target == "direct"):
        raise ValueError(f"bad cell {name!r}: features {unknown or features} (known, claimguard only: "
                         f"{' '.join(FEATURES)})")
    via = "direct" if target == "direct" else "+".join(["rules_redis"] + sorted(features))
    return Cell(name, flow, via, tuple(sorted(features)))


class DurableMariaDB(servers.MariaDB):
    """The fixture's MariaDB with a binary log, sync_binlog = 1 and innodb_flush_log_at_trx_commit = 1; with
    slow_fsync (library, microseconds) every fsync and fdatasync of mariadbd waits that much longer
    (tests/load/slow_fsync.cpp, preloaded): storage that flushes like network block storage."""

    slow_fsync = None

    def command(self):
        cmd = [a for a in super().command() if a not in UNDURABLE_FLAGS]
        cmd += [f"--log-bin={os.path.join(self.dir, 'binlog')}", *DURABLE_FLAGS]
        if self.slow_fsync:
            library, delay_us = self.slow_fsync
            cmd = ["env", f"LD_PRELOAD={library}", f"CLAIMGUARD_FSYNC_DELAY_US={delay_us}"] + cmd
        return cmd


class FlashBench(bc.Bench):
    def start(self):
        self.cluster.db = DurableMariaDB(self.cluster.db.dir)
        if self.args.fsync_delay_us:
            self.cluster.db.slow_fsync = (self.args.slow_fsync_lib, self.args.fsync_delay_us)
        super().start()

    def flush_check(self, commits=FLUSH_CHECK_COMMITS):
        """How long one durable commit takes on this set-up: serial autocommit UPDATEs of one row, directly, in
        one session, with the server's sync counters around them. Shows that the storage-latency delay reached
        the server's flushes (each commit waits for the binary log's and the redo log's)."""
        status = "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_fsyncs', 'Innodb_data_fsyncs');"

        def counters():
            return {k: int(v) for k, v in (line.split("\t") for line in self.cluster.db.sql(status).splitlines())}

        before = counters()
        # +1 then -1: every statement changes the row (a statement that changes nothing commits nothing), and the
        # stock ends as it started.
        script = "".join(f"UPDATE coupon_stock SET remain = remain {'+' if i % 2 == 0 else '-'} 1 "
                         f"WHERE campaign_id = {CAMPAIGN};\n" for i in range(commits - commits % 2))
        started = time.monotonic()
        self.cluster.db.sql(script, database=cluster.DATABASE)
        elapsed = time.monotonic() - started
        after = counters()
        return {"commits": commits, "ms_per_commit": elapsed / commits * 1e3,
                "fsyncs_per_commit": {k: (after[k] - before[k]) / commits for k in after}}

    def proxy_args(self, via):
        extra = super().proxy_args("rules_redis")
        features = via.split("+")[1:]
        if features:
            lines = [line for f in features for line in self.args.feature_lines[f]]
            path = cluster.rules_with_stock_lines(os.path.join(self.work, f"rules-{via}.yaml"), lines)
            extra[extra.index(cluster.EXAMPLE_RULES)] = path
        extra[extra.index("--audit-log") + 1] = os.path.join(self.work, f"audit-{via}.jsonl")
        return extra

    def reset(self, stock):
        self.args.stock = stock
        super().reset()

    def statement_counters(self):
        out = self.cluster.db.sql("SHOW GLOBAL STATUS LIKE 'Com\\_%';")
        values = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
        return {k: int(values.get(k, 0)) for k in STATEMENT_COUNTERS + (PREPARED_COUNTER,)}

    def order_facts(self, stock):
        out = self.cluster.sql(f"""
            SELECT COUNT(*), COUNT(DISTINCT user_id) FROM coupon_order WHERE campaign_id = {CAMPAIGN};
            SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};""").split()
        rows, users, remain = (int(x) for x in out)
        return {"rows": rows, "duplicate_rows": rows - users, "remain": remain, "consumed": stock - remain,
                "stock": stock}


# --- one run --------------------------------------------------------------------------------------------
def load_command(args, port, cell_flow, threads, extra):
    return [args.load, "--target", f"{servers.HOST}:{port}", "--user", cluster.APP_USER,
            "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE, "--threads", str(threads),
            "--campaign", str(CAMPAIGN), "--protocol", args.protocol, "--flow", cell_flow, "--seed", str(SEED),
            "--json"] + (["--found-rows"] if args.found_rows else []) + extra


def suite_load_args(args, suite):
    """The load flags of a suite beyond the cell's: who attempts, how often, for how long."""
    if suite == "herd":
        return ["--first-user", "1", "--users", str(args.herd_users), "--attempts", str(args.herd_attempts)]
    seconds = args.hotrow_seconds if suite == "hotrow" else args.autocommit_seconds
    extra = ["--first-user", "1", "--users", str(HOT_STOCK), "--attempts-per-user", "1", "--seconds", f"{seconds:g}"]
    if suite == "hotrow":
        extra += ["--app-work-ms", f"{args.app_work_ms:g}"]
    return extra


def suite_stock(args, suite):
    return args.herd_stock if suite == "herd" else HOT_STOCK


def suite_timeout(args, suite):
    if suite == "herd":
        return args.herd_timeout
    return (args.hotrow_seconds if suite == "hotrow" else args.autocommit_seconds) + bc.LOAD_GRACE_S


def measure(bench, suite, cell, threads):
    """One measured run: reset, (warm up, reset,) run; what it cost the database and what it left behind."""
    args = bench.args
    proxy = None if cell.via == "direct" else bench.proxy(cell.via)
    port = bench.cluster.db.port if proxy is None else proxy.port
    stock = suite_stock(args, suite)
    extra = suite_load_args(args, suite)
    if suite != "herd" and args.warmup > 0:
        bench.reset(stock)
        warm = list(extra)
        warm[warm.index("--seconds") + 1] = f"{args.warmup:g}"
        bc.run_load(load_command(args, port, cell.flow, threads, warm), args.warmup)
    bench.reset(stock)
    pids = {"mariadbd": bench.cluster.db.proc.pid, "redis": bench.cluster.redis.proc.pid}
    if proxy is not None:
        pids["claimguard"] = proxy.proc.pid
    cpu_before = {k: bc.process_cpu_s(p) for k, p in pids.items()}
    children_before, machine_before = bc.children_cpu_s(), bc.machine_cpu_s()
    load_before = os.getloadavg()[0]
    counters_before = bench.statement_counters()
    s = bc.run_load(load_command(args, port, cell.flow, threads, extra), suite_timeout(args, suite) - bc.LOAD_GRACE_S)
    machine_after, children_after = bc.machine_cpu_s(), bc.children_cpu_s()
    counters_after = bench.statement_counters()
    cpu_after = {k: bc.process_cpu_s(p) for k, p in pids.items()}
    cpu = {k: cpu_after[k] - cpu_before[k] for k in pids if cpu_before[k] is not None and cpu_after[k] is not None}
    ours = sum(cpu.values()) + children_after - children_before  # + the load tool (and the SQL clients)
    busy, total = machine_after[0] - machine_before[0], machine_after[1] - machine_before[1]
    delta = {k: counters_after[k] - counters_before[k] for k in counters_before}
    statements = sum(delta[k] for k in STATEMENT_COUNTERS)
    r = {"suite": suite, "cell": cell.name, "threads": threads, "attempts": s["attempts"], "claimed": s["claimed"],
         "sold_out": s["sold_out"], "duplicate": s["duplicate"], "other_errors": s["other_errors"],
         "errors": s["errors"], "elapsed_s": s["elapsed_s"], "claims_per_s": s["claims_per_s"],
         "last_claim_s": s.get("last_claim_s", 0.0),
         "claims_per_s_until_last_claim": s.get("claims_per_s_until_last_claim", 0.0),
         "attempts_per_s": s["attempts_per_s"], "p50": s["latency_ms"]["p50"], "p99": s["latency_ms"]["p99"],
         "counters": delta, "statements": statements,
         "statements_per_attempt": statements / s["attempts"] if s["attempts"] else 0.0,
         "cpu_s": cpu, "others_cpu_share": max(0.0, busy - ours) / total if total > 0 else 0.0,
         "loadavg": (load_before + os.getloadavg()[0]) / 2}
    if suite == "herd":
        r.update(after_sale(bench, port, cell, threads))
    r.update(bench.order_facts(stock))
    return r


def after_sale(bench, port, cell, threads):
    """The herd's second figure: SOLD_OUT_ATTEMPTS more attempts by new users on the sold-out stock, measured
    alone, give the database statements per rejected attempt; the run's statements less its rejected attempts'
    at that rate give the statements per claim. A claim here would be an over-issue: it counts in the
    invariants like the run's."""
    args = bench.args
    extra = ["--first-user", str(args.herd_users + 1), "--users", str(SOLD_OUT_ATTEMPTS),
             "--attempts", str(SOLD_OUT_ATTEMPTS)]
    before = bench.statement_counters()
    s = bc.run_load(load_command(args, port, cell.flow, threads, extra), args.herd_timeout)
    after = bench.statement_counters()
    statements = sum(after[k] - before[k] for k in STATEMENT_COUNTERS)
    return {"after_sale_attempts": s["attempts"], "after_sale_claimed": s["claimed"],
            "after_sale_statements": statements,
            "statements_per_rejected": statements / s["attempts"] if s["attempts"] else 0.0}


def statements_per_claim(r):
    if not r["claimed"]:
        return None
    rejected = r["attempts"] - r["claimed"]
    return max(0.0, r["statements"] - rejected * r["statements_per_rejected"]) / r["claimed"]


def invariants(r, cell):
    """claimguard's promises on what the run left: rows = stock consumed = claims the app was told, one row per
    user, no more rows than the stock."""
    problems = []
    if r["rows"] > r["stock"] or r["remain"] < 0:
        problems.append(f"over-issue: {r['rows']} rows of a stock of {r['stock']}, remain {r['remain']}")
    if r["rows"] != r["consumed"]:
        problems.append(f"rows {r['rows']} != stock consumed {r['consumed']}")
    told = r["claimed"] + r.get("after_sale_claimed", 0)
    if told != r["rows"]:
        problems.append(f"app told {told} claimed vs {r['rows']} rows")
    if r["duplicate_rows"]:
        problems.append(f"{r['duplicate_rows']} duplicate rows")
    if not problems:
        return "hold"
    return ("VIOLATED" if cell.safe else "VIOLATED (expected, unsafe app)") + ": " + "; ".join(problems)


# --- the document ---------------------------------------------------------------------------------------
def cpu_per_attempt(r, who):
    v = r["cpu_s"].get(who)
    return f"{v / r['attempts'] * US_PER_S:.0f}" if v is not None and r["attempts"] else "-"


def errors_text(r):
    return ", ".join(f"{e['statement']} {e['code']} {e['message']} x{e['count']}" for e in r["errors"])


def herd_table(results):
    lines = ["| threads | cell | attempts | claimed | sold out | already claimed | other errors | DB statements "
             "per attempt | per rejected attempt (sold out) | per claim | Com_* deltas "
             "(select/update/insert/delete/begin/commit/rollback; stmt_execute) | "
             "claims/s until last claim | last claim s | p50 ms | p99 ms | all done s | "
             "CPU us/attempt MariaDB / claimguard | invariants | load avg | others' CPU |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|"]
    for r in results:
        c = r["counters"]
        per_claim = statements_per_claim(r)
        lines.append(
            f"| {r['threads']} | {r['cell']} | {r['attempts']} | {r['claimed']} | {r['sold_out']} | "
            f"{r['duplicate']} | {r['other_errors']} | {r['statements_per_attempt']:.2f} | "
            f"{r['statements_per_rejected']:.4f} | {'-' if per_claim is None else f'{per_claim:.2f}'} | "
            f"{'/'.join(str(c[k]) for k in STATEMENT_COUNTERS)}; {c[PREPARED_COUNTER]} | "
            f"{r['claims_per_s_until_last_claim']:.0f} | "
            f"{r['last_claim_s']:.2f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['elapsed_s']:.2f} | "
            f"{cpu_per_attempt(r, 'mariadbd')} / {cpu_per_attempt(r, 'claimguard')} | "
            f"{invariants(r, parse_cell(r['cell']))} | {r['loadavg']:.1f} | {r['others_cpu_share']:.0%} |")
    return lines


def throughput_table(results, reference):
    lines = ["| threads | cell | claims/s | vs " + reference + " | p50 ms | p99 ms | DB statements per claim | "
             "other errors | CPU us/claim MariaDB / claimguard | invariants | load avg | others' CPU |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"]
    for r in results:
        ref = next((x for x in results if x["cell"] == reference and x["threads"] == r["threads"]), None)
        ratio = bc.fmt_ratio(r["claims_per_s"], ref["claims_per_s"]) if ref else "-"
        per_claim = f"{r['statements'] / r['claimed']:.2f}" if r["claimed"] else "-"
        cpu = " / ".join(f"{r['cpu_s'][w] / r['claimed'] * US_PER_S:.0f}" if w in r["cpu_s"] and r["claimed"]
                         else "-" for w in ("mariadbd", "claimguard"))
        lines.append(f"| {r['threads']} | {r['cell']} | {r['claims_per_s']:.0f} | {ratio} | {r['p50']:.2f} | "
                     f"{r['p99']:.2f} | {per_claim} | {r['other_errors']} | {cpu} | "
                     f"{invariants(r, parse_cell(r['cell']))} | {r['loadavg']:.1f} | {r['others_cpu_share']:.0%} |")
    return lines


def goals(results):
    """Issue 11's goals, for every claimguard cell measured."""
    lines = []
    for r in results:
        cell = parse_cell(r["cell"])
        if cell.via == "direct":
            continue
        what = f"{r['suite']} {r['cell']} at {r['threads']} threads: "
        if r["suite"] == "herd":
            ok = r["statements_per_attempt"] <= HERD_GOAL_STATEMENTS
            lines.append(f"- {what}{r['statements_per_attempt']:.2f} DB statements per attempt, goal <= "
                         f"{HERD_GOAL_STATEMENTS}: {'met' if ok else 'not met'}.")
            ok = r["statements_per_rejected"] <= HERD_GOAL_REJECTED
            lines.append(f"- {what}{r['statements_per_rejected']:.4f} DB statements per rejected attempt once sold "
                         f"out, goal <= {HERD_GOAL_REJECTED}: {'met' if ok else 'not met'}.")
            continue
        reference = "fixed_tx_direct" if r["suite"] == "hotrow" else "fixed_direct"
        goal = HOTROW_GOAL_RATIO if r["suite"] == "hotrow" else AUTOCOMMIT_GOAL_RATIO
        ref = next((x for x in results if x["suite"] == r["suite"] and x["cell"] == reference
                    and x["threads"] == r["threads"]), None)
        if ref is None or not ref["claims_per_s"]:
            lines.append(f"- {what}{reference} not measured, no ratio.")
            continue
        ratio = r["claims_per_s"] / ref["claims_per_s"]
        lines.append(f"- {what}{ratio:.2f} x {reference}, goal >= {goal}: {'met' if ratio >= goal else 'not met'}.")
    return lines


def render(args, runs, skipped, facts, variables, started, commands):
    slow = bool(args.fsync_delay_us)
    lines = [SLOW_BEGIN_MARKER if slow else BEGIN_MARKER, "", SLOW_SECTION_TITLE if slow else SECTION_TITLE, ""]
    lines.append("Issue 11's flash-sale benchmarks side by side in one run, written by `scripts/bench_claims.sh "
                 "flash` (helper `scripts/bench_flash.py`): a private MariaDB with production durability "
                 "(`sql/legacy_schema.sql` + the UNIQUE index migration), a Redis, and one claimguard per rules "
                 "set-up (rules/examples/coupon.yaml plus the features' stock-rule lines: "
                 + "; ".join(f"{f}: `{'; '.join(args.feature_lines[f])}`" for f in FEATURES)
                 + "). Cells: FLOW_direct is the app straight to MariaDB, FLOW_claimguard[+FEATURE] through "
                 "claimguard with Redis and the audit log; naive is the incident's read-check-write-insert, fixed "
                 "the post-mortem's conditional UPDATE, _tx the same inside BEGIN ... COMMIT. The tables are reset "
                 "before every run. The relay benchmark (sysbench against HAProxy, CPU per statement) is "
                 "`scripts/bench_proxy.sh` and `tests/bench/hop_cpu.py`, not this script. Speeds are reported, never "
                 "asserted.")
    lines.append("")
    lines.append(f"Measured {started:%Y-%m-%d %H:%M} UTC, claimguard {bc.claimguard_version()} at commit "
                 f"{facts['commit']}" + (f" plus uncommitted changes in {facts['dirty_files']} tracked files"
                                         if facts["dirty_files"] else "")
                 + f", built {args.build_type}; {args.protocol} protocol, "
                 + ("CLIENT_FOUND_ROWS" if args.found_rows else "no CLIENT_FOUND_ROWS")
                 + f", claimguard I/O threads {args.claimguard_threads or 'one per core'}.")
    lines.append("")
    lines.append(f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']} RAM, Linux {facts['kernel']}; "
                 f"{facts['redis']}. Load average at the start {args.loadavg_start:.1f}, at the end "
                 f"{os.getloadavg()[0]:.1f} (shared machine: other people's builds and tests run meanwhile; compare "
                 "cells of one table, run back to back, rather than absolute numbers). \"load avg\" in the tables is "
                 "the 1-minute load average around a run and counts this benchmark's own threads too (MariaDB "
                 "threads waiting on a log flush, the load tool's threads); \"others' CPU\" is the share of the "
                 "machine's CPU time (/proc/stat) that processes other than this benchmark's took during the run.")
    lines.append("")
    check = facts["flush_check"]
    lines.append(("Storage: every fsync and fdatasync of mariadbd waits "
                  f"{args.fsync_delay_us / 1000:g} ms longer (`tests/load/slow_fsync.cpp` preloaded with LD_PRELOAD, "
                  "standing for network block storage that flushes in 0.5-1 ms). " if slow else
                  "Storage: this machine's disk, no delay added (`--fsync-delay-us` adds one). ")
                 + f"Checked before the runs: {check['commits']} serial autocommit UPDATEs of one row, directly, took "
                 f"{check['ms_per_commit']:.2f} ms per commit, with "
                 + ", ".join(f"{v:.2f} {k}" for k, v in sorted(check["fsyncs_per_commit"].items()))
                 + " per commit (the binary log's syncs are not counted by the server).")
    lines.append("")
    lines.append("Server (queried with SELECT @@...): " + ", ".join(f"`{k}` = {v}" for k, v in variables.items())
                 + ".")
    if "herd" in runs:
        lines += ["", "### Herd", "",
                  f"{args.herd_stock} coupons, {args.herd_attempts:,} attempts by {args.herd_users:,} users drawn at "
                  "random (some try more than once), autocommit, every attempt run to the end. DB statements per "
                  "attempt: the SHOW GLOBAL STATUS deltas of " + ", ".join(STATEMENT_COUNTERS) + " over the run "
                  "(claimguard's own statements included) divided by the attempts. Claims/s until the last claim: "
                  "claims / the time of the last successful claim (the sale's speed until sold out). Latency is "
                  "per attempt. CPU per attempt from /proc (utime + stime).", ""]
        lines += herd_table(runs["herd"])
    if "hotrow" in runs:
        lines += ["", "### Hot row in transactions", "",
                  f"BEGIN; statements; COMMIT with {args.app_work_ms:g} ms of app work slept between statements, "
                  f"{args.hotrow_seconds:g} s per run after a {args.warmup:g} s warm-up, stock {HOT_STOCK:,} (never "
                  "exhausted), every user claiming once.", ""]
        lines += throughput_table(runs["hotrow"], "fixed_tx_direct")
    if "autocommit" in runs:
        lines += ["", "### Autocommit throughput", "",
                  f"The claims benchmark's flows (autocommit), {args.autocommit_seconds:g} s per run after a "
                  f"{args.warmup:g} s warm-up, stock {HOT_STOCK:,}, every user claiming once.", ""]
        lines += throughput_table(runs["autocommit"], "fixed_direct")
    all_results = [r for suite in SUITES for r in runs.get(suite, [])]
    lines += ["", "Goals (issue 11):", ""] + (goals(all_results) or ["- no claimguard cell measured."])
    if skipped:
        grouped = {}
        for suite, name, threads, why in skipped:
            grouped.setdefault((suite, name, why), []).append(str(threads))
        lines += ["", "Not run: " + "; ".join(f"{suite} {name} at {'/'.join(ts)} threads: {why}"
                                               for (suite, name, why), ts in grouped.items()) + "."]
    errs = [f"{r['suite']} {r['cell']} at {r['threads']} threads: {errors_text(r)}" for r in all_results if r["errors"]]
    lines += ["", "Other errors by cell: " + ("; ".join(errs) if errs else "none") + ".", "", "Commands:", "", "```"]
    lines += commands + ["```", "", SLOW_END_MARKER if slow else END_MARKER]
    return "\n".join(lines) + "\n"


def first_error(work, via, exception):
    """The first error line of a claimguard that did not start (e.g. the rules field it does not know)."""
    try:
        with open(os.path.join(work, f"claimguard-{via}.log"), "r", encoding="utf-8", errors="replace") as f:
            line = next((x for x in f if "[error]" in x or "[critical]" in x), None)
    except OSError:
        line = None
    text = line.split("] ", 3)[-1].strip() if line else str(exception).splitlines()[0]
    return text.replace(work, "$WORK")


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    raise SystemExit(128 + signum)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--load", required=True, help="the claimguard-load binary")
    ap.add_argument("--doc", required=True)
    ap.add_argument("--suites", default=" ".join(SUITES))
    ap.add_argument("--herd-cells", default="naive_direct fixed_direct naive_claimguard naive_claimguard+read_cache "
                    "naive_claimguard+admission naive_claimguard+admission+read_cache")
    ap.add_argument("--herd-threads", default="64 256")
    ap.add_argument("--herd-stock", type=int, default=100)
    ap.add_argument("--herd-attempts", type=int, default=50_000)
    ap.add_argument("--herd-users", type=int, default=20_000)
    ap.add_argument("--herd-timeout", type=float, default=900, help="seconds one herd run may take")
    ap.add_argument("--hotrow-cells", default="naive_tx_direct fixed_tx_direct naive_tx_claimguard "
                    "naive_tx_claimguard+defer naive_tx_claimguard+admission+defer")
    ap.add_argument("--hotrow-threads", default="64")
    ap.add_argument("--hotrow-seconds", type=float, default=10)
    ap.add_argument("--app-work-ms", type=float, default=1)
    ap.add_argument("--autocommit-cells", default="naive_direct fixed_direct naive_claimguard "
                    "naive_claimguard+read_cache")
    ap.add_argument("--autocommit-threads", default="8 64")
    ap.add_argument("--autocommit-seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--rule-lines", action="append", default=[],
                    help="FEATURE='line; line': the stock-rule YAML lines of a feature (default: FEATURES)")
    ap.add_argument("--protocol", choices=["text", "prepared"], default="text")
    ap.add_argument("--found-rows", type=int, choices=[0, 1], default=1)
    ap.add_argument("--claimguard-threads", type=int, default=1)
    ap.add_argument("--build-type", default="unknown")
    ap.add_argument("--invocation", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fsync-delay-us", type=int, default=0,
                    help="add this many microseconds to every fsync/fdatasync of MariaDB (0: none)")
    ap.add_argument("--slow-fsync-lib", default="", help="the claimguard-slow-fsync.so shim (with --fsync-delay-us)")
    args = ap.parse_args()
    if args.fsync_delay_us and not os.path.isfile(args.slow_fsync_lib):
        ap.error("--fsync-delay-us needs --slow-fsync-lib (build target claimguard-slow-fsync)")
    args.feature_lines = {k: list(v) for k, v in FEATURES.items()}
    for spec in args.rule_lines:
        feature, sep, yaml = spec.partition("=")
        if not sep or feature not in FEATURES:
            ap.error(f"--rule-lines {spec!r}: FEATURE=yaml with FEATURE of {' '.join(FEATURES)}")
        args.feature_lines[feature] = [line.strip() for line in yaml.split(";") if line.strip()]
    args.suites = args.suites.split()
    if [s for s in args.suites if s not in SUITES]:
        ap.error(f"--suites: of {' '.join(SUITES)}")
    try:
        args.cells = {s: [parse_cell(c) for c in getattr(args, f"{s}_cells").split()] for s in SUITES}
    except ValueError as e:
        ap.error(str(e))
    args.threads = {s: [int(t) for t in getattr(args, f"{s}_threads").split()] for s in SUITES}
    args.stock = HOT_STOCK  # for bc.Bench.reset until the first FlashBench.reset
    args.flush_log_at_trx_commit = None
    args.loadavg_start = os.getloadavg()[0]
    return args


def main():
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    args = parse_args()
    started = datetime.datetime.now(datetime.timezone.utc)
    work = tempfile.mkdtemp(prefix="claimguard-bench-flash.")
    bench = FlashBench(args, work)
    runs, skipped, failed_setups = {}, [], {}
    try:
        facts = bc.machine_facts(args.doc)
        bench.start()
        variables = bench.server_variables()
        bench.reset(HOT_STOCK)
        facts["flush_check"] = bench.flush_check()
        print(f"flush check: {facts['flush_check']}", flush=True)
        print("server: " + ", ".join(f"{k}={v}" for k, v in variables.items()), flush=True)
        for suite in args.suites:
            for t in args.threads[suite]:
                for cell in args.cells[suite]:
                    if cell.via in failed_setups:
                        skipped.append((suite, cell.name, t, failed_setups[cell.via]))
                        continue
                    try:
                        r = measure(bench, suite, cell, t)
                    except RuntimeError as e:
                        if cell.via != "direct" and cell.via not in bench.proxies:
                            why = "claimguard did not start with these rules: " + first_error(work, cell.via, e)
                            failed_setups[cell.via] = why
                            skipped.append((suite, cell.name, t, why))
                            print(f"{suite} {cell.name}: not run: {why}", flush=True)
                            continue
                        raise
                    runs.setdefault(suite, []).append(r)
                    print(f"{suite:<10} {t:>3} threads {cell.name:<42} attempts {r['attempts']:>7} claimed "
                          f"{r['claimed']:>7} claims/s {r['claims_per_s']:8.0f} (until last claim "
                          f"{r['claims_per_s_until_last_claim']:8.0f}) stmts/attempt {r['statements_per_attempt']:.2f} "
                          f"p99 {r['p99']:.2f} ms errors {r['other_errors']} invariants "
                          f"{invariants(r, cell)} load {r['loadavg']:.1f} others {r['others_cpu_share']:.0%}",
                          flush=True)
        commands = [args.invocation] if args.invocation else []
        for via, p in bench.proxies.items():
            commands.append(f"# claimguard for {via} ($WORK: the temporary directory):")
            commands.append(shlex.join(p.command()).replace(work, "$WORK").replace(bc.REPO + os.sep, ""))
        commands.append("# MariaDB: " + shlex.join(bench.cluster.db.command()).replace(work, "$WORK"))
        for suite in args.suites:
            load = load_command(args, "PORT", "FLOW", "N", suite_load_args(args, suite))
            commands.append(f"# {suite}, per run after the tables' reset (PORT: MariaDB's or a claimguard's):")
            commands.append(shlex.join(load).replace(bc.REPO + os.sep, "").replace(":PORT", ":$PORT"))
        slow = bool(args.fsync_delay_us)
        bc.benchdoc.write_block(args.doc, render(args, runs, skipped, facts, variables, started, commands),
                                SLOW_BEGIN_MARKER if slow else BEGIN_MARKER, SLOW_END_MARKER if slow else END_MARKER)
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
