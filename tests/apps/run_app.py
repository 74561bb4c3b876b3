#!/usr/bin/env python3
"""run_app.py: one app of the zoo (the coupon legacy flow written with a real library) through 8 claimguard sidecars.

Usage: run_app.py APP --claimguard PATH --work-dir DIR [--target claimguard|direct|both] [--rounds N]
                      [--variant V ...] [--build-dir DIR]
       run_app.py --list

Starts its own MariaDB (sql/legacy_schema.sql + the UNIQUE index migration, plus a `campaign` table and a
coupon_stock.end_time column some shapes read), a Redis and 8 `claimguard serve` instances with
rules/examples/coupon.yaml (tests/incident/cluster.py). Per variant of APP:

- direct (no proxy): one race, printed as a table row (orders / remain / duplicates); it asserts only for
  apps that are correct on their own (optimistic @Version with retries), which must hold the invariants;
- through claimguard, per round: stock 100, 300 users x 3 attempts from 24 threads over 8 app instances
  (one per sidecar port), then DESIGN.md section 2's invariants in SQL: orders <= stock, remain >= 0,
  initial - remain == orders, no (user, campaign) twice; every error the app saw is a configured answer
  (ERR 1644 "sold out" / "already claimed") or a refusal naming a rule; then a drain (new users, one
  thread) and the stock must be sold out, or, for the shapes claimguard may refuse by policy
  (unmodeled: refuse), every write refused and nothing sold.

Exit 0 when every check passed, 1 otherwise, 77 (ctest skip) when the app's toolchain or packages are
missing (scripts/setup.sh installs them).
"""

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py)

STOCK = 100
CAMPAIGN = 1
CONTROL_CAMPAIGN = 2
USERS = 300
ATTEMPTS_PER_USER = 3
PROXIES = 8
THREADS = 24
ROUNDS = 1
DRAIN_FIRST_USER = 1_000_001
DRAIN_USERS = STOCK
APP_TIMEOUT_S = 120
BUILD_TIMEOUT_S = 240
HARNESS_DEADLINE_S = 280      # below ctest's TIMEOUT, so the servers are always stopped
SKIP_EXIT_CODE = 77
# The answers rules/examples/coupon.yaml configures, and the names of its rules: a refusal is claimguard's own
# ERR ("claimguard: ..."; JDBC puts "(conn=N) " before it) naming one of them.
CONFIGURED_ANSWERS = ((1644, "claimguard: coupon_stock is sold out for this key"),
                      (1644, "claimguard: already claimed"))
RULE_NAMES = ("coupon_stock", "coupon_order")
# What the zoo adds to the legacy schema: the shapes read a JOIN and `end_time > NOW()`.
ZOO_SCHEMA = """
    ALTER TABLE coupon_stock ADD COLUMN end_time DATETIME NOT NULL DEFAULT '2099-12-31 00:00:00';
    CREATE TABLE campaign (campaign_id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL);
    INSERT INTO campaign VALUES (1, 'flash sale'), (2, 'control');
"""
NODE_DIR = os.path.join(HERE, "node")
PYTHON_DIR = os.path.join(HERE, "python")
JAVA_DIR = os.path.join(HERE, "java")
GO_DIR = os.path.join(HERE, "go")
JAVA_JARS = ("hibernate3", "hibernate-commons-annotations", "geronimo-jpa_2.0_spec", "geronimo-jta-1.2-spec",
             "antlr", "commons-collections3", "dom4j", "javassist", "slf4j-api", "slf4j-nop", "c3p0",
             "hibernate-c3p0", "mariadb-java-client")
GO_ENV = {"GO111MODULE": "off", "GOPATH": "/usr/share/gocode"}


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    description: str
    works_directly: bool = False  # correct without claimguard: direct must hold the invariants too
    may_refuse: bool = False      # claimguard may refuse it by policy (unmodeled: refuse) and sell nothing
    left_max: int = 0             # the stock the app itself leaves unsold (it needs 2 units, the rule takes 1)


@dataclasses.dataclass(frozen=True)
class App:
    language: str                 # node, python, java, go
    program: str                  # file under tests/apps/<language>/
    description: str
    variants: tuple
    redis: bool = True            # False: the sidecars run without Redis, so every duplicate reaches the database


V = Variant
APPS = {
    "mysql2": App("node", "mysql2_app.js", "Node mysql2 createPool, a connection per statement", (
        V("query", "pool.query (text protocol)"),
        V("execute", "pool.execute (prepared; JS numbers bound as DOUBLE)"))),
    "mysqljs": App("node", "mysqljs_app.js", "Node mysql (mysqljs) createPool + pool.query", (
        V("pool_query", "pool.query, a connection per statement"),)),
    "sequelize": App("node", "sequelize_app.js", "Node Sequelize 6 over mysql2: findOne, save, create", (
        V("save", "findOne, stock.remain -= 1, save(), Order.create()"),
        V("transaction", "the same in sequelize.transaction()"))),
    "sqlalchemy": App("python", "sqlalchemy_app.py", "SQLAlchemy 1.4 ORM over mysqlclient, default QueuePool", (
        V("read_then_tx", "read in a read-only session, then a write transaction (Spring readOnly-then-write)"),
        V("session", "one ORM session: get, remain -= 1, add(Order), commit"))),
    "django": App("python", "django_app.py", "Django 3.2 ORM over mysqlclient, connection per request", (
        V("save", "Stock.objects.get, remain -= 1, save(), Order.objects.create"),
        V("update", "filter().update(remain=<read - 1>), Order.objects.create"),
        V("atomic", "the save() flow in transaction.atomic()"))),
    "hibernate": App("java", "HibernateApp.java", "Hibernate 3.6 @Version entity, c3p0 pool, MariaDB JDBC", (
        V("version", "get, setRemain(remain - 1), save(order), commit; StaleObjectStateException: retry",
          works_directly=True),)),
    "go": App("go", "go_app.go", "Go database/sql, default pool, go-sql-driver/mysql", (
        V("database_sql", "db.QueryRow + db.Exec without a transaction, a connection per statement (the driver's "
          "default: arguments as server-side prepared statements)"),
        V("interpolate", "the same with interpolateParams=true (text protocol)"))),
    "shapes_reads": App("python", "shapes_app.py", "PyMySQL: where the read comes from", (
        V("rw_split", "read on a read connection, write on a write connection"),
        V("app_cache", "stock read from a 20 ms app cache"),
        V("select_before_tx", "SELECT, then START TRANSACTION; UPDATE; INSERT; COMMIT"),
        V("read_join", "read via a JOIN"),
        V("read_in", "read via IN (1, 2)"),
        V("read_now", "read with AND end_time > NOW()"),
        V("stale_read", "written on a pooled connection that read the stock long ago"))),
    "shapes_writes": App("python", "shapes_app.py", "PyMySQL: how the counter is written", (
        V("expression", "SET remain = 57 - 1"),
        V("two_units", "an order of 2 units: SET remain = R - 2", left_max=1),
        V("multi_statement", "UPDATE ...; INSERT ... in one COM_QUERY (CLIENT_MULTI_STATEMENTS)", may_refuse=True),
        V("optimistic_version", "SET remain = R - 1, version = V + 1 ... AND version = V; 0 rows: read again "
          "(5 tries); a duplicate key gives the unit back", works_directly=True),
        V("hand_fixed", "the post-mortem's fix: remain = remain - 1 ... AND remain > 0, 0 rows = sold out, a "
          "duplicate key gives the unit back", works_directly=True))),
    "shapes_inserts": App("python", "shapes_app.py", "PyMySQL: how the claim row is inserted (sidecars without "
                          "Redis: the database's unique index meets every duplicate)", (
        V("insert_ignore", "INSERT IGNORE, 0 rows = the app's 'already claimed'"),
        V("on_duplicate_key", "INSERT ... ON DUPLICATE KEY UPDATE created_at = created_at"),
        V("replace", "REPLACE INTO coupon_order"),
        # claimguard reads the table's columns (information_schema) and then handles it like any claim.
        V("no_column_list", "INSERT INTO coupon_order VALUES (...) with no column list")),
        redis=False),
}


class Skip(Exception):
    """The app cannot run here (toolchain or packages missing)."""


# --- building and running an app --------------------------------------------------------------------
def build(app, build_dir):
    """The command prefix that runs the app (compiles Java and Go into build_dir first)."""
    if app.language == "node":
        node = shutil.which("node")
        if node is None or not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
            raise Skip("needs node and tests/apps/node/node_modules (scripts/setup.sh runs npm ci there)")
        return [node, os.path.join(NODE_DIR, app.program)]
    if app.language == "python":
        return [sys.executable, os.path.join(PYTHON_DIR, app.program)]
    os.makedirs(build_dir, exist_ok=True)
    if app.language == "java":
        jars = []
        for name in JAVA_JARS:
            path = f"/usr/share/java/{name}.jar"
            if not os.path.exists(path):
                raise Skip(f"needs {path} (scripts/setup.sh installs the Debian package)")
            jars.append(path)
        classes = os.path.join(build_dir, "java-classes")
        os.makedirs(classes, exist_ok=True)
        cp = ":".join(jars)
        compile_run([shutil.which("javac") or "javac", "-nowarn", "-d", classes, "-cp", cp,
                     os.path.join(JAVA_DIR, app.program)], "javac")
        return [shutil.which("java") or "java", "-cp", f"{classes}:{cp}", "HibernateApp"]
    if app.language == "go":
        go = shutil.which("go")
        if go is None or not os.path.isdir("/usr/share/gocode/src/github.com/go-sql-driver/mysql"):
            raise Skip("needs golang-go and golang-github-go-sql-driver-mysql-dev")
        binary = os.path.join(build_dir, "go_app")
        env = dict(os.environ, **GO_ENV)
        if not any(k in env for k in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
            env["GOCACHE"] = os.path.join(build_dir, "go-cache")   # go build needs a cache directory
        compile_run([go, "build", "-o", binary, os.path.join(GO_DIR, app.program)], "go build", env=env)
        return [binary]
    raise ValueError(app.language)


def compile_run(cmd, what, env=None):
    began = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=BUILD_TIMEOUT_S, check=False, env=env)
    if r.returncode != 0:
        raise cluster.HarnessError(f"{what} failed: {r.stdout.decode(errors='replace')[-2000:]}")
    print(f"{what}: {time.monotonic() - began:.1f} s")


def run_app(prefix, variant, ports, threads, first_user, users, attempts, seed):
    cmd = prefix + ["--host", cluster.HOST, "--ports", ",".join(str(p) for p in ports), "--user", cluster.APP_USER,
                    "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE, "--campaign",
                    str(CAMPAIGN), "--threads", str(threads), "--first-user", str(first_user), "--users", str(users),
                    "--attempts", str(attempts), "--seed", str(seed), "--variant", variant.name]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=APP_TIMEOUT_S, check=False, cwd=HERE)
    except subprocess.TimeoutExpired as e:
        raise cluster.HarnessError(f"the app did not finish within {APP_TIMEOUT_S}s (a hang?)") from e
    err = r.stderr.decode(errors="replace").strip()
    lines = [ln for ln in r.stdout.decode(errors="replace").splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise cluster.HarnessError(f"the app exited with {r.returncode} and no report: {err[-2000:]}")
    report = json.loads(lines[-1])
    report["stderr"] = err
    return report


# --- judging ----------------------------------------------------------------------------------------
def kind_of_error(e):
    """'answer' (a configured answer), 'refusal' (an ERR naming a claimguard rule) or 'other'."""
    if any(e["code"] == code and text in e["message"] for code, text in CONFIGURED_ANSWERS):
        return "answer"
    if "claimguard:" in e["message"] and any(rule in e["message"] for rule in RULE_NAMES):
        return "refusal"
    return "other"


def describe(r):
    errs = sorted(r["errors"], key=lambda e: -e["count"])[:4]
    text = "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message'][:110]}" for e in errs)
    return (f"attempts {r['attempts']}/{r['attempts_planned']}, claimed {r['claimed']}, sold out (app's check) "
            f"{r['sold_out_app']}, conflicts handled {r['conflicts']}, errors {sum(e['count'] for e in r['errors'])}"
            f"{' [' + text + ']' if text else ''}, {r['elapsed_s']:.2f} s")


def check_race(checks, label, r, facts, stock):
    rows, remain = facts["rows"], facts["remain"]
    checks.check(not r["setup_errors"], f"{label}: every app thread connected", "; ".join(r["setup_errors"])[:300])
    checks.equal(r["attempts"], r["attempts_planned"], f"{label}: every attempt ran")
    checks.check(rows <= stock, f"{label}: no over-issue: orders <= {stock}", f"OVER-ISSUE: {rows} orders")
    checks.check(remain is not None and remain >= 0, f"{label}: remain >= 0", f"remain is {remain}")
    checks.check(remain is not None and stock - remain == rows, f"{label}: no leak: initial - remain == orders",
                 f"{stock} - {remain} = {stock - (remain or 0)} taken, {rows} orders")
    checks.check(facts["duplicate_pairs"] == 0, f"{label}: no (user, campaign) twice",
                 f"{facts['duplicate_pairs']} users hold two coupons")
    bad = [e for e in r["errors"] if kind_of_error(e) == "other"]
    checks.check(not bad, f"{label}: every error is a configured answer or a refusal naming a rule",
                 "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message'][:160]}" for e in bad[:4]))
    told = set(r["claimed_users"])
    checks.check(told <= set(facts["users"]), f"{label}: every user the app counted as claimed has an order",
                 f"told but missing: {sorted(told - set(facts['users']))[:10]}")


def run_variant(args, app, prefix, variant, c, checks, rows_table):
    label = f"{variant.name}"
    print(f"\n=== {args.app}.{variant.name}: {variant.description}")
    targets = []
    if args.target in ("direct", "both"):
        targets.append("direct")
    if args.target in ("claimguard", "both"):
        targets += [f"claimguard#{i}" for i in range(1, args.rounds + 1)]
    for target in targets:
        direct = target == "direct"
        rnd = 1 if direct else int(target.split("#")[1])
        c.reset({CAMPAIGN: STOCK, CONTROL_CAMPAIGN: STOCK})
        ports = [c.db.port] * PROXIES if direct else [p.port for p in c.proxies]
        race = run_app(prefix, variant, ports, THREADS, 1, USERS, ATTEMPTS_PER_USER, rnd)
        after = c.facts(CAMPAIGN)
        row = {"variant": variant.name, "target": target.split("#")[0], "orders": after["rows"],
               "remain": after["remain"], "duplicates": after["duplicate_pairs"], "race": race}
        print(f"-- {target}: {describe(race)}")
        print(f"   database: {after['rows']} orders, remain {after['remain']}, {after['duplicate_pairs']} duplicate "
              f"pairs, leak {STOCK - (after['remain'] or 0) - after['rows']}")
        if race["stderr"]:
            print("   app stderr: " + race["stderr"][-600:].replace("\n", "\n   | "))
        assert_it = not direct or variant.works_directly
        if assert_it:
            check_race(checks, f"{label} {target}", race, after, STOCK)
            if variant.works_directly:
                # It sold the stock on its own: no answer through claimguard may stop it early ("sold out" for
                # a lost version race), so the race itself must sell out, before any drain.
                checks.check(after["remain"] == 0, f"{label} {target}: the race itself sells out",
                             f"remain {after['remain']} after 300 users x 3 attempts")
            drain = run_app(prefix, variant, ports[:1], 1, DRAIN_FIRST_USER, DRAIN_USERS, 1, rnd)
            final = c.facts(CAMPAIGN)
            print(f"   drain: {describe(drain)}")
            print(f"   after the drain: {final['rows']} orders, remain {final['remain']}")
            check_race(checks, f"{label} {target} drain", drain, final, STOCK)
            refusals = sum(e["count"] for e in race["errors"] + drain["errors"] if kind_of_error(e) == "refusal")
            if variant.may_refuse and final["rows"] == 0 and refusals > 0:
                checks.check(final["remain"] == STOCK, f"{label} {target}: refused by policy, nothing taken",
                             f"remain {final['remain']}")
            else:
                checks.check(final["remain"] is not None and final["remain"] <= variant.left_max,
                             f"{label} {target}: the stock sells out (remain <= {variant.left_max} after the drain)",
                             f"remain {final['remain']}, {final['rows']} orders")
            row.update(final_orders=final["rows"], final_remain=final["remain"])
            control = c.facts(CONTROL_CAMPAIGN)
            checks.check(control["rows"] == 0 and control["remain"] == STOCK,
                         f"{label} {target}: campaign {CONTROL_CAMPAIGN} untouched",
                         f"{control['rows']} orders, remain {control['remain']}")
        if not direct:
            dead = [p.name for p in c.proxies if p.proc is not None and p.proc.poll() is not None]
            checks.check(not dead, f"{label} {target}: all {PROXIES} sidecars still running", f"exited: {dead}")
        rows_table.append(row)


def print_table(app_name, rows_table):
    print(f"\n{app_name}: orders / remain after the race (300 users x 3 attempts, 100 coupons, 24 threads, 8 pods)")
    print(f"  {'variant':<18} {'target':<11} {'orders':>6} {'remain':>6} {'dups':>4}  after drain   top answer")
    for r in rows_table:
        errs = sorted(r["race"]["errors"], key=lambda e: -e["count"])
        top = f"{errs[0]['code']} {errs[0]['message'][:70]}" if errs else "-"
        drained = (f"{r['final_orders']:>4} / {r['final_remain']:<4}" if "final_orders" in r else " " * 11)
        print(f"  {r['variant']:<18} {r['target']:<11} {r['orders']:>6} {r['remain']:>6} {r['duplicates']:>4}  "
              f"{drained}   {top}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", nargs="?", choices=sorted(APPS))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--claimguard", help="the claimguard binary")
    ap.add_argument("--work-dir", help="servers, data and logs go here (emptied first)")
    ap.add_argument("--build-dir", help="compiled Java classes and Go binary (default: WORK_DIR/build)")
    ap.add_argument("--target", choices=["claimguard", "direct", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="rounds through claimguard per variant")
    ap.add_argument("--variant", action="append", help="only these variants of APP")
    args = ap.parse_args()
    if args.list:
        for name, app in APPS.items():
            print(f"{name:16} {app.description}")
            for v in app.variants:
                print(f"    {v.name:18} {v.description}")
        return 0
    if not args.app or not args.work_dir or (args.target != "direct" and not args.claimguard):
        ap.error("give APP --work-dir DIR and --claimguard PATH (or --list)")
    app = APPS[args.app]
    variants = [v for v in app.variants if not args.variant or v.name in args.variant]
    if not variants:
        ap.error(f"{args.app} has the variants {[v.name for v in app.variants]}")

    c = cluster.start_harness(args.work_dir, HARNESS_DEADLINE_S)
    checks = cluster.Checks()
    began = time.monotonic()
    rows_table = []
    skipped = None
    try:
        prefix = build(app, args.build_dir or os.path.join(c.dir, "build"))
        c.start_db(unique_index=True)
        c.sql(ZOO_SCHEMA)
        if args.target != "direct":
            if app.redis:
                c.start_redis()
            c.start_proxies(args.claimguard, PROXIES)
        print(f"{args.app}: {app.description}; servers up in {time.monotonic() - began:.1f} s "
              f"(MariaDB {c.db.port}, sidecars {[p.port for p in c.proxies]})")
        for v in variants:
            run_variant(args, app, prefix, v, c, checks, rows_table)
    except Skip as e:
        skipped = str(e)
    except Exception as e:  # noqa: BLE001 - a server that would not start, a hang, ...: a failure, reported
        checks.failed.append(f"harness: {e}")
        print(f"HARNESS ERROR: {type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        c.stop()
    if skipped:
        print(f"SKIPPED: {args.app}: {skipped}")
        return SKIP_EXIT_CODE
    print_table(args.app, rows_table)
    elapsed = time.monotonic() - began
    if checks.failed:
        if c.proxies:
            print(f"\n--- last lines of {c.proxies[0].log}\n{cluster.tail(c.proxies[0].log, 10)}")
        print(f"\napps {args.app}: FAILED ({elapsed:.1f} s); logs in {c.dir}")
        for what in checks.failed:
            print(f"  - {what}")
    else:
        shutil.rmtree(os.path.join(c.dir, "mariadb", "data"), ignore_errors=True)
    print(f"apps {args.app}: {checks.passed} passed, {len(checks.failed)} failed ({elapsed:.1f} s)")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
