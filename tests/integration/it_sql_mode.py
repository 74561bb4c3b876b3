#!/usr/bin/env python3
"""The session's sql_mode drives how claimguard reads SQL: a real MariaDB, Redis and a claimguard sidecar.

Usage: it_sql_mode.py --claimguard PATH --work-dir DIR [unittest args]

SessionModes (a MariaDB with the default sql_mode): P11 as a regression test (SET SESSION sql_mode =
CONCAT(@@sql_mode, ',ANSI_QUOTES') then a double-quoted UPDATE of the stock: a take, not a refusal);
the question asked once per connection (the session's Com_select) and again after COM_RESET_CONNECTION;
the same UPDATE prepared and executed in the binary protocol; XA PREPARE "x" (where the server refuses a
SELECT) not asked;
NO_BACKSLASH_ESCAPES set by CONCAT (a string ends where the server ends it); a SET GLOBAL by another
client directly on the database reaches the sidecar's next connections; a PyMySQL app that sets
ANSI_QUOTES per session with CONCAT and claims concurrently on small stock through eight sidecars sells
exactly the stock.
GlobalModes (a MariaDB started with --sql-mode=...ANSI_QUOTES,NO_BACKSLASH_ESCAPES): the server's default
is read, the app's double-quoted UPDATE is a take, `"campaign_id" = "campaign_id"` (every row there)
is refused, and a backslash in a string reads as the server reads it; the same concurrent app without its
SET (the server's default has ANSI_QUOTES) through eight sidecars sells exactly the stock.
Each class runs eight sidecars (issue 19: "through 8 sidecars"); the single-connection cases use the first.
MariaDB and the coupon schema come from tests/incident/cluster.py (rules/examples/coupon.yaml).
"""

import argparse
import os
import re
import struct
import sys
import threading
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402
import itlib  # noqa: E402
import rawmysql  # noqa: E402
import servers  # noqa: E402

ER_CLAIMGUARD = 1644
SIDECARS = 8
CAMPAIGN = 77
ARGS = None
P11_UPDATE = f'UPDATE "coupon_stock" SET "remain" = 99 WHERE "campaign_id" = {CAMPAIGN}'


def unmodeled(proxy, reason=None):
    status, body = servers.http_get(proxy.admin_port, "/metrics")
    assert status == 200
    total = 0.0
    for m in re.finditer(r'^claimguard_unmodeled_total\{([^}]*)\} (\S+)$', body, re.M):
        if reason is None or f'reason="{reason}"' in m.group(1):
            total += float(m.group(2))
    return total


class Base(unittest.TestCase):
    GLOBAL_SQL_MODE = None  # mariadbd --sql-mode

    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(os.path.join(ARGS.work_dir, cls.__name__))
        cls.cluster = cluster.Cluster(cls.work)
        if cls.GLOBAL_SQL_MODE is not None:
            cls.cluster.db.extra_args.append(f"--sql-mode={cls.GLOBAL_SQL_MODE}")
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.start_redis()
            cls.proxies = cls.cluster.start_proxies(ARGS.claimguard, SIDECARS)
            cls.proxy = cls.proxies[0]
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def connect(self, sidecar=0, **kwargs):
        return pymysql.connect(host=servers.HOST, port=self.proxies[sidecar].port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               read_timeout=20, write_timeout=20, **kwargs)

    def set_stock(self, remain):
        self.cluster.reset({CAMPAIGN: remain, CAMPAIGN + 1: 50})

    def unmodeled_everywhere(self, reason=None):
        return sum(unmodeled(p, reason) for p in self.proxies)

    def claim_concurrently_exactly_the_stock(self, set_session_mode):
        """The racy legacy flow in double quotes (read, check in the app, write the literal, record), 60 users on
        12 connections spread over the eight sidecars, each connection adding ANSI_QUOTES with CONCAT first when
        `set_session_mode`: exactly the stock sold, no duplicate, every user answered OK or sold out."""
        stock, users, threads = 15, 60, 12
        self.set_stock(stock)
        outcomes = {"ok": 0, "sold_out": 0, "other": []}
        lock = threading.Lock()
        next_user = iter(range(1, users + 1))

        def worker(i):
            with self.connect(i % SIDECARS) as c, c.cursor() as cur:
                if set_session_mode:
                    cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
                while True:
                    with lock:
                        user = next(next_user, None)
                    if user is None:
                        return
                    try:
                        cur.execute(f'SELECT "remain" FROM "coupon_stock" WHERE "campaign_id" = {CAMPAIGN}')
                        remain = cur.fetchone()[0]
                        if remain <= 0:
                            with lock:
                                outcomes["sold_out"] += 1
                            continue
                        cur.execute(f'UPDATE "coupon_stock" SET "remain" = {remain - 1} '
                                    f'WHERE "campaign_id" = {CAMPAIGN}')
                        cur.execute(f'INSERT INTO "coupon_order" ("user_id", "campaign_id") '
                                    f'VALUES ({user}, {CAMPAIGN})')
                        with lock:
                            outcomes["ok"] += 1
                    except pymysql.MySQLError as e:
                        with lock:
                            if e.args[0] == ER_CLAIMGUARD and "sold out" in e.args[1]:
                                outcomes["sold_out"] += 1
                            else:
                                outcomes["other"].append(e.args)

        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        self.assertEqual(outcomes["other"], [])
        facts = self.stock()
        self.assertEqual(facts["rows"], stock)
        self.assertEqual(facts["remain"], 0)
        self.assertEqual(facts["duplicate_pairs"], 0)
        self.assertEqual(outcomes["ok"], stock)
        self.assertEqual(outcomes["ok"] + outcomes["sold_out"], users)
        self.assertEqual(self.unmodeled_everywhere("sql_mode_unknown"), 0)

    def stock(self, campaign=CAMPAIGN):
        return self.cluster.facts(campaign)


class SessionModes(Base):

    def test_p11_concat_ansi_quotes_then_double_quoted_update_is_a_take(self):
        self.set_stock(100)
        before = unmodeled(self.proxy)
        with self.connect() as c, c.cursor() as cur:
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
            self.assertEqual(cur.execute(P11_UPDATE), 1)  # was: ERR 1644 "rule coupon_stock refuses this statement"
            cur.execute(f'INSERT INTO "coupon_order" ("user_id", "campaign_id") VALUES (1, {CAMPAIGN})')
            # Back to the server's default by a non-literal SET: "coupon_stock" is a string again, and the
            # server itself refuses that UPDATE (a syntax error), as it would without claimguard.
            cur.execute("SET SESSION sql_mode = REPLACE(@@sql_mode, 'ANSI_QUOTES', '')")
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(P11_UPDATE)
            self.assertIn(ctx.exception.args[0], (ER_CLAIMGUARD, 1064))
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"]), (99, 1))
        self.assertEqual(unmodeled(self.proxy, "sql_mode_unknown"), 0)
        self.assertLessEqual(unmodeled(self.proxy) - before, 1)

    def test_question_asked_once_per_connection_and_again_after_reset(self):
        self.set_stock(100)
        with self.connect() as c, c.cursor() as cur:
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
            for remain in (99, 98, 97):
                self.assertEqual(cur.execute(P11_UPDATE.replace("= 99", f"= {remain}")), 1)
            # The session's own count of SELECTs: the one question before the first UPDATE, none after.
            cur.execute("SHOW SESSION STATUS LIKE 'Com_select'")
            self.assertEqual(int(cur.fetchone()[1]), 1)
            # COM_RESET_CONNECTION: the session's sql_mode is the server's default again (no ANSI_QUOTES),
            # so "coupon_stock" is a string again: the server would refuse it as a syntax error.
            c._execute_command(0x1f, b"")  # noqa: SLF001 - COM_RESET_CONNECTION is not in PyMySQL's API
            c._read_ok_packet()  # noqa: SLF001
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(P11_UPDATE.replace("= 99", "= 50"))
            self.assertIn(ctx.exception.args[0], (ER_CLAIMGUARD, 1064))
        self.assertEqual(self.stock()["remain"], 97)

    def test_xa_with_double_quoted_xid_then_double_quoted_strings(self):
        """The default sql_mode, where "77" is a string. XA PREPARE "cg1" comes in XA's IDLE state, where the
        server refuses any SELECT: the sql_mode is not asked for it (it means the same either way)."""
        self.set_stock(100)
        before = unmodeled(self.proxy, "sql_mode_unknown")
        with self.connect() as c, c.cursor() as cur:
            cur.execute("XA START 'cg1'")
            self.assertEqual(cur.execute(f"UPDATE coupon_stock SET remain = 99 WHERE campaign_id = {CAMPAIGN}"), 1)
            cur.execute("XA END 'cg1'")
            cur.execute('XA PREPARE "cg1"')
            cur.execute('XA COMMIT "cg1"')
            self.assertEqual(cur.execute(f'UPDATE coupon_stock SET remain = 98 WHERE campaign_id = "{CAMPAIGN}"'), 1)
        self.assertEqual(self.stock()["remain"], 98)
        self.assertEqual(unmodeled(self.proxy, "sql_mode_unknown"), before)

    def test_prepared_double_quoted_update_after_concat_is_a_take(self):
        """COM_STMT_PREPARE / COM_STMT_EXECUTE (binary protocol): the mode is asked before the prepare."""
        self.set_stock(100)
        c = rawmysql.RawClient(servers.HOST, self.proxy.port)
        try:
            c.login(cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE)
            reply = c.query("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
            self.assertEqual(reply[-1][:1], b"\x00", rawmysql.describe(reply[-1]))
            c.send_packet(0, b"\x16" + b'UPDATE "coupon_stock" SET "remain" = ? WHERE "campaign_id" = ?')
            _, ok = c.read_packet()
            self.assertEqual(ok[:1], b"\x00", rawmysql.describe(ok))  # was: ERR 1644 at prepare time
            statement_id, columns, params = struct.unpack("<IHH", ok[1:9])
            self.assertEqual((columns, params), (0, 2))
            for _ in range(params + 1):  # the parameters' definitions, then EOF
                c.read_packet()
            execute = struct.pack("<BIBI", 0x17, statement_id, 0, 1) + b"\x00\x01"  # null bitmap, types bound
            execute += struct.pack("<BBBB", 8, 0, 8, 0) + struct.pack("<qq", 99, CAMPAIGN)  # two LONGLONGs
            c.send_packet(0, execute)
            _, reply = c.read_packet()
            self.assertEqual(reply[:2], b"\x00\x01", rawmysql.describe(reply))  # OK, 1 row
        finally:
            c.close()
        self.assertEqual(self.stock()["remain"], 99)

    def test_no_backslash_escapes_set_by_concat_reads_strings_as_the_server(self):
        self.set_stock(100)
        with self.connect() as c, c.cursor() as cur:
            cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            # With NO_BACKSLASH_ESCAPES 'a\' is a whole string: a literal comparison (MyBatis' 1=1), then a take.
            self.assertEqual(cur.execute(
                f"UPDATE coupon_stock SET remain = 99 WHERE campaign_id = {CAMPAIGN} AND 'a\\' = 'a\\'"), 1)
            # ... and here the string ends before OR: not ours (OR), so refused, and nothing written. Read
            # with backslash escapes, the OR would have been inside a string.
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"UPDATE coupon_stock SET remain = 1 WHERE campaign_id = {CAMPAIGN} "
                            f"AND 'x\\' = 'x\\' OR campaign_id = {CAMPAIGN + 1}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.stock()["remain"], 99)
        self.assertEqual(self.stock(CAMPAIGN + 1)["remain"], 50)

    def test_set_global_by_another_client_reaches_the_next_connections(self):
        self.set_stock(100)
        try:
            # Directly on the database, not through the sidecar.
            self.cluster.sql("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',ANSI_QUOTES')")
            with self.connect() as c, c.cursor() as cur:
                self.assertEqual(cur.execute(P11_UPDATE), 1)
                # The column compared with itself: every row. Refused, never a take on key 'campaign_id'.
                with self.assertRaises(pymysql.MySQLError) as ctx:
                    cur.execute('UPDATE coupon_stock SET remain = 5 WHERE "campaign_id" = "campaign_id"')
                self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        finally:
            self.cluster.sql("SET GLOBAL sql_mode = REPLACE(@@GLOBAL.sql_mode, 'ANSI_QUOTES', '')")
        self.assertEqual(self.stock()["remain"], 99)
        self.assertEqual(self.stock(CAMPAIGN + 1)["remain"], 50)

    def test_app_sets_ansi_quotes_by_concat_and_claims_concurrently_exactly_the_stock(self):
        self.claim_concurrently_exactly_the_stock(set_session_mode=True)


class GlobalModes(Base):
    GLOBAL_SQL_MODE = "STRICT_TRANS_TABLES,ANSI_QUOTES,NO_BACKSLASH_ESCAPES"

    def test_server_default_ansi_quotes_double_quoted_update_is_a_take(self):
        self.set_stock(100)
        with self.connect() as c, c.cursor() as cur:
            self.assertEqual(cur.execute(P11_UPDATE), 1)
            cur.execute(f'INSERT INTO "coupon_order" ("user_id", "campaign_id") VALUES (3, {CAMPAIGN})')
            with self.assertRaises(pymysql.MySQLError) as ctx:  # one claim per user
                cur.execute(f'INSERT INTO "coupon_order" ("user_id", "campaign_id") VALUES (3, {CAMPAIGN})')
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"]), (99, 1))

    def test_app_on_the_server_default_claims_concurrently_exactly_the_stock(self):
        self.claim_concurrently_exactly_the_stock(set_session_mode=False)

    def test_server_default_column_compared_with_itself_is_refused(self):
        self.set_stock(100)
        with self.connect() as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute('UPDATE "coupon_stock" SET "remain" = 5 WHERE "campaign_id" = "campaign_id"')
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.stock()["remain"], 100)
        self.assertEqual(self.stock(CAMPAIGN + 1)["remain"], 50)

    def test_server_default_no_backslash_escapes(self):
        self.set_stock(100)
        with self.connect() as c, c.cursor() as cur:
            self.assertEqual(cur.execute(
                f"UPDATE \"coupon_stock\" SET remain = 99 WHERE campaign_id = {CAMPAIGN} AND 'a\\' = 'a\\'"), 1)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"UPDATE coupon_stock SET remain = 1 WHERE campaign_id = {CAMPAIGN} "
                            f"AND 'x\\' = 'x\\' OR campaign_id = {CAMPAIGN + 1}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.stock()["remain"], 99)
        self.assertEqual(self.stock(CAMPAIGN + 1)["remain"], 50)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
