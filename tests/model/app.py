"""Runs one generated app (grammar.py) through claimguard sidecars and records what it was told.

Each user is a thread; each statement the app sends is recorded (connection, sidecar, SQL, answer) in
`AppRun.trace`, which is the failure's statement-by-statement reproducer. Only the drivers' public
APIs are used, except two habits they do not expose: COM_RESET_CONNECTION through PyMySQL's internal
_execute_command, and a vanishing client (the socket shut, no COM_QUIT).
"""

import os
import random
import socket
import threading
import time

import MySQLdb
from MySQLdb.constants import CLIENT as MYSQLDB_CLIENT
import pymysql
from pymysql.constants import CLIENT

from grammar import TX_STYLES_WITH_TRANSACTION, VERSION_WRITES, GUARDED_WRITES

HOST = "127.0.0.1"
APP_USER = "cg_app"
APP_PASSWORD = "app-Pw1"
DATABASE = "incident"
OTHER_DATABASE = "other"
COM_RESET_CONNECTION = 0x1F
READ_TIMEOUT_S = 30          # an answer slower than this is a hang (a broken promise)
RETRYABLE_ERRNOS = {1205, 1213, 1399, 1402, 1613, 1614, 2006, 2013, 2055}
LOST_ERRNOS = {2006, 2013, 2055, 0}


def trigger_table(trigger):
    """The claim table whose INSERT trigger decrements coupon_stock (grammar dimension `trigger`)."""
    return f"coupon_order_t{trigger}"


class Vanished(Exception):
    """The app's process vanished between two statements (a client fault)."""


class Res:
    __slots__ = ("errno", "msg", "rows", "affected", "elapsed")

    def __init__(self, errno=0, msg="", rows=None, affected=0, elapsed=0.0):
        self.errno, self.msg, self.rows, self.affected, self.elapsed = errno, msg, rows or [], affected, elapsed

    @property
    def ok(self):
        return self.errno == 0

    def summary(self):
        if not self.ok:
            return f"ERR {self.errno} {self.msg[:120]}"
        if self.rows:
            return "rows " + "; ".join(",".join(f"{k}={v}" for k, v in r.items()) for r in self.rows[:3])
        return f"OK {self.affected} rows"


class Conn:
    """One physical client connection through one sidecar."""

    def __init__(self, app, sidecar):
        self.app = app
        self.sidecar = sidecar
        self.port = app.proxy_ports[sidecar]
        self.c = None
        self.name = None
        self.prepared = set()
        self.broken = True
        self.open()

    def open(self):
        self.name = self.app.next_conn_name()
        self.prepared = set()
        db = self.app.default_db
        if self.app.spec["driver"] == "pymysql":
            kw = dict(host=HOST, port=self.port, user=APP_USER, password=APP_PASSWORD, autocommit=True,
                      connect_timeout=10, read_timeout=READ_TIMEOUT_S, write_timeout=READ_TIMEOUT_S)
            if db:
                kw["database"] = db
            if self.app.spec["carrier"] == "multi_statement":
                kw["client_flag"] = CLIENT.MULTI_STATEMENTS
            self.c = pymysql.connect(**kw)
            local = self.c._sock.getsockname()  # noqa: SLF001 - the audit names the client by address
        else:
            kw = dict(host=HOST, port=self.port, user=APP_USER, passwd=APP_PASSWORD, autocommit=True,
                      connect_timeout=10, read_timeout=READ_TIMEOUT_S, write_timeout=READ_TIMEOUT_S)
            if db:
                kw["db"] = db
            if self.app.spec["carrier"] == "multi_statement":
                kw["client_flag"] = MYSQLDB_CLIENT.MULTI_STATEMENTS | MYSQLDB_CLIENT.MULTI_RESULTS
            self.c = MySQLdb.connect(**kw)
            s = socket.socket(fileno=os.dup(self.c.fileno()))
            local = s.getsockname()
            s.close()
        self.app.client_addrs.add(f"{local[0]}:{local[1]}")
        self.broken = False
        self.app.log(None, self, "-- connect", f"sidecar {self.sidecar} db={db or 'NONE'} driver={self.app.spec['driver']}")
        self.set_sql_mode()

    def set_sql_mode(self):
        """sql_mode.ansi_quotes_session: the session adds ANSI_QUOTES to whatever the server gave it."""
        if self.app.spec["sql_mode"] == "ansi_quotes_session" and not self.broken:
            self.q(None, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")

    def q(self, user, sql):
        if self.broken:
            self.open()
        t0 = time.monotonic()
        try:
            cur = self.c.cursor()
            try:
                affected = cur.execute(sql)
                rows = []
                while True:
                    if cur.description:
                        names = [d[0] for d in cur.description]
                        rows.extend(dict(zip(names, r)) for r in cur.fetchall())
                    if not cur.nextset():
                        break
                affected = cur.rowcount if cur.rowcount is not None and cur.rowcount >= 0 else (affected or 0)
            finally:
                try:
                    cur.close()
                except Exception:  # noqa: BLE001 - a lost connection fails the close too
                    pass
            r = Res(rows=rows, affected=affected, elapsed=time.monotonic() - t0)
        except (pymysql.err.MySQLError, MySQLdb.Error) as e:
            errno = e.args[0] if e.args and isinstance(e.args[0], int) else 0
            msg = str(e.args[1]) if len(e.args) > 1 else str(e)
            r = Res(errno=errno, msg=msg, elapsed=time.monotonic() - t0)
            if errno in LOST_ERRNOS or errno >= 2000:
                self.broken = True
                self.close()
        self.app.log(user, self, sql, r.summary(), r.elapsed)
        if r.elapsed >= READ_TIMEOUT_S - 1:
            self.app.hangs.append(f"{self.name}: {sql!r} took {r.elapsed:.1f}s")
        return r

    def between_borrows(self, how):
        """What a pool does when the connection comes back: COM_RESET_CONNECTION or COM_CHANGE_USER."""
        if self.broken or how == "none":
            return
        try:
            if how == "reset":
                self.c._execute_command(COM_RESET_CONNECTION, b"")  # noqa: SLF001 - not in PyMySQL's API
                self.c._read_ok_packet()  # noqa: SLF001
                self.app.log(None, self, "-- COM_RESET_CONNECTION", "OK")
            else:
                self.c.change_user(APP_USER, APP_PASSWORD, self.app.default_db)
                self.app.log(None, self, "-- COM_CHANGE_USER", "OK")
            self.prepared = set()
            self.set_sql_mode()  # the session's variables are the server's defaults again
        except Exception as e:  # noqa: BLE001
            self.app.log(None, self, f"-- {how}", f"ERR {e}")
            self.broken = True
            self.close()

    def vanish(self):
        """The app vanishes: the socket is shut with whatever transaction was open, no COM_QUIT."""
        self.app.log(None, self, "-- vanish (socket shut, no COM_QUIT)", "")
        try:
            if self.app.spec["driver"] == "pymysql":
                self.c._sock.shutdown(socket.SHUT_RDWR)  # noqa: SLF001
                self.c._force_close()  # noqa: SLF001
            else:
                s = socket.socket(fileno=os.dup(self.c.fileno()))
                s.shutdown(socket.SHUT_RDWR)
                s.close()
        except Exception:  # noqa: BLE001
            pass
        self.broken = True
        self.close()

    def close(self):
        c, self.c = self.c, None
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass


class Lender:
    """The app's connection habit: dedicated, a pool (FIFO/LIFO) or a read/write split."""

    def __init__(self, app):
        self.app = app
        self.spec = app.spec
        self.kind = self.spec["conn"]
        self.lock = threading.Condition()
        self.mine = {}  # user -> {role: Conn}
        self.pools = {}  # instance -> [Conn]: each app instance has its own pool
        if self.kind.startswith("pool"):
            for inst in range(len(app.proxy_ports)):
                if any(app.instance_of(u) == inst for u in range(1, self.spec["users"] + 1)):
                    self.pools[inst] = [Conn(app, app.pick_sidecar(inst))
                                        for _ in range(max(1, self.spec["pool_size"]))]

    def _user_conn(self, user, role):
        with self.lock:
            d = self.mine.setdefault(user, {})
            if self.kind == "rw_split":
                if role not in d:
                    d[role] = None
            else:
                role = "rw"
                d.setdefault(role, None)
        if self.mine[user][role] is None:
            self.mine[user][role] = Conn(self.app, self.app.pick_sidecar(self.app.instance_of(user)))
        return self.mine[user][role]

    def borrow(self, user, role):
        if not self.kind.startswith("pool"):
            return self._user_conn(user, role)
        pool = self.pools[self.app.instance_of(user)]
        with self.lock:
            while not pool:
                self.lock.wait()
            conn = pool.pop(0) if self.kind == "pool_fifo" else pool.pop()
            conn.home = pool
            return conn

    def give_back(self, conn):
        if not self.kind.startswith("pool"):
            return
        conn.between_borrows(self.spec["borrow"])
        with self.lock:
            conn.home.append(conn)
            self.lock.notify_all()

    def close_all(self):
        for d in self.mine.values():
            for c in d.values():
                if c is not None:
                    c.close()
        for pool in self.pools.values():
            for c in pool:
                c.close()


def classify(res):
    """What the app understands from an ERR."""
    if res.errno == 1644:
        m = res.msg.lower()
        if "sold out" in m:
            return "sold_out"
        if "already claimed" in m:
            return "dup"
        if "refuses" in m:
            return "refused"
        return "error:1644"
    if res.errno == 1062:
        return "dup"
    if res.errno in LOST_ERRNOS or res.errno >= 2000:
        return "lost"
    if res.errno in RETRYABLE_ERRNOS:
        return f"retry:{res.errno}"
    return f"error:{res.errno}"


RETRY_KINDS = ("conflict", "lost", "fault", "xa_rolled_back", "savepoint_undone")


class AppRun:
    def __init__(self, spec, campaigns, proxy_ports):
        self.spec = spec
        self.campaigns = campaigns  # [(campaign_id, initial stock)]
        self.proxy_ports = proxy_ports[:max(1, min(spec["sidecars"], len(proxy_ports)))]
        self.default_db = {"default": DATABASE, "qualified_same": DATABASE, "other_db": OTHER_DATABASE,
                           "no_db": None}[spec["schema"]]
        self.qual = "" if spec["schema"] == "default" else f"{DATABASE}."
        self.string_key = spec["key"] in ("string", "string_case")
        self.lock = threading.Lock()
        self.trace = []
        self.client_addrs = set()
        self.hangs = []
        self.told = {}          # (user, campaign) -> [answers]
        self.faults = 0
        self.abandoned = 0      # autocommit takes OK'd whose claim the app then gave up (error, refusal)
        self.conn_seq = 0
        self.rng = random.Random(spec["user_seed"])
        self.crashes = []       # exceptions in the app's own code (harness bugs)
        self.lender = None

    # --- bookkeeping -------------------------------------------------------------------------
    def next_conn_name(self):
        with self.lock:
            self.conn_seq += 1
            return f"c{self.conn_seq}"

    def instance_of(self, user):
        return (user - 1) % len(self.proxy_ports)

    def pick_sidecar(self, instance):
        """per_instance: the instance's own sidecar; shared_tier: any sidecar, per connection."""
        with self.lock:
            if self.spec["sidecar_pick"] == "shared_tier":
                return self.rng.randrange(len(self.proxy_ports))
            return instance

    def log(self, user, conn, sql, result, elapsed=0.0):
        with self.lock:
            self.trace.append({"t": round(time.monotonic(), 4), "user": user, "conn": conn.name,
                               "sidecar": conn.sidecar, "sql": sql, "result": result,
                               "ms": round(elapsed * 1000, 1)})

    def tell(self, user, camp, kind):
        with self.lock:
            self.told.setdefault((user, camp), []).append(kind)

    # --- SQL of this app -----------------------------------------------------------------------
    def names(self):
        s = self.spec
        if self.string_key:
            stock, order, key = "coupon_stock_s", "coupon_order_s", "code"
        else:
            stock, order, key = "coupon_stock", "coupon_order", "campaign_id"
        if s["carrier"] == "view":
            stock = "v_stock"
        if s["trigger"] != "none":
            order = trigger_table(s["trigger"])
        if s["sql_mode"] == "ansi_quotes_session":  # names as ANSI SQL writes them
            qual = "".join(f'"{part}".' for part in self.qual.split(".") if part)
            return f'{qual}"{stock}"', f'{qual}"{order}"', f'"{key}"'
        return self.qual + stock, self.qual + order, key

    def stock_key(self, camp):
        k = self.spec["key"]
        if k == "int":
            return str(camp)
        if k == "quoted":
            return f"'{camp}'"
        return f"'sale-{camp}'"

    def claim_key(self, camp, urng):
        if self.spec["key"] == "string_case":
            return urng.choice([f"'SALE-{camp}'", f"'sale-{camp} '", f"'Sale-{camp}'"])
        return self.stock_key(camp)

    def read_stmt(self, camp):
        s = self.spec
        stock, _, key = self.names()
        cols = "*" if s["read"] == "star" else ("remain, version" if s["write"] in VERSION_WRITES else "remain")
        lock = {"for_update": " FOR UPDATE", "share": " LOCK IN SHARE MODE"}.get(s["read"], "")
        return f"SELECT {cols} FROM {stock} WHERE {key} = ?{lock}", [self.stock_key(camp)]

    def write_stmt(self, camp, r, v):
        w = self.spec["write"]
        stock, _, key = self.names()
        k = self.stock_key(camp)
        if w == "abs_int":
            return f"UPDATE {stock} SET remain = ? WHERE {key} = ?", [str(r - 1), k]
        if w == "abs_str":
            return f"UPDATE {stock} SET remain = ? WHERE {key} = ?", [f"'{r - 1}'", k]
        if w == "abs_double":
            return f"UPDATE {stock} SET remain = ? WHERE {key} = ?", [f"{r - 1}.0", k]
        if w == "rel":
            return f"UPDATE {stock} SET remain = remain - ? WHERE {key} = ?", ["1", k]
        if w == "guard_gt0":
            return f"UPDATE {stock} SET remain = remain - ? WHERE {key} = ? AND remain > 0", ["1", k]
        if w == "guard_ge1":
            return f"UPDATE {stock} SET remain = remain - ? WHERE {key} = ? AND remain >= 1", ["1", k]
        if w == "guard_minus_ge0":
            return f"UPDATE {stock} SET remain = remain - ? WHERE {key} = ? AND remain - ? >= 0", ["1", k, "1"]
        if w == "guard_join":
            on = "c.code = s.code" if self.string_key else "c.id = s.campaign_id"
            return (f"UPDATE {stock} s JOIN {self.qual}campaign c ON {on} SET s.remain = s.remain - ? "
                    f"WHERE s.{key} = ? AND s.remain > 0 AND c.active = 1", ["1", k])
        if w == "version_abs":
            return (f"UPDATE {stock} SET remain = ?, version = ? WHERE {key} = ? AND version = ?",
                    [str(r - 1), str(v + 1), k, str(v)])
        if w == "version_rel":
            return (f"UPDATE {stock} SET remain = remain - 1, version = version + 1 WHERE {key} = ? AND version = ?",
                    [k, str(v)])
        if w == "upsert_odku":
            return (f"INSERT INTO {stock} ({key}, remain, version) VALUES (?, ?, ?) "
                    f"ON DUPLICATE KEY UPDATE remain = VALUES(remain)", [k, str(r - 1), str(v or 0)])
        if w == "upsert_replace":
            return f"REPLACE INTO {stock} ({key}, remain, version) VALUES (?, ?, ?)", [k, str(r - 1), str(v or 0)]
        raise ValueError(w)

    def claim_stmt(self, user, camp, urng):
        c = self.spec["claim"]
        _, order, key = self.names()
        p = [str(user), self.claim_key(camp, urng)]
        if c == "insert":
            return f"INSERT INTO {order} (user_id, {key}) VALUES (?, ?)", p
        if c == "insert_ignore":
            return f"INSERT IGNORE INTO {order} (user_id, {key}) VALUES (?, ?)", p
        if c == "insert_odku":
            return f"INSERT INTO {order} (user_id, {key}) VALUES (?, ?) ON DUPLICATE KEY UPDATE user_id = user_id", p
        if c == "replace":
            return f"REPLACE INTO {order} (user_id, {key}) VALUES (?, ?)", p
        if c == "no_columns":
            return f"INSERT INTO {order} VALUES (NULL, ?, ?, NOW())", p
        if c == "insert_set":
            return f"INSERT INTO {order} SET user_id = ?, {key} = ?", p
        if c == "insert_returning":  # Django's create() on MariaDB 10.5+: a duplicate is an ERR after the columns
            return f"INSERT INTO {order} (user_id, {key}) VALUES (?, ?) RETURNING id", p
        raise ValueError(c)

    @staticmethod
    def render(tmpl, params):
        out, i = [], 0
        for ch in tmpl:
            if ch == "?":
                out.append(params[i])
                i += 1
            else:
                out.append(ch)
        return "".join(out)

    def send(self, conn, user, tmpl, params, urng):
        """One statement through the app's carrier (text or SQL-level PREPARE/EXECUTE USING @vars)."""
        if self.spec["carrier"] != "sql_prepare":
            return conn.q(user, self.render(tmpl, params))
        name = "s%08x" % (hash(tmpl) & 0xFFFFFFFF)
        if name not in conn.prepared:
            r = conn.q(user, f"PREPARE {name} FROM '{tmpl}'")
            if not r.ok:
                return r
            conn.prepared.add(name)
        if params:
            r = conn.q(user, "SET " + ", ".join(f"@p{i + 1} = {p}" for i, p in enumerate(params)))
            if not r.ok:
                return r
            r = conn.q(user, f"EXECUTE {name} USING " + ", ".join(f"@p{i + 1}" for i in range(len(params))))
        else:
            r = conn.q(user, f"EXECUTE {name}")
        if urng.random() < 0.2 and not conn.broken:
            conn.q(user, f"DEALLOCATE PREPARE {name}")
            conn.prepared.discard(name)
        return r

    # --- a refund ------------------------------------------------------------------------------
    def cancel(self, user, camp):
        """The user's claim cancelled, as a correct refund flow does it: delete_then_restock in a transaction
        (BEGIN; DELETE the row by user and key; remain = remain + 1; COMMIT), delete_only as one DELETE in
        autocommit (COMMIT after it ends the implicit transaction under autocommit = 0). With cancel_where
        row_id the same as an ORM deletes a row it loaded: SELECT the claim row's id, then DELETE ... WHERE
        id = <it> (no row read: nothing to cancel). A deadlock or lock wait timeout is retried, as an app
        retries it. As text on the base tables, whatever the app's carrier."""
        s = self.spec
        stock, order, key = self.names()
        stock = stock.replace("v_stock", "coupon_stock")  # a view carrier's app refunds on the table itself
        k = self.stock_key(camp)
        in_tx = s["cancel"] == "delete_then_restock"
        by_id = s["cancel_where"] == "row_id"
        conn = self.lender.borrow(user, "write")
        try:
            for retry in range(20):
                r = conn.q(user, "BEGIN") if in_tx else Res()
                deleted = 0
                where = f"user_id = {user} AND {key} = {k}"
                if r.ok and by_id:
                    r = conn.q(user, f"SELECT id FROM {order} WHERE {where}")
                    where = f"id = {r.rows[0]['id']}" if r.ok and r.rows else None
                if r.ok and where:
                    r = conn.q(user, f"DELETE FROM {order} WHERE {where}")
                    deleted = r.affected if r.ok else 0
                if r.ok and deleted == 1 and in_tx:
                    r = conn.q(user, f"UPDATE {stock} SET remain = remain + 1 WHERE {key} = {k}")
                if r.ok:
                    r = conn.q(user, "COMMIT")
                if r.ok:
                    if deleted == 1:
                        self.tell(user, camp, "cancelled")
                    return
                conn.q(user, "ROLLBACK")
                if r.errno not in (1205, 1213):
                    break
                time.sleep(0.005 * (retry + 1))
            self.tell(user, camp, f"cancel_error:{r.errno}")
        finally:
            self.lender.give_back(conn)

    # --- one claim attempt ---------------------------------------------------------------------
    def attempt(self, user, camp, tries, urng, st):
        """One claim attempt; returns what the app concluded (got, dup, sold_out, refused, conflict,
        lost, fault, retry:N, error:N, ...)."""
        s = self.spec
        tx = s["tx"]
        a = {"conn": None, "xid": None, "last": None}

        def vanish_maybe():
            if s["fault"] == "vanish" and urng.random() < s["fault_p"]:
                # only a connection this user holds: a pool's connection lent per statement is back in the
                # pool (maybe lent to another user) between two statements
                c = a["conn"] or (None if s["conn"].startswith("pool") else a["last"])
                if c is not None and not c.broken:
                    with self.lock:
                        self.faults += 1
                    c.vanish()
                    raise Vanished()

        def think():
            if s["think_ms"]:
                time.sleep(urng.random() * s["think_ms"] / 1000.0)

        def run(role, tmpl, params):
            think()
            if a["conn"] is not None:
                a["last"] = a["conn"]
                return self.send(a["conn"], user, tmpl, params, urng)
            conn = self.lender.borrow(user, role)
            a["last"] = conn
            try:
                if tx == "per_statement" and role == "write":
                    r0 = conn.q(user, "START TRANSACTION")
                    if not r0.ok:
                        return r0
                    r = self.send(conn, user, tmpl, params, urng)
                    if r.ok:
                        rc = conn.q(user, "COMMIT")
                        return rc if not rc.ok else r
                    conn.q(user, "ROLLBACK")
                    return r
                return self.send(conn, user, tmpl, params, urng)
            finally:
                self.lender.give_back(conn)

        def q(sql):
            return a["conn"].q(user, sql)

        def begin():
            a["conn"] = self.lender.borrow(user, "write")
            a["last"] = a["conn"]
            if tx in ("begin", "read_then_begin"):
                r = q("BEGIN")
            elif tx == "start_transaction":
                r = q("START TRANSACTION")
            elif tx == "autocommit0":
                r = q("SET autocommit = 0")
            elif tx in ("savepoint", "savepoint_rollback"):
                r = q("BEGIN")
                if r.ok:
                    r = q("SAVEPOINT sp1")
            else:
                st["xa"] += 1
                a["xid"] = f"'m{s['seed']}-{s['index']}-{user}-{st['xa']}'"
                r = q(f"XA START {a['xid']}")
            return r

        def release():
            c, a["conn"] = a["conn"], None
            if c is not None:
                self.lender.give_back(c)

        def rollback():
            if a["conn"] is None:
                return
            if not a["conn"].broken:
                if a["xid"]:
                    q(f"XA END {a['xid']}")
                    q(f"XA ROLLBACK {a['xid']}")
                else:
                    q("ROLLBACK")
                    if tx == "autocommit0" and s["conn"].startswith("pool"):
                        q("SET autocommit = 1")
            release()

        def commit():
            if a["xid"]:
                r = q(f"XA END {a['xid']}")
                if r.ok:
                    r = q(f"XA PREPARE {a['xid']}")
                if r.ok:
                    if tx == "xa_rollback_retry" and not st["xa_rolled_back"]:
                        st["xa_rolled_back"] = True
                        r = q(f"XA ROLLBACK {a['xid']}")
                        release()
                        return "xa_rolled_back" if r.ok else classify(r)
                    r = q(f"XA COMMIT {a['xid']}")
                if not r.ok:
                    rollback()
                    return classify(r)
                release()
                return None
            if tx in ("savepoint", "savepoint_rollback"):
                r = q("RELEASE SAVEPOINT sp1")
                if not r.ok:
                    rollback()
                    return classify(r)
            r = q("COMMIT")
            if not r.ok:
                rollback()
                return classify(r)
            if tx == "autocommit0" and s["conn"].startswith("pool"):
                q("SET autocommit = 1")
            release()
            return None

        in_tx = tx in TX_STYLES_WITH_TRANSACTION

        def fail(r):
            rollback()
            return classify(r)

        try:
            if s["carrier"] == "procedure":
                if in_tx:
                    r = begin()
                    if not r.ok:
                        return fail(r)
                proc = f"{self.qual}claim_coupon"
                r = run("write", f"CALL {proc}(?, ?)", [str(user), self.stock_key(camp)])
                if not r.ok:
                    return fail(r)
                claimed = r.rows[-1].get("claimed") if r.rows else None
                if in_tx:
                    e = commit()
                    if e:
                        return e
                return "got" if claimed == 1 else "sold_out"

            if s["claim_select"] != "none":
                return self.claim_by_select(user, camp, run, begin, commit, fail, in_tx)

            if in_tx and tx != "read_then_begin":
                r = begin()
                if not r.ok:
                    return fail(r)
            remain = version = None
            if s["read"] != "none":
                r = run("read", *self.read_stmt(camp))
                if not r.ok:
                    return fail(r)
                if not r.rows:
                    rollback()
                    return "error:no_row"
                remain = int(r.rows[0]["remain"])
                version = int(r.rows[0].get("version") or 0)
                if remain <= 0:
                    if a["conn"] is not None:
                        e = commit()
                        if e:
                            return e
                    return "sold_out"
                vanish_maybe()
            if tx == "read_then_begin":
                r = begin()
                if not r.ok:
                    return fail(r)

            def do_write():
                if tx == "savepoint_rollback":
                    # the app changes its mind once (a validation failed) and redoes the write
                    r0 = q("SAVEPOINT sp2")
                    if not r0.ok:
                        return fail(r0)
                    r0 = run("write", *self.write_stmt(camp, remain, version))
                    if not r0.ok:
                        return fail(r0)
                    r0 = q("ROLLBACK TO SAVEPOINT sp2")
                    if not r0.ok:
                        return fail(r0)
                r = run("write", *self.write_stmt(camp, remain, version))
                if s["write_answer"] == "ignored" and classify(r) != "lost":
                    return None  # sloppy legacy code: whatever the UPDATE said, the INSERT follows
                if not r.ok:
                    return fail(r)
                if a["conn"] is None and r.affected >= 1:
                    st["took_outside_tx"] = True  # committed at once: abandoning the claim now leaks, as directly
                if r.affected == 0:
                    if s["write"] in GUARDED_WRITES:
                        rollback()
                        return "sold_out"
                    if s["write"] in VERSION_WRITES:
                        rollback()
                        return "conflict"
                return None

            def do_claim():
                r = run("write", *self.claim_stmt(user, camp, urng))
                if not r.ok:
                    return fail(r)
                c = s["claim"]
                dup = ((c == "insert_ignore" and r.affected == 0) or (c == "insert_odku" and r.affected != 1)
                       or (c == "replace" and r.affected >= 2))
                if dup:
                    rollback()
                    return "dup"
                return None

            def do_write_and_claim():
                # one query of two statements: the server stops at the first ERR ("sold out", "already claimed")
                write_tmpl, write_params = self.write_stmt(camp, remain, version)
                claim_tmpl, claim_params = self.claim_stmt(user, camp, urng)
                r = run("write", f"{write_tmpl}; {claim_tmpl}", write_params + claim_params)
                if not r.ok:
                    return fail(r)
                if s["claim"] == "insert_ignore" and r.affected == 0:  # the last result is the INSERT's
                    rollback()
                    return "dup"
                return None

            steps = (do_write, do_claim) if s["order"] == "decrement_first" else (do_claim, do_write)
            if s["trigger"] != "none":
                steps = (do_claim,)  # the claim table's trigger decrements the stock
            elif s["carrier"] == "multi_statement":
                steps = (do_write_and_claim,)
            for i, step in enumerate(steps):
                e = step()
                if e:
                    return e
                vanish_maybe()
            if a["conn"] is not None:
                e = commit()
                if e:
                    return e
            return "got"
        except Vanished:
            release()  # a pool gets the dead connection back and reconnects it on its next use
            return "fault"

    def claim_by_select(self, user, camp, run, begin, commit, fail, in_tx):
        """grammar claim_select: the claim as INSERT ... SELECT from the stock row, then the counter recomputed
        from the claims (in a transaction after SELECT ... FOR UPDATE, or in autocommit), or (autocommit_decrement)
        decremented by the app itself."""
        stock, order, key = self.names()
        k = self.stock_key(camp)
        total = dict(self.campaigns)[camp]
        if in_tx:
            r = begin()
            if not r.ok:
                return fail(r)
            r = run("read", f"SELECT remain FROM {stock} WHERE {key} = ? FOR UPDATE", [k])
            if not r.ok:
                return fail(r)
        r = run("write", f"INSERT INTO {order} (user_id, {key}) SELECT ?, {key} FROM {stock} "
                         f"WHERE {key} = ? AND remain > 0", [str(user), k])
        if not r.ok:
            return fail(r)
        got = r.affected == 1
        if got and self.spec["claim_select"] == "autocommit_decrement":
            # its own decrement of the unit the claim took (the sidecar absorbs it: the claim took the unit)
            r = run("write", f"UPDATE {stock} SET remain = remain - 1 WHERE {key} = ?", [k])
            if not r.ok:
                return fail(r)
        elif got:
            r = run("write", f"UPDATE {stock} SET remain = ? - (SELECT COUNT(*) FROM {order} WHERE {key} = ?) "
                             f"WHERE {key} = ?", [str(total), k, k])
            if not r.ok:
                return fail(r)
        if in_tx:
            e = commit()
            if e:
                return e
        return "got" if got else "sold_out"

    def user_main(self, user, barrier):
        s = self.spec
        urng = random.Random(f"{s['user_seed']}:{user}")
        st = {"xa": 0, "xa_rolled_back": False, "took_outside_tx": False}
        try:
            barrier.wait(timeout=60)
        except threading.BrokenBarrierError:
            pass
        try:
            done = set()
            camps = [c for c, _ in self.campaigns]
            for _ in range(s["attempts"]):
                left = [c for c in camps if c not in done]
                if not left:
                    break
                camp = urng.choice(left)
                st["xa_rolled_back"] = False
                tries = 0
                clicks = 0
                holds = False
                while True:
                    st["took_outside_tx"] = False
                    kind = self.attempt(user, camp, tries, urng, st)
                    self.tell(user, camp, kind)
                    holds = holds or kind == "got"
                    if st["took_outside_tx"] and kind not in ("got", "dup", "fault", "sold_out"):
                        with self.lock:
                            self.abandoned += 1
                    if kind == "got" and s["repeat"] == "double_click" and clicks == 0:
                        clicks += 1
                        continue  # the second click; its answer is recorded too
                    if kind in ("got", "dup", "sold_out", "refused") or kind.startswith("error:"):
                        done.add(camp)
                        if holds and s["cancel"] != "none" and urng.random() < 0.4:
                            self.cancel(user, camp)
                        break
                    tries += 1
                    if tries > s["retries"]:
                        break
                    time.sleep(urng.random() * 0.02)
        except Exception as e:  # noqa: BLE001 - a harness bug: reported as such
            import traceback
            self.crashes.append(f"user {user}: {e!r}\n{traceback.format_exc()}")

    def run(self):
        self.lender = Lender(self)
        users = list(range(1, self.spec["users"] + 1))
        barrier = threading.Barrier(len(users))
        threads = [threading.Thread(target=self.user_main, args=(u, barrier), daemon=True) for u in users]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 240
        for t in threads:
            t.join(max(0.1, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            self.hangs.append("app threads still running after 240 s")
        self.lender.close_all()
        return self
