#!/usr/bin/env python3
"""silent_app.py: issue 17's "no silent path" rows as legacy claim apps, over PyMySQL (MySQLdb where a row needs
COM_CHANGE_USER), one --variant each. Each is the incident's flow (read remain, write it back, insert the order)
carried the way the row says; run_app.py (apps `silent`, `silent_options`) judges them in MariaDB.

Carried by database code or SQL-level statements (claimguard must refuse them by the rule's policy):
  call_text          CALL claim_coupon(user, campaign): the claim in a stored procedure (row 1)
  view_update        read and UPDATE v_stock SET remain = <R-1> (an updatable view), then the INSERT (row 2)
  replace_stock      REPLACE INTO coupon_stock (campaign_id, remain, version) VALUES (k, R-1, V) (row 3)
  upsert_stock       INSERT INTO coupon_stock ... ON DUPLICATE KEY UPDATE remain = VALUES(remain) (row 3)
  sql_prepare        PREPARE u FROM 'UPDATE coupon_stock SET remain = ? ...'; SET @r, @c; EXECUTE u USING @r, @c (row 4)
  n_units            an order of 2 or 3 units written SET remain = <R - N> (the rule's units: 1) (row 13)
Transaction and session habits (must be safe):
  savepoint_rollback START TRANSACTION; SAVEPOINT s; read; UPDATE; a third of the time the app's own check fails
                     afterwards: ROLLBACK TO SAVEPOINT s; COMMIT (row 6)
  xa_rollback_retry  XA START; read; UPDATE; INSERT; XA END; XA PREPARE; half the time XA ROLLBACK and at once the
                     same again with XA COMMIT (row 12)
  change_user_app    MySQLdb: the pool's connection belongs to a trusted user (root) and re-authenticates with
                     COM_CHANGE_USER to the app user for each borrow (row 8)
  change_user_admin  MySQLdb: app-user connections; now and then the pool changes user to the admin (trusted) for
                     a restock (SELECT ... FOR UPDATE; SET remain = R + 10), then back (row 8, the other way)
  qualified_other_db the tables written incident.coupon_stock / incident.coupon_order, default database `other` (row 9)
  qualified_no_db    the same with no default database (row 9)
  string_case        string key: UPDATE coupon_stock_s ... WHERE code = 'sale-2026', the INSERT spells it
                     'SALE-2026' or 'SALE-2026 ' (utf8mb4_general_ci) (row 10)
  tenants            one database per tenant (tenant_a, tenant_b), the same tables; each attempt claims in one
                     tenant, users claim in both (row 11)
  relative_version   SET remain = remain - 1, version = version + 1 WHERE ... AND version = V; 0 rows: read again
                     (5 tries); a duplicate key gives the unit back. Correct on its own (row 15)
  share_lock_tx      START TRANSACTION; SELECT ... LOCK IN SHARE MODE; UPDATE <R-1>; INSERT; COMMIT; deadlocks and
                     lock waits retried (10 tries). Correct on its own (row 18, with read_cache/admission/defer)
Restocks through the app's account:
  app_restock        the incident's flow, and now and then a restock SET remain = <R + 50> as the app user (row 14)

The report adds `restocked` (units the app restocked and was told OK): the runner adds them to the stock.
"""

import os
import random
import sys
import threading
import types

import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

VARIANTS = ("call_text", "view_update", "replace_stock", "upsert_stock", "sql_prepare", "n_units",
            "savepoint_rollback", "xa_rollback_retry", "change_user_app", "change_user_admin", "qualified_other_db",
            "qualified_no_db", "string_case", "tenants", "relative_version", "share_lock_tx", "app_restock")
ER_DUP_ENTRY = 1062
ER_LOCK_WAIT_TIMEOUT = 1205
ER_LOCK_DEADLOCK = 1213
OPTIMISTIC_TRIES = 5
LOCK_TRIES = 10
STRING_KEY = "sale-2026"
TENANTS = ("tenant_a", "tenant_b")
TENANT_B_OFFSET = 10_000_000       # a tenant_b claim is reported as user + this (run_app.py knows it)
DRAIN_FIRST_USER = 1_000_001       # run_app.py's drain: no restocks there
ADMIN_USER, ADMIN_PASSWORD = "root", "root-Pw1"   # tests/incident/cluster.py; trusted in run_app.py's silent rules
RESTOCK_EVERY = 15                 # attempts of a thread between two restocks
RESTOCK_BUDGET = 10                # restocks per app run
ROLLBACK_SHARE = 1 / 3             # savepoint_rollback: how often the app's check fails after the take

restock_lock = threading.Lock()
restock_done = {"count": 0, "units": 0}


class Silent(zoo.App):
    name = "silent"

    def __init__(self, args):
        super().__init__(args)
        if args.variant not in VARIANTS:
            raise SystemExit(f"silent_app.py: --variant must be one of {', '.join(VARIANTS)}")
        self.v = args.variant

    # --- connections -------------------------------------------------------------------------------------------
    def connect(self, port, database=None, user=None, password=None):
        a = self.args
        if database is None:
            database = a.database
        if self.v in ("change_user_app", "change_user_admin"):
            import MySQLdb  # python3-mysqldb (libmariadb): COM_CHANGE_USER
            kw = {"db": database} if database else {}
            conn = MySQLdb.connect(host=a.host, port=port, user=user or a.user, password=password or a.password,
                                   connect_timeout=30, **kw)
            conn.autocommit(True)
            return conn
        return pymysql.connect(host=a.host, port=port, user=user or a.user, password=password or a.password,
                               database=database or None, autocommit=True, connect_timeout=30, read_timeout=60,
                               write_timeout=60)

    def state(self, port):
        s = types.SimpleNamespace(port=port, rnd=random.Random(self.args.seed * 1000 + port), n=0, prepared=False,
                                  conns={})
        if self.v == "tenants":
            s.conns = {t: self.connect(port, database=t) for t in TENANTS}
        elif self.v == "qualified_other_db":
            s.conn = self.connect(port, database="other")
        elif self.v == "qualified_no_db":
            s.conn = self.connect(port, database="")
        elif self.v == "change_user_app":
            s.conn = self.connect(port, user=ADMIN_USER, password=ADMIN_PASSWORD)   # the pool's technical user
        else:
            s.conn = self.connect(port)
        return s

    def close_state(self, s):
        for c in list(s.conns.values()) + ([s.conn] if hasattr(s, "conn") else []):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

    @staticmethod
    def q(conn, sql):
        cur = conn.cursor()
        try:
            affected = cur.execute(sql)
            rows = cur.fetchall() if cur.description else ()
            while cur.nextset():
                pass
            return affected, rows
        finally:
            cur.close()

    # --- the flows ---------------------------------------------------------------------------------------------
    def attempt(self, s, user, trace):
        s.n += 1
        k = self.args.campaign
        v = self.v
        if v == "call_text":
            trace.statement = "CALL"
            try:
                _, rows = self.q(s.conn, f"CALL claim_coupon({user}, {k})")
            except pymysql.err.IntegrityError as e:
                if e.args[0] == ER_DUP_ENTRY:
                    return zoo.Outcome.CONFLICT   # the app's own "already claimed"
                raise
            return zoo.Outcome.CLAIMED if rows and int(rows[0][0]) == 1 else zoo.Outcome.SOLD_OUT
        if v == "relative_version":
            return self.relative_version(s.conn, user, trace)
        if v == "share_lock_tx":
            return self.share_lock(s.conn, user, trace)
        if v == "xa_rollback_retry":
            return self.xa(s, user, trace)
        if v == "savepoint_rollback":
            return self.savepoint(s, user, trace)
        if v == "app_restock" and user < DRAIN_FIRST_USER and s.n % RESTOCK_EVERY == 0 and self.budget():
            self.restock(s.conn, trace, 50, lock=False)
        if v == "change_user_admin" and user < DRAIN_FIRST_USER and s.n % RESTOCK_EVERY == 0 and self.budget():
            self.change_user(s.conn, trace, "COM_CHANGE_USER admin", ADMIN_USER, ADMIN_PASSWORD)
            try:
                self.restock(s.conn, trace, 10, lock=True)
            finally:
                self.change_user(s.conn, trace, "COM_CHANGE_USER app", self.args.user, self.args.password)
        if v == "change_user_app":
            trace.statement = "COM_CHANGE_USER app"
            s.conn.change_user(self.args.user, self.args.password, self.args.database)   # the borrow
            try:
                return self.legacy(s.conn, user, trace)
            finally:
                self.change_user(s.conn, trace, "COM_CHANGE_USER back", ADMIN_USER, ADMIN_PASSWORD)   # the release
        if v == "tenants":
            if user >= DRAIN_FIRST_USER:
                tenant = TENANTS[user % 2]
            else:
                tenant = TENANTS[s.rnd.randrange(2)]
            if tenant == TENANTS[1]:
                trace.who = user + TENANT_B_OFFSET
            return self.legacy(s.conns[tenant], user, trace)
        return self.legacy(s.conn, user, trace)

    def change_user(self, conn, trace, what, user, password):
        """COM_CHANGE_USER, as a pool re-authenticates a connection it lends (the error names it if it fails)."""
        try:
            conn.change_user(user, password, self.args.database)
        except Exception:
            trace.statement = what
            raise

    def budget(self):
        with restock_lock:
            if restock_done["count"] >= RESTOCK_BUDGET:
                return False
            restock_done["count"] += 1
            return True

    def restock(self, conn, trace, units, lock):
        k = self.args.campaign
        trace.statement = "RESTOCK"
        if lock:
            self.q(conn, "START TRANSACTION")
            try:
                _, rows = self.q(conn, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k} FOR UPDATE")
                self.q(conn, f"UPDATE coupon_stock SET remain = {int(rows[0][0]) + units} WHERE campaign_id = {k}")
                self.q(conn, "COMMIT")
            except Exception:
                conn.rollback()
                raise
        else:
            _, rows = self.q(conn, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k}")
            self.q(conn, f"UPDATE coupon_stock SET remain = {int(rows[0][0]) + units} WHERE campaign_id = {k}")
        with restock_lock:
            restock_done["units"] += units

    def names(self):
        """(stock table, order table, key column, key literal for the UPDATE, key literal for the INSERT)."""
        k = self.args.campaign
        if self.v in ("qualified_other_db", "qualified_no_db"):
            return "incident.coupon_stock", "incident.coupon_order", "campaign_id", str(k), str(k)
        if self.v == "string_case":
            return "coupon_stock_s", "coupon_order_s", "code", f"'{STRING_KEY}'", None
        stock = "v_stock" if self.v == "view_update" else "coupon_stock"
        return stock, "coupon_order", "campaign_id", str(k), str(k)

    def legacy(self, conn, user, trace, units=None):
        stock, order, col, key, ins_key = self.names()
        if ins_key is None:   # string_case: the INSERT spells the key otherwise
            ins_key = "'" + STRING_KEY.upper() + (" " if random.random() < 0.5 else "") + "'"
        n = units or (2 + user % 2 if self.v == "n_units" else 1)
        trace.statement = "SELECT"
        _, rows = self.q(conn, f"SELECT remain, version FROM {stock} WHERE {col} = {key}")
        if not rows or int(rows[0][0]) < n:
            return zoo.Outcome.SOLD_OUT
        remain, version = int(rows[0][0]), int(rows[0][1])
        trace.statement = "UPDATE"
        self.write(conn, stock, col, key, remain - n, version)
        trace.statement = "INSERT"
        self.q(conn, f"INSERT INTO {order} (user_id, {col}, created_at) VALUES ({user}, {ins_key}, NOW())")
        return zoo.Outcome.CLAIMED

    def write(self, conn, stock, col, key, value, version):
        k = self.args.campaign
        if self.v == "replace_stock":
            self.q(conn, f"REPLACE INTO coupon_stock (campaign_id, remain, version) VALUES ({k}, {value}, {version})")
        elif self.v == "upsert_stock":
            self.q(conn, f"INSERT INTO coupon_stock (campaign_id, remain) VALUES ({k}, {value}) "
                         f"ON DUPLICATE KEY UPDATE remain = VALUES(remain)")
        elif self.v == "sql_prepare":
            if not getattr(conn, "_u_prepared", False):
                self.q(conn, "PREPARE u FROM 'UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?'")
                conn._u_prepared = True
            self.q(conn, f"SET @r = {value}, @c = {k}")
            self.q(conn, "EXECUTE u USING @r, @c")
        else:
            self.q(conn, f"UPDATE {stock} SET remain = {value} WHERE {col} = {key}")

    def savepoint(self, s, user, trace):
        k = self.args.campaign
        c = s.conn
        trace.statement = "START TRANSACTION"
        self.q(c, "START TRANSACTION")
        try:
            self.q(c, "SAVEPOINT before_claim")
            trace.statement = "SELECT"
            _, rows = self.q(c, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k}")
            remain = int(rows[0][0])
            if remain <= 0:
                self.q(c, "COMMIT")
                return zoo.Outcome.SOLD_OUT
            trace.statement = "UPDATE"
            self.q(c, f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {k}")
            if s.rnd.random() < ROLLBACK_SHARE:   # the app's own check after the take fails (a risk rule, a quota)
                trace.statement = "ROLLBACK TO SAVEPOINT"
                self.q(c, "ROLLBACK TO SAVEPOINT before_claim")
                trace.statement = "COMMIT"
                self.q(c, "COMMIT")
                return zoo.Outcome.CONFLICT
            trace.statement = "INSERT"
            self.q(c, f"INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES ({user}, {k}, NOW())")
            trace.statement = "COMMIT"
            self.q(c, "COMMIT")
            return zoo.Outcome.CLAIMED
        except Exception:
            try:
                c.rollback()
            except Exception:  # noqa: BLE001
                pass
            raise

    def xa(self, s, user, trace):
        k = self.args.campaign
        c = s.conn
        rollback_first = s.rnd.random() < 0.5
        for round_ in range(2 if rollback_first else 1):
            xid = f"'claim-{user}-{s.port}-{id(s)}-{s.n}-{round_}'"
            trace.statement = "XA START"
            self.q(c, f"XA START {xid}")
            ended = False
            try:
                trace.statement = "SELECT"
                _, rows = self.q(c, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k}")
                remain = int(rows[0][0])
                if remain <= 0:
                    self.q(c, f"XA END {xid}")
                    ended = True
                    self.q(c, f"XA ROLLBACK {xid}")
                    return zoo.Outcome.SOLD_OUT
                trace.statement = "UPDATE"
                self.q(c, f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {k}")
                trace.statement = "INSERT"
                self.q(c, f"INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES ({user}, {k}, NOW())")
                trace.statement = "XA END"
                self.q(c, f"XA END {xid}")
                ended = True
                trace.statement = "XA PREPARE"
                self.q(c, f"XA PREPARE {xid}")
                if round_ == 0 and rollback_first:   # the coordinator's other branch failed: roll back, retry
                    trace.statement = "XA ROLLBACK"
                    self.q(c, f"XA ROLLBACK {xid}")
                    continue
                trace.statement = "XA COMMIT"
                self.q(c, f"XA COMMIT {xid}")
                return zoo.Outcome.CLAIMED
            except Exception:
                for stmt in ([] if ended else [f"XA END {xid}"]) + [f"XA ROLLBACK {xid}"]:
                    try:
                        self.q(c, stmt)
                    except Exception:  # noqa: BLE001 - already ended by the server
                        pass
                raise
        raise AssertionError("unreachable")

    def relative_version(self, c, user, trace):
        k = self.args.campaign
        for _ in range(OPTIMISTIC_TRIES):
            trace.statement = "SELECT"
            _, rows = self.q(c, f"SELECT remain, version FROM coupon_stock WHERE campaign_id = {k}")
            remain, version = int(rows[0][0]), int(rows[0][1])
            if remain <= 0:
                return zoo.Outcome.SOLD_OUT
            trace.statement = "UPDATE"
            won, _ = self.q(c, f"UPDATE coupon_stock SET remain = remain - 1, version = version + 1 "
                               f"WHERE campaign_id = {k} AND version = {version}")
            if won:
                trace.statement = "INSERT"
                try:
                    self.q(c, f"INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES ({user}, {k}, NOW())")
                except pymysql.err.IntegrityError as e:
                    if e.args[0] != ER_DUP_ENTRY:
                        raise
                    trace.statement = "UPDATE (give back)"
                    self.q(c, f"UPDATE coupon_stock SET remain = remain + 1, version = version + 1 "
                              f"WHERE campaign_id = {k}")
                    return zoo.Outcome.CONFLICT
                return zoo.Outcome.CLAIMED
        return zoo.Outcome.CONFLICT   # "please try again" after its retries

    def share_lock(self, c, user, trace):
        k = self.args.campaign
        for _ in range(LOCK_TRIES):
            try:
                trace.statement = "START TRANSACTION"
                self.q(c, "START TRANSACTION")
                trace.statement = "SELECT LOCK IN SHARE MODE"
                _, rows = self.q(c, f"SELECT remain FROM coupon_stock WHERE campaign_id = {k} LOCK IN SHARE MODE")
                remain = int(rows[0][0])
                if remain <= 0:
                    self.q(c, "ROLLBACK")
                    return zoo.Outcome.SOLD_OUT
                trace.statement = "UPDATE"
                self.q(c, f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {k}")
                trace.statement = "INSERT"
                self.q(c, f"INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES ({user}, {k}, NOW())")
                trace.statement = "COMMIT"
                self.q(c, "COMMIT")
                return zoo.Outcome.CLAIMED
            except pymysql.err.MySQLError as e:
                code = e.args[0] if e.args else 0
                try:
                    c.rollback()
                except Exception:  # noqa: BLE001
                    pass
                if code in (ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT):
                    continue   # as Spring's @Retryable does
                if code == ER_DUP_ENTRY:
                    return zoo.Outcome.CONFLICT
                raise
        return zoo.Outcome.CONFLICT


def main():
    # zoo.main prints the report; the restocked units are added to it here.
    import io
    import json
    real = sys.stdout
    buf = io.StringIO()
    sys.stdout = buf
    try:
        rc = zoo.main(Silent)
    finally:
        sys.stdout = real
    for line in buf.getvalue().splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            report["restocked"] = restock_done["units"]
            line = json.dumps(report)
        print(line)
    return rc


if __name__ == "__main__":
    sys.exit(main())
