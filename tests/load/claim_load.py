#!/usr/bin/env python3
"""claim_load.py: the coupon incident's claim flow from many threads with PyMySQL (text protocol).

The "one more client stack" variant of claimguard-load: the same flags (where they apply), the same
naive and fixed flows, the same JSON keys. Needs python3-pymysql (Debian). Exit status 0 when the run
completed, whatever the answers; 2 on bad flags.
"""

import argparse
import json
import math
import random
import re
import sys
import threading
import time

import pymysql
from pymysql.constants import CLIENT

TOOL = "claim_load.py"
DEFAULT_THREADS = 24
DEFAULT_USERS = 300
DEFAULT_ATTEMPTS_PER_USER = 3
DEFAULT_IO_TIMEOUT_S = 30
MAX_THREADS = 1024
MAX_DISTINCT_ERRORS = 50
OTHER_MESSAGES = "(other messages)"
RECONNECT_BACKOFF_S = 0.02
ER_DUP_ENTRY = 1062
# Errors after which the connection cannot be used: client-side (2000-2999), shutdown, killed.
FIRST_CLIENT_ERROR, LAST_CLIENT_ERROR = 2000, 2999
ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED = 1053, 1927
# Our own code for "the app found no stock row / could not read the answer" (not a MySQL code).
NO_STOCK_ROW = 0


def breaks_connection(code):
    return FIRST_CLIENT_ERROR <= code <= LAST_CLIENT_ERROR or code in (ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED)


class SqlError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.connection_lost = breaks_connection(code)
        self.statement = ""


def sql_error(e):
    """A SqlError from whatever PyMySQL raised."""
    if isinstance(e, pymysql.err.MySQLError) and len(e.args) >= 2 and isinstance(e.args[0], int):
        return SqlError(e.args[0], str(e.args[1]))
    if isinstance(e, (OSError, pymysql.err.InterfaceError)):
        return SqlError(2013, f"connection lost: {e}")
    return SqlError(2000, f"{type(e).__name__}: {e}")


class Session:
    """One connection, text protocol: every statement is built with integer literals, like the legacy app."""

    def __init__(self, host, port, args):
        self.host, self.port, self.args = host, port, args
        self.conn = None
        self.statement = ""  # the last statement sent: BEGIN, SELECT, UPDATE, INSERT, COMMIT ...

    def connect(self):
        self.close()
        try:
            self.conn = pymysql.connect(
                host=self.host, port=self.port, user=self.args.user, password=self.args.password,
                database=self.args.database, autocommit=True, connect_timeout=self.args.io_timeout_s,
                read_timeout=self.args.io_timeout_s, write_timeout=self.args.io_timeout_s,
                client_flag=CLIENT.FOUND_ROWS if self.args.found_rows else 0)
        except Exception as e:  # noqa: BLE001 - every failure is an answer to count
            err = sql_error(e)
            err.connection_lost = True
            raise err from None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.conn = None

    def query(self, sql, label=None):
        """(affected rows, rows) of one statement; label names it in error counts (default: its first word)."""
        self.statement = label or sql.split(" ", 1)[0]
        try:
            with self.conn.cursor() as cur:
                affected = cur.execute(sql)
                return affected, cur.fetchall()
        except Exception as e:  # noqa: BLE001
            raise sql_error(e) from None


def classify(err, args):
    """('sold_out'|'duplicate'|'error', reason) of an ERR, by code and message text."""
    if not err.connection_lost:
        text = err.message.lower()
        if err.code == args.sold_out_code and args.sold_out_message_contains.lower() in text:
            return "sold_out", "server_answer"
        if err.code == args.duplicate_code and args.duplicate_message_contains.lower() in text:
            return "duplicate", "server_answer"
    return "error", None


def attempt(session, args, user):
    """(kind, reason, SqlError or None) of one attempt."""
    k = args.campaign

    def abandon():
        if args.transaction and session.conn is not None:
            try:
                session.query("ROLLBACK")
            except SqlError as e:
                if e.connection_lost:
                    session.close()

    def refused(kind, reason):
        abandon()
        return kind, reason, None

    def failed(err):
        err.statement = session.statement
        if err.connection_lost:
            session.close()
            return "error", None, err
        abandon()
        kind, reason = classify(err, args)
        return kind, reason, err

    try:
        if args.transaction:
            session.query("BEGIN")
        if args.flow == "naive":
            cols = "remain, version" if args.version_column else "remain"
            _, rows = session.query(f"SELECT {cols} FROM coupon_stock WHERE campaign_id = {k}")
            if not rows:
                abandon()
                err = SqlError(NO_STOCK_ROW, f"no coupon_stock row for campaign {k}")
                err.statement = "SELECT"
                return "error", None, err
            remain = int(rows[0][0])
            version = int(rows[0][1]) if args.version_column else 0
            if remain <= 0:
                return refused("sold_out", "app_check")
            sets = f"remain = {remain - 1}" + (f", version = {version + 1}" if args.version_column else "")
            affected, _ = session.query(f"UPDATE coupon_stock SET {sets} WHERE campaign_id = {k}")
            if affected == 0 and not args.ignore_affected_rows:
                return refused("sold_out", "affected_rows")
        else:
            affected, _ = session.query(
                f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {k} AND remain > 0")
            if affected == 0:
                return refused("sold_out", "affected_rows")
        try:
            inserted, _ = session.query(
                f"INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES ({user}, {k}, NOW())")
        except SqlError as e:
            if args.flow == "fixed" and e.code == ER_DUP_ENTRY:
                # The hand fix: a duplicate key is "already claimed", and the unit taken goes back.
                if args.transaction:
                    return refused("duplicate", "duplicate_key")
                session.query(f"UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = {k}",
                              label="UPDATE (return unit)")
                return "duplicate", "duplicate_key", None
            raise
        if inserted == 0:
            return refused("sold_out", "insert_no_row")
        if args.transaction:
            session.query("COMMIT")
        return "claimed", None, None
    except SqlError as e:
        return failed(e)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.attempts = self.claimed = self.sold_out = self.duplicate = self.other_errors = self.reconnects = 0
        self.sold_out_by = {"app_check": 0, "affected_rows": 0, "server_answer": 0, "insert_no_row": 0}
        self.duplicate_by = {"server_answer": 0, "duplicate_key": 0}
        self.errors = {}
        self.latencies_us = []
        self.claimed_users = []

    def add(self, kind, reason, err, user, latency_s):
        with self.lock:
            self.attempts += 1
            self.latencies_us.append(int(latency_s * 1e6))
            if kind == "claimed":
                self.claimed += 1
                self.claimed_users.append(user)
            elif kind == "sold_out":
                self.sold_out += 1
                self.sold_out_by[reason] += 1
            elif kind == "duplicate":
                self.duplicate += 1
                self.duplicate_by[reason] += 1
            else:
                self.other_errors += 1
                key = (err.statement, err.code, error_pattern(err.message)) if err else ("", 0, "unknown")
                if len(self.errors) >= MAX_DISTINCT_ERRORS and key not in self.errors:
                    key = (key[0], key[1], OTHER_MESSAGES)
                self.errors[key] = self.errors.get(key, 0) + 1


def error_pattern(message):
    """The message with every run of digits replaced by N (as claimguard-load groups errors)."""
    return re.sub(r"[0-9]+", "N", message)


def percentile_ms(samples_us, p):
    """Nearest-rank percentile in milliseconds; 0 when empty (the same rule as claimguard-load)."""
    if not samples_us:
        return 0.0
    s = sorted(samples_us)
    rank = min(max(1, math.ceil(p / 100.0 * len(s))), len(s))
    return s[rank - 1] / 1000.0


def parse_target(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"--target must be host:port, not {text!r}")
    return host.strip("[]"), int(port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", action="append", type=parse_target,
                    help="host:port of MySQL or claimguard; repeat it, threads go round-robin")
    ap.add_argument("--user", default="root")
    ap.add_argument("--password", default="")
    ap.add_argument("--database", required=True)
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    ap.add_argument("--users", type=int, default=DEFAULT_USERS, help="ids first-user .. first-user + N - 1")
    ap.add_argument("--first-user", type=int, default=1)
    ap.add_argument("--attempts-per-user", type=int, default=DEFAULT_ATTEMPTS_PER_USER)
    ap.add_argument("--campaign", type=int, default=1)
    ap.add_argument("--protocol", choices=["text"], default="text", help="PyMySQL speaks the text protocol only")
    ap.add_argument("--flow", choices=["naive", "fixed"], default="naive")
    ap.add_argument("--transaction", action="store_true")
    ap.add_argument("--ignore-affected-rows", action="store_true")
    ap.add_argument("--version-column", action="store_true")
    ap.add_argument("--found-rows", action="store_true")
    ap.add_argument("--seconds", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--io-timeout-s", type=int, default=DEFAULT_IO_TIMEOUT_S)
    ap.add_argument("--sold-out-code", type=int, default=1644)
    ap.add_argument("--sold-out-message-contains", default="sold out")
    ap.add_argument("--duplicate-code", type=int, default=1644)
    ap.add_argument("--duplicate-message-contains", default="already claimed")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--record-claims", action="store_true")
    args = ap.parse_args()
    targets = args.target or [("127.0.0.1", 3306)]
    if (not 1 <= args.threads <= MAX_THREADS or min(args.users, args.first_user, args.attempts_per_user) < 1
            or args.seconds < 0):
        ap.error("--threads, --users, --first-user and --attempts-per-user must be positive, --seconds not negative")

    plan = [u for u in range(args.first_user, args.first_user + args.users) for _ in range(args.attempts_per_user)]
    random.Random(args.seed).shuffle(plan)
    next_index = iter(range(len(plan)))
    next_lock = threading.Lock()
    tally = Tally()
    connected = threading.Barrier(args.threads + 1)
    go = threading.Event()
    deadline = [float("inf")]

    def worker(host, port):
        session = Session(host, port, args)
        try:
            session.connect()
        except SqlError:
            pass  # retried, and counted, by the first attempt
        connected.wait()
        go.wait()
        while time.monotonic() < deadline[0]:
            with next_lock:
                i = next(next_index, None)
            if i is None:
                break
            user = plan[i]
            began = time.monotonic()
            if session.conn is None:
                with tally.lock:
                    tally.reconnects += 1
                try:
                    session.connect()
                except SqlError as e:
                    e.statement = "connect"
                    tally.add("error", None, e, user, time.monotonic() - began)
                    time.sleep(RECONNECT_BACKOFF_S)
                    continue
            kind, reason, err = attempt(session, args, user)
            tally.add(kind, reason, err, user, time.monotonic() - began)
        session.close()

    threads = [threading.Thread(target=worker, args=targets[i % len(targets)], daemon=True)
               for i in range(args.threads)]
    for t in threads:
        t.start()
    connected.wait()
    began = time.monotonic()
    if args.seconds > 0:
        deadline[0] = began + args.seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began

    t = tally
    out = {
        "tool": TOOL,
        "config": {"targets": [f"{h}:{p}" for h, p in targets], "threads": args.threads, "users": args.users,
                   "first_user": args.first_user,
                   "attempts_per_user": args.attempts_per_user, "campaign": args.campaign,
                   "protocol": "text", "flow": args.flow, "transaction": args.transaction,
                   "ignore_affected_rows": args.ignore_affected_rows, "version_column": args.version_column,
                   "found_rows": args.found_rows, "seconds": args.seconds, "seed": args.seed},
        "attempts_planned": len(plan), "attempts": t.attempts, "claimed": t.claimed, "sold_out": t.sold_out,
        "duplicate": t.duplicate, "other_errors": t.other_errors, "sold_out_by": t.sold_out_by,
        "duplicate_by": t.duplicate_by,
        "errors": [{"statement": st, "code": c, "message": m, "count": n}
                   for (st, c, m), n in sorted(t.errors.items())],
        "reconnects": t.reconnects, "elapsed_s": elapsed,
        "claims_per_s": t.claimed / elapsed if elapsed > 0 else 0.0,
        "attempts_per_s": t.attempts / elapsed if elapsed > 0 else 0.0,
        "latency_ms": {"p50": percentile_ms(t.latencies_us, 50), "p95": percentile_ms(t.latencies_us, 95),
                       "p99": percentile_ms(t.latencies_us, 99), "max": percentile_ms(t.latencies_us, 100)},
    }
    if args.record_claims:
        out["claimed_users"] = sorted(t.claimed_users)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{TOOL}: {args.flow} flow, text protocol, {'transactions' if args.transaction else 'autocommit'}, "
              f"{args.threads} threads over {len(targets)} target(s), campaign {args.campaign}")
        print(f"  attempts {t.attempts} of {len(plan)}, claimed {t.claimed}, sold out {t.sold_out} {t.sold_out_by}, "
              f"already claimed {t.duplicate} {t.duplicate_by}, other errors {t.other_errors}")
        for (st, c, m), n in sorted(t.errors.items()):
            print(f"      {n:>5} x {st:<8} {c:<8} {m}")
        lat = out["latency_ms"]
        print(f"  elapsed {elapsed:.3f} s, claims/s {out['claims_per_s']:.1f}, "
              f"latency ms p50 {lat['p50']:.2f} p95 {lat['p95']:.2f} p99 {lat['p99']:.2f} max {lat['max']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
