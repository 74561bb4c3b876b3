#!/usr/bin/env python3
"""incident_test.py: the coupon incident (DESIGN.md section 1) replayed through 8 claimguard sidecars.

Usage: incident_test.py VARIANT --claimguard PATH --load PATH --work-dir DIR [--rounds N]
       incident_test.py --list

Each run starts its own MariaDB (sql/legacy_schema.sql, plus the UNIQUE index of
sql/migrations/001_claimguard_unique_index.sql unless the variant says otherwise), a Redis and
8 `claimguard serve` instances in DIR, then per round: resets the stock to 100, races 300 users x 3
attempts from 24 threads of the unchanged legacy flow, checks DESIGN.md section 2's invariants with
SQL straight against MariaDB and against what the app was told, then lets one thread of new users
take what is left (units a refused duplicate gave back late) and checks that exactly the stock was
issued. The crash variants (sidecar_killed, mysql_restart, mysql_restart_transaction) SIGKILL two
sidecars or mariadbd at half the stock and start them again on the same ports; they check the
crash form of the promises (no over-issue, no duplicate, a leak bounded by the attempts whose
connection was lost, no hang) and that the drain then takes exactly what is left. Timings are
printed, never asserted. Exit 0 when every check passed, 1 otherwise, 77
(ctest skip) when the variant needs a claimguard subcommand that does not exist yet.
"""

import argparse
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402  (same directory)

STOCK = 100
CAMPAIGN = 1
CONTROL_CAMPAIGN = 2          # a second stock row no statement targets: must stay untouched
USERS = 300
ATTEMPTS_PER_USER = 3
PROXIES = 8
THREADS_PER_PROXY = 3         # the incident: 8 app instances x 3 threads
ROUNDS = 3
DRAIN_FIRST_USER = 1_000_001  # new users for the drain phase, never in the race
DRAIN_USERS = STOCK
LOAD_TIMEOUT_S = 120
HARNESS_DEADLINE_S = 280      # below ctest's TIMEOUT 300, so the servers are always stopped
SKIP_EXIT_CODE = 77
LOG_TAIL_LINES = 25
# The Redis fault: SIGSTOP when half the stock is gone, SIGKILL at a quarter left or this long after.
REDIS_STOP_AT_REMAIN = STOCK // 2
REDIS_KILL_AT_REMAIN = STOCK // 4
REDIS_KILL_AFTER_S = 1.0
REDIS_POLL_INTERVAL_S = 0.002
REDIS_POLLER_START_TIMEOUT_S = 10.0
# The crash faults: SIGKILL when the poller sees half the stock gone, then start again on the same ports.
# Stock and users are CRASH_SCALE times the incident's: 100 coupons go in about 0.1 s, so the race would be
# over before a killed process is back; ten times longer, the restarted ones serve the second half.
CRASH_SCALE = 10
KILLED_PROXIES = 2
# A lost connection: libmariadb's own 2006/2013/2055, or a server ERR that ends the connection (1053 server
# shutdown, 1927 connection killed), as tests/load's breaks_connection reads them. Not 2027: libmariadb 3.3
# reports a server ERR that carries a client code (2001-2061, e.g. 2013) as 2027 "Received malformed packet".
LOST_CONNECTION_CODES = (2006, 2013, 2055, 1053, 1927)
# A connect that found nobody listening (a killed sidecar's port) or was refused.
CONNECT_FAILED_CODES = (2002, 2003)
# The statements whose loss may leave a unit taken without its claim row (autocommit: the decrement is
# committed before the INSERT is sent). A SELECT or a failed connect takes nothing.
WRITE_STATEMENTS = ("UPDATE", "INSERT", "COMMIT")
# A hang must fail the run (the harness's LOAD_TIMEOUT_S), never pass as a lost connection: the load's own
# read timeout, which libmariadb reports as 2013, is set longer than that.
CRASH_IO_TIMEOUT_S = 2 * LOAD_TIMEOUT_S
PROBE_TIMEOUT_S = 30
CLI11_REJECTED = ("was not expected", "were not expected", "is required", "not a subcommand",
                  "Run with --help for more information")

HERE = os.path.dirname(os.path.abspath(__file__))
CLAIM_LOAD_PY = os.path.join(cluster.REPO, "tests", "load", "claim_load.py")


@dataclasses.dataclass(frozen=True)
class Variant:
    description: str
    through_claimguard: bool = True
    client: str = "load"          # "load" (claimguard-load, libmariadb) or "pymysql" (claim_load.py)
    protocol: str = "text"
    transaction: bool = False
    ignore_affected_rows: bool = False
    version_column: bool = False
    found_rows: bool = False
    flow: str = "naive"
    unique_index: bool = True
    exhausted_ok: bool = False    # rules answer a refused decrement with OK, 0 rows
    redis_fault: bool = False
    crash: str = ""               # "sidecar" or "mysql": SIGKILL at half the stock, then start again
    scale: int = 1                # stock and users of the race, times the incident's
    exact: bool = True            # exactly the stock issued; False: only no over-issue and no leak
    assert_nothing: bool = False  # the baseline: print what happened


VARIANTS = {
    "text": Variant("naive flow, text protocol, autocommit"),
    "prepared": Variant("naive flow, prepared statements (mysql_stmt_*), autocommit", protocol="prepared"),
    "transaction": Variant("naive flow, text protocol, BEGIN ... COMMIT", transaction=True),
    "prepared_transaction": Variant("naive flow, prepared statements, BEGIN ... COMMIT", protocol="prepared",
                                    transaction=True),
    "found_rows": Variant("naive flow, CLIENT_FOUND_ROWS as JDBC drivers connect", found_rows=True),
    "redis_down": Variant("naive flow; Redis gets SIGSTOP at half the stock, then SIGKILL", redis_fault=True),
    "ignore_affected_rows": Variant("the app inserts whatever the UPDATE's affected rows; rules answer a refused "
                                    "decrement with OK (exhausted: ok)", ignore_affected_rows=True,
                                    exhausted_ok=True),
    "version_column": Variant("naive flow that also writes version = <version+1>", version_column=True),
    "pymysql": Variant("naive flow from PyMySQL (claim_load.py)", client="pymysql"),
    "sidecar_killed": Variant("naive flow; 2 of the 8 sidecars get SIGKILL at half the stock, then start again "
                              "on their ports", crash="sidecar", exact=False, scale=CRASH_SCALE),
    "mysql_restart": Variant("naive flow; mariadbd gets SIGKILL at half the stock, then starts again on its port "
                             "and datadir (crash recovery)", crash="mysql", exact=False, scale=CRASH_SCALE),
    "mysql_restart_transaction": Variant("naive flow in BEGIN ... COMMIT; mariadbd gets SIGKILL at half the stock, "
                                         "then starts again (crash recovery)", crash="mysql", transaction=True,
                                         exact=False, scale=CRASH_SCALE),
    "no_unique_index": Variant("legacy schema without the UNIQUE index: no over-issue, no leak",
                               unique_index=False, exact=False),
    "fixed_direct": Variant("control: the post-mortem's hand fix straight to MariaDB, no claimguard",
                            through_claimguard=False, flow="fixed"),
    "baseline_direct": Variant("baseline: the naive flow straight to MariaDB, legacy schema; asserts nothing",
                               through_claimguard=False, unique_index=False, assert_nothing=True),
}
SPECIAL = {"schema_check": "claimguard check reports the missing UNIQUE index (exit non-zero), passes once added"}


HarnessError = cluster.HarnessError
Checks = cluster.Checks


# --- running the load -------------------------------------------------------------------------------
def load_command(args, variant, targets, threads, first_user, users, attempts, seed):
    if variant.client == "pymysql":
        cmd = [sys.executable, CLAIM_LOAD_PY]
    else:
        cmd = [args.load, "--protocol", variant.protocol]
    for port in targets:
        cmd += ["--target", f"{cluster.HOST}:{port}"]
    cmd += ["--user", cluster.APP_USER, "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE,
            "--threads", str(threads), "--first-user", str(first_user), "--users", str(users),
            "--attempts-per-user", str(attempts), "--campaign", str(CAMPAIGN), "--flow", variant.flow,
            "--seed", str(seed), "--json", "--record-claims"]
    for flag, on in (("--transaction", variant.transaction), ("--ignore-affected-rows", variant.ignore_affected_rows),
                     ("--version-column", variant.version_column), ("--found-rows", variant.found_rows)):
        if on:
            cmd.append(flag)
    if variant.crash:
        cmd += ["--io-timeout-s", str(CRASH_IO_TIMEOUT_S)]
    return cmd


def run_load(cmd):
    return cluster.run_load(cmd, LOAD_TIMEOUT_S)


def top_errors(s, n=3):
    errors = sorted(s["errors"], key=lambda e: -e["count"])[:n]
    return "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message']}" for e in errors)


def describe_load(s):
    errs = top_errors(s)
    return (f"attempts {s['attempts']}/{s['attempts_planned']}, claimed {s['claimed']}, sold out {s['sold_out']} "
            f"{s['sold_out_by']}, already claimed {s['duplicate']} {s['duplicate_by']}, other errors "
            f"{s['other_errors']}{' [' + errs + ']' if errs else ''}, reconnects {s['reconnects']}, "
            f"{s['elapsed_s']:.2f} s, {s['claims_per_s']:.0f} claims/s, latency ms p50 {s['latency_ms']['p50']:.2f} "
            f"p99 {s['latency_ms']['p99']:.2f}")


# --- the Redis fault --------------------------------------------------------------------------------
class RedisFault(cluster.RemainWatcher):
    """Watches remain in MariaDB while the load runs: SIGSTOP Redis at half the stock, SIGKILL later."""

    def __init__(self, c):
        super().__init__(c, CAMPAIGN, REDIS_POLL_INTERVAL_S)
        self.stopped_at = None
        self.stop_time = None
        self.killed = False

    def on_remain(self, remain):
        now = time.monotonic()
        if self.stop_time is None and remain <= REDIS_STOP_AT_REMAIN:
            self.cluster.redis.signal(signal.SIGSTOP)
            self.stop_time, self.stopped_at = now, remain
            self.events.append(f"SIGSTOP at remain {remain} ({self.elapsed()})")
        elif self.stop_time is not None and (remain <= REDIS_KILL_AT_REMAIN
                                             or now - self.stop_time >= REDIS_KILL_AFTER_S):
            self.cluster.redis.signal(signal.SIGKILL)
            self.killed = True
            self.events.append(f"SIGKILL at remain {remain} ({self.elapsed()})")
        return self.killed

    def finish(self):
        self.done.set()
        self.join()
        if not self.killed:
            self.cluster.redis.signal(signal.SIGKILL)
            note = " (never stopped mid-run)" if self.stopped_at is None else ""
            self.events.append("SIGKILL after the run" + note)
        # Reap it so the next round can start a new one on the same port.
        self.cluster.redis.stop()


# --- the crash faults ------------------------------------------------------------------------------
class CrashFault(cluster.RemainWatcher):
    """Watches remain while the load runs; at half the stock SIGKILLs the victim sidecars (kind "sidecar") or
    mariadbd (kind "mysql") and starts them again on the same ports with the same arguments, as a
    Kubernetes restart would (mariadbd on the same datadir: crash recovery)."""

    def __init__(self, c, kind, victims, strike_at_remain):
        super().__init__(c, CAMPAIGN, REDIS_POLL_INTERVAL_S)
        self.kind = kind
        self.strike_at_remain = strike_at_remain
        self.victims = victims        # the claimguard instances to kill (kind "sidecar")
        self.stopped_at = None        # remain when the fault struck during the race
        self.struck = False

    def on_remain(self, remain):
        if remain <= self.strike_at_remain:
            self.stopped_at = remain
            return True
        return False

    def after_polling(self):
        # The poller's connection is closed by now: mariadbd may go down under it.
        if self.stopped_at is not None:
            self.strike(f"at remain {self.stopped_at}")

    def strike(self, when):
        """SIGKILL, then start again; a start that fails is kept in self.error (the round reports it)."""
        self.struck = True
        try:
            if self.kind == "sidecar":
                names = ", ".join(p.name for p in self.victims)
                for p in self.victims:
                    p.stop(sig=signal.SIGKILL)
                self.events.append(f"SIGKILL {names} {when} ({self.elapsed()})")
                for p in self.victims:
                    p.start()
                self.events.append(f"{names} started again on ports {[p.port for p in self.victims]} "
                                   f"({self.elapsed()})")
            else:
                self.cluster.db.kill()
                self.events.append(f"SIGKILL mariadbd {when} ({self.elapsed()})")
                self.cluster.db.start()
                self.events.append(f"mariadbd started again on port {self.cluster.db.port} after crash recovery "
                                   f"({self.elapsed()})")
        except Exception as e:  # noqa: BLE001 - reported by the caller
            self.error = e

    def finish(self):
        self.done.set()
        self.join()
        if not self.struck and self.error is None:
            # The race ended before the poller saw half the stock gone: crash anyway, so the restart is tested.
            self.strike("after the run")


def proxy_victims(c, rnd):
    """The sidecars killed in round rnd: KILLED_PROXIES of them, spread out, different ones each round."""
    step = len(c.proxies) // KILLED_PROXIES
    return [c.proxies[(rnd + k * step) % len(c.proxies)] for k in range(KILLED_PROXIES)]


# --- one round --------------------------------------------------------------------------------------
def check_answers(checks, label, s):
    checks.check(s["attempts"] == s["attempts_planned"], f"{label}: every attempt ran",
                 f"{s['attempts']} of {s['attempts_planned']}")
    answered = s["claimed"] + s["sold_out"] + s["duplicate"]
    checks.check(s["other_errors"] == 0,
                 f"{label}: every attempt got a claim, 'sold out' or 'already claimed' (no other error)",
                 f"{s['other_errors']} other errors, most frequent: {top_errors(s)}; answered {answered} of "
                 f"{s['attempts']}")


def run_round(args, variant, c, rnd, checks, redis_port):
    print(f"\n== round {rnd}/{args.rounds}")
    if variant.redis_fault and c.redis is not None and not c.redis.alive():
        c.redis = cluster.Redis(os.path.join(c.dir, "redis"), port=redis_port).start()
    stock, users = STOCK * variant.scale, USERS * variant.scale
    c.reset({CAMPAIGN: stock, CONTROL_CAMPAIGN: STOCK})
    targets = [p.port for p in c.proxies] if variant.through_claimguard else [c.db.port]
    threads = PROXIES * THREADS_PER_PROXY
    fault = RedisFault(c) if variant.redis_fault else None
    if variant.crash:
        fault = CrashFault(c, variant.crash, proxy_victims(c, rnd), stock // 2)
    if fault:
        fault.start()
        fault.ready.wait(REDIS_POLLER_START_TIMEOUT_S)
    try:
        race = run_load(load_command(args, variant, targets, threads, 1, users, ATTEMPTS_PER_USER, rnd))
    finally:
        if fault:
            fault.finish()
    after = c.facts(CAMPAIGN)
    print(f"  race:  {describe_load(race)}")
    print(f"         database: {after['rows']} claim rows, {after['duplicate_pairs']} duplicate (user, campaign) "
          f"pairs, remain {after['remain']}, version {after['version']}")
    if variant.crash:
        check_crash_round(args, variant, c, rnd, stock, race, after, fault, checks, targets)
        return fault
    if fault:
        print(f"         redis: {', '.join(fault.events) or 'nothing done'}"
              + (f" (poller failed: {fault.error})" if fault.error else ""))
    if variant.assert_nothing:
        issued = after["rows"]
        print(f"  baseline: {issued} coupons issued for {STOCK} ({issued - STOCK:+d}), "
              f"{after['duplicate_pairs']} duplicate pairs, remain {after['remain']} "
              f"(initial - remain = {STOCK - after['remain']} vs {issued} rows)")
        return fault

    rows, remain = after["rows"], after["remain"]
    checks.check(rows <= STOCK, f"no over-issue: claim rows <= {STOCK}",
                 f"OVER-ISSUE: {rows} claim rows for {STOCK} coupons ({rows - STOCK} too many)")
    checks.check(remain is not None and remain >= 0, "the counter never goes below 0",
                 f"remain is {remain}")
    checks.check(remain is not None and STOCK - remain == rows, "no leak: initial - remain == claim rows",
                 f"{STOCK} - {remain} = {STOCK - (remain or 0)} units taken, but {rows} claim rows")
    if variant.unique_index or variant.exact:
        checks.check(after["duplicate_pairs"] == 0, "no duplicates: one row per (user, campaign)",
                     f"DUPLICATES: {after['duplicate_pairs']} users hold more than one coupon "
                     f"({after['duplicate_extra_rows']} extra rows)")
    else:
        print(f"    note  {after['duplicate_pairs']} duplicate pairs (no UNIQUE index: Redis is only a filter)")
    check_answers(checks, "race", race)
    checks.check(sorted(race["claimed_users"]) == after["users"],
                 "the app was told 'claimed' exactly for the rows in coupon_order",
                 f"app believes {race['claimed']} claims, database has {rows} rows; told but missing: "
                 f"{sorted(set(race['claimed_users']) - set(after['users']))[:10]}, present but not told: "
                 f"{sorted(set(after['users']) - set(race['claimed_users']))[:10]}")

    if variant.exact:
        # Units a refused duplicate gave back after the last racer was answered are still in stock:
        # new users, one thread, take them. Then exactly the stock must be issued.
        drain = run_load(load_command(args, variant, targets[:1], 1, DRAIN_FIRST_USER, DRAIN_USERS, 1, rnd))
        final = c.facts(CAMPAIGN)
        print(f"  drain: {describe_load(drain)}")
        print(f"         database: {final['rows']} claim rows, {final['duplicate_pairs']} duplicate pairs, "
              f"remain {final['remain']}")
        check_answers(checks, "drain", drain)
        checks.check(final["rows"] == STOCK, f"exactly {STOCK} claim rows",
                     f"{'OVER' if final['rows'] > STOCK else 'UNDER'}-ISSUE: {final['rows']} claim rows")
        checks.check(final["remain"] == 0, "remain = 0", f"remain is {final['remain']}")
        checks.check(race["claimed"] + drain["claimed"] == STOCK,
                     f"the app believes exactly {STOCK} claims succeeded",
                     f"{race['claimed']} in the race + {drain['claimed']} in the drain")
        checks.check(final["duplicate_pairs"] == 0, "still no duplicates after the drain",
                     f"{final['duplicate_pairs']} duplicate pairs")
        checks.check(sorted(race["claimed_users"] + drain["claimed_users"]) == final["users"],
                     "the app's claims match coupon_order after the drain")

    control = c.facts(CONTROL_CAMPAIGN)
    checks.check(control["rows"] == 0 and control["remain"] == STOCK and control["version"] == 0,
                 f"campaign {CONTROL_CAMPAIGN}, which nobody claims, is untouched",
                 f"{control['rows']} rows, remain {control['remain']}, version {control['version']}")
    if variant.through_claimguard:
        dead = [p.name for p in c.proxies if p.proc is not None and p.proc.poll() is not None]
        checks.check(not dead, f"all {len(c.proxies)} claimguard instances still running",
                     f"exited: {dead}")
    return fault


# --- the crash rounds ------------------------------------------------------------------------------
def errors_where(s, codes, statements=None, connect=None):
    """How many attempts ended with one of these error codes (at these statements; at connect or not)."""
    return sum(e["count"] for e in s["errors"]
               if e["code"] in codes and (statements is None or e["statement"] in statements)
               and (connect is None or (e["statement"] == "connect") == connect))


def probe_proxies(c):
    """Opens a new connection through every sidecar and reads the untouched campaign; the failures."""
    import pymysql
    failures = []
    for p in c.proxies:
        try:
            conn = pymysql.connect(host=cluster.HOST, port=p.port, user=cluster.APP_USER,
                                   password=cluster.APP_PASSWORD, database=cluster.DATABASE,
                                   connect_timeout=PROBE_TIMEOUT_S, read_timeout=PROBE_TIMEOUT_S,
                                   write_timeout=PROBE_TIMEOUT_S)
            try:
                with conn.cursor() as cur:
                    cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CONTROL_CAMPAIGN}")
                    got = cur.fetchone()
            finally:
                conn.close()
            if got is None or int(got[0]) != STOCK:
                failures.append(f"{p.name}: read {got}, expected ({STOCK},)")
        except Exception as e:  # noqa: BLE001 - a failed probe is a failed check
            failures.append(f"{p.name} (port {p.port}): {type(e).__name__}: {e}")
    return failures


def check_crash_round(args, variant, c, rnd, stock, race, after, fault, checks, targets):
    """The promises when a process crashed mid-race: DESIGN.md section 2 with section 6's faults."""
    print(f"         fault: {', '.join(fault.events) or 'nothing done'}"
          + (f" (failed: {type(fault.error).__name__}: {fault.error})" if fault.error else ""))
    what = "killed sidecars" if variant.crash == "sidecar" else "mariadbd"
    checks.check(fault.error is None, f"the fault struck and the {what} started again on the same ports",
                 f"{type(fault.error).__name__}: {fault.error}")
    rows, remain = after["rows"], after["remain"]
    leak = stock - remain - rows if remain is not None else None
    lost = errors_where(race, LOST_CONNECTION_CODES, connect=False)
    lost_writes = errors_where(race, LOST_CONNECTION_CODES, statements=WRITE_STATEMENTS)
    connect_failed = errors_where(race, LOST_CONNECTION_CODES + CONNECT_FAILED_CODES, connect=True)
    told, present = set(race["claimed_users"]), set(after["users"])
    print(f"  leak:  {leak} unit(s) taken without a claim row; {lost} attempts lost their connection "
          f"({lost_writes} at {'/'.join(WRITE_STATEMENTS)}), {connect_failed} connects failed; "
          f"{len(present - told)} rows whose 'claimed' answer was lost")

    checks.check(rows <= stock, f"no over-issue: claim rows <= {stock}",
                 f"OVER-ISSUE: {rows} claim rows for {stock} coupons ({rows - stock} too many)")
    checks.check(remain is not None and remain >= 0, "the counter never goes below 0", f"remain is {remain}")
    checks.check(after["duplicate_pairs"] == 0, "no duplicates: one row per (user, campaign)",
                 f"DUPLICATES: {after['duplicate_pairs']} users hold more than one coupon "
                 f"({after['duplicate_extra_rows']} extra rows)")
    if variant.transaction:
        checks.check(leak == 0, "no leak in transactions: initial - remain == claim rows (the server rolled back "
                     "what the crash interrupted)", f"{stock} - {remain} = {stock - (remain or 0)} units taken, "
                     f"but {rows} claim rows")
    else:
        checks.check(leak is not None and 0 <= leak <= lost_writes,
                     f"leak bounded by the claims in flight: 0 <= initial - remain - rows <= attempts that lost "
                     f"their connection at {'/'.join(WRITE_STATEMENTS)}",
                     f"leak {leak} ({stock} - {remain} units taken, {rows} rows), {lost_writes} such attempts")
    checks.check(race["attempts"] == race["attempts_planned"], "race: every attempt ran",
                 f"{race['attempts']} of {race['attempts_planned']}")
    unexpected = [e for e in race["errors"] if e["code"] not in LOST_CONNECTION_CODES
                  and not (e["statement"] == "connect" and e["code"] in CONNECT_FAILED_CODES)]
    checks.check(not unexpected, "race: every error is a lost connection or a failed connect",
                 "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message']}" for e in unexpected))
    if variant.crash == "sidecar":
        # Each client thread of a killed sidecar loses its connection once; then it connects again. A lost
        # connection on a surviving sidecar would push the count past that.
        most = KILLED_PROXIES * THREADS_PER_PROXY
        checks.check(lost <= most, f"race: at most the {most} connections of the killed sidecars were lost",
                     f"{lost} attempts lost their connection: {top_errors(race, 6)}")
    else:
        # The sidecars stayed up: whatever a client lost, the sidecar told it so with an ERR of its own.
        silent = [e for e in race["errors"] if "claimguard" not in e["message"]]
        checks.check(not silent, "race: every failure came as the sidecar's ERR (none was a dropped connection)",
                     "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message']}" for e in silent))
    checks.check(told <= present, "every user the app was told 'claimed' has a row",
                 f"told but missing: {sorted(told - present)[:10]}")

    unreachable = probe_proxies(c)
    checks.check(not unreachable, f"all {len(c.proxies)} sidecars serve a new connection after the fault",
                 "; ".join(unreachable))

    # After the fault, new users on one thread take exactly what is left.
    drain = run_load(load_command(args, variant, targets[:1], 1, DRAIN_FIRST_USER, stock, 1, rnd))
    final = c.facts(CAMPAIGN)
    print(f"  drain: {describe_load(drain)}")
    print(f"         database: {final['rows']} claim rows, {final['duplicate_pairs']} duplicate pairs, "
          f"remain {final['remain']}; {final['rows']} rows + leak {leak} = "
          f"{final['rows'] + (leak or 0)} of {stock}")
    check_answers(checks, "drain", drain)
    checks.check(drain["claimed"] == remain, f"the drain took exactly the {remain} left after the race",
                 f"it was told 'claimed' {drain['claimed']} times")
    checks.check(final["remain"] == 0, "remain = 0 after the drain", f"remain is {final['remain']}")
    checks.check(leak is not None and final["rows"] + leak == stock, f"claim rows + leak == {stock} after the drain",
                 f"{final['rows']} rows + leak {leak}")
    checks.check(final["duplicate_pairs"] == 0, "still no duplicates after the drain",
                 f"{final['duplicate_pairs']} duplicate pairs")
    told_all = told | set(drain["claimed_users"])
    checks.check(told_all <= set(final["users"]), "every claim the app was told about has a row after the drain",
                 f"told but missing: {sorted(told_all - set(final['users']))[:10]}")

    control = c.facts(CONTROL_CAMPAIGN)
    checks.check(control["rows"] == 0 and control["remain"] == STOCK and control["version"] == 0,
                 f"campaign {CONTROL_CAMPAIGN}, which nobody claims, is untouched",
                 f"{control['rows']} rows, remain {control['remain']}, version {control['version']}")
    dead = [p.name for p in c.proxies if p.proc is None or p.proc.poll() is not None]
    checks.check(not dead, f"all {len(c.proxies)} claimguard instances running (the restarted ones included)",
                 f"exited: {dead}")


# --- the schema check -------------------------------------------------------------------------------
def run_schema_check(args, c, checks):
    probe = subprocess.run([args.claimguard, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, check=False)
    text = probe.stdout.decode(errors="replace")
    if not re.search(r"(?m)^\s+check\s", text):
        print("NOT IMPLEMENTED: `claimguard check` does not exist yet (`claimguard --help` lists no check "
              "subcommand); reported as skipped")
        return SKIP_EXIT_CODE
    c.start_db(unique_index=False)
    cmd = [args.claimguard, "check", "--rules", cluster.EXAMPLE_RULES, "--backend",
           f"{cluster.HOST}:{c.db.port}", "--user", cluster.ADMIN_USER, "--password", cluster.ADMIN_PASSWORD,
           "--database", cluster.DATABASE]
    print("$ " + " ".join(cmd))

    def run_check():
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=LOAD_TIMEOUT_S, check=False)
        out = r.stdout.decode(errors="replace")
        print("\n".join("  | " + line for line in out.splitlines()) + f"\n  (exit {r.returncode})")
        return r.returncode, out

    rc, out = run_check()
    rejected = any(s in out for s in CLI11_REJECTED)
    checks.check(not rejected, "check accepts --rules --backend --user --password --database", out.strip()[:300])
    checks.check(rc != 0 and not rejected, "check exits non-zero on the legacy schema (no UNIQUE index)",
                 f"exit {rc}")
    checks.check("coupon_order" in out and "unique" in out.lower(),
                 "check names coupon_order and the missing UNIQUE index")
    c.apply_sql_file(cluster.UNIQUE_INDEX_MIGRATION)
    rc, out = run_check()
    checks.check(rc == 0, "check exits 0 once sql/migrations/001_claimguard_unique_index.sql is applied",
                 f"exit {rc}")
    return None


# --- main -------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", nargs="?", choices=sorted(VARIANTS) + sorted(SPECIAL))
    ap.add_argument("--list", action="store_true", help="print the variants and exit")
    ap.add_argument("--claimguard", help="the claimguard binary")
    ap.add_argument("--load", help="the claimguard-load binary")
    ap.add_argument("--work-dir", help="servers, data and logs go here (emptied first)")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    if args.list:
        for name in sorted(VARIANTS):
            print(f"{name:22} {VARIANTS[name].description}")
        for name, text in SPECIAL.items():
            print(f"{name:22} {text}")
        return 0
    if not (args.variant and args.claimguard and args.load and args.work_dir):
        ap.error("give VARIANT --claimguard --load --work-dir (or --list)")

    c = cluster.start_harness(args.work_dir, HARNESS_DEADLINE_S)
    work = c.dir
    checks = Checks()
    began = time.monotonic()
    status = None
    try:
        what = VARIANTS[args.variant].description if args.variant in VARIANTS else SPECIAL[args.variant]
        print(f"incident {args.variant}: {what}")
        if args.variant in SPECIAL:
            status = run_schema_check(args, c, checks)
        else:
            v = VARIANTS[args.variant]
            c.start_db(unique_index=v.unique_index)
            redis_port = None
            if v.through_claimguard:
                redis_port = c.start_redis().port
                rules = cluster.EXAMPLE_RULES
                if v.exhausted_ok:
                    rules = cluster.rules_with_exhausted_ok(rules, os.path.join(work, "coupon-exhausted-ok.yaml"))
                c.start_proxies(args.claimguard, PROXIES, rules=rules)
                for flag in c.missing_serve_flags:
                    print(f"WARNING: `claimguard serve` has no {flag} flag yet: the sidecars run without it")
            print(f"servers up in {time.monotonic() - began:.1f} s: MariaDB {c.db.port}, Redis {redis_port}, "
                  f"claimguard {[p.port for p in c.proxies] or 'none (direct)'}; {USERS} users x {ATTEMPTS_PER_USER} "
                  f"attempts, "
                  f"{PROXIES * THREADS_PER_PROXY} threads, {STOCK} coupons")
            if v.scale != 1:
                print(f"this variant races {v.scale} times that: {USERS * v.scale} users, {STOCK * v.scale} coupons")
            stopped_mid_run = 0
            for rnd in range(1, args.rounds + 1):
                fault = run_round(args, v, c, rnd, checks, redis_port)
                if fault is not None and fault.stopped_at is not None and fault.stopped_at > 0:
                    stopped_mid_run += 1
            if v.redis_fault:
                checks.check(stopped_mid_run > 0, "Redis was stopped while coupons were still being claimed",
                             "every round finished before the poller saw half the stock gone")
            if v.crash:
                checks.check(stopped_mid_run > 0, "the crash struck while coupons were still being claimed",
                             "every round finished before the poller saw half the stock gone")
    except Exception as e:  # noqa: BLE001 - a server that would not start, a hang, ...: a failure, reported
        checks.failed.append(f"harness: {e}")
        print(f"HARNESS ERROR: {type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        c.stop()
    elapsed = time.monotonic() - began
    if checks.failed:
        # The first sidecar's log, and those of any that exited.
        for p in c.proxies:
            if p is c.proxies[0] or (p.proc is not None and p.proc.returncode not in (None, 0, -signal.SIGTERM)):
                print(f"\n--- last lines of {p.log}\n{cluster.tail(p.log)}")
        print(f"\nincident {args.variant}: FAILED ({elapsed:.1f} s); servers' logs are in {work}")
        for what in checks.failed:
            print(f"  - {what}")
    else:
        shutil.rmtree(os.path.join(work, "mariadb", "data"), ignore_errors=True)
    print(f"incident {args.variant}: {checks.passed} passed, {len(checks.failed)} failed ({elapsed:.1f} s)")
    if status == SKIP_EXIT_CODE:
        return SKIP_EXIT_CODE
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
