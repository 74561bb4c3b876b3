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
import collections
import dataclasses
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py)
import servers  # noqa: E402  (tests/integration/servers.py, on the path cluster.py set)

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
                      (1644, "claimguard: coupon_stock_s is sold out for this key"),   # the silent rules' default
                      (1644, "claimguard: already claimed"))
RULE_NAMES = ("coupon_stock", "coupon_order")
# What the zoo adds to the legacy schema: the shapes read a JOIN and `end_time > NOW()`.
ZOO_SCHEMA = """
    ALTER TABLE coupon_stock ADD COLUMN end_time DATETIME NOT NULL DEFAULT '2099-12-31 00:00:00';
    CREATE TABLE campaign (campaign_id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL);
    INSERT INTO campaign VALUES (1, 'flash sale'), (2, 'control');
"""
# Issue 17's rows (app `silent`, `mariadb_batch`): database code, another database, tenants, string keys.
SILENT_SCHEMA = """
    CREATE DATABASE other;
    GRANT SELECT ON other.* TO 'cg_app'@'%';
    GRANT EXECUTE ON incident.* TO 'cg_app'@'%';
    CREATE TABLE coupon_stock_s (
      code    VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
      remain  INT NOT NULL,
      version INT NOT NULL DEFAULT 0,
      PRIMARY KEY (code)) ENGINE=InnoDB;
    CREATE TABLE coupon_order_s (
      id         BIGINT NOT NULL AUTO_INCREMENT,
      user_id    BIGINT NOT NULL,
      code       VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
      created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
      PRIMARY KEY (id),
      UNIQUE KEY uq_user_code (user_id, code)) ENGINE=InnoDB;
    CREATE VIEW v_stock AS SELECT campaign_id, remain, version FROM coupon_stock;
    DELIMITER //
    CREATE PROCEDURE claim_coupon(IN p_user BIGINT, IN p_campaign BIGINT)
    BEGIN
      DECLARE r INT;
      SELECT remain INTO r FROM incident.coupon_stock WHERE campaign_id = p_campaign;
      IF r > 0 THEN
        UPDATE incident.coupon_stock SET remain = r - 1 WHERE campaign_id = p_campaign;
        INSERT INTO incident.coupon_order (user_id, campaign_id) VALUES (p_user, p_campaign);
        SELECT 1 AS claimed;
      ELSE
        SELECT 0 AS claimed;
      END IF;
    END//
    DELIMITER ;
    CREATE DATABASE tenant_a;
    CREATE TABLE tenant_a.coupon_stock LIKE incident.coupon_stock;
    CREATE TABLE tenant_a.coupon_order LIKE incident.coupon_order;
    GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_a.* TO 'cg_app'@'%';
    CREATE DATABASE tenant_b;
    CREATE TABLE tenant_b.coupon_stock LIKE incident.coupon_stock;
    CREATE TABLE tenant_b.coupon_order LIKE incident.coupon_order;
    GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_b.* TO 'cg_app'@'%';
    FLUSH PRIVILEGES;
"""
# The example rules plus the same pair for the string-keyed tables; the harness's admin user (root) trusted, as a
# restock job's account would be (the change_user rows switch to it).
SILENT_RULES_EXTRA_STOCK = """  - name: coupon_stock_s
    table: coupon_stock_s
    key_columns: [code]
    counter_column: remain
    floor: 0
    units: 1
    unmodeled: refuse
    version_column: version
"""
SILENT_RULES_EXTRA_CLAIM = """  - name: coupon_order_s
    table: coupon_order_s
    idempotency_columns: [user_id, code]
    consumes:
      rule: coupon_stock_s
      columns:
        code: code
    redis:
      key: "lock:coupons:{user_id}:{code}"
      ttl: 3000ms
    strictness: require_decrement
    unmodeled: refuse

trusted_users: [root]
"""
# Issue 17 row 18: the rule options on (docs/RULES.md).
OPTIONS_LINES = ("read_cache: 50ms", "admission: {max_in_flight: 2, queue_timeout: 2s}", "defer_decrement: true")
SCHEMA_CHECK_ARGS = ("--schema-check", "warn", "--schema-check-user", cluster.ADMIN_USER, "--schema-check-password",
                     cluster.ADMIN_PASSWORD, "--schema-check-database", cluster.DATABASE)
STRING_KEY = "'sale-2026'"          # silent_app.py's STRING_KEY
STRING_CONTROL_KEY = "'sale-control'"
TENANTS = ("tenant_a", "tenant_b")
TENANT_B_OFFSET = 10_000_000        # silent_app.py reports a tenant_b claim as user + this
REFUSAL_ACTIONS_PREFIX = "refused-"  # audit actions of a refusal (refused-unmodeled, refused-not-lower)
ROLLED_BACK_ACTION = "rolled-back"   # a COMMIT claimguard turned into ROLLBACK
AUDIT_SETTLE_S = 0.2                # audit lines are written in batches by a background thread (20 ms linger)
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
    expect: str = "safe"          # safe; refused (every claim refused by a rule, nothing sold); some_refused (some
                                  # statements refused, e.g. restocks, and the stock still sells out)
    known_open: tuple = ()        # checks (substrings of their names) known to fail: a finding not fixed yet, named in
                                  # known_why; reported as KNOWN OPEN, not failed (--strict fails them)
    known_why: str = ""
    in_ctest: bool = True         # False: outside the ctest time budget (run_app.py --ctest skips it; --variant runs it)
    scope: str = "int"            # where the stock is: int (incident.coupon_stock), string (coupon_stock_s),
                                  # tenants (tenant_a and tenant_b)


@dataclasses.dataclass(frozen=True)
class App:
    language: str                 # node, python, java, go
    program: str                  # file under tests/apps/<language>/
    description: str
    variants: tuple
    redis: bool = True            # False: the sidecars run without Redis, so every duplicate reaches the database
    config: str = "zoo"           # zoo (the example rules), silent (issue 17's schema, database code, a schema
                                  # check user, trusted admin), options (read_cache + admission + defer_decrement)


V = Variant
APPS = {
    "mysql2": App("node", "mysql2_app.js", "Node mysql2 createPool, a connection per statement", (
        V("query", "pool.query (text protocol)"),
        V("execute", "pool.execute (prepared; JS numbers bound as DOUBLE)"))),
    "mysqljs": App("node", "mysqljs_app.js", "Node mysql (mysqljs) createPool + pool.query", (
        V("pool_query", "pool.query, a connection per statement"),)),
    "sequelize": App("node", "sequelize_app.js", "Node Sequelize 6 over mysql2: findOne, save, create", (
        V("save", "findOne, stock.remain -= 1, save(), Order.create()"),
        V("transaction", "the same in sequelize.transaction()"),
        V("upsert", "Stock.upsert({campaignId, remain: read - 1}) (INSERT ... ON DUPLICATE KEY UPDATE): issue 17 row 3",
          expect="refused"),
        V("version", "model version: true (UPDATE ... AND version = ?), OptimisticLockError: read again (5 tries); "
          "issue 17 row 16", in_ctest=False))),
    "typeorm": App("node", "typeorm_app.js", "Node TypeORM 0.3 EntitySchema over mysqljs, a DataSource pool per pod", (
        V("save", "findOneBy, stock.remain -= 1, repository.save(stock), then save(order), each save its own "
          "START TRANSACTION ... COMMIT: issue 17 row 7"),
        V("version", "version column (@VersionColumn): update({campaignId, version}, {remain: read - 1}), 0 rows: read "
          "again (5 tries), then save(order); a duplicate leaks its unit directly: issue 17 row 16"))),
    "mariadb_batch": App("node", "mariadb_batch_app.js", "Node MariaDB connector 3.x createPool (COM_STMT_BULK_EXECUTE, "
                         "binary protocol)", (
        V("batch", "pool.query read, UPDATE <read - 1>, pool.batch(INSERT claim): issue 17 row 5 (was refused, "
          "bulk_execute; now one claim per row of the bulk)"),
        V("batch_tx", "the same on one connection in beginTransaction() ... commit()"),
        V("call_execute", "conn.execute('CALL claim_coupon(?, ?)') (prepared): issue 17 row 1", expect="refused")),
        config="silent"),
    "sqlalchemy": App("python", "sqlalchemy_app.py", "SQLAlchemy 1.4 ORM over mysqlclient, default QueuePool", (
        V("read_then_tx", "read in a read-only session, then a write transaction (Spring readOnly-then-write)"),
        V("session", "one ORM session: get, remain -= 1, add(Order), commit"),
        V("version", "the session flow with version_id_col; StaleDataError: read again (5 tries): issue 17 row 17",
          works_directly=True, in_ctest=False))),
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
        V("multi_statement", "UPDATE ...; INSERT ... in one COM_QUERY (CLIENT_MULTI_STATEMENTS): issue 19's MyBatis "
          "<foreach> row (was refused, several_statements; now each statement decided in order)"),
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
    # Issue 17 ("no silent path"): each row of its table as an app; sidecars with a schema check user, so that
    # database code (the procedure, the view) and the key columns' collations are known.
    "silent": App("python", "silent_app.py", "PyMySQL / MySQLdb: issue 17's rows (database code, upserts, SQL "
                  "PREPARE, savepoints, XA, COM_CHANGE_USER, qualified names, string keys, tenants, amounts)", (
        V("call_text", "CALL claim_coupon(user, campaign) (text): row 1", expect="refused"),
        V("view_update", "UPDATE v_stock SET remain = <read - 1> (an updatable view): row 2", expect="refused"),
        V("replace_stock", "REPLACE INTO coupon_stock (campaign_id, remain, version) VALUES (...): row 3",
          expect="refused"),
        V("upsert_stock", "INSERT INTO coupon_stock ... ON DUPLICATE KEY UPDATE remain = VALUES(remain): row 3",
          expect="refused"),
        V("sql_prepare", "PREPARE u FROM 'UPDATE coupon_stock SET remain = ? ...'; EXECUTE u USING @r, @c: row 4",
          expect="refused"),
        V("savepoint_rollback", "SAVEPOINT; read; UPDATE; a third ROLLBACK TO SAVEPOINT + COMMIT: row 6"),
        V("change_user_app", "MySQLdb, pool user root (trusted) COM_CHANGE_USER to the app user per borrow: row 8"),
        V("change_user_admin", "MySQLdb app user; restocks (FOR UPDATE; SET remain = R + 10) after COM_CHANGE_USER "
          "to root (trusted), then back: row 8"),
        V("qualified_other_db", "incident.coupon_stock / incident.coupon_order with default database other: row 9"),
        V("qualified_no_db", "the same with no default database: row 9"),
        V("string_case", "string key 'sale-2026' in the UPDATE, 'SALE-2026' / 'SALE-2026 ' in the INSERT "
          "(utf8mb4_general_ci): row 10", scope="string"),
        V("tenants", "tenant_a and tenant_b, the same tables, users claim in both: row 11", scope="tenants"),
        V("xa_rollback_retry", "XA START ... XA END; XA PREPARE; half XA ROLLBACK then the retry: row 12"),
        V("n_units", "orders of 2-3 units written SET remain = <R - N> (units: 1): row 13", expect="refused"),
        V("app_restock", "the flow plus restocks SET remain = <R + 50> through the app's account: row 14",
          expect="some_refused"),
        V("relative_version", "SET remain = remain - 1, version = version + 1 ... AND version = V, retried: row 15",
          works_directly=True)),
        config="silent"),
    "silent_options": App("python", "silent_app.py", "PyMySQL with read_cache + admission + defer_decrement on: "
                          "issue 17 row 18", (
        V("share_lock_tx", "START TRANSACTION; SELECT ... LOCK IN SHARE MODE; UPDATE <R-1>; INSERT; COMMIT; deadlocks "
          "retried", works_directly=True),
        V("relative_version", "SET remain = remain - 1, version = version + 1 ... AND version = V, retried",
          works_directly=True)),
        config="options"),
    # Issue 17 row 19: no race; claimguard check and the sidecars' schema check against a rule naming a column the
    # database lacks.
    "rules_typo": App("check", "", "rules with counter_column: remainder (a typo): check, readiness, the log", (
        V("remainder", "lint, check (exit 1, file:line), serve --schema-check refuse (not ready, file:line) and warn "
          "(file:line in the log), a write through each"),)),
}


class Skip(Exception):
    """The app cannot run here (toolchain or packages missing)."""

    class Done(Exception):
        """A check-only app (no race) finished."""


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


def run_app(prefix, variant, ports, threads, first_user, users, attempts, seed, timeout_s=APP_TIMEOUT_S):
    cmd = prefix + ["--host", cluster.HOST, "--ports", ",".join(str(p) for p in ports), "--user", cluster.APP_USER,
                    "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE, "--campaign",
                    str(CAMPAIGN), "--threads", str(threads), "--first-user", str(first_user), "--users", str(users),
                    "--attempts", str(attempts), "--seed", str(seed), "--variant", variant.name]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=timeout_s, check=False, cwd=HERE)
    except subprocess.TimeoutExpired as e:
        raise cluster.HarnessError(f"the app did not finish within {timeout_s}s (a hang?)") from e
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


def facts_of(c, database, stock, order, col, key, offset=0):
    """What the database holds for one stock key (the orders of that key, its remain)."""
    out = c.db.sql(f"""
        SELECT COUNT(*) FROM {order} WHERE {col} = {key};
        SELECT COUNT(*) FROM (SELECT user_id FROM {order} WHERE {col} = {key} GROUP BY user_id HAVING COUNT(*) > 1) d;
        SELECT remain FROM {stock} WHERE {col} = {key};
    """, database=database).split("\n")
    users = [int(x) + offset for x in c.db.sql(
        f"SELECT user_id FROM {order} WHERE {col} = {key} ORDER BY user_id;", database=database).split()]
    return {"rows": int(out[0]), "duplicate_pairs": int(out[1]),
            "remain": int(out[2]) if out[2].strip() else None, "users": users}


def scope_reset(c, scope):
    c.reset({CAMPAIGN: STOCK, CONTROL_CAMPAIGN: STOCK})   # also empties Redis
    if scope == "string":
        c.sql(f"TRUNCATE TABLE coupon_order_s; DELETE FROM coupon_stock_s; INSERT INTO coupon_stock_s (code, remain, "
              f"version) VALUES ({STRING_KEY}, {STOCK}, 0), ({STRING_CONTROL_KEY}, {STOCK}, 0);")
    elif scope == "tenants":
        for t in TENANTS:
            c.db.sql(f"TRUNCATE TABLE coupon_order; DELETE FROM coupon_stock; INSERT INTO coupon_stock (campaign_id, "
                     f"remain, version) VALUES ({CAMPAIGN}, {STOCK}, 0), ({CONTROL_CAMPAIGN}, {STOCK}, 0);", database=t)


def scope_facts(c, scope, control=False):
    """[(label, facts)]: every stock key the variant sells (its control key with control=True)."""
    if scope == "string":
        return [("coupon_stock_s", facts_of(c, cluster.DATABASE, "coupon_stock_s", "coupon_order_s", "code",
                                            STRING_CONTROL_KEY if control else STRING_KEY))]
    campaign = CONTROL_CAMPAIGN if control else CAMPAIGN
    if scope == "tenants":
        return [(t, facts_of(c, t, "coupon_stock", "coupon_order", "campaign_id", campaign, i * TENANT_B_OFFSET))
                for i, t in enumerate(TENANTS)]
    return [("", facts_of(c, cluster.DATABASE, "coupon_stock", "coupon_order", "campaign_id", campaign))]


def total(facts):
    return {"rows": sum(f["rows"] for _, f in facts), "duplicate_pairs": sum(f["duplicate_pairs"] for _, f in facts),
            "remain": sum(f["remain"] or 0 for _, f in facts), "users": sorted(u for _, f in facts for u in f["users"])}


def check_race(checks, label, r, facts, stock):
    """facts: [(label, facts)] per stock key; stock: what each key held (initial + restocked)."""
    checks.check(not r["setup_errors"], f"{label}: every app thread connected", "; ".join(r["setup_errors"])[:300])
    checks.equal(r["attempts"], r["attempts_planned"], f"{label}: every attempt ran")
    for where, f in facts:
        at = f" ({where})" if where else ""
        rows, remain = f["rows"], f["remain"]
        checks.check(rows <= stock, f"{label}{at}: no over-issue: orders <= {stock}", f"OVER-ISSUE: {rows} orders")
        checks.check(remain is not None and remain >= 0, f"{label}{at}: remain >= 0", f"remain is {remain}")
        checks.check(remain is not None and stock - remain == rows, f"{label}{at}: no leak: initial - remain == orders",
                     f"{stock} - {remain} = {stock - (remain or 0)} taken, {rows} orders")
        checks.check(f["duplicate_pairs"] == 0, f"{label}{at}: no (user, campaign) twice",
                     f"{f['duplicate_pairs']} users hold two coupons")
    bad = [e for e in r["errors"] if kind_of_error(e) == "other"]
    checks.check(not bad, f"{label}: every error is a configured answer or a refusal naming a rule",
                 "; ".join(f"{e['statement']}: {e['code']} x{e['count']} {e['message'][:160]}" for e in bad[:4]))
    holders = set(total(facts)["users"])
    told = set(r["claimed_users"])
    checks.check(told <= holders, f"{label}: every user the app counted as claimed has an order",
                 f"told but missing: {sorted(told - holders)[:10]}")
    if "already_claimed_users" in r:
        told = set(r["already_claimed_users"])
        checks.check(told <= holders, f"{label}: every user told \"already claimed\" holds an order",
                     f"{len(told - holders)} told \"already claimed\" hold none: {sorted(told - holders)[:10]}")


# --- what claimguard said about it: audit lines and metrics ------------------------------------------
def audit_counts(c):
    """Audit lines of every sidecar so far, by action."""
    counts = collections.Counter()
    for path in glob.glob(os.path.join(c.dir, "audit-*.jsonl")):
        with open(path, "rb") as f:
            for raw in f:
                try:
                    counts[json.loads(raw).get("action", "?")] += 1
                except ValueError:
                    counts["(unreadable)"] += 1
    return counts


def settled_audit_counts(c):
    """audit_counts once the sidecars' background writers have caught up (two reads in a row agree)."""
    before = audit_counts(c)
    for _ in range(20):
        time.sleep(AUDIT_SETTLE_S)
        now = audit_counts(c)
        if now == before:
            return now
        before = now
    return before


METRIC_LINE = re.compile(r'^(claimguard_unmodeled_total|claimguard_ledger_waiting_units|claimguard_rolled_back_commits_total)\{([^}]*)\} (\S+)$', re.M)


def metric_snapshot(c):
    """{(metric, reason, policy): value} summed over the sidecars."""
    out = collections.Counter()
    for p in c.proxies:
        status, body = servers.http_get(p.admin_port, "/metrics")
        if status != 200:
            raise cluster.HarnessError(f"{p.name}: /metrics answered {status}")
        for m in METRIC_LINE.finditer(body):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels.get("reason", ""), labels.get("policy", ""))] += float(m.group(3))
    return out


def deltas(after, before):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


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
        scope_reset(c, variant.scope)
        if not direct:
            audit0, metrics0 = settled_audit_counts(c), metric_snapshot(c)
        ports = [c.db.port] * PROXIES if direct else [p.port for p in c.proxies]
        began = time.monotonic()
        race = run_app(prefix, variant, ports, THREADS, 1, USERS, ATTEMPTS_PER_USER, rnd, args.app_timeout)
        stock = STOCK + race.get("restocked", 0)
        after = scope_facts(c, variant.scope)
        sums = total(after)
        row = {"variant": variant.name, "target": target.split("#")[0], "orders": sums["rows"],
               "remain": sums["remain"], "duplicates": sums["duplicate_pairs"], "race": race}
        print(f"-- {target}: {describe(race)}")
        for where, f in after:
            print(f"   database{' ' + where if where else ''}: {f['rows']} orders, remain {f['remain']}, "
                  f"{f['duplicate_pairs']} duplicate pairs, leak {stock - (f['remain'] or 0) - f['rows']}"
                  f"{f', restocked {stock - STOCK}' if stock != STOCK else ''}")
        told = set(race.get("already_claimed_users", [])) - set(sums["users"])
        if told:
            print(f"   told \"already claimed\" but hold no order: {len(told)} {sorted(told)[:10]}")
        if race["stderr"]:
            print("   app stderr: " + race["stderr"][-600:].replace("\n", "\n   | "))
        assert_it = not direct or variant.works_directly
        if assert_it:
            check_race(checks, f"{label} {target}", race, after, stock)
            if variant.works_directly:
                # It sold the stock on its own: no answer through claimguard may stop it early ("sold out" for
                # a lost version race), so the race itself must sell out, before any drain. Only a unit given
                # back after the last buyer heard a true "sold out" may be left: claimguard answers sold out
                # when its probe reads the counter at the floor, and a duplicate's unit (audited compensated)
                # can come back after that, as the app's own give-back can directly; the drain sells it.
                late = 0 if direct else deltas(settled_audit_counts(c), audit0).get("compensated", 0)
                for where, f in after:
                    checks.check(f["remain"] == 0 or (f["remain"] or 0) <= late,
                                 f"{label} {target}{' ' + where if where else ''}: the race itself sells out (but for "
                                 "units given back late)",
                                 f"remain {f['remain']} after 300 users x 3 attempts, {late} units given back")
            drain = run_app(prefix, variant, ports[:1], 1, DRAIN_FIRST_USER, DRAIN_USERS * len(after), 1, rnd,
                            args.app_timeout)
            final = scope_facts(c, variant.scope)
            fsum = total(final)
            print(f"   drain: {describe(drain)}")
            print(f"   after the drain: {fsum['rows']} orders, remain {fsum['remain']}")
            check_race(checks, f"{label} {target} drain", drain, final, stock)
            refusals = sum(e["count"] for e in race["errors"] + drain["errors"] if kind_of_error(e) == "refusal")
            if variant.expect == "refused":
                checks.check(refusals > 0, f"{label} {target}: refused by a rule (an ERR naming it)",
                             "no refusal: the app was never told")
                checks.check(fsum["rows"] == 0, f"{label} {target}: refused by policy, nothing sold",
                             f"{fsum['rows']} orders")
                for where, f in final:
                    checks.check(f["remain"] == stock, f"{label} {target}{' ' + where if where else ''}: refused by "
                                 "policy, nothing taken", f"remain {f['remain']} of {stock}")
            elif variant.may_refuse and fsum["rows"] == 0 and refusals > 0:
                checks.check(fsum["remain"] == STOCK, f"{label} {target}: refused by policy, nothing taken",
                             f"remain {fsum['remain']}")
            else:
                if variant.expect == "some_refused":
                    checks.check(refusals > 0, f"{label} {target}: the ambiguous writes refused by a rule",
                                 "no refusal")
                for where, f in final:
                    checks.check(f["remain"] is not None and f["remain"] <= variant.left_max,
                                 f"{label} {target}{' ' + where if where else ''}: the stock sells out (remain <= "
                                 f"{variant.left_max} after the drain)", f"remain {f['remain']}, {f['rows']} orders")
            row.update(final_orders=fsum["rows"], final_remain=fsum["remain"])
            control = total(scope_facts(c, variant.scope, control=True))
            checks.check(control["rows"] == 0 and control["remain"] == STOCK * len(after),
                         f"{label} {target}: the control key untouched",
                         f"{control['rows']} orders, remain {control['remain']}")
        if not direct:
            audit1, metrics1 = settled_audit_counts(c), metric_snapshot(c)
            audit_d, metric_d = deltas(audit1, audit0), deltas(metrics1, metrics0)
            # A COMMIT claimguard turned into ROLLBACK (a claim with no decrement) is a refusal too: audited
            # rolled-back, counted in claimguard_rolled_back_commits_total.
            refused_lines = sum(n for a, n in audit_d.items()
                                if a.startswith(REFUSAL_ACTIONS_PREFIX) or a == ROLLED_BACK_ACTION)
            unmodeled = {k[1] + "/" + k[2]: v for k, v in metric_d.items() if k[0] == "claimguard_unmodeled_total"}
            rolled_back = sum(v for k, v in metric_d.items() if k[0] == "claimguard_rolled_back_commits_total")
            if rolled_back:
                unmodeled["rolled_back_commits"] = rolled_back
            waiting = metrics1.get(("claimguard_ledger_waiting_units", "", ""), 0)
            print(f"   refusals the app saw {refusals}; audit {dict(sorted(audit_d.items()))}; "
                  f"claimguard_unmodeled_total +{unmodeled}; ledger waiting units {waiting:g} "
                  f"({time.monotonic() - began:.1f} s)")
            row.update(refusals=refusals, audit_refused=refused_lines, unmodeled=unmodeled,
                       forwarded_unmodeled=audit_d.get("forwarded-unmodeled", 0), waiting=waiting)
            checks.check(refused_lines >= refusals, f"{label} {target}: every refusal the app saw has an audit line",
                         f"{refusals} refusals, {refused_lines} refused-* audit lines")
            checks.check(sum(unmodeled.values()) >= refusals,
                         f"{label} {target}: every refusal the app saw is counted (claimguard_unmodeled_total, "
                         "claimguard_rolled_back_commits_total)",
                         f"{refusals} refusals, +{sum(unmodeled.values()):g} counted")
            checks.check(audit_d.get("forwarded-unmodeled", 0) == 0,
                         f"{label} {target}: nothing unmodelled forwarded (the rules say refuse)",
                         f"{audit_d.get('forwarded-unmodeled')} forwarded-unmodeled lines")
            dead = [p.name for p in c.proxies if p.proc is not None and p.proc.poll() is not None]
            checks.check(not dead, f"{label} {target}: all {PROXIES} sidecars still running", f"exited: {dead}")
        rows_table.append(row)


def print_table(app_name, rows_table):
    print(f"\n{app_name}: orders / remain after the race (300 users x 3 attempts, 100 coupons, 24 threads, 8 pods)")
    print(f"  {'variant':<18} {'target':<11} {'orders':>6} {'remain':>6} {'dups':>4}  after drain   refusals/audit/"
          f"counted  top answer")
    for r in rows_table:
        errs = sorted(r["race"]["errors"], key=lambda e: -e["count"])
        top = f"{errs[0]['code']} {errs[0]['message'][:70]}" if errs else "-"
        drained = (f"{r['final_orders']:>4} / {r['final_remain']:<4}" if "final_orders" in r else " " * 11)
        loud = (f"{r['refusals']}/{r['audit_refused']}/{sum(r['unmodeled'].values()):g}" if "refusals" in r else "-")
        print(f"  {r['variant']:<18} {r['target']:<11} {r['orders']:>6} {r['remain']:>6} {r['duplicates']:>4}  "
              f"{drained}   {loud:<22} {top}")


def write_silent_rules(work):
    with open(cluster.EXAMPLE_RULES, encoding="utf-8") as f:
        text = f.read()
    head, sep, tail = text.partition("\nclaim_rules:")
    path = os.path.join(work, "rules-silent.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(head.rstrip("\n") + "\n" + SILENT_RULES_EXTRA_STOCK + sep + tail.rstrip("\n") + "\n"
                + SILENT_RULES_EXTRA_CLAIM)
    return path


# --- issue 21: observe, learn, enforce -------------------------------------------------------------------
LEARN_USERS = 40              # the app's users while the database's general log records what it sends


def cli(args, *argv):
    r = subprocess.run([args.claimguard, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=60, check=False, text=True)
    return r.returncode, r.stdout, r.stderr


def learn_rules(args, prefix, variant, c, checks):
    """A DBA's first install without writing rules: record what the app sends (the general log) in one direct
    race, let `claimguard suggest` draft the rules, lint and check the draft, and switch it to enforce."""
    log = os.path.join(c.dir, "general.log")
    scope_reset(c, variant.scope)
    c.db.sql(f"SET GLOBAL general_log_file = '{log}'; SET GLOBAL general_log = ON")
    try:
        run_app(prefix, variant, [c.db.port] * PROXIES, THREADS, 1, LEARN_USERS, 1, 99, args.app_timeout)
    finally:
        c.db.sql("SET GLOBAL general_log = OFF")
    rc, draft, err = cli(args, "suggest", log)
    checks.equal(rc, 0, f"learn: claimguard suggest exits 0 ({err.strip()[-300:]})")
    return check_draft(args, c, checks, draft, "the general log")


def learn_rules_from_digests(args, prefix, variant, c, checks):
    """The same without a general log (a managed database): one sidecar with no rules for the app's tables
    watches them (watch_unlisted_tables), the app runs through it, and `claimguard suggest --digests` drafts
    the rules from the sidecar's /digests."""
    scope_reset(c, variant.scope)
    rules_dir = os.path.join(c.dir, "rules-none")
    os.makedirs(rules_dir, exist_ok=True)
    watcher = servers.Claimguard(args.claimguard, c.dir, "claimguard-watch", c.db.port,
                                 extra_args=["--rules-dir", rules_dir, "--watch-unlisted-tables", "16",
                                             "--audit-log", "off"])
    watcher.start()
    try:
        run_app(prefix, variant, [watcher.port] * PROXIES, THREADS, 1, LEARN_USERS, 1, 99, args.app_timeout)
        status, body = servers.http_get(watcher.admin_port, "/digests")
    finally:
        watcher.stop()
    checks.equal(status, 200, "learn: the watching sidecar answers /digests")
    digests = os.path.join(c.dir, "digests.json")
    with open(digests, "w", encoding="utf-8") as f:
        f.write(body)
    rc, draft, err = cli(args, "suggest", "--digests", digests)
    checks.equal(rc, 0, f"learn: claimguard suggest --digests exits 0 ({err.strip()[-300:]})")
    return check_draft(args, c, checks, draft, "the sidecar's /digests")


def check_draft(args, c, checks, draft, source):
    """The draft is the app's rules, lints and checks; then its enforce copy (the rules the sidecars get)."""
    path = os.path.join(c.dir, "rules-suggested.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(draft)
    print(f"-- learn: the draft claimguard suggest wrote from {source}:")
    print(textwrap.indent(draft, "   "))
    for want in ("table: coupon_stock", "key_columns: [campaign_id]", "counter_column: remain",
                 "table: coupon_order", "campaign_id: campaign_id"):
        checks.check(want in draft, f"learn: the draft says {want}")
    found = re.search(r"idempotency_columns: \[(.*)\]", draft)
    checks.equal(sorted(found.group(1).split(", ")) if found else None, ["campaign_id", "user_id"],
                 "learn: the draft's idempotency columns are the claim's (user, campaign)")
    rc, out, err = cli(args, "lint", path)
    checks.equal(rc, 0, f"learn: the draft passes lint ({(out + err).strip()[-300:]})")
    rc, out, err = cli(args, "check", "--rules", path, "--backend", f"{cluster.HOST}:{c.db.port}", "--user",
                       cluster.ADMIN_USER, "--password", cluster.ADMIN_PASSWORD, "--database", cluster.DATABASE)
    checks.equal(rc, 0, f"learn: the draft passes check ({(out + err).strip()[-500:]})")
    enforce = os.path.join(c.dir, "rules-suggested-enforce.yaml")
    with open(enforce, "w", encoding="utf-8") as f:
        f.write(draft.replace("default_mode: observe", "default_mode: enforce"))
    return enforce


def kill_switch(c, checks):
    """Every sidecar to observe at once (POST /-/mode-override/observe), then back to the rules."""
    began = time.monotonic()
    for p in c.proxies:
        status, body = servers.http_post(p.control_port, "/-/mode-override/observe")
        checks.equal(status, 200, f"kill switch: {p.name} answers ({body})")
    took = time.monotonic() - began
    modes = [json.loads(servers.http_get(p.admin_port, "/rules")[1]).get("mode_override") for p in c.proxies]
    # Printed, not asserted (shared machines): the bound is one second.
    print(f"-- kill switch: {len(c.proxies)} sidecars observing {took * 1000:.0f} ms after the first POST")
    checks.check(modes == ["observe"] * len(c.proxies), f"kill switch: every sidecar observes ({modes})")
    for p in c.proxies:
        servers.http_post(p.control_port, "/-/mode-override/off")


def start_servers(args, app, c, learned=None):
    c.start_db(unique_index=True)
    c.sql(ZOO_SCHEMA)
    if app.config == "silent":
        c.sql(textwrap.dedent(SILENT_SCHEMA))
    if args.target == "direct":
        return
    if app.redis:
        c.start_redis()
    if learned is not None:
        c.start_proxies(args.claimguard, PROXIES, rules=learned(), extra_args=())
        return
    rules, extra = cluster.EXAMPLE_RULES, ()
    if app.config == "silent":
        rules, extra = write_silent_rules(c.dir), SCHEMA_CHECK_ARGS
    elif app.config == "options":
        # A lock wait ends in 1205 after 5 s (the default 50 s; 5-10 s is common in production), as in tests/model.
        c.db.sql("SET GLOBAL innodb_lock_wait_timeout = 5")
        rules = cluster.rules_with_stock_lines(os.path.join(c.dir, "rules-options.yaml"), OPTIONS_LINES)
    c.start_proxies(args.claimguard, PROXIES, rules=rules, extra_args=extra)
    if app.config == "silent":
        # Traffic waits for the first schema check: the procedure and the view are known, as a DBA deploys it.
        for p in c.proxies:
            cluster.wait_for(lambda p=p: all(n in servers.http_get(p.admin_port, "/rules")[1]
                                             for n in ("claim_coupon", "v_stock")), 30,
                             f"{p.name}: the schema check found claim_coupon and v_stock")


# --- issue 17 row 19: a rule naming a column the database lacks ---------------------------------------
def run_rules_typo(args, c, checks):
    c.start_db(unique_index=True)
    c.sql(ZOO_SCHEMA)
    with open(cluster.EXAMPLE_RULES, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    line_no = next(i for i, ln in enumerate(lines, 1) if re.match(r"\s*counter_column: remain\b", ln))
    typo = os.path.join(c.dir, "typo.yaml")
    with open(typo, "w", encoding="utf-8") as f:
        f.write(text.replace("counter_column: remain", "counter_column: remainder", 1))
    where = f"{typo}:{line_no}:"

    def cli(*argv):
        r = subprocess.run([args.claimguard] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=60, check=False)
        return r.returncode, r.stdout.decode(errors="replace")
    rc, out = cli("lint", typo)
    print(f"lint: exit {rc}: {out.strip()[:300]}")
    rc, out = cli("check", "--rules", typo, "--backend", f"{cluster.HOST}:{c.db.port}", "--user", cluster.ADMIN_USER,
                  "--password", cluster.ADMIN_PASSWORD, "--database", cluster.DATABASE, "--skip-duplicates")
    print(f"check: exit {rc}:\n   | " + out.strip()[:1200].replace("\n", "\n   | "))
    checks.equal(rc, 1, "claimguard check exits 1")
    checks.check(where in out and "remainder" in out, f"claimguard check names {os.path.basename(typo)}:{line_no} and "
                 "remainder", out[:300])
    c.start_redis()
    results = {}
    for mode in ("refuse", "warn"):
        check = ["--schema-check", mode, "--schema-check-user", cluster.ADMIN_USER, "--schema-check-password",
                 cluster.ADMIN_PASSWORD, "--schema-check-database", cluster.DATABASE]
        p = c.start_proxies(args.claimguard, 1, rules=typo, extra_args=check)[-1]
        deadline = time.monotonic() + 20
        status, body = servers.http_get(p.admin_port, "/readiness")
        while time.monotonic() < deadline and not (where in body or where in cluster.tail(p.log, 200)):
            time.sleep(0.2)
            status, body = servers.http_get(p.admin_port, "/readiness")
        log = cluster.tail(p.log, 200)
        print(f"serve --schema-check {mode}: /readiness {status}: {body.strip()[:300]}")
        print("   log: " + "\n   | ".join(ln for ln in log.splitlines() if "remainder" in ln)[:600])
        if mode == "refuse":
            checks.equal(status, 503, "schema_check refuse: the sidecar is not ready")
            checks.check(where in body, f"schema_check refuse: /readiness names {os.path.basename(typo)}:{line_no}",
                         body[:300])
        checks.check(where in log, f"schema_check {mode}: the log names {os.path.basename(typo)}:{line_no}",
                     log[-300:])
        # What a write through it does (an app that ignores readiness, or a Service without a readiness probe).
        c.reset({CAMPAIGN: STOCK, CONTROL_CAMPAIGN: STOCK})
        audit0 = settled_audit_counts(c)
        try:
            import pymysql
            conn = pymysql.connect(host=cluster.HOST, port=p.port, user=cluster.APP_USER,
                                   password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                                   connect_timeout=10, read_timeout=10)
            with conn.cursor() as cur:
                cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                cur.execute(f"UPDATE coupon_stock SET remain = {STOCK + 50} WHERE campaign_id = {CAMPAIGN}")
            answer = "OK"
            conn.close()
        except Exception as e:  # noqa: BLE001 - what the app is told is the result
            answer = f"{type(e).__name__}: {e}"
        remain = c.facts(CAMPAIGN)["remain"]
        audit_d = deltas(settled_audit_counts(c), audit0)
        results[mode] = (answer, remain, audit_d)
        print(f"   UPDATE coupon_stock SET remain = {STOCK + 50} (app user, after a read of {STOCK}): {answer}; "
              f"remain {remain}; audit {audit_d}")
        # The next mode's sidecar gets the same name (start_proxies counts from 1): stop this one, keep its files.
        p.stop()
        c.proxies.remove(p)
        for path in (p.log, os.path.join(c.dir, "audit-1.jsonl")):
            if os.path.exists(path):
                os.rename(path, f"{path}.{mode}")
    return results


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
    ap.add_argument("--ctest", action="store_true", help="only the variants in the ctest time budget")
    ap.add_argument("--strict", action="store_true", help="checks a variant marks known open fail too")
    ap.add_argument("--app-timeout", type=int, default=APP_TIMEOUT_S, help="seconds one run of the app may take")
    ap.add_argument("--deadline", type=int, default=HARNESS_DEADLINE_S, help="seconds the whole run may take")
    ap.add_argument("--learn", action="store_true",
                    help="issue 21's workflow: the rules come from `claimguard suggest` on the general log of a direct "
                         "run, then the race through the sidecars and the kill switch")
    ap.add_argument("--learn-from", choices=["log", "digests"], default="log",
                    help="with --learn: the general log of a direct run, or the /digests of a sidecar with no rules "
                         "for the app's tables and watch_unlisted_tables on")
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
    variants = [v for v in app.variants if (v.name in args.variant if args.variant else v.in_ctest or not args.ctest)]
    if not variants:
        ap.error(f"{args.app} has the variants {[v.name for v in app.variants]}")

    c = cluster.start_harness(args.work_dir, args.deadline)
    checks = cluster.Checks()
    began = time.monotonic()
    rows_table = []
    known_open = []
    skipped = None
    try:
        if app.language == "check":
            run_rules_typo(args, c, checks)
            raise Skip.Done()
        prefix = build(app, args.build_dir or os.path.join(c.dir, "build"))
        if args.learn:
            learn = learn_rules_from_digests if args.learn_from == "digests" else learn_rules
            learned = lambda: learn(args, prefix, variants[0], c, checks)  # noqa: E731 (after the database)
            start_servers(args, app, c, learned)
        else:
            start_servers(args, app, c)
        print(f"{args.app}: {app.description}; servers up in {time.monotonic() - began:.1f} s "
              f"(MariaDB {c.db.port}, sidecars {[p.port for p in c.proxies]})")
        for v in variants:
            first = len(checks.failed)
            run_variant(args, app, prefix, v, c, checks, rows_table)
            if args.learn:
                kill_switch(c, checks)
            if v.known_open and not args.strict:
                new = checks.failed[first:]
                known = [w for w in new if any(k in w for k in v.known_open)]
                checks.failed[first:] = [w for w in new if w not in known]
                known_open.extend(f"{w} ({v.known_why})" for w in known)
                if not known:
                    print(f"NOTE: {args.app}.{v.name} is marked known open ({v.known_why}) but its checks "
                          f"{list(v.known_open)} passed: remove the mark if it holds")
    except Skip.Done:
        pass
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
    for what in known_open:
        print(f"KNOWN OPEN: {what}")
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
