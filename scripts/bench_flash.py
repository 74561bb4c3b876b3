#!/usr/bin/env python3
"""Flash-sale benchmarks of issues 11 and 20 (herd, hot row in transactions, autocommit), side by side in one run.

Driven by `scripts/bench_claims.sh flash` (which builds the Release binaries and passes them here). Starts its own
MariaDB with production durability (log_bin, sync_binlog = 1, innodb_flush_log_at_trx_commit = 1), a Redis and
the claimguard sidecars of each rules set-up, reusing scripts/bench_claims.py (Bench, CPU accounting, machine facts)
and tests/incident/cluster.py. A cell is a flow, a target and, for claimguard, the features whose stock-rule lines
are appended to the coupon_stock rule of rules/examples/coupon.yaml:

    naive_direct  fixed_direct  naive_tx_direct  fixed_tx_direct     the app straight to MariaDB
    naive_claimguard[+FEATURE...]  naive_tx_claimguard[+FEATURE...]  through one claimguard (features: FEATURES)
    naive_claimguardN[+FEATURE...]                                    through N claimguards with the same rules in
                                                                      front of the one database (the load tool's
                                                                      threads go round-robin over them)

A cell whose claimguard does not start (a binary that does not know a feature's rule field) is reported as not
run; the others go on. Each claimguard cell's table row says what its features did (from the sidecars' /metrics
over the run), and says so when a feature did nothing. Writes the block between the flash markers of
docs/BENCHMARKS.md (with --fsync-delay-us, the flash-slow-storage block). Speeds are reported, never asserted.
"""

import argparse
import dataclasses
import datetime
import os
import re
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
SECTION_TITLE = "## Flash sale (issues 11 and 20)"
# With --fsync-delay-us the results go to a block of their own, so both storage settings stay in the document.
SLOW_BEGIN_MARKER = "<!-- flash-slow-storage:begin -->"
SLOW_END_MARKER = "<!-- flash-slow-storage:end -->"
SLOW_SECTION_TITLE = "## Flash sale with slow storage (issue 20)"
CAMPAIGN = bc.CAMPAIGN
SEED = bc.SEED
US_PER_S = bc.US_PER_S
# The stock-rule lines each feature adds (override with --rule-lines FEATURE='yaml; yaml').
FEATURES = {
    # a sold-out key's refreshes back off to 1 s (read_cache_sold_out): the herd's after-sale attempts
    "read_cache": ["read_cache: 50ms", "read_cache_sold_out: 1s"],
    "admission": ["admission: {max_in_flight: 4, queue_timeout: 2s}"],
    "defer": ["defer_decrement: true"],
    # group_update gathers the takes waiting in admission's per-key queue (a rule with group_update and no
    # admission is an error), so it brings its own admission line: one batch of a key in flight per sidecar, the
    # next one gathering while it flushes (docs/RULES.md's example). A cell that also names +admission gets
    # admission's line instead (see stock_lines).
    "group_update": ["admission: {max_in_flight: 1, queue_timeout: 2s}",
                     "group_update: {max_batch: 32, max_wait: 1ms}"],
    # reserve needs the sidecar's own account (RESERVE_USER, created by FlashBench.start) and a rule without
    # version_column: its set-ups use the example rules without that line (reserve_base_rules).
    "reserve": ["reserve: {block: 50, idle: 5s}"],
}
# The stock-rule field a feature is named after, for stock_lines' precedence.
FEATURE_FIELD = {"read_cache": "read_cache", "admission": "admission", "defer": "defer_decrement",
                 "group_update": "group_update", "reserve": "reserve"}
MAX_SIDECARS = 64
# The sidecar's own account of reserve set-ups (the schema check's): SELECT on the database, UPDATE on the stock
# table, nothing else (docs/OPERATIONS.md); its password reaches claimguard through the environment only.
RESERVE_USER = "cg_bench_sidecar"
RESERVE_PASSWORD = "bench-Sidecar-Pw1"
RESERVE_PASSWORD_ENV = "CLAIMGUARD_SCHEMA_CHECK_PASSWORD"
# Counters read from every sidecar's /metrics before and after a run (summed over the set-up's sidecars).
RULE = 'rule="coupon_stock"'
METRICS = {
    "read_cache_hits": f'claimguard_read_cache_total{{{RULE},result="hit"}}',
    "admission_waits": f"claimguard_admission_waits_total{{{RULE}}}",
    "admission_timeouts": f"claimguard_admission_timeouts_total{{{RULE}}}",
    "deferred_committed": f'claimguard_deferred_takes_total{{{RULE},result="committed"}}',
    "group_batches": f"claimguard_group_update_batches_total{{{RULE}}}",
    "group_takes": f"claimguard_group_update_takes_total{{{RULE}}}",
    "reserve_served": f'claimguard_reserve_takes_total{{{RULE},result="served"}}',
    "reserve_returned": f'claimguard_reserve_takes_total{{{RULE},result="returned"}}',
    "reserve_refills": "claimguard_reserve_refills_total",
}
FLOWS = ("naive", "fixed", "naive_tx", "fixed_tx")
# SHOW GLOBAL STATUS counters that count a client's statements (text protocol); Com_stmt_execute is shown apart,
# as MariaDB counts an executed prepared statement under it and under its command's counter.
STATEMENT_COUNTERS = ("Com_select", "Com_update", "Com_insert", "Com_delete", "Com_begin", "Com_commit",
                      "Com_rollback")
PREPARED_COUNTER = "Com_stmt_execute"
# Issue 11's goal (the others are issue 20's, below).
HERD_GOAL_STATEMENTS = 0.1      # database statements per attempt through claimguard
ISSUE11_HERD_STOCK = 100        # ... in a herd on this many coupons (at most)
FLUSH_CHECK_COMMITS = 100       # serial durable commits timed by FlashBench.flush_check
SOLD_OUT_ATTEMPTS = 2_000       # the herd's after-sale phase: attempts on the sold-out stock, measured alone
# Issue 20's goals as (with 1 ms flushes, on this machine's disk): claimguard's claims/s against the hand-fixed
# app's; autocommit by threads, the herd at any stock and threads, the hot row in transactions (64 threads).
AUTOCOMMIT_GOALS = {64: (3.0, 1.2), 8: (1.5, 1.0), 1: (0.9, 0.9)}
HERD_GOAL = (2.0, 1.2)
HOTROW_GOAL = (5.0, 4.0)
HOTROW_STRETCH = 10.0           # with 1 ms flushes
HERD_GOAL_REJECTED = 0.001      # database statements per rejected attempt in a herd (both settings)
MARIADB_CPU_GOAL = 0.6          # MariaDB CPU per claim with group_update vs the hand-fixed app (this disk only)
HOT_STOCK = 1_000_000           # hot row and autocommit: nothing sells out
DURABLE_FLAGS = ("--sync-binlog=1", "--innodb-flush-log-at-trx-commit=1", "--server-id=1",
                 "--binlog-format=ROW")
UNDURABLE_FLAGS = ("--skip-log-bin", "--innodb-flush-log-at-trx-commit=2")
SUITES = ("herd", "hotrow", "autocommit")


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str
    flow: str                 # claimguard-load --flow
    via: str                  # "direct", or the claimguard rules set-up: "rules_redis[+feature...]"
    features: tuple
    sidecars: int = 0         # claimguard processes of the set-up (0: direct)

    @property
    def safe(self):
        return self.via != "direct" or self.flow.startswith("fixed")

    @property
    def setup(self):
        """The sidecars this cell runs through: one set-up per rules set-up and count."""
        return self.via if self.sidecars <= 1 else f"{self.via}x{self.sidecars}"


def parse_cell(name):
    """naive_direct, fixed_tx_direct, naive_claimguard+read_cache+admission, naive_claimguard8+group_update, ...
    -> Cell; ValueError if bad."""
    base, *features = name.split("+")
    flow, _, target = base.rpartition("_")
    m = re.fullmatch(r"claimguard([1-9][0-9]*)?", target)
    if flow not in FLOWS or (target != "direct" and not m):
        raise ValueError(f"bad cell {name!r}: FLOW_direct or FLOW_claimguard[N][+FEATURE...], FLOW of {FLOWS}")
    sidecars = 0 if target == "direct" else int(m.group(1) or 1)
    if sidecars > MAX_SIDECARS:
        raise ValueError(f"bad cell {name!r}: at most {MAX_SIDECARS} sidecars")
    unknown = [f for f in features if f not in FEATURES]
    if unknown or (features and target == "direct") or len(set(features)) != len(features):
        raise ValueError(f"bad cell {name!r}: features {unknown or features} (known, once each, claimguard only: "
                         f"{' '.join(FEATURES)})")
    via = "direct" if target == "direct" else "+".join(["rules_redis"] + sorted(features))
    return Cell(name, flow, via, tuple(sorted(features)), sidecars)


def stock_lines(feature_lines, features):
    """The stock-rule lines of a set-up's features. A field is written once: a feature's own field (admission's
    `admission:`) before the same field brought along by another feature (group_update's admission line), else
    the first feature's in name order."""
    own = {FEATURE_FIELD[f] for f in features}
    lines, fields = [], set()
    for f in sorted(features):
        for line in feature_lines[f]:
            field = line.split(":", 1)[0].strip()
            if field in fields or (field in own and field != FEATURE_FIELD[f]):
                continue
            fields.add(field)
            lines.append(line)
    return lines


def reserve_base_rules(dest):
    """rules/examples/coupon.yaml without its version_column line: reserve refuses a rule with one (the row
    never sees the takes it serves, so it could not count them)."""
    with open(cluster.EXAMPLE_RULES, encoding="utf-8") as f:
        text = f.read()
    text, n = re.subn(r"(?m)^[ ]+version_column:[^\n]*\n", "", text)
    if n != 1:
        raise RuntimeError(f"{cluster.EXAMPLE_RULES}: expected one version_column line, found {n}")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text)
    return dest


def parse_metrics(text):
    """Prometheus text -> {name{labels}: value} (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
    return out


def feature_work(features, m, claimed):
    """(text, idle features) of what a cell's features did over a run, from its sidecars' metric deltas m. A
    feature that did nothing is named in idle: read_cache without a hit, defer without a deferred take committed,
    group_update without a batch of more than one take, reserve without a take served from a block. admission is
    shown (its waits), never idle: with few threads nothing needs to wait."""
    parts, idle = [], []
    if "read_cache" in features:
        parts.append(f"read_cache {m.get('read_cache_hits', 0):.0f} hits")
        if not m.get("read_cache_hits"):
            idle.append("read_cache")
    if "admission" in features or "group_update" in features:
        parts.append(f"admission {m.get('admission_waits', 0):.0f} waits"
                     + (f", {m['admission_timeouts']:.0f} timeouts" if m.get("admission_timeouts") else ""))
    if "defer" in features:
        parts.append(f"defer {m.get('deferred_committed', 0):.0f} committed")
        if not m.get("deferred_committed"):
            idle.append("defer")
    if "group_update" in features:
        batches, takes = m.get("group_batches", 0), m.get("group_takes", 0)
        parts.append(f"group_update {takes:.0f} takes in {batches:.0f} batches"
                     + (f" ({takes / batches:.1f} per batch)" if batches else ""))
        if takes <= batches:
            idle.append("group_update")
    if "reserve" in features:
        served = m.get("reserve_served", 0)
        parts.append(f"reserve {served:.0f} served" + (f" ({served / claimed:.0%} of claims)" if claimed else "")
                     + f", {m.get('reserve_returned', 0):.0f} returned, {m.get('reserve_refills', 0):.0f} refills")
        if not served:
            idle.append("reserve")
    text = "; ".join(parts)
    if idle:
        text += "; DID NOTHING: " + ", ".join(idle)
    return text, idle


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
    def __init__(self, args, work):
        super().__init__(args, work)
        self.setups = {}     # Cell.setup -> its running sidecars (servers.Claimguard), started on first use
        self.commands = {}   # Cell.setup -> (sidecars, the first one's command line, features), for the document

    def start(self):
        self.cluster.db = DurableMariaDB(self.cluster.db.dir)
        if self.args.fsync_delay_us:
            self.cluster.db.slow_fsync = (self.args.slow_fsync_lib, self.args.fsync_delay_us)
        super().start()
        # reserve's account: the sidecar's own, least privilege (as docs/OPERATIONS.md "reserve" provisions it).
        self.cluster.db.sql(f"""
            CREATE USER '{RESERVE_USER}'@'%' IDENTIFIED BY '{RESERVE_PASSWORD}';
            GRANT SELECT ON {cluster.DATABASE}.* TO '{RESERVE_USER}'@'%';
            GRANT UPDATE ON {cluster.DATABASE}.coupon_stock TO '{RESERVE_USER}'@'%';
            FLUSH PRIVILEGES;""")

    @staticmethod
    def sidecar_name(setup, count, i):
        return f"claimguard-{setup}" + (f"-{i + 1}" if count > 1 else "")

    def sidecars(self, cell):
        """The cell's running sidecars: cell.sidecars claimguard processes with the same rules, started (one after
        another) on first use and kept until the end, or until settle() stops a reserve set-up."""
        if cell.setup not in self.setups:
            started = []
            reserve = "reserve" in cell.features
            if reserve:
                os.environ[RESERVE_PASSWORD_ENV] = RESERVE_PASSWORD  # the environment, never a flag
            try:
                for i in range(cell.sidecars):
                    name = self.sidecar_name(cell.setup, cell.sidecars, i)
                    p = servers.Claimguard(self.args.claimguard, self.work, name, self.cluster.db.port,
                                           extra_args=self.proxy_args(cell.via, name), log_level="warn")
                    p.start()
                    started.append(p)
            except Exception:
                for p in started:
                    p.stop()
                raise
            finally:
                os.environ.pop(RESERVE_PASSWORD_ENV, None)
            self.setups[cell.setup] = started
            self.commands.setdefault(cell.setup, (cell.sidecars, started[0].command(), cell.features))
        return self.setups[cell.setup]

    def ports(self, cell):
        return [self.cluster.db.port] if cell.via == "direct" else [p.port for p in self.sidecars(cell)]

    def settle(self, cell):
        """Before the tables are read or reset: a reserve set-up's sidecars are stopped (SIGTERM: the units they
        hold go back to the row), so the row counts only claims; the next run starts them again."""
        if "reserve" in cell.features and cell.setup in self.setups:
            for p in self.setups.pop(cell.setup):
                p.stop()

    def sidecar_metrics(self, cell):
        """METRICS summed over the cell's running sidecars ({} for a direct cell)."""
        total = dict.fromkeys(METRICS, 0.0)
        for p in self.setups.get(cell.setup, []) if cell.via != "direct" else []:
            status, body = servers.http_get(p.admin_port, "/metrics")
            if status != 200:
                raise RuntimeError(f"{p.name}: /metrics answered {status}")
            values = parse_metrics(body)
            for k, key in METRICS.items():
                total[k] += values.get(key, 0.0)
        return total

    def proxy_args(self, via, name):
        extra = super().proxy_args("rules_redis")
        features = via.split("+")[1:]
        if features:
            source = cluster.EXAMPLE_RULES
            if "reserve" in features:
                source = reserve_base_rules(os.path.join(self.work, "rules-reserve-base.yaml"))
                extra += ["--schema-check", "warn", "--schema-check-user", RESERVE_USER,
                          "--schema-check-database", cluster.DATABASE]
            path = cluster.rules_with_stock_lines(os.path.join(self.work, f"rules-{via}.yaml"),
                                                  stock_lines(self.args.feature_lines, features), source=source)
            extra[extra.index(cluster.EXAMPLE_RULES)] = path
        extra[extra.index("--audit-log") + 1] = os.path.join(self.work, f"audit-{name}.jsonl")
        return extra

    def stop(self):
        for sidecars in self.setups.values():
            for p in sidecars:
                p.stop()
        self.setups = {}
        super().stop()

    def reset(self, stock):
        self.args.stock = stock
        super().reset()
        # One audit line per rewritten claim adds up; claimguard appends (O_APPEND), so emptying is safe.
        for sidecars in self.setups.values():
            for p in sidecars:
                path = os.path.join(self.work, f"audit-{p.name}.jsonl")
                if os.path.exists(path):
                    os.truncate(path, 0)

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
def load_command(args, ports, cell_flow, threads, extra):
    """claimguard-load against the given ports: one --target each, the threads going round-robin over them."""
    targets = [a for port in ports for a in ("--target", f"{servers.HOST}:{port}")]
    return [args.load] + targets + [
        "--user", cluster.APP_USER, "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE,
        "--threads", str(threads), "--campaign", str(CAMPAIGN), "--protocol", args.protocol, "--flow", cell_flow,
        "--seed", str(SEED), "--json"] + (["--found-rows"] if args.found_rows else []) + extra


def herd_size(args, stock):
    """(users, attempts) of a herd on `stock` coupons: at least the configured ones, and enough that the stock
    sells out (twice as many users as coupons, three attempts per coupon)."""
    return max(args.herd_users, 2 * stock), max(args.herd_attempts, 3 * stock)


def suite_load_args(args, suite, stock):
    """The load flags of a suite beyond the cell's: who attempts, how often, for how long."""
    if suite == "herd":
        users, attempts = herd_size(args, stock)
        return ["--first-user", "1", "--users", str(users), "--attempts", str(attempts)]
    seconds = args.hotrow_seconds if suite == "hotrow" else args.autocommit_seconds
    extra = ["--first-user", "1", "--users", str(HOT_STOCK), "--attempts-per-user", "1", "--seconds", f"{seconds:g}"]
    if suite == "hotrow":
        extra += ["--app-work-ms", f"{args.app_work_ms:g}"]
    return extra


def suite_stocks(args, suite):
    return args.herd_stocks if suite == "herd" else [HOT_STOCK]


def suite_timeout(args, suite):
    if suite == "herd":
        return args.herd_timeout
    return (args.hotrow_seconds if suite == "hotrow" else args.autocommit_seconds) + bc.LOAD_GRACE_S


def measure(bench, suite, cell, threads, stock):
    """One measured run: reset, (warm up, reset,) run; what it cost the database, what the cell's features did
    and what the run left behind."""
    args = bench.args
    extra = suite_load_args(args, suite, stock)
    if suite != "herd" and args.warmup > 0:
        bench.reset(stock)
        warm = list(extra)
        warm[warm.index("--seconds") + 1] = f"{args.warmup:g}"
        bc.run_load(load_command(args, bench.ports(cell), cell.flow, threads, warm), args.warmup)
        bench.settle(cell)
    bench.reset(stock)
    ports = bench.ports(cell)  # a reserve set-up's sidecars start again here, after the reset
    pids = {"mariadbd": [bench.cluster.db.proc.pid], "redis": [bench.cluster.redis.proc.pid]}
    if cell.via != "direct":
        pids["claimguard"] = [p.proc.pid for p in bench.sidecars(cell)]  # all of the set-up's, summed

    def cpu_now():
        return {k: [bc.process_cpu_s(p) for p in ps] for k, ps in pids.items()}

    cpu_before = cpu_now()
    metrics_before = bench.sidecar_metrics(cell)
    children_before, machine_before = bc.children_cpu_s(), bc.machine_cpu_s()
    load_before = os.getloadavg()[0]
    counters_before = bench.statement_counters()
    s = bc.run_load(load_command(args, ports, cell.flow, threads, extra), suite_timeout(args, suite) - bc.LOAD_GRACE_S)
    machine_after, children_after = bc.machine_cpu_s(), bc.children_cpu_s()
    counters_after = bench.statement_counters()
    cpu_after = cpu_now()
    metrics_after = bench.sidecar_metrics(cell)
    cpu = {k: sum(a - b for a, b in zip(cpu_after[k], cpu_before[k]) if a is not None and b is not None)
           for k in pids if None not in cpu_before[k] + cpu_after[k]}
    ours = sum(cpu.values()) + children_after - children_before  # + the load tool (and the SQL clients)
    busy, total = machine_after[0] - machine_before[0], machine_after[1] - machine_before[1]
    delta = {k: counters_after[k] - counters_before[k] for k in counters_before}
    statements = sum(delta[k] for k in STATEMENT_COUNTERS)
    metrics = {k: metrics_after[k] - metrics_before[k] for k in metrics_after}
    work, idle = feature_work(cell.features, metrics, s["claimed"])
    r = {"suite": suite, "cell": cell.name, "threads": threads, "attempts": s["attempts"], "claimed": s["claimed"],
         "sold_out": s["sold_out"], "duplicate": s["duplicate"], "other_errors": s["other_errors"],
         "errors": s["errors"], "elapsed_s": s["elapsed_s"], "claims_per_s": s["claims_per_s"],
         "last_claim_s": s.get("last_claim_s", 0.0),
         "claims_per_s_until_last_claim": s.get("claims_per_s_until_last_claim", 0.0),
         "attempts_per_s": s["attempts_per_s"], "p50": s["latency_ms"]["p50"], "p99": s["latency_ms"]["p99"],
         "counters": delta, "statements": statements,
         "statements_per_attempt": statements / s["attempts"] if s["attempts"] else 0.0,
         "cpu_s": cpu, "others_cpu_share": max(0.0, busy - ours) / total if total > 0 else 0.0,
         "loadavg": (load_before + os.getloadavg()[0]) / 2, "sidecars": cell.sidecars, "metrics": metrics,
         "feature_work": work, "idle_features": idle}
    if suite == "herd":
        r.update(after_sale(bench, ports, cell, threads, stock))
    bench.settle(cell)
    r.update(bench.order_facts(stock))
    return r


def after_sale(bench, ports, cell, threads, stock):
    """The herd's second figure: SOLD_OUT_ATTEMPTS more attempts by new users on the sold-out stock, measured
    alone, give the database statements per rejected attempt; the run's statements less its rejected attempts'
    at that rate give the statements per claim. A claim here would be an over-issue: it counts in the
    invariants like the run's."""
    args = bench.args
    users, _ = herd_size(args, stock)
    extra = ["--first-user", str(users + 1), "--users", str(SOLD_OUT_ATTEMPTS), "--attempts", str(SOLD_OUT_ATTEMPTS)]
    before = bench.statement_counters()
    s = bc.run_load(load_command(args, ports, cell.flow, threads, extra), args.herd_timeout)
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


def same_run_shape(a, b):
    return a["suite"] == b["suite"] and a["threads"] == b["threads"] and a["stock"] == b["stock"]


def reference_of(results, r, reference):
    return next((x for x in results if x["cell"] == reference and same_run_shape(x, r)), None)


def herd_table(results):
    lines = ["| coupons | threads | cell | attempts | claimed | sold out | already claimed | other errors | DB "
             "statements per attempt | per rejected attempt (sold out) | per claim | Com_* deltas "
             "(select/update/insert/delete/begin/commit/rollback; stmt_execute) | "
             "claims/s until last claim | vs fixed_direct | last claim s | p50 ms | p99 ms | all done s | "
             "CPU us/attempt MariaDB / claimguard | invariants | features at work | load avg | others' CPU |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|"
             "---:|---:|"]
    for r in results:
        c = r["counters"]
        per_claim = statements_per_claim(r)
        ref = reference_of(results, r, "fixed_direct")
        ratio = bc.fmt_ratio(r["claims_per_s_until_last_claim"], ref["claims_per_s_until_last_claim"]) if ref else "-"
        lines.append(
            f"| {r['stock']} | {r['threads']} | {r['cell']} | {r['attempts']} | {r['claimed']} | {r['sold_out']} | "
            f"{r['duplicate']} | {r['other_errors']} | {r['statements_per_attempt']:.2f} | "
            f"{r['statements_per_rejected']:.4f} | {'-' if per_claim is None else f'{per_claim:.2f}'} | "
            f"{'/'.join(str(c[k]) for k in STATEMENT_COUNTERS)}; {c[PREPARED_COUNTER]} | "
            f"{r['claims_per_s_until_last_claim']:.0f} | {ratio} | "
            f"{r['last_claim_s']:.2f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['elapsed_s']:.2f} | "
            f"{cpu_per_attempt(r, 'mariadbd')} / {cpu_per_attempt(r, 'claimguard')} | "
            f"{invariants(r, parse_cell(r['cell']))} | {r['feature_work'] or '-'} | {r['loadavg']:.1f} | "
            f"{r['others_cpu_share']:.0%} |")
    return lines


def cpu_per_claim(r, who):
    v = r["cpu_s"].get(who)
    return v / r["claimed"] * US_PER_S if v is not None and r["claimed"] else None


def throughput_table(results, reference):
    lines = ["| threads | cell | claims/s | vs " + reference + " | p50 ms | p99 ms | DB statements per claim | "
             "other errors | CPU us/claim MariaDB / claimguard | invariants | features at work | load avg | "
             "others' CPU |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|"]
    for r in results:
        ref = reference_of(results, r, reference)
        ratio = bc.fmt_ratio(r["claims_per_s"], ref["claims_per_s"]) if ref else "-"
        per_claim = f"{r['statements'] / r['claimed']:.2f}" if r["claimed"] else "-"
        cpu = " / ".join("-" if v is None else f"{v:.0f}"
                         for v in (cpu_per_claim(r, w) for w in ("mariadbd", "claimguard")))
        lines.append(f"| {r['threads']} | {r['cell']} | {r['claims_per_s']:.0f} | {ratio} | {r['p50']:.2f} | "
                     f"{r['p99']:.2f} | {per_claim} | {r['other_errors']} | {cpu} | "
                     f"{invariants(r, parse_cell(r['cell']))} | {r['feature_work'] or '-'} | {r['loadavg']:.1f} | "
                     f"{r['others_cpu_share']:.0%} |")
    return lines


def verdict(ok):
    return "met" if ok else "not met"


def goals_issue11(results):
    """Issue 11's goal that issue 20 does not restate: the database statements per attempt of its herd, 100
    coupons (a bigger stock's claims alone take more: two statements each)."""
    lines = []
    for r in results:
        if r["suite"] == "herd" and r["stock"] <= ISSUE11_HERD_STOCK and parse_cell(r["cell"]).via != "direct":
            ok = r["statements_per_attempt"] <= HERD_GOAL_STATEMENTS
            lines.append(f"- herd of {r['stock']} coupons, {r['cell']} at {r['threads']} threads: "
                         f"{r['statements_per_attempt']:.2f} DB statements per attempt, goal <= "
                         f"{HERD_GOAL_STATEMENTS}: {verdict(ok)}.")
    return lines


def goals(results, slow):
    """Issue 20's goals for every claimguard cell measured; which goal depends on the storage setting (slow: the
    storage-latency mode, standing for 1 ms flushes)."""
    pick = 0 if slow else 1
    lines = []
    for r in results:
        cell = parse_cell(r["cell"])
        if cell.via == "direct":
            continue
        where = f"herd of {r['stock']} coupons" if r["suite"] == "herd" else r["suite"]
        what = f"- {where}, {r['cell']} at {r['threads']} threads: "
        idle = (f" ({', '.join(r['idle_features'])} did nothing in this cell)" if r["idle_features"] else "")
        if r["suite"] == "herd":
            ref = reference_of(results, r, "fixed_direct")
            goal = HERD_GOAL[pick]
            if ref is None or not ref["claims_per_s_until_last_claim"]:
                lines.append(f"{what}fixed_direct not measured, no ratio{idle}.")
            else:
                ratio = r["claims_per_s_until_last_claim"] / ref["claims_per_s_until_last_claim"]
                lines.append(f"{what}claims/s until sold out {ratio:.2f} x fixed_direct, goal >= {goal}: "
                             f"{verdict(ratio >= goal)}{idle}.")
            ok = r["statements_per_rejected"] <= HERD_GOAL_REJECTED
            lines.append(f"{what}{r['statements_per_rejected']:.4f} DB statements per rejected attempt once sold "
                         f"out, goal <= {HERD_GOAL_REJECTED}: {verdict(ok)}.")
            continue
        reference = "fixed_tx_direct" if r["suite"] == "hotrow" else "fixed_direct"
        ref = reference_of(results, r, reference)
        if ref is None or not ref["claims_per_s"]:
            lines.append(f"{what}{reference} not measured, no ratio{idle}.")
            continue
        ratio = r["claims_per_s"] / ref["claims_per_s"]
        if r["suite"] == "hotrow":
            goal = HOTROW_GOAL[pick]
            stretch = f" (stretch {HOTROW_STRETCH:g}x: {verdict(ratio >= HOTROW_STRETCH)})" if slow else ""
            lines.append(f"{what}{ratio:.2f} x {reference}, goal >= {goal}: {verdict(ratio >= goal)}{stretch}{idle}.")
        elif r["threads"] in AUTOCOMMIT_GOALS:
            goal = AUTOCOMMIT_GOALS[r["threads"]][pick]
            lines.append(f"{what}{ratio:.2f} x {reference}, goal >= {goal}: {verdict(ratio >= goal)}{idle}.")
        else:
            lines.append(f"{what}{ratio:.2f} x {reference}, no goal at {r['threads']} threads{idle}.")
        if r["suite"] == "autocommit" and "group_update" in cell.features:
            ours, theirs = cpu_per_claim(r, "mariadbd"), cpu_per_claim(ref, "mariadbd")
            if ours is None or not theirs:
                lines.append(f"{what}MariaDB CPU per claim not measured.")
            else:
                cpu = ours / theirs
                goal = (f"goal <= {MARIADB_CPU_GOAL}: {verdict(cpu <= MARIADB_CPU_GOAL)}" if not slow else
                        "no goal with 1 ms flushes")
                lines.append(f"{what}MariaDB CPU per claim {ours:.0f} us, {cpu:.2f} x {reference}'s, {goal}{idle}.")
    return lines


def render(args, runs, skipped, facts, variables, started, commands):
    slow = bool(args.fsync_delay_us)
    lines = [SLOW_BEGIN_MARKER if slow else BEGIN_MARKER, "", SLOW_SECTION_TITLE if slow else SECTION_TITLE, ""]
    lines.append("Issues 11 and 20's flash-sale benchmarks side by side in one run, written by "
                 "`scripts/bench_claims.sh flash` (helper `scripts/bench_flash.py`): a private MariaDB with "
                 "production durability (`sql/legacy_schema.sql` + the UNIQUE index migration), a Redis, and the "
                 "claimguard sidecars of each rules set-up (rules/examples/coupon.yaml plus the features' stock-rule "
                 "lines: " + "; ".join(f"{f}: `{'; '.join(args.feature_lines[f])}`" for f in FEATURES)
                 + "; group_update's admission line only when the cell does not name admission; reserve's set-ups "
                 f"without the example's version_column line, with the sidecar's own account `{RESERVE_USER}` "
                 "(SELECT on the database, UPDATE on coupon_stock, password from the environment) as "
                 "schema_check_user, and stopped (SIGTERM: the units they hold go back to the row) before the tables "
                 "are read or reset, so every run starts them again). Cells: FLOW_direct is the app straight to "
                 "MariaDB, FLOW_claimguard[+FEATURE] through one claimguard with Redis and the audit log, "
                 "FLOW_claimguardN[+FEATURE] through N claimguards with the same rules, Redis and the one database "
                 "(the load tool's threads go round-robin over them; their CPU summed in the claimguard column); "
                 "naive is the incident's read-check-write-insert, fixed the post-mortem's conditional UPDATE, _tx "
                 "the same inside BEGIN ... COMMIT. \"features at work\" is what each feature did over the measured "
                 "run, from the sidecars' /metrics (read_cache hits, admission waits, deferred takes committed, "
                 "group_update takes and batches, reserve takes served from a block), with \"DID NOTHING\" when a "
                 "feature did not act. The tables are reset before every run. The relay benchmark (sysbench against "
                 "HAProxy, CPU per statement) is `scripts/bench_proxy.sh` and `tests/bench/hop_cpu.py`, not this "
                 "script. Speeds are reported, never asserted.")
    lines.append("")
    lines.append(f"Measured {started:%Y-%m-%d %H:%M} UTC, claimguard {bc.claimguard_version()} at commit "
                 f"{facts['commit']}" + (f" plus uncommitted changes in {facts['dirty_files']} tracked files"
                                         if facts["dirty_files"] else "")
                 + f", built {args.build_type}; {args.protocol} protocol, "
                 + ("CLIENT_FOUND_ROWS" if args.found_rows else "no CLIENT_FOUND_ROWS")
                 + f", claimguard I/O threads {args.claimguard_threads or 'one per core'} per sidecar; the whole run "
                 f"took {(datetime.datetime.now(datetime.timezone.utc) - started).total_seconds() / 60:.1f} min.")
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
        sizes = ", ".join(f"{stock:,} coupons: {herd_size(args, stock)[1]:,} attempts by {herd_size(args, stock)[0]:,} "
                          "users" for stock in args.herd_stocks)
        lines += ["", "### Herd", "",
                  f"{sizes}; users drawn at random (some try more than once), autocommit, every attempt run to the "
                  "end. DB statements per attempt: the SHOW GLOBAL STATUS deltas of " + ", ".join(STATEMENT_COUNTERS)
                  + " over the run (claimguard's own statements included) divided by the attempts; per rejected "
                  f"attempt: {SOLD_OUT_ATTEMPTS:,} more attempts by new users on the sold-out stock, measured alone; "
                  "per claim: the run's statements less its rejected attempts' at that rate. Claims/s until the last "
                  "claim: claims / the time of the last successful claim (the sale's speed until sold out), against "
                  "fixed_direct's of the same coupons and threads. Latency is per attempt. CPU per attempt from /proc "
                  "(utime + stime).", ""]
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
    setting = (f"every fsync {args.fsync_delay_us / 1000:g} ms slower, the goals \"with 1 ms flushes\"" if slow
               else "this machine's disk, the goals \"on this machine's disk\"")
    lines += ["", f"Goals (issue 20; {setting}; claims/s against the hand-fixed app of the same threads, and "
              "coupons in a herd):", ""] + (goals(all_results, slow) or ["- no claimguard cell measured."])
    lines += ["", f"Goals (issue 11, herds of at most {ISSUE11_HERD_STOCK} coupons):", ""] + (
        goals_issue11(all_results) or ["- no such claimguard herd cell measured."])
    if skipped:
        grouped = {}
        for suite, name, threads, why in skipped:
            grouped.setdefault((suite, name, why), []).append(str(threads))
        lines += ["", "Not run: " + "; ".join(f"{suite} {name} at {'/'.join(ts)} threads: {why}"
                                               for (suite, name, why), ts in grouped.items()) + "."]
    errs = [f"{r['suite']}" + (f" of {r['stock']} coupons" if r["suite"] == "herd" else "")
            + f" {r['cell']} at {r['threads']} threads: {errors_text(r)}" for r in all_results if r["errors"]]
    lines += ["", "Other errors by cell: " + ("; ".join(errs) if errs else "none") + ".", "", "Commands:", "", "```"]
    lines += commands + ["```", "", SLOW_END_MARKER if slow else END_MARKER]
    return "\n".join(lines) + "\n"


def first_error(work, name, exception):
    """The first error line of a claimguard that did not start (e.g. the rules field it does not know)."""
    try:
        with open(os.path.join(work, f"{name}.log"), "r", encoding="utf-8", errors="replace") as f:
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
    # No naive_direct: the unsafe app over-issues on every one of its attempts' hot-row UPDATEs, which on 10,000
    # coupons with 1 ms flushes takes minutes; the herd's goals compare with the hand-fixed app.
    # reserve in the herd: its naive app reads the row and stops at 0, so the sale ends only because a sidecar
    # gives its last units back when a read finds the row empty (docs/RULES.md "reserve").
    ap.add_argument("--herd-cells", default="fixed_direct naive_claimguard+admission+read_cache "
                    "naive_claimguard+read_cache+group_update naive_claimguard8+read_cache+group_update "
                    "naive_claimguard+read_cache+reserve naive_claimguard8+read_cache+reserve")
    ap.add_argument("--herd-threads", default="64 256")
    ap.add_argument("--herd-stocks", default="100 10000", help="coupons of each herd")
    ap.add_argument("--herd-attempts", type=int, default=20_000, help="at least; 3 per coupon on a bigger stock")
    ap.add_argument("--herd-users", type=int, default=20_000, help="at least; 2 per coupon on a bigger stock")
    ap.add_argument("--herd-timeout", type=float, default=900, help="seconds one herd run may take")
    ap.add_argument("--hotrow-cells", default="naive_tx_direct fixed_tx_direct naive_tx_claimguard+defer "
                    "naive_tx_claimguard+admission+defer naive_tx_claimguard+reserve "
                    "naive_tx_claimguard8+admission+defer naive_tx_claimguard8+reserve")
    ap.add_argument("--hotrow-threads", default="64")
    ap.add_argument("--hotrow-seconds", type=float, default=5)
    ap.add_argument("--app-work-ms", type=float, default=1)
    # reserve serves autocommit takes too: the sale's only statement on the database is the claim's INSERT.
    ap.add_argument("--autocommit-cells", default="naive_direct fixed_direct naive_claimguard "
                    "naive_claimguard+read_cache naive_claimguard+group_update "
                    "naive_claimguard+read_cache+group_update naive_claimguard+read_cache+reserve "
                    "naive_claimguard8+read_cache naive_claimguard8+read_cache+group_update "
                    "naive_claimguard8+read_cache+reserve")
    ap.add_argument("--autocommit-threads", default="1 8 64")
    ap.add_argument("--autocommit-seconds", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
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
    args.herd_stocks = [int(x) for x in args.herd_stocks.split()]
    if not args.herd_stocks or min(args.herd_stocks) < 1:
        ap.error("--herd-stocks: one or more coupon counts")
    args.stock = HOT_STOCK  # for bc.Bench.reset until the first FlashBench.reset
    args.flush_log_at_trx_commit = None
    args.loadavg_start = os.getloadavg()[0]
    return args


def run_cell(bench, work, suite, cell, threads, stock, skipped, failed_setups):
    """measure(), or None when the cell's claimguard did not start (recorded in skipped; its rules set-up is not
    tried again)."""
    if cell.via in failed_setups:
        skipped.append((suite, cell.name, threads, failed_setups[cell.via]))
        return None
    try:
        r = measure(bench, suite, cell, threads, stock)
    except RuntimeError as e:
        if cell.via == "direct" or cell.setup in bench.setups:
            raise
        names = [FlashBench.sidecar_name(cell.setup, cell.sidecars, i) for i in range(cell.sidecars)]
        why = "claimguard did not start with these rules: " + next(
            (first_error(work, n, e) for n in names if os.path.exists(os.path.join(work, f"{n}.log"))), str(e))
        failed_setups[cell.via] = why
        skipped.append((suite, cell.name, threads, why))
        print(f"{suite} {cell.name}: not run: {why}", flush=True)
        return None
    shape = f"{stock:>5} coupons " if suite == "herd" else ""
    print(f"{suite:<10} {shape}{threads:>3} threads {cell.name:<44} attempts {r['attempts']:>7} claimed "
          f"{r['claimed']:>7} claims/s {r['claims_per_s']:8.0f} (until last claim "
          f"{r['claims_per_s_until_last_claim']:8.0f}) stmts/attempt {r['statements_per_attempt']:.2f} "
          f"p99 {r['p99']:.2f} ms errors {r['other_errors']} invariants {invariants(r, cell)} load "
          f"{r['loadavg']:.1f} others {r['others_cpu_share']:.0%}" + (f" | {r['feature_work']}" if r["feature_work"]
                                                                      else ""), flush=True)
    return r


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
            for stock in suite_stocks(args, suite):
                for t in args.threads[suite]:
                    for cell in args.cells[suite]:
                        r = run_cell(bench, work, suite, cell, t, stock, skipped, failed_setups)
                        if r is not None:
                            runs.setdefault(suite, []).append(r)
        commands = [args.invocation] if args.invocation else []
        if any("reserve" in features for _, _, features in bench.commands.values()):
            commands.append(f"# reserve's account (once, as root): CREATE USER '{RESERVE_USER}'@'%' IDENTIFIED BY "
                            f"'...'; GRANT SELECT ON {cluster.DATABASE}.* TO '{RESERVE_USER}'@'%'; GRANT UPDATE ON "
                            f"{cluster.DATABASE}.coupon_stock TO '{RESERVE_USER}'@'%'; its sidecars get the "
                            f"password in {RESERVE_PASSWORD_ENV}")
        for setup, (count, command, _) in bench.commands.items():
            commands.append(f"# claimguard for {setup}" + (f", {count} sidecars like this one (each its own ports "
                                                            "and audit log)" if count > 1 else "")
                            + " ($WORK: the temporary directory):")
            commands.append(shlex.join(command).replace(work, "$WORK").replace(bc.REPO + os.sep, ""))
        commands.append("# MariaDB: " + shlex.join(bench.cluster.db.command()).replace(work, "$WORK"))
        for suite in args.suites:
            for stock in suite_stocks(args, suite):
                load = load_command(args, ["PORT"], "FLOW", "N", suite_load_args(args, suite, stock))
                commands.append(f"# {suite}" + (f" of {stock} coupons" if suite == "herd" else "")
                                + ", per run after the tables' reset (PORT: MariaDB's or a claimguard's; one "
                                "--target per sidecar):")
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
