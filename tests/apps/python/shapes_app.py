#!/usr/bin/env python3
"""shapes_app.py: the legacy coupon flow in the shapes real services give it, over PyMySQL (one --variant each).

Reads: rw_split (read pool / write pool), app_cache (stock read from a 20 ms cache per app instance),
select_before_tx (SELECT, then START TRANSACTION; UPDATE; INSERT; COMMIT), read_join, read_in
(IN (1, 2)), read_now (AND end_time > NOW()), stale_read (the write goes on a pooled connection
that read the stock long ago). Writes: expression (SET remain = 57 - 1), two_units (SET remain = R - 2),
multi_statement (UPDATE ...; INSERT ... in one COM_QUERY); two apps correct on their own: optimistic_version
(SET remain = R - 1, version = V + 1 ... AND version = V, retried on 0 rows) and hand_fixed (the post-mortem's
guarded decrement, a duplicate key gives the unit back). Inserts: insert_ignore, on_duplicate_key,
replace, no_column_list. Everything else is the incident's flow: read, remain - 1 as a literal, insert.
"""

import os
import sys
import threading
import time
import types

import pymysql
from pymysql.constants import CLIENT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

CACHE_TTL_S = 0.020
VARIANTS = ("rw_split", "app_cache", "select_before_tx", "read_join", "read_in", "read_now", "stale_read",
            "expression", "two_units", "multi_statement", "optimistic_version", "hand_fixed", "insert_ignore",
            "on_duplicate_key", "replace", "no_column_list")
OPTIMISTIC_TRIES = 5
ER_DUP_ENTRY = 1062


class Shapes(zoo.App):
    name = "shapes"

    def __init__(self, args):
        super().__init__(args)
        if args.variant not in VARIANTS:
            raise SystemExit(f"shapes_app.py: --variant must be one of {', '.join(VARIANTS)}")
        self.v = args.variant
        self.units = 2 if self.v == "two_units" else 1

    def connect(self, port):
        a = self.args
        return pymysql.connect(host=a.host, port=port, user=a.user, password=a.password, database=a.database,
                               autocommit=True, connect_timeout=30, read_timeout=60, write_timeout=60,
                               client_flag=CLIENT.MULTI_STATEMENTS if self.v == "multi_statement" else 0)

    def pod(self, port):
        return types.SimpleNamespace(port=port, lock=threading.Lock(), cached=None, cached_at=0.0)

    def state(self, pod):
        s = types.SimpleNamespace(pod=pod, conn=self.connect(pod.port), read=None, write=None)
        s.read = s.write = s.conn
        if self.v == "rw_split":
            s.read = self.connect(pod.port)       # the "read" pool (a replica's address in production)
        if self.v == "stale_read":
            s.write = self.connect(pod.port)      # a pooled connection that read the stock once, long ago
            self.query(s.write, f"SELECT remain FROM coupon_stock WHERE campaign_id = {self.args.campaign}")
        return s

    def close_state(self, s):
        for c in {id(c): c for c in (s.conn, s.read, s.write)}.values():
            c.close()

    @staticmethod
    def query(conn, sql):
        with conn.cursor() as cur:
            affected = cur.execute(sql)
            rows = cur.fetchall()
            while cur.nextset():  # the later results of a multi-statement: their errors surface here
                pass
            return affected, rows

    def read_remain(self, s, trace):
        k = self.args.campaign
        trace.statement = "SELECT"
        if self.v == "app_cache":
            with s.pod.lock:
                if s.pod.cached is not None and time.monotonic() - s.pod.cached_at < CACHE_TTL_S:
                    return s.pod.cached
            _, rows = self.query(s.read, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k}")
            with s.pod.lock:
                s.pod.cached, s.pod.cached_at = int(rows[0][0]), time.monotonic()
            return int(rows[0][0])
        if self.v == "read_join":
            sql = (f"SELECT s.remain, c.name FROM coupon_stock s JOIN campaign c ON c.campaign_id = s.campaign_id "
                   f"WHERE s.campaign_id = {k}")
        elif self.v == "read_in":
            sql = "SELECT campaign_id, remain FROM coupon_stock WHERE campaign_id IN (1, 2) ORDER BY campaign_id"
        elif self.v == "read_now":
            sql = f"SELECT remain FROM coupon_stock WHERE campaign_id = {k} AND end_time > NOW()"
        else:
            sql = f"SELECT remain FROM coupon_stock WHERE campaign_id = {k}"
        _, rows = self.query(s.read, sql)
        if self.v == "read_in":
            rows = [(r[1],) for r in rows if int(r[0]) == k]
        return int(rows[0][0]) if rows else 0

    def update_sql(self, remain):
        k = self.args.campaign
        value = f"{remain} - {self.units}" if self.v in ("expression", "two_units") else f"{remain - 1}"
        return f"UPDATE coupon_stock SET remain = {value} WHERE campaign_id = {k}"

    def insert_sql(self, user):
        k = self.args.campaign
        cols = "(user_id, campaign_id, created_at)"
        values = f"VALUES ({user}, {k}, NOW())"
        if self.v == "insert_ignore":
            return f"INSERT IGNORE INTO coupon_order {cols} {values}"
        if self.v == "on_duplicate_key":
            return f"INSERT INTO coupon_order {cols} {values} ON DUPLICATE KEY UPDATE created_at = created_at"
        if self.v == "replace":
            return f"REPLACE INTO coupon_order {cols} {values}"
        if self.v == "no_column_list":
            return f"INSERT INTO coupon_order VALUES (NULL, {user}, {k}, NOW())"
        return f"INSERT INTO coupon_order {cols} {values}"

    def give_back_on_duplicate(self, s, user, trace):
        """The hand fix: a duplicate key is the app's "already claimed" and the unit taken goes back."""
        trace.statement = "INSERT"
        try:
            self.query(s.write, self.insert_sql(user))
        except pymysql.err.IntegrityError as e:
            if e.args[0] != ER_DUP_ENTRY:
                raise
            trace.statement = "UPDATE (give back)"
            # An optimistic app bumps the version with every write, or a concurrent CAS would overwrite this one.
            bump = ", version = version + 1" if self.v == "optimistic_version" else ""
            self.query(s.write, f"UPDATE coupon_stock SET remain = remain + 1{bump} "
                                f"WHERE campaign_id = {self.args.campaign}")
            return zoo.Outcome.CONFLICT
        return zoo.Outcome.CLAIMED

    def attempt(self, s, user, trace):
        k = self.args.campaign
        if self.v == "hand_fixed":
            trace.statement = "UPDATE"
            taken, _ = self.query(s.write, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {k} "
                                           f"AND remain > 0")
            return self.give_back_on_duplicate(s, user, trace) if taken else zoo.Outcome.SOLD_OUT
        if self.v == "optimistic_version":
            for _ in range(OPTIMISTIC_TRIES):
                trace.statement = "SELECT"
                _, rows = self.query(s.read, f"SELECT remain, version FROM coupon_stock WHERE campaign_id = {k}")
                remain, version = int(rows[0][0]), int(rows[0][1])
                if remain <= 0:
                    return zoo.Outcome.SOLD_OUT
                trace.statement = "UPDATE"
                won, _ = self.query(s.write, f"UPDATE coupon_stock SET remain = {remain - 1}, version = {version + 1} "
                                             f"WHERE campaign_id = {k} AND version = {version}")
                if won:
                    return self.give_back_on_duplicate(s, user, trace)
            return zoo.Outcome.CONFLICT   # "please try again": the app's own answer after its retries
        remain = self.read_remain(s, trace)
        if remain < self.units:
            return zoo.Outcome.SOLD_OUT
        if self.v == "multi_statement":
            trace.statement = "UPDATE;INSERT"
            self.query(s.write, f"{self.update_sql(remain)}; {self.insert_sql(user)}")
            return zoo.Outcome.CLAIMED
        if self.v == "select_before_tx":
            trace.statement = "START TRANSACTION"
            self.query(s.write, "START TRANSACTION")
            try:
                trace.statement = "UPDATE"
                self.query(s.write, self.update_sql(remain))
                trace.statement = "INSERT"
                self.query(s.write, self.insert_sql(user))
                trace.statement = "COMMIT"
                self.query(s.write, "COMMIT")
            except Exception:
                s.write.rollback()
                raise
            return zoo.Outcome.CLAIMED
        trace.statement = "UPDATE"
        try:
            self.query(s.write, self.update_sql(remain))
        except pymysql.err.MySQLError:
            if self.v == "app_cache":
                # A failed write evicts the cached stock, as caching layers do on an error: without it the
                # drain's new users (100 attempts in about 30 ms on a quiet machine, under the 20 ms TTL twice at
                # most) kept writing from one stale value and left units unsold (remain 1 after the drain, seen
                # on a fresh-clone CI); the race before it is unchanged until a write fails.
                with s.pod.lock:
                    s.pod.cached = None
            raise
        trace.statement = "INSERT"
        inserted, _ = self.query(s.write, self.insert_sql(user))
        if self.v == "insert_ignore" and inserted == 0:
            return zoo.Outcome.CONFLICT   # the app's "already claimed": the row was there
        return zoo.Outcome.CLAIMED


if __name__ == "__main__":
    sys.exit(zoo.main(Shapes))
