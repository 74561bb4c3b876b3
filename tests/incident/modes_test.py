#!/usr/bin/env python3
"""modes_test.py: observe mode and insert-first apps, end to end through real claimguard processes.

Usage: modes_test.py SCENARIO --claimguard PATH --load PATH --work-dir DIR
       modes_test.py --list

Each run starts its own MariaDB (sql/legacy_schema.sql + the UNIQUE index), a Redis and the
claimguard sidecars it needs in DIR, with real clients (PyMySQL, claimguard-load):

  observe_wire              the same deterministic interleavings (two apps that both read remain=1 ...)
                            straight to MariaDB, through an observe-mode sidecar and through an
                            enforce-mode one: observe gives the client byte-identical replies and
                            the same tables (over-issue included), counts and logs every decision;
                            enforce differs exactly where it refuses
  observe_per_rule          one rules file, one rule pair in observe and one in enforce: only the
                            enforced one changes what the app sees
  observe_load              the concurrent naive load (text and prepared) through observe sidecars:
                            decisions counted, no answer changed
  insert_first_transaction  BEGIN; INSERT claim; SELECT; UPDATE; COMMIT: the COMMIT of a transaction
                            whose decrement was refused becomes a ROLLBACK (deterministic case, then
                            24 threads over 4 sidecars)
  insert_first_autocommit   the claim inserted before the decrement in autocommit: detected, counted,
                            logged, not changed; refused under strictness: require_decrement

Exit 0 when every check passed, 1 otherwise. Timings are printed, never asserted.
"""

import argparse
import collections
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import struct

import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402  (same directory)
import servers  # noqa: E402  (tests/integration, put on sys.path by cluster)

import pymysql  # noqa: E402  (python3-pymysql)
from pymysql.constants import CLIENT  # noqa: E402

CAMPAIGN = 1
CONTROL_CAMPAIGN = 2          # a stock row nobody claims: must stay untouched
CONTROL_STOCK = 100
HARNESS_DEADLINE_S = 110      # below ctest's TIMEOUT, so the servers are always stopped
IO_TIMEOUT_S = 20             # a statement that blocks this long is a failure, not a hang
LOAD_TIMEOUT_S = 60
LOG_TAIL_LINES = 25
AUDIT_WAIT_S = 10.0           # the audit log's writer thread is this late at most, or lines are missing
POLL_S = 0.02
STATUS_IN_TRANS = 0x0001

# The answers of rules/examples/coupon.yaml.
EXHAUSTED = (1644, "45000", "claimguard: coupon_stock is sold out for this key")
ALREADY_CLAIMED = (1644, "45000", "claimguard: already claimed")
ER_DUP_ENTRY = 1062

# The concurrent insert-first race (B).
RACE_STOCK = 100
RACE_USERS = 300
RACE_ATTEMPTS_PER_USER = 2    # every user tries twice: repeats
RACE_PROXIES = 4
RACE_THREADS = 24
RACE_ROUNDS = 2

# The concurrent observe load (A).
LOAD_STOCK = 100
LOAD_USERS = 300
LOAD_ATTEMPTS_PER_USER = 3
LOAD_PROXIES = 4
LOAD_THREADS = 24


HarnessError = cluster.HarnessError
Checks = cluster.Checks


# --- rules files -------------------------------------------------------------------------------------
def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_rules(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def example_rules_with(default_mode="enforce", strictness="after_refused"):
    """rules/examples/coupon.yaml with default_mode and the claim rule's strictness replaced (the
    example says require_decrement; these scenarios default to after_refused, where an autocommit
    app that inserts first is let through and counted)."""
    text = read_text(cluster.EXAMPLE_RULES)
    text, n1 = re.subn(r"(?m)^default_mode: enforce$", f"default_mode: {default_mode}", text)
    text, n2 = re.subn(r"(?m)^(\s+strictness: )(after_refused|require_decrement)\b", rf"\g<1>{strictness}", text)
    if n1 != 1 or n2 != 1:
        raise HarnessError(f"{cluster.EXAMPLE_RULES}: expected one default_mode and one strictness line, "
                           f"found {n1} and {n2}")
    return text


# A second stock/claim pair, in observe mode per rule, next to the example's enforced pair.
GIFT_TABLES = """
    CREATE TABLE gift_stock (campaign_id BIGINT NOT NULL, remain INT NOT NULL, PRIMARY KEY (campaign_id))
      ENGINE=InnoDB;
    CREATE TABLE gift_order (id BIGINT NOT NULL AUTO_INCREMENT, user_id BIGINT NOT NULL,
      campaign_id BIGINT NOT NULL, PRIMARY KEY (id), UNIQUE KEY uq_gift (user_id, campaign_id)) ENGINE=InnoDB;
"""
GIFT_STOCK_RULE = """  - name: gift_stock
    table: gift_stock
    key_columns: [campaign_id]
    counter_column: remain
    mode: observe                 # per rule: watched only
"""
GIFT_CLAIM_RULE = """  - name: gift_order
    table: gift_order
    idempotency_columns: [user_id, campaign_id]
    consumes: gift_stock
    redis:
      key: "lock:gift:{user_id}:{campaign_id}"
    mode: observe
"""


def per_rule_rules():
    """The example's rules (default_mode: enforce) plus the gift pair, each rule `mode: observe`."""
    text = example_rules_with()
    head, sep, claims = text.partition("\nclaim_rules:\n")
    if not sep:
        raise HarnessError(f"{cluster.EXAMPLE_RULES}: no claim_rules section")
    return head.rstrip("\n") + "\n" + GIFT_STOCK_RULE + sep + claims.rstrip("\n") + "\n" + GIFT_CLAIM_RULE


# --- servers -----------------------------------------------------------------------------------------
def start_proxy(c, claimguard, name, rules_path):
    """One sidecar with these rules, Redis and an audit log of its own (name: claimguard-<something>)."""
    audit_path = os.path.join(c.dir, f"{name}.audit.jsonl")
    extra = ["--rules", rules_path, "--audit-log", audit_path]
    if c.redis is not None:
        extra += ["--redis", f"{cluster.HOST}:{c.redis.port}"]
    p = servers.Claimguard(claimguard, c.dir, name, c.db.port, extra_args=extra)
    p.audit_path = audit_path
    c.proxies.append(p)
    p.start()
    return p


def reset(c, stock, extra_sql=""):
    c.reset({CAMPAIGN: stock, CONTROL_CAMPAIGN: CONTROL_STOCK})
    if extra_sql:
        c.sql(extra_sql)


def table_state(c, gift=False):
    """Everything the tables hold that a run decides (created_at is a clock, left out)."""
    out = c.sql("SELECT campaign_id, remain, version FROM coupon_stock ORDER BY campaign_id;"
                "SELECT '--';"
                "SELECT id, user_id, campaign_id FROM coupon_order ORDER BY id;")
    if gift:
        out += c.sql("SELECT '--'; SELECT campaign_id, remain FROM gift_stock ORDER BY campaign_id;"
                     "SELECT '--'; SELECT id, user_id, campaign_id FROM gift_order ORDER BY id;")
    return out


def order_users(c, table="coupon_order", campaign=CAMPAIGN):
    return [int(x) for x in c.sql(f"SELECT user_id FROM {table} WHERE campaign_id = {campaign} "
                                  f"ORDER BY user_id;").split()]


def remain_of(c, table="coupon_stock", campaign=CAMPAIGN):
    return int(c.sql(f"SELECT remain FROM {table} WHERE campaign_id = {campaign};").strip())


# --- metrics and audit -------------------------------------------------------------------------------
METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
CLAIM_METRICS = ("claimguard_rewrites_total", "claimguard_exhausted_total", "claimguard_blocked_claims_total",
                 "claimguard_duplicates_total", "claimguard_compensations_total",
                 "claimguard_would_rewrite_total", "claimguard_untracked_writes_total", "claimguard_claims_total",
                 "claimguard_claims_before_decrement_total")


def metrics(p):
    """{(name, ((label, value), ...)): value} of the claim engine's counters of one sidecar."""
    status, body = servers.http_get(p.admin_port, "/metrics")
    if status != 200:
        raise HarnessError(f"{p.name}: GET /metrics answered {status}")
    out = {}
    for line in body.splitlines():
        m = METRIC_LINE.match(line)
        if not m or m.group(1) not in CLAIM_METRICS:
            continue
        labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric_delta(before, after):
    """The counters that changed, as {"name{label=value,...}": increase}."""
    out = {}
    for key, value in after.items():
        d = value - before.get(key, 0.0)
        if d:
            name, labels = key
            out[name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"] = int(d)
    return out


def total(delta, name, **labels):
    """Sum of the increases of counter `name` whose labels include `labels`."""
    s = 0
    for key, value in delta.items():
        n, _, rest = key.partition("{")
        have = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv)
        if n == name and all(have.get(k) == v for k, v in labels.items()):
            s += value
    return s


class AuditTail:
    """Where the test has read a sidecar's audit log up to."""

    def __init__(self, p):
        self.path = p.audit_path
        self.offset = 0

    def peek(self):
        """(complete lines written since the offset, their size in bytes)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        end = data.rfind(b"\n") + 1
        return [json.loads(line) for line in data[:end].decode().splitlines() if line.strip()], end


def read_audit(tails, expect):
    """The audit lines the sidecars wrote since the last call. Each line is queued before the
    client gets its answer but written by the log's own thread, so wait (bounded) until at least
    `expect` are in; extra lines are returned too, and the caller's comparison fails on them."""
    deadline = time.monotonic() + AUDIT_WAIT_S
    while True:
        seen = [t.peek() for t in tails]
        if sum(len(lines) for lines, _ in seen) >= expect or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    out = []
    for t, (lines, size) in zip(tails, seen):
        t.offset += size
        out += lines
    return out


def audit_summary(lines):
    """(action, rule, keys) of each line: what the test compares."""
    return [(e.get("action"), e.get("rule"), tuple(sorted(e.get("keys", {}).items()))) for e in lines]


# --- a client whose every received byte is kept ------------------------------------------------------
class WireConnection(pymysql.connections.Connection):
    """PyMySQL, recording the bytes the server (or claimguard) sends while `recording` is a bytearray."""

    recording = None

    def _read_bytes(self, num_bytes):
        data = super()._read_bytes(num_bytes)
        if self.recording is not None:
            self.recording += data
        return data


def connect(port, found_rows=False, wire=True):
    cls = WireConnection if wire else pymysql.connections.Connection
    return cls(host=cluster.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
               database=cluster.DATABASE, autocommit=True, connect_timeout=IO_TIMEOUT_S,
               read_timeout=IO_TIMEOUT_S, write_timeout=IO_TIMEOUT_S,
               client_flag=CLIENT.FOUND_ROWS if found_rows else 0)


@dataclasses.dataclass
class Result:
    error: tuple = None          # (code, sqlstate, message) of an ERR answer
    affected: int = 0
    rows: tuple = ()
    wire: bytes = b""            # every byte of the answer, packet headers included
    status: int = None           # server status flags of the answer's OK/EOF (None: ERR)

    def describe(self):
        if self.error:
            return f"ERR {self.error[0]} ({self.error[1]}) {self.error[2]}"
        return f"OK affected {self.affected}, rows {list(self.rows)}"


def last_payload(wire):
    pos, last = 0, b""
    while pos + 4 <= len(wire):
        length = wire[pos] | (wire[pos + 1] << 8) | (wire[pos + 2] << 16)
        last = wire[pos + 4:pos + 4 + length]
        pos += 4 + length
    return last


def lenenc(data, pos):
    """(value, next position) of a length-encoded integer."""
    first = data[pos]
    if first < 0xfb:
        return first, pos + 1
    size = {0xfc: 2, 0xfd: 3, 0xfe: 8}[first]
    return int.from_bytes(data[pos + 1:pos + 1 + size], "little"), pos + 1 + size


def status_of_wire(wire):
    """The server status flags of the OK or EOF packet a reply ends with (None for ERR)."""
    last = last_payload(wire)
    if last[:1] == b"\xfe" and len(last) < 9:
        return struct.unpack_from("<H", last, 3)[0]
    if last[:1] == b"\x00":
        _, pos = lenenc(last, 1)
        _, pos = lenenc(last, pos)
        return struct.unpack_from("<H", last, pos)[0]
    return None


def err_of_wire(wire):
    """(code, sqlstate, message) of the ERR packet a reply ends with."""
    last = last_payload(wire)
    if last[:1] != b"\xff":
        return None
    code = struct.unpack_from("<H", last, 1)[0]
    if last[3:4] == b"#":
        return code, last[4:9].decode(), last[9:].decode(errors="replace")
    return code, "", last[3:].decode(errors="replace")


def execute(conn, sql):
    conn.recording = bytearray()
    r = Result()
    try:
        with conn.cursor() as cur:
            r.affected = cur.execute(sql)
            r.rows = tuple(tuple(row) for row in cur.fetchall())
    except pymysql.err.MySQLError as e:
        r.error = err_of_wire(bytes(conn.recording)) or (e.args[0] if e.args else 0, "", str(e))
        if not conn.open:
            raise HarnessError(f"the connection was lost on {sql!r}: {e}") from e
    r.wire = bytes(conn.recording)
    r.status = status_of_wire(r.wire)
    conn.recording = None
    return r


# --- the apps: generators that yield SQL and receive its Result --------------------------------------
def naive_app(user, campaign=CAMPAIGN, stock="coupon_stock", orders="coupon_order"):
    """The incident's app: read remain, write back remain - 1, insert the claim (autocommit)."""
    r = yield f"SELECT remain FROM {stock} WHERE campaign_id = {campaign}"
    if r.error or not r.rows or int(r.rows[0][0]) <= 0:
        return
    r = yield f"UPDATE {stock} SET remain = {int(r.rows[0][0]) - 1} WHERE campaign_id = {campaign}"
    if r.error or r.affected == 0:
        return
    yield f"INSERT INTO {orders} (user_id, campaign_id) VALUES ({user}, {campaign})"


def naive_app_twice(user):
    """The same user tries twice on one connection (the second is a duplicate)."""
    yield from naive_app(user)
    yield from naive_app(user)


def insert_first_transaction_app(user, campaign=CAMPAIGN):
    """BEGIN; INSERT claim; SELECT remain; UPDATE remain = <read - 1>; COMMIT. Ignores the UPDATE's
    answer (commits whatever it says); then asks whether its claim is there."""
    yield "BEGIN"
    r = yield f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {campaign})"
    if r.error:
        yield "ROLLBACK"
        return
    r = yield f"SELECT remain FROM coupon_stock WHERE campaign_id = {campaign}"
    yield f"UPDATE coupon_stock SET remain = {int(r.rows[0][0]) - 1} WHERE campaign_id = {campaign}"
    yield "COMMIT"
    yield f"SELECT COUNT(*) FROM coupon_order WHERE user_id = {user} AND campaign_id = {campaign}"


def insert_first_autocommit_app(*users, campaign=CAMPAIGN):
    """Per user, autocommit: INSERT claim; SELECT remain; if remain > 0: UPDATE remain = <read - 1>."""
    for user in users:
        r = yield f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {campaign})"
        if r.error:
            continue
        r = yield f"SELECT remain FROM coupon_stock WHERE campaign_id = {campaign}"
        if r.error or int(r.rows[0][0]) <= 0:
            continue
        yield f"UPDATE coupon_stock SET remain = {int(r.rows[0][0]) - 1} WHERE campaign_id = {campaign}"


@dataclasses.dataclass
class Scenario:
    name: str
    what: str
    stock: int
    apps: dict                   # session name -> generator function of no arguments
    order: str                   # whose statement runs next; then the rest round-robin
    found_rows: bool = False     # connect as JDBC does: affected rows = rows matched


@dataclasses.dataclass
class Step:
    session: str
    sql: str
    result: Result


def run_scenario(sc, port):
    """Runs the apps' statements one at a time in sc.order (deterministic): the steps."""
    conns = {name: connect(port, found_rows=sc.found_rows) for name in sc.apps}
    try:
        gens = {name: app() for name, app in sc.apps.items()}
        pending = {name: next(g) for name, g in gens.items()}
        steps = []
        rest = [n for n in sorted(sc.apps)] * 64
        for name in list(sc.order) + rest:
            if not pending:
                break
            if name not in pending:
                continue
            sql = pending[name]
            r = execute(conns[name], sql)
            if not r.wire:
                raise HarnessError(f"{sc.name}: nothing recorded for the answer to {sql!r}")
            steps.append(Step(name, sql, r))
            try:
                pending[name] = gens[name].send(r)
            except StopIteration:
                del pending[name]
        if pending:
            raise HarnessError(f"{sc.name}: apps never finished: {sorted(pending)}")
        return steps
    finally:
        for conn in conns.values():
            conn.close()


def print_steps(steps, indent="      "):
    for s in steps:
        print(f"{indent}{s.session}: {s.sql:<78} -> {s.result.describe()}")


def keyed(steps):
    """(session, sql, n) for each step: n counts earlier steps of the same session and text."""
    seen = collections.Counter()
    out = []
    for s in steps:
        out.append(((s.session, s.sql, seen[(s.session, s.sql)]), s))
        seen[(s.session, s.sql)] += 1
    return out


# The deterministic interleavings (A, with B's and C's shapes).
def scenarios():
    return [
        Scenario("naive_interleaved",
                 "two apps read remain=1, both write remain=0, both insert (CLIENT_FOUND_ROWS, as JDBC)",
                 stock=1, apps={"A": lambda: naive_app(11), "B": lambda: naive_app(12)}, order="ABABAB",
                 found_rows=True),
        Scenario("duplicate_claim", "one user claims twice on one connection (the UNIQUE index answers 1062)",
                 stock=5, apps={"C": lambda: naive_app_twice(21)}, order="C"),
        Scenario("insert_first_transaction",
                 "BEGIN; INSERT; SELECT; UPDATE; COMMIT in two sessions, both read remain=1",
                 stock=1, apps={"D": lambda: insert_first_transaction_app(31),
                                "E": lambda: insert_first_transaction_app(32)},
                 order="DEDEDEDDEE"),
        Scenario("insert_first_autocommit", "INSERT then SELECT, UPDATE in autocommit, two sessions read remain=1",
                 stock=1, apps={"H": lambda: insert_first_autocommit_app(51),
                                "I": lambda: insert_first_autocommit_app(52)},
                 order="HIHIHI"),
    ]


def expected_observe_audit(steps, stock_rule="coupon_stock", claim_rule="coupon_order"):
    """In observe mode every decision is one would-* line: the UPDATE after a read is a decrement,
    the claim INSERT a claim. Keys: the stock key; for claims also the idempotency columns."""
    out = []
    for s in steps:
        m = re.match(r"UPDATE \S+ SET remain = \S+ WHERE campaign_id = (\d+)$", s.sql)
        if m:
            out.append(("would-rewritten", stock_rule, (("campaign_id", m.group(1)),)))
        m = re.match(r"INSERT INTO \S+ \(user_id, campaign_id\) VALUES \((\d+), (\d+)\)$", s.sql)
        if m:
            out.append(("would-claimed", claim_rule, (("campaign_id", m.group(2)), ("user_id", m.group(1)))))
    return out


def would_counts(audit):
    c = collections.Counter((rule, action[len("would-"):]) for action, rule, _ in audit)
    return {f"claimguard_would_rewrite_total{{action={a},rule={r}}}": n for (r, a), n in sorted(c.items())}


# --- A: observe mode on the wire ---------------------------------------------------------------------
def compare_steps(checks, label, base, other, allowed_diff):
    """Steps of `other` equal `base` byte for byte except the keys in allowed_diff (checked by
    the caller); steps after a refusal may be missing (the app stopped), none may be added."""
    base_by = dict(keyed(base))
    diffs = []
    for k, s in keyed(other):
        if k not in base_by:
            diffs.append(f"extra statement {k}")
        elif s.result.wire != base_by[k].result.wire and k not in allowed_diff:
            diffs.append(f"{k}: {base_by[k].result.describe()} became {s.result.describe()}")
    checks.check(not diffs, f"{label}: every other answer byte-identical to MariaDB's", "; ".join(diffs[:5]))


def enforce_expectations(name):
    """(answers that differ from MariaDB's: {(session, sql): (code, sqlstate, message)},
        statements the app no longer sends, metric increases, audit actions in order)."""
    upd = "UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1", 0
    if name == "naive_interleaved":
        return ({("B", *upd): EXHAUSTED},
                [("B", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (12, 1)", 0)],
                {"claimguard_rewrites_total{rule=coupon_stock}": 1, "claimguard_exhausted_total{rule=coupon_stock}": 1,
                 "claimguard_claims_total{rule=coupon_order}": 1},
                ["rewritten", "exhausted"])
    if name == "duplicate_claim":
        return ({("C", "INSERT INTO coupon_order (user_id, campaign_id) VALUES (21, 1)", 1): ALREADY_CLAIMED},
                [],
                {"claimguard_rewrites_total{rule=coupon_stock}": 2, "claimguard_claims_total{rule=coupon_order}": 1,
                 "claimguard_duplicates_total": 1, "claimguard_compensations_total{rule=coupon_order}": 1},
                ["rewritten", "rewritten", "duplicate-*", "compensated"])
    if name == "insert_first_transaction":
        return ({("E", *upd): EXHAUSTED, ("E", "COMMIT", 0): EXHAUSTED,
                 ("E", "SELECT COUNT(*) FROM coupon_order WHERE user_id = 32 AND campaign_id = 1", 0): None},
                [],
                {"claimguard_rewrites_total{rule=coupon_stock}": 1, "claimguard_exhausted_total{rule=coupon_stock}": 1,
                 "claimguard_claims_total{rule=coupon_order}": 2,
                 "claimguard_claims_before_decrement_total{in=transaction,rule=coupon_order}": 2},
                ["rewritten", "exhausted", "rolled-back"])
    if name == "insert_first_autocommit":
        return ({("I", *upd): EXHAUSTED},
                [],
                {"claimguard_rewrites_total{rule=coupon_stock}": 1, "claimguard_exhausted_total{rule=coupon_stock}": 1,
                 "claimguard_claims_total{rule=coupon_order}": 2,
                 "claimguard_claims_before_decrement_total{in=autocommit,rule=coupon_order}": 2},
                ["claim-before-decrement", "claim-before-decrement", "rewritten", "exhausted"])
    raise HarnessError(f"no expectations for {name}")


def check_metric_delta(checks, label, delta, want):
    """Every counter in want increased by exactly that much (a bare name: summed over labels);
    no other claim counter moved."""
    ok, detail = True, []
    for key, n in want.items():
        got = delta.get(key, 0) if "{" in key else total(delta, key)
        if got != n:
            ok = False
            detail.append(f"{key} +{got}, want +{n}")
    for key, n in delta.items():
        name = key.partition("{")[0]
        if key not in want and name not in want:
            ok = False
            detail.append(f"{key} +{n}, want +0")
    checks.check(ok, f"{label}: metrics exactly {want}", "; ".join(detail))


def run_observe_wire(args, c, checks):
    c.start_redis()
    observe = start_proxy(c, args.claimguard, "claimguard-observe",
                          write_rules(c.dir, "observe.yaml", example_rules_with(default_mode="observe")))
    enforce = start_proxy(c, args.claimguard, "claimguard-enforce",
                          write_rules(c.dir, "enforce.yaml", example_rules_with("enforce")))
    tails = {observe.name: AuditTail(observe), enforce.name: AuditTail(enforce)}
    for sc in scenarios():
        print(f"\n== {sc.name}: {sc.what}")
        runs = {}
        expect_lines = {}
        for mode, port, proxy in (("direct", c.db.port, None), ("observe", observe.port, observe),
                                  ("enforce", enforce.port, enforce)):
            reset(c, sc.stock)
            before = metrics(proxy) if proxy else None
            steps = run_scenario(sc, port)
            state = table_state(c)
            redis_keys = c.redis.command("DBSIZE")
            delta = metric_delta(before, metrics(proxy)) if proxy else None
            if mode == "direct":
                expect_lines = {"observe": len(expected_observe_audit(steps)),
                                "enforce": len(enforce_expectations(sc.name)[3])}
            audit = audit_summary(read_audit([tails[proxy.name]], expect_lines[mode])) if proxy else None
            runs[mode] = (steps, state, redis_keys, delta, audit)
            print(f"  {mode}:")
            print_steps(steps)
            print("      tables: " + " | ".join(state.strip().splitlines()))
            if proxy:
                print(f"      metrics: {delta}\n      audit: {[a for a, _, _ in audit]}")

        d_steps, d_state, _, _, _ = runs["direct"]
        o_steps, o_state, o_redis, o_delta, o_audit = runs["observe"]
        e_steps, e_state, _, e_delta, e_audit = runs["enforce"]
        # Observe: nothing on the wire, in the tables or in Redis differs from MariaDB alone.
        checks.equal([(s.session, s.sql) for s in o_steps], [(s.session, s.sql) for s in d_steps],
                     "observe: the apps sent the same statements as straight to MariaDB")
        diffs = [f"{s.session}: {s.sql}: MariaDB {d.result.describe()} / observe {s.result.describe()}"
                 for s, d in zip(o_steps, d_steps) if s.result.wire != d.result.wire]
        checks.check(not diffs and len(o_steps) == len(d_steps),
                     "observe: every answer byte-identical to MariaDB's (result rows, affected rows, errors)",
                     "; ".join(diffs[:5]))
        checks.equal(o_state, d_state, "observe: final tables identical to MariaDB alone")
        checks.equal(o_redis, ":0", "observe: no Redis key taken")
        want_audit = expected_observe_audit(d_steps)
        checks.equal(o_audit, want_audit, f"observe: one would-* audit line per decision ({len(want_audit)})")
        check_metric_delta(checks, "observe", o_delta, would_counts(want_audit))
        if sc.name in ("naive_interleaved", "insert_first_transaction", "insert_first_autocommit"):
            rows = len(order_users_from_state(d_state))
            checks.check(rows == 2 and "1\t0\t0" in d_state.splitlines(),
                         "MariaDB alone over-issues: 2 claim rows for 1 coupon (and observe let it happen)",
                         f"rows {rows}")

        # Enforce: differs exactly where claimguard refuses.
        diff_answers, not_sent, want_metrics, want_actions = enforce_expectations(sc.name)
        compare_steps(checks, "enforce", d_steps, e_steps, set(diff_answers))
        e_keyed = dict(keyed(e_steps))
        for key, want in diff_answers.items():
            got = e_keyed.get(key)
            if want is not None:
                checks.check(got is not None and got.result.error == want,
                             f"enforce: {key[0]}: {key[1]} (#{key[2] + 1}) -> ERR {want[0]} {want[2]!r}",
                             got.result.describe() if got else "not sent")
        sent = set(e_keyed)
        checks.check(not (set(not_sent) & sent), f"enforce: the refused app stopped: {not_sent} not sent")
        check_metric_delta(checks, "enforce", e_delta, want_metrics)
        actions = [a for a, _, _ in e_audit]
        checks.check(len(actions) == len(want_actions) and all(
            a == w or (w.endswith("*") and a.startswith(w[:-1])) for a, w in zip(actions, want_actions)),
            f"enforce: audit actions {want_actions}", f"got {actions}")
        # (remain, claim rows): the autocommit claims stay (detected, not changed); the duplicate's
        # unit is given back.
        want_final = {"naive_interleaved": (0, [11]), "duplicate_claim": (4, [21]),
                      "insert_first_transaction": (0, [31]), "insert_first_autocommit": (0, [51, 52])}[sc.name]
        checks.equal((int(e_state.split("\n")[0].split("\t")[1]), sorted(order_users_from_state(e_state))),
                     want_final, "enforce: final (remain, claim rows)")
        if sc.name == "insert_first_transaction":
            count = [s.result for s in e_steps
                     if (s.session, s.sql) == ("E", "SELECT COUNT(*) FROM coupon_order WHERE user_id = 32 AND "
                                                    "campaign_id = 1")]
            checks.check(len(count) == 1 and count[0].rows == ((0,),) and count[0].status is not None
                         and not (count[0].status & STATUS_IN_TRANS),
                         "enforce: after the refused COMMIT the session is outside a transaction and its claim row "
                         "is gone", f"{[r.describe() for r in count]}")
    for p in c.proxies:
        checks.check(p.proc.poll() is None, f"{p.name} still running")


def order_users_from_state(state):
    """User ids of coupon_order rows in table_state's output."""
    part = state.split("--\n", 1)[1] if "--\n" in state else ""
    return [int(line.split("\t")[1]) for line in part.strip().splitlines() if line.strip()]


# --- A: observe per rule -----------------------------------------------------------------------------
def run_observe_per_rule(args, c, checks):
    c.sql(GIFT_TABLES)
    c.start_redis()
    rules = write_rules(c.dir, "per-rule.yaml", per_rule_rules())
    p = start_proxy(c, args.claimguard, "claimguard-mixed", rules)
    status, body = servers.http_get(p.admin_port, "/rules")
    print(f"  /rules: {body.strip()[:400]}")
    tail = AuditTail(p)

    gift = "INSERT INTO gift_stock VALUES (1, 1)"
    sc = Scenario("per_rule", "coupon (enforce) and gift (observe): two apps each, both read remain=1",
                  stock=1,
                  apps={"A": lambda: naive_app(11), "B": lambda: naive_app(12),
                        "G": lambda: naive_app(11, stock="gift_stock", orders="gift_order"),
                        "K": lambda: naive_app(12, stock="gift_stock", orders="gift_order")},
                  order="ABGKABGKABGK", found_rows=True)
    runs = {}
    for mode, port in (("direct", c.db.port), ("mixed", p.port)):
        reset(c, sc.stock, f"DELETE FROM gift_stock; TRUNCATE TABLE gift_order; {gift};")
        before = metrics(p)
        steps = run_scenario(sc, port)
        redis_keys = [c.redis.command("EXISTS", f"lock:{kind}:{user}:1:{cluster.DATABASE}") for kind in ("coupon", "gift")
                      for user in (11, 12)]
        # Mixed: 4 would-* for gift (2 UPDATEs, 2 INSERTs), rewritten and exhausted for coupon.
        runs[mode] = (steps, table_state(c, gift=True), metric_delta(before, metrics(p)),
                      audit_summary(read_audit([tail], 6 if mode == "mixed" else 0)), redis_keys)
        print(f"  {mode}:")
        print_steps(steps)
    d_steps, d_state, _, _, _ = runs["direct"]
    m_steps, m_state, m_delta, m_audit, m_redis = runs["mixed"]

    def only(steps, sessions):
        return [s for s in steps if s.session in sessions]

    o, d = only(m_steps, "GK"), only(d_steps, "GK")
    checks.check(len(o) == len(d) and all(a.sql == b.sql and a.result.wire == b.result.wire for a, b in zip(o, d)),
                 "observe rule (gift): every answer byte-identical to MariaDB's",
                 f"{[s.result.describe() for s in o]} vs {[s.result.describe() for s in d]}")
    gift_d = d_state.split("--\n", 2)[2]
    gift_m = m_state.split("--\n", 2)[2]
    checks.equal(gift_m, gift_d, "observe rule (gift): tables identical to MariaDB alone (2 rows for 1: over-issue)")
    checks.equal(len(gift_m.split("--\n")[1].strip().splitlines()), 2, "observe rule (gift): both claims went in")
    refused = [s for s in m_steps if s.session == "B" and s.sql.startswith("UPDATE")]
    checks.check(len(refused) == 1 and refused[0].result.error == EXHAUSTED,
                 "enforce rule (coupon): the second app's UPDATE gets the exhausted answer",
                 f"{[s.result.describe() for s in refused]}")
    compare_steps(checks, "enforce rule (coupon)", only(d_steps, "AB"), only(m_steps, "AB"),
                  {("B", "UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1", 0)})
    checks.equal(order_users(c), [11], "enforce rule (coupon): one claim row")
    checks.equal(m_redis, [":1", ":0", ":0", ":0"],
                 "Redis: the enforced claim took its lock (lock:coupon:11:1:incident); the observed ones took none")
    checks.equal(remain_of(c, "gift_stock"), 0, "observe rule (gift): remain as the app wrote it")
    want_audit = expected_observe_audit(only(d_steps, "GK"), "gift_stock", "gift_order")
    checks.equal([a for a in m_audit if a[0].startswith("would-")], want_audit,
                 "observe rule (gift): one would-* audit line per decision, for gift rules only")
    checks.equal([(a, r) for a, r, _ in m_audit if not a.startswith("would-")],
                 [("rewritten", "coupon_stock"), ("exhausted", "coupon_stock")],
                 "enforce rule (coupon): its interventions logged, no would-*")
    want = dict(would_counts(want_audit))
    want.update({"claimguard_rewrites_total{rule=coupon_stock}": 1, "claimguard_exhausted_total{rule=coupon_stock}": 1,
                 "claimguard_claims_total{rule=coupon_order}": 1})
    check_metric_delta(checks, "mixed", m_delta, want)
    checks.check(p.proc.poll() is None, f"{p.name} still running")


# --- A: the concurrent load through observe sidecars -------------------------------------------------
def run_load(cmd):
    return cluster.run_load(cmd, LOAD_TIMEOUT_S)


def run_observe_load(args, c, checks):
    c.start_redis()
    rules = write_rules(c.dir, "observe.yaml", example_rules_with(default_mode="observe"))
    proxies = [start_proxy(c, args.claimguard, f"claimguard-{i}", rules) for i in range(1, LOAD_PROXIES + 1)]
    tails = [AuditTail(p) for p in proxies]
    for protocol in ("text", "prepared"):
        print(f"\n== naive load, {protocol} protocol, {LOAD_THREADS} threads over {LOAD_PROXIES} observe sidecars")
        reset(c, LOAD_STOCK)
        before = [metrics(p) for p in proxies]
        cmd = [args.load, "--protocol", protocol]
        for p in proxies:
            cmd += ["--target", f"{cluster.HOST}:{p.port}"]
        cmd += ["--user", cluster.APP_USER, "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE,
                "--threads", str(LOAD_THREADS), "--users", str(LOAD_USERS), "--attempts-per-user",
                str(LOAD_ATTEMPTS_PER_USER), "--campaign", str(CAMPAIGN), "--flow", "naive", "--seed", "7",
                "--json", "--record-claims"]
        s = run_load(cmd)
        delta = {}
        for p, b in zip(proxies, before):
            for k, v in metric_delta(b, metrics(p)).items():
                delta[k] = delta.get(k, 0) + v
        rows, remain = len(order_users(c)), remain_of(c)
        errors = collections.Counter()
        for e in s["errors"]:
            errors[(e["statement"], e["code"])] += e["count"]
        print(f"  load: attempts {s['attempts']}, claimed {s['claimed']}, sold out {s['sold_out_by']}, "
              f"duplicate {s['duplicate_by']}, errors {dict(errors)}")
        print(f"  database: {rows} claim rows for {LOAD_STOCK} coupons, remain {remain} (observed, not prevented)")
        print(f"  metrics (all sidecars): {delta}")
        updates = s["attempts"] - s["sold_out_by"]["app_check"] - sum(
            n for (st, _), n in errors.items() if st in ("SELECT", "connect"))
        inserts = updates - s["sold_out_by"]["affected_rows"] - sum(n for (st, _), n in errors.items()
                                                                      if st == "UPDATE")
        audit = audit_summary(read_audit(tails, updates + inserts))
        checks.equal(s["attempts"], s["attempts_planned"], f"{protocol}: every attempt ran")
        checks.check(set(errors) <= {("INSERT", ER_DUP_ENTRY)},
                     f"{protocol}: the only errors are MariaDB's own duplicate-key errors (1062), unchanged",
                     f"{dict(errors)}")
        checks.check(s["sold_out_by"]["server_answer"] == 0 and s["duplicate_by"]["server_answer"] == 0,
                     f"{protocol}: no claimguard answer reached the app")
        checks.check(total(delta, "claimguard_would_rewrite_total") > 0, f"{protocol}: would_rewrite counted")
        checks.equal(total(delta, "claimguard_would_rewrite_total", rule="coupon_stock", action="rewritten"),
                     updates, f"{protocol}: would-rewritten counted once per UPDATE the app sent")
        checks.equal(total(delta, "claimguard_would_rewrite_total", rule="coupon_order", action="claimed"),
                     inserts, f"{protocol}: would-claimed counted once per INSERT the app sent")
        for name in ("claimguard_exhausted_total", "claimguard_blocked_claims_total", "claimguard_rewrites_total",
                     "claimguard_duplicates_total", "claimguard_compensations_total", "claimguard_claims_total"):
            checks.equal(total(delta, name), 0, f"{protocol}: {name} == 0")
        checks.equal(collections.Counter(a for a, _, _ in audit),
                     collections.Counter({"would-rewritten": updates, "would-claimed": inserts}),
                     f"{protocol}: audit lines: one would-* per decision")
        checks.equal(c.redis.command("DBSIZE"), ":0", f"{protocol}: no Redis key taken")
        checks.equal(sorted(s["claimed_users"]), order_users(c),
                     f"{protocol}: the app's claims are the rows in coupon_order")
    for p in proxies:
        checks.check(p.proc.poll() is None, f"{p.name} still running")


# --- B: insert-first in a transaction ----------------------------------------------------------------
class RaceTally:
    def __init__(self):
        self.lock = threading.Lock()
        self.kinds = collections.Counter()
        self.claimed_users = []
        self.refused_commit_users = []
        self.duplicate_users = []
        self.update_ok = 0
        self.update_exhausted = 0
        self.inserts_ok = 0
        self.other = collections.Counter()


def race_attempt(conn, user, behaviour):
    """One insert-first claim in a transaction. behaviour: check (rolls back when remain <= 0, commits
    whatever the UPDATE says), ignore (no remain check, commits whatever the UPDATE says), careful (checks
    remain, rolls back when the UPDATE is refused)."""
    local = collections.Counter()

    def q(sql):
        with conn.cursor() as cur:
            n = cur.execute(sql)
            return n, cur.fetchall()

    def code_message(e):
        return (e.args[0], str(e.args[1])) if len(e.args) >= 2 else (0, str(e))

    outcome = None
    try:
        q("BEGIN")
        try:
            q(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN})")
        except pymysql.err.MySQLError as e:
            code, msg = code_message(e)
            outcome = "duplicate" if (code, msg) == (ALREADY_CLAIMED[0], ALREADY_CLAIMED[2]) else f"insert {code} {msg}"
            q("ROLLBACK")
            return outcome, local
        local["insert_ok"] += 1
        _, rows = q(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
        remain = int(rows[0][0])
        if behaviour != "ignore" and remain <= 0:
            q("ROLLBACK")
            return "sold_out_app_check", local
        try:
            q(f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {CAMPAIGN}")
            local["update_ok"] += 1
        except pymysql.err.MySQLError as e:
            code, msg = code_message(e)
            if (code, msg) != (EXHAUSTED[0], EXHAUSTED[2]):
                q("ROLLBACK")
                return f"update {code} {msg}", local
            local["update_exhausted"] += 1
            if behaviour == "careful":
                q("ROLLBACK")
                return "sold_out_update", local
        try:
            q("COMMIT")
        except pymysql.err.MySQLError as e:
            code, msg = code_message(e)
            if (code, msg) == (EXHAUSTED[0], EXHAUSTED[2]):
                return "refused_commit", local
            return f"commit {code} {msg}", local
        return "claimed", local
    except pymysql.err.MySQLError as e:
        code, msg = code_message(e)
        try:
            q("ROLLBACK")
        except pymysql.err.MySQLError:
            pass
        return f"error {code} {msg}", local


def run_race(ports, seed):
    plan = [u for u in range(1, RACE_USERS + 1) for _ in range(RACE_ATTEMPTS_PER_USER)]
    random.Random(seed).shuffle(plan)
    it = iter(plan)
    it_lock = threading.Lock()
    tally = RaceTally()
    behaviours = ("check", "ignore", "careful")
    ready = threading.Barrier(RACE_THREADS + 1)
    failures = []

    def worker(i):
        try:
            conn = connect(ports[i % len(ports)], wire=False)
        except Exception as e:  # noqa: BLE001 - reported
            failures.append(f"thread {i}: connect: {e}")
            ready.wait()
            return
        ready.wait()
        try:
            while True:
                with it_lock:
                    user = next(it, None)
                if user is None:
                    break
                outcome, local = race_attempt(conn, user, behaviours[i % len(behaviours)])
                with tally.lock:
                    tally.kinds[outcome] += 1
                    tally.update_ok += local["update_ok"]
                    tally.update_exhausted += local["update_exhausted"]
                    tally.inserts_ok += local["insert_ok"]
                    if outcome == "claimed":
                        tally.claimed_users.append(user)
                    elif outcome == "refused_commit":
                        tally.refused_commit_users.append(user)
                    elif outcome == "duplicate":
                        tally.duplicate_users.append(user)
        except Exception as e:  # noqa: BLE001 - a lost connection: reported as a failure
            failures.append(f"thread {i}: {type(e).__name__}: {e}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(RACE_THREADS)]
    for t in threads:
        t.start()
    ready.wait()
    began = time.monotonic()
    for t in threads:
        t.join(LOAD_TIMEOUT_S)
    if any(t.is_alive() for t in threads):
        raise HarnessError(f"the race did not finish within {LOAD_TIMEOUT_S}s")
    return tally, failures, time.monotonic() - began


def run_insert_first_transaction(args, c, checks):
    c.start_redis()
    proxies = [start_proxy(c, args.claimguard, f"claimguard-{i}", cluster.EXAMPLE_RULES)
               for i in range(1, RACE_PROXIES + 1)]
    tails = [AuditTail(p) for p in proxies]

    # The deterministic case: two sessions read remain=1; the second COMMIT becomes a ROLLBACK.
    sc = [s for s in scenarios() if s.name == "insert_first_transaction"][0]
    print(f"\n== deterministic: {sc.what}")
    reset(c, sc.stock)
    direct = run_scenario(sc, c.db.port)
    print("  MariaDB alone:")
    print_steps(direct)
    checks.equal(order_users(c), [31, 32], "MariaDB alone: both claims committed for 1 coupon (over-issue)")
    reset(c, sc.stock)
    before = metrics(proxies[0])
    steps = run_scenario(sc, proxies[0].port)
    print("  through claimguard (enforce):")
    print_steps(steps)
    answers = {(s.session, s.sql): s.result for s in steps}
    upd = ("E", "UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 1")
    for key, want, what in ((upd, EXHAUSTED, "E's UPDATE gets the exhausted answer"),
                            (("E", "COMMIT"), EXHAUSTED, "E's COMMIT gets the exhausted answer (rolled back)"),
                            (("D", "COMMIT"), None, "D's COMMIT succeeds")):
        got = answers.get(key)
        checks.check(got is not None and got.error == want, what, got.describe() if got else "not sent")
    checks.equal(order_users(c), [31], "only D's claim row is in coupon_order")
    checks.equal(remain_of(c), 0, "remain 0")
    delta = metric_delta(before, metrics(proxies[0]))
    check_metric_delta(checks, "deterministic", delta,
                       {"claimguard_rewrites_total{rule=coupon_stock}": 1,
                        "claimguard_exhausted_total{rule=coupon_stock}": 1,
                        "claimguard_claims_total{rule=coupon_order}": 2,
                        "claimguard_claims_before_decrement_total{in=transaction,rule=coupon_order}": 2})
    audit = [a for a, _, _ in audit_summary(read_audit(tails[:1], 3))]
    checks.equal(audit, ["rewritten", "exhausted", "rolled-back"], "deterministic: audit actions")

    # The race.
    ports = [p.port for p in proxies]
    for rnd in range(1, RACE_ROUNDS + 1):
        print(f"\n== race {rnd}/{RACE_ROUNDS}: {RACE_USERS} users x {RACE_ATTEMPTS_PER_USER}, {RACE_THREADS} threads "
              f"over {RACE_PROXIES} sidecars, {RACE_STOCK} coupons, insert first in a transaction")
        reset(c, RACE_STOCK)
        before = [metrics(p) for p in proxies]
        tally, failures, elapsed = run_race(ports, rnd)
        delta = {}
        for p, b in zip(proxies, before):
            for k, v in metric_delta(b, metrics(p)).items():
                delta[k] = delta.get(k, 0) + v
        # One line per rewrite, exhausted UPDATE, duplicate, compensation and refused COMMIT.
        expect = sum(total(delta, name) for name in (
            "claimguard_rewrites_total", "claimguard_exhausted_total", "claimguard_duplicates_total",
            "claimguard_compensations_total", "claimguard_blocked_claims_total")) + tally.kinds["refused_commit"]
        audit = collections.Counter(a for a, _, _ in audit_summary(read_audit(tails, expect)))
        f = c.facts(CAMPAIGN)
        print(f"  outcomes {dict(tally.kinds)} in {elapsed:.2f} s; UPDATE ok {tally.update_ok}, exhausted "
              f"{tally.update_exhausted}; inserts {tally.inserts_ok}")
        print(f"  database: {f['rows']} claim rows, {f['duplicate_pairs']} duplicate pairs, remain {f['remain']}")
        print(f"  metrics: {delta}\n  audit: {dict(audit)}")
        # Not asserted (the Redis key's TTL is the design): a claim rolled back keeps its Redis key,
        # so the same user's retry within the TTL hears "already claimed" though it holds nothing.
        unheld = [u for u in tally.duplicate_users if u not in set(f["users"])]
        print(f"  note: {len(unheld)} of {len(tally.duplicate_users)} 'already claimed' answers went to users "
              f"who hold no claim")
        checks.check(not failures, f"round {rnd}: no client failed", "; ".join(failures[:3]))
        unexpected = {k: n for k, n in tally.kinds.items()
                      if k not in ("claimed", "refused_commit", "duplicate", "sold_out_app_check", "sold_out_update")}
        checks.check(not unexpected, f"round {rnd}: every attempt claimed, sold out, duplicate or refused at COMMIT",
                     f"{unexpected}")
        checks.equal(f["rows"], RACE_STOCK, f"round {rnd}: exactly {RACE_STOCK} claim rows")
        checks.equal(f["duplicate_pairs"], 0, f"round {rnd}: no duplicates")
        checks.equal(f["remain"], 0, f"round {rnd}: remain 0")
        checks.equal(RACE_STOCK - f["remain"], f["rows"], f"round {rnd}: no leak (initial - remain == rows)")
        checks.equal(sorted(tally.claimed_users), f["users"],
                     f"round {rnd}: the app was told 'committed' exactly for the rows in coupon_order")
        gone = set(tally.refused_commit_users) - set(tally.claimed_users)
        checks.check(tally.kinds["refused_commit"] > 0 and not (gone & set(f["users"])),
                     f"round {rnd}: {tally.kinds['refused_commit']} COMMITs got the exhausted answer and none of "
                     f"their claim rows is in the table", f"present: {sorted(gone & set(f['users']))[:10]}")
        checks.equal(audit["rolled-back"], tally.kinds["refused_commit"],
                     f"round {rnd}: one rolled-back audit line per refused COMMIT")
        checks.equal(audit["exhausted"], tally.update_exhausted,
                     f"round {rnd}: one exhausted audit line per refused UPDATE")
        checks.equal(total(delta, "claimguard_exhausted_total"), tally.update_exhausted,
                     f"round {rnd}: exhausted_total == refused UPDATEs")
        checks.equal(total(delta, "claimguard_rewrites_total"), tally.update_ok,
                     f"round {rnd}: rewrites_total == UPDATEs that took a unit")
        checks.equal(total(delta, "claimguard_claims_before_decrement_total", **{"in": "transaction"}),
                     tally.inserts_ok, f"round {rnd}: claims_before_decrement{{in=transaction}} == inserted claims")
        checks.equal(total(delta, "claimguard_claims_before_decrement_total", **{"in": "autocommit"}), 0,
                     f"round {rnd}: nothing counted as autocommit")
        checks.equal(total(delta, "claimguard_compensations_total"), 0,
                     f"round {rnd}: no compensation (no unit is taken before the claim)")
        control = c.facts(CONTROL_CAMPAIGN)
        checks.check(control["rows"] == 0 and control["remain"] == CONTROL_STOCK,
                     f"round {rnd}: campaign {CONTROL_CAMPAIGN} untouched")
    for p in proxies:
        checks.check(p.proc.poll() is None, f"{p.name} still running")


# --- C: insert-first in autocommit -------------------------------------------------------------------
def run_insert_first_autocommit(args, c, checks):
    c.start_redis()
    enforce = start_proxy(c, args.claimguard, "claimguard-enforce",
                          write_rules(c.dir, "lenient.yaml", example_rules_with(strictness="after_refused")))
    strict = start_proxy(c, args.claimguard, "claimguard-strict",
                         write_rules(c.dir, "strict.yaml", example_rules_with(strictness="require_decrement")))
    strict_observe = start_proxy(c, args.claimguard, "claimguard-strict-observe",
                                 write_rules(c.dir, "strict-observe.yaml",
                                             example_rules_with("observe", "require_decrement")))
    tails = {p.name: AuditTail(p) for p in c.proxies}

    def run(label, proxy, sc, expect_lines):
        reset(c, sc.stock)
        before = metrics(proxy)
        steps = run_scenario(sc, proxy.port)
        delta = metric_delta(before, metrics(proxy))
        audit = read_audit([tails[proxy.name]], expect_lines)
        print(f"\n== {label}: {sc.what}")
        print_steps(steps)
        print(f"      metrics: {delta}\n      audit: {audit_summary(audit)}")
        return steps, delta, audit

    # Detected, counted and logged once per claim, also when one connection does it repeatedly.
    sc = Scenario("repeat", "F inserts first for users 41 then 42 on one connection, G for 43", stock=10,
                  apps={"F": lambda: insert_first_autocommit_app(41, 42), "G": lambda: insert_first_autocommit_app(43)},
                  order="FGFGFG")
    steps, delta, audit = run("enforce, after_refused", enforce, sc, 6)
    checks.check(all(s.result.error is None for s in steps), "every statement answered as MariaDB would (no error)")
    checks.equal(order_users(c), [41, 42, 43], "the three claims are in coupon_order (not changed)")
    checks.equal(remain_of(c), 7, "remain 10 - 3")
    check_metric_delta(checks, "insert first, autocommit", delta,
                       {"claimguard_claims_before_decrement_total{in=autocommit,rule=coupon_order}": 3,
                        "claimguard_claims_total{rule=coupon_order}": 3,
                        "claimguard_rewrites_total{rule=coupon_stock}": 3})
    cbd = [e for e in audit if e["action"] == "claim-before-decrement"]
    checks.equal(sorted((e["rule"], e["keys"].get("user_id"), e["keys"].get("campaign_id")) for e in cbd),
                 [("coupon_order", "41", "1"), ("coupon_order", "42", "1"), ("coupon_order", "43", "1")],
                 "one claim-before-decrement audit line per claim, with its rule and keys")

    # The usual order (decrement, then insert) is not counted.
    sc = Scenario("usual", "the naive flow (decrement, then insert) twice on one connection", stock=10,
                  apps={"N": lambda: naive_app_twice_distinct(81, 82)}, order="N")
    steps, delta, audit = run("enforce, usual order", enforce, sc, 2)
    checks.equal(total(delta, "claimguard_claims_before_decrement_total"), 0,
                 "decrement-then-insert is not counted as claim-before-decrement")
    checks.equal([e["action"] for e in audit], ["rewritten", "rewritten"], "usual order: audit actions")

    # require_decrement: the same insert gets the exhausted answer and never reaches the table.
    sc = Scenario("strict", "F inserts first for user 61; N claims user 62 the usual way", stock=10,
                  apps={"F": lambda: insert_first_autocommit_app(61), "N": lambda: naive_app(62)}, order="FNNN")
    steps, delta, audit = run("enforce, require_decrement", strict, sc, 2)
    ins = [s for s in steps if s.sql.startswith("INSERT") and s.session == "F"]
    checks.check(len(ins) == 1 and ins[0].result.error == EXHAUSTED,
                 "require_decrement: the insert-first claim gets the exhausted answer",
                 f"{[s.result.describe() for s in ins]}")
    checks.equal(order_users(c), [62], "require_decrement: the refused claim is not in coupon_order; the usual "
                 "claim is")
    checks.equal(remain_of(c), 9, "require_decrement: remain 10 - 1 (the refused app did not decrement)")
    check_metric_delta(checks, "require_decrement", delta,
                       {"claimguard_blocked_claims_total{rule=coupon_order}": 1,
                        "claimguard_claims_total{rule=coupon_order}": 1,
                        "claimguard_rewrites_total{rule=coupon_stock}": 1})
    checks.equal([(e["action"], e["keys"].get("user_id")) for e in audit], [("blocked", "61"), ("rewritten", None)],
                 "require_decrement: audit actions")

    # require_decrement in observe mode first (docs/RULES.md): would-blocked only for the claim
    # enforce would refuse; nothing changed.
    steps, delta, audit = run("observe, require_decrement", strict_observe, sc, 4)
    checks.check(all(s.result.error is None for s in steps), "observe: no answer changed")
    checks.equal(order_users(c), [61, 62], "observe: both claims in coupon_order")
    checks.equal([(e["action"], e["keys"].get("user_id")) for e in audit],
                 [("would-blocked", "61"), ("would-rewritten", None), ("would-claimed", "62"),
                  ("would-rewritten", None)],
                 "observe: would-blocked for the insert-first claim only; the usual claim is would-claimed")
    for p in c.proxies:
        checks.check(p.proc.poll() is None, f"{p.name} still running")


def naive_app_twice_distinct(u1, u2):
    yield from naive_app(u1)
    yield from naive_app(u2)


def redis_key_exists(c, user, campaign=CAMPAIGN):
    """Whether the example rules' claim key lock:coupon:{user}:{campaign} is held in Redis."""
    # The example rules name no schema: the key ends with the claim's database (one per tenant).
    return c.redis.command("EXISTS", f"lock:coupon:{user}:{campaign}:{cluster.DATABASE}") == ":1"


def run_redis_released_on_rollback(args, c, checks):
    """A claim that does not commit gives its Redis key back at once (not after the key's ttl), so the
    user's next try is a claim, not 'already claimed'; a committed claim keeps it."""
    c.start_redis()
    proxy = start_proxy(c, args.claimguard, "claimguard-1", cluster.EXAMPLE_RULES)

    def claim_in_transaction(conn, user, end):
        for sql in ("BEGIN", f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}"):
            r = execute(conn, sql)
            checks.check(r.error is None, f"user {user}: {sql}", r.describe())
        remain = int(r.rows[0][0])
        for sql in (f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {CAMPAIGN}",
                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN})"):
            r = execute(conn, sql)
            checks.check(r.error is None, f"user {user}: {sql}", r.describe())
        checks.check(redis_key_exists(c, user), f"user {user}: the claim holds its Redis key inside the transaction")
        if end:
            r = execute(conn, end)
            checks.check(r.error is None, f"user {user}: {end}", r.describe())

    def released(user, what):
        try:
            cluster.wait_for(lambda: not redis_key_exists(c, user), 2.0, f"user {user}'s Redis key released")
            checks.check(True, f"{what}: the Redis key of user {user} is released at once")
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            checks.check(False, f"{what}: the Redis key of user {user} is released at once", str(e))

    reset(c, 10)
    conn = connect(proxy.port)
    claim_in_transaction(conn, 71, "ROLLBACK")
    released(71, "the app's ROLLBACK")
    app, r = naive_app(71), None
    try:
        sql = next(app)
        while True:
            r = execute(conn, sql)
            sql = app.send(r)
    except StopIteration:
        pass
    checks.check(r is not None and r.error is None and r.affected == 1,
                 "user 71 claims again right after the rollback (not 'already claimed')", r.describe() if r else "")

    claim_in_transaction(conn, 72, "COMMIT")
    checks.check(redis_key_exists(c, 72), "a committed claim keeps its Redis key (for its ttl)")

    other = connect(proxy.port)
    claim_in_transaction(other, 73, None)
    other.close()  # the server rolls the open transaction back
    released(73, "the client went away mid-transaction")
    conn.close()

    # The proxy's own COMMIT -> ROLLBACK (insert first, decrement refused): that claim's key goes too.
    sc = [s for s in scenarios() if s.name == "insert_first_transaction"][0]
    reset(c, sc.stock)
    steps = run_scenario(sc, proxy.port)
    print_steps(steps)
    answers = {(st.session, st.sql): st.result for st in steps}
    got = answers.get(("E", "COMMIT"))
    checks.check(got is not None and got.error == EXHAUSTED, "E's COMMIT was rolled back by the proxy",
                 got.describe() if got else "not sent")
    released(32, "the proxy's COMMIT -> ROLLBACK")
    checks.check(redis_key_exists(c, 31), "D's committed claim keeps its Redis key")
    checks.equal(order_users(c), [31], "coupon_order holds only the committed claim")


SCENARIOS = {
    "observe_wire": run_observe_wire,
    "observe_per_rule": run_observe_per_rule,
    "observe_load": run_observe_load,
    "insert_first_transaction": run_insert_first_transaction,
    "insert_first_autocommit": run_insert_first_autocommit,
    "redis_released_on_rollback": run_redis_released_on_rollback,
}


# --- main --------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--claimguard")
    ap.add_argument("--load")
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    if args.list:
        print("\n".join(sorted(SCENARIOS)))
        return 0
    if not (args.scenario and args.claimguard and args.load and args.work_dir):
        ap.error("give SCENARIO --claimguard --load --work-dir (or --list)")

    c = cluster.start_harness(args.work_dir, HARNESS_DEADLINE_S)
    work = c.dir
    checks = Checks()
    began = time.monotonic()
    try:
        print(f"modes {args.scenario}")
        c.start_db(unique_index=True)
        SCENARIOS[args.scenario](args, c, checks)
    except Exception as e:  # noqa: BLE001 - a server that would not start, a hang ...: a failure, reported
        checks.failed.append(f"harness: {type(e).__name__}: {e}")
        print(f"HARNESS ERROR: {type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        c.stop()
    elapsed = time.monotonic() - began
    if checks.failed:
        for path in [os.path.join(c.db.dir, "install.log"), c.db.log] + [p.log for p in c.proxies]:
            if os.path.exists(path):
                print(f"\n--- last lines of {path}\n{cluster.tail(path, LOG_TAIL_LINES)}")
        print(f"\nmodes {args.scenario}: FAILED ({elapsed:.1f} s); logs are in {work}")
        for what in checks.failed:
            print(f"  - {what}")
    else:
        shutil.rmtree(os.path.join(work, "mariadb", "data"), ignore_errors=True)
    print(f"modes {args.scenario}: {checks.passed} passed, {len(checks.failed)} failed ({elapsed:.1f} s)")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
