#!/usr/bin/env python3
"""Batches through claimguard sidecars, a real MariaDB + Redis and PyMySQL.

Usage: it_batches.py --claimguard PATH --work-dir DIR [unittest args]

A claim INSERT of several rows (Connector/J rewriteBatchedStatements, PyMySQL executemany) is one claim
per row: each row uses its own take, a duplicate fails the statement as a whole and gives every row's
unit back, INSERT IGNORE gives back the rows it skipped, and the app gets the server's own affected rows.
Reproducer P13: `INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1), (2, 1)` was refused
(multi_row_insert). Concurrent users on small stock through two sidecars claim exactly the stock. A prepared claim
INSERT executed as COM_STMT_BULK_EXECUTE (MariaDB's array binding: Connector/J useBulkStmts, Connector/C
STMT_ATTR_ARRAY_SIZE) is the same claim of several rows, one per row of values (it was refused: bulk_execute).
MariaDB and the coupon schema come from tests/incident/cluster.py (rules/examples/coupon.yaml).
"""

import argparse
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import unittest

import pymysql
from pymysql.constants import CLIENT, COMMAND

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402
import itlib  # noqa: E402
import servers  # noqa: E402

ER_CLAIMGUARD = 1644
CAMPAIGN = 77
ARGS = None


class Cluster(unittest.TestCase):
    """One MariaDB, Redis and SIDECARS sidecars for the cases of a class."""

    SIDECARS = 2

    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work)
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.start_redis()
            cls.proxies = cls.cluster.start_proxies(ARGS.claimguard, cls.SIDECARS)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def refusals(self):
        """claimguard_unmodeled_total over both sidecars."""
        total = 0.0
        for proxy in self.proxies:
            status, body = servers.http_get(proxy.admin_port, "/metrics")
            self.assertEqual(status, 200)
            total += sum(float(m.group(1)) for m in re.finditer(r"^claimguard_unmodeled_total\{[^}]*\} (\S+)$", body, re.M))
        return total

    def connect(self, sidecar=0, **kwargs):
        options = dict(host=servers.HOST, port=self.proxies[sidecar].port, user=cluster.APP_USER,
                       password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                       read_timeout=30, write_timeout=30)
        options.update(kwargs)
        return pymysql.connect(**options)


class Batches(Cluster):
    """A claim INSERT of several rows: one claim per row. Eight sidecars (issue 19: "through 8 sidecars"): the
    concurrent users spread over all of them."""

    SIDECARS = 8

    def redis_key(self, user, campaign):
        """EXISTS of a claim's Redis key (the rule has no schema: the key names the database)."""
        return self.cluster.redis.command("EXISTS", f"lock:coupon:{user}:{campaign}:{cluster.DATABASE}")

    def take(self, cur, campaign=CAMPAIGN, times=1):
        for _ in range(times):
            self.assertEqual(cur.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {campaign}"),
                             1)

    def test_p13_multi_row_claim_insert(self):
        self.cluster.reset({CAMPAIGN: 10})
        with self.connect() as c, c.cursor() as cur:
            self.take(cur, times=2)
            rows = cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN}), (2, {CAMPAIGN})")
            self.assertEqual(rows, 2)  # the server's own affected rows
            self.assertGreater(cur.lastrowid, 0)  # and its insert id
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"], facts["users"]), (8, 2, [1, 2]))
        # The Redis first filter, row by row: both rows' keys are marked committed.
        self.assertEqual([self.redis_key(user, CAMPAIGN) for user in (1, 2, 3)], [":1", ":1", ":0"])

    def test_rows_of_two_campaigns(self):
        self.cluster.reset({CAMPAIGN: 5, CAMPAIGN + 1: 5})
        with self.connect() as c, c.cursor() as cur:
            self.take(cur, CAMPAIGN)
            self.take(cur, CAMPAIGN + 1, times=2)
            rows = cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES "
                               f"(1, {CAMPAIGN + 1}), (1, {CAMPAIGN}), (2, {CAMPAIGN + 1})")
            self.assertEqual(rows, 3)
        self.assertEqual((self.cluster.facts(CAMPAIGN)["rows"], self.cluster.facts(CAMPAIGN)["remain"]), (1, 4))
        self.assertEqual((self.cluster.facts(CAMPAIGN + 1)["rows"], self.cluster.facts(CAMPAIGN + 1)["remain"]), (2, 3))

    def test_a_row_without_its_take_is_refused_and_the_take_waits(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.connect() as c, c.cursor() as cur:
            self.take(cur)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN}), (2, {CAMPAIGN})")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("sold out", ctx.exception.args[1])
            self.assertEqual(cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})"), 1)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (4, 1))

    def test_duplicate_row_fails_the_statement_and_every_unit_goes_back(self):
        self.cluster.reset({CAMPAIGN: 5, CAMPAIGN + 1: 5})
        with self.connect() as c, c.cursor() as cur:
            self.take(cur)
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (2, {CAMPAIGN})")
            self.take(cur, CAMPAIGN, times=2)
            self.take(cur, CAMPAIGN + 1)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES "
                            f"(1, {CAMPAIGN}), (1, {CAMPAIGN + 1}), (2, {CAMPAIGN})")
            self.assertEqual(ctx.exception.args, (ER_CLAIMGUARD, "claimguard: already claimed"))
        self.assertEqual((self.cluster.facts(CAMPAIGN)["rows"], self.cluster.facts(CAMPAIGN)["remain"]), (1, 4))
        # Redis knew user 2's claim: the statement never reached the database, and the keys the other rows
        # took went before the answer (a retry without the duplicate row is not told "already claimed").
        self.assertEqual([self.redis_key(1, CAMPAIGN), self.redis_key(1, CAMPAIGN + 1)], [":0", ":0"])
        self.assertEqual((self.cluster.facts(CAMPAIGN + 1)["rows"], self.cluster.facts(CAMPAIGN + 1)["remain"]), (0, 5))

    def test_insert_ignore_gives_back_the_skipped_rows(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.connect() as c, c.cursor() as cur:
            self.take(cur)
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (2, {CAMPAIGN})")
            self.take(cur, times=3)
            rows = cur.execute("INSERT IGNORE INTO coupon_order (user_id, campaign_id) VALUES "
                               f"(1, {CAMPAIGN}), (2, {CAMPAIGN}), (3, {CAMPAIGN})")
            self.assertEqual(rows, 2)  # what the server says: the rows that went in
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"], facts["users"]), (2, 3, [1, 2, 3]))

    def test_rows_in_a_transaction(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.connect() as c, c.cursor() as cur:
            cur.execute("START TRANSACTION")
            self.take(cur, times=2)
            self.assertEqual(cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES "
                                         f"(1, {CAMPAIGN}), (2, {CAMPAIGN})"), 2)
            cur.execute("COMMIT")
            # A duplicate inside a transaction: the statement fails, its units go back in the transaction.
            cur.execute("START TRANSACTION")
            self.take(cur, times=2)
            with self.assertRaises(pymysql.MySQLError):
                cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (3, {CAMPAIGN}), (1, {CAMPAIGN})")
            cur.execute("COMMIT")
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (3, 2))

    def test_executemany_concurrent_users_claim_exactly_the_stock(self):
        """Users read, write the stale literal (remain - 1) per campaign and record their orders with
        executemany (one multi-row INSERT); each tries twice. Through eight sidecars: exactly the stock."""
        stock = {CAMPAIGN: 12, CAMPAIGN + 1: 7}
        self.cluster.reset(stock)
        errors = []

        def user(uid, attempts):
            try:
                with self.connect(uid % self.SIDECARS) as c, c.cursor() as cur:
                    for _ in range(attempts):
                        got = []
                        for campaign in stock:
                            cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {campaign}")
                            remain = cur.fetchone()[0]
                            if remain <= 0:
                                continue
                            try:
                                cur.execute(f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {campaign}")
                                got.append(campaign)
                            except pymysql.MySQLError as err:
                                if err.args[0] != ER_CLAIMGUARD:
                                    raise
                        if not got:
                            continue
                        try:
                            n = cur.executemany("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)",
                                                [(uid, campaign) for campaign in got])
                            if n != len(got):
                                errors.append(f"user {uid}: {n} rows for {len(got)}")
                        except pymysql.MySQLError as err:
                            if err.args[0] != ER_CLAIMGUARD:
                                raise
            except Exception as err:  # noqa: BLE001 - reported by the test
                errors.append(f"user {uid}: {err!r}")

        threads = [threading.Thread(target=user, args=(uid, 2)) for uid in range(1, 41)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        # Units given back by duplicates are claimable: new users sweep until sold out.
        user(1000, 1)
        for uid in range(1001, 1030):
            user(uid, 1)
        self.assertEqual(errors, [])
        for campaign, units in stock.items():
            facts = self.cluster.facts(campaign)
            self.assertEqual(facts["duplicate_pairs"], 0, campaign)
            self.assertEqual((facts["rows"], facts["remain"]), (units, 0), campaign)
        self.assertEqual(self.refusals(), 0)


class SeveralStatements(Cluster):
    """A query of several statements (CLIENT_MULTI_STATEMENTS: MyBatis <foreach> with allowMultiQueries):
    split at the `;`s and each statement decided in order; one result per statement; the server's stop
    at the first error. Was refused as several_statements: 0 sold. Eight sidecars: the concurrent users spread
    over all of them."""

    SIDECARS = 8

    def multi(self, sidecar=0):
        return self.connect(sidecar, client_flag=CLIENT.MULTI_STATEMENTS)

    def results(self, cur, sql):
        """Each statement's result: its rows, or its affected rows; the error that stopped the run, if any."""
        out = []
        try:
            cur.execute(sql)
            while True:
                out.append(list(cur.fetchall()) if cur.description else cur.rowcount)
                if not cur.nextset():
                    break
        except pymysql.MySQLError as err:
            out.append(err.args)
        return out

    def test_update_then_insert(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.multi() as c, c.cursor() as cur:
            got = self.results(cur, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}; "
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})")
            self.assertEqual(got, [1, 1])
            # The session goes on in step: a read, the stale literal, the claim, in one query.
            got = self.results(cur, f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};"
                                    f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN};"
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (2, {CAMPAIGN});")
            self.assertEqual(got, [[(4,)], 1, 1])
            self.assertEqual(c.server_status & 0x0008, 0)  # the last result says no more follow
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (3, 2))

    def test_sold_out_stops_the_run(self):
        self.cluster.reset({CAMPAIGN: 0})
        with self.multi() as c, c.cursor() as cur:
            got = self.results(cur, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}; "
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})")
            self.assertEqual(got, [(ER_CLAIMGUARD, "claimguard: coupon_stock is sold out for this key")])
            self.assertEqual(self.results(cur, "SELECT 1; SELECT 2"), [[(1,)], [(2,)]])  # still in step
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (0, 0))

    def test_duplicate_after_the_take_gives_the_unit_back(self):
        self.cluster.reset({CAMPAIGN: 5})
        sql = (f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}; "
               f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN}); SELECT 'after'")
        with self.multi() as c, c.cursor() as cur:
            self.assertEqual(self.results(cur, sql), [1, 1, [("after",)]])
            self.assertEqual(self.results(cur, sql), [1, (ER_CLAIMGUARD, "claimguard: already claimed")])
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (4, 1))

    def test_transaction_in_one_query(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.multi() as c, c.cursor() as cur:
            got = self.results(cur, f"START TRANSACTION; UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = "
                                    f"{CAMPAIGN}; INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN}), "
                                    f"(2, {CAMPAIGN}); COMMIT")
            # One decrement for two claim rows: in a transaction the rows go in ahead of their decrements,
            # and the COMMIT, with one row still without one, becomes a ROLLBACK.
            self.assertEqual(got[:3], [0, 1, 2])
            self.assertEqual(got[3][0], ER_CLAIMGUARD, got)
            self.assertEqual(len(got), 4)
            self.assertEqual(self.cluster.facts(CAMPAIGN)["rows"], 0)
            got = self.results(cur, f"BEGIN; UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = {CAMPAIGN}; "
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN}); "
                                    f"UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = {CAMPAIGN}; COMMIT")
            self.assertEqual(len(got), 5, got)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (4, 1))

    def test_without_multi_statements_the_server_refuses_the_text(self):
        self.cluster.reset({CAMPAIGN: 5})
        with self.connect() as c, c.cursor() as cur:
            got = self.results(cur, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}; "
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})")
            self.assertEqual(got[0][0], 1064)  # the server's syntax error, as directly
        self.assertEqual(self.cluster.facts(CAMPAIGN)["remain"], 5)

    def test_same_results_as_directly(self):
        """A correct app's query of several statements: what it sees through the sidecar is what it sees
        directly (results, affected rows, insert ids, warnings, status flags)."""
        sql = (f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}; "
               f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN} AND remain >= 1; "
               f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (7, {CAMPAIGN}); "
               "SELECT 1 + 'x'; SET @a = 1; SELECT @a")

        def seen(port):
            self.cluster.reset({CAMPAIGN: 5})
            conn = pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                                   database=cluster.DATABASE, autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)
            out = []
            with conn, conn.cursor() as cur:
                cur.execute(sql)
                while True:
                    result = cur._result  # noqa: SLF001 - what the OK or EOF said
                    out.append((cur.description and [d[0] for d in cur.description], cur.fetchall(), cur.rowcount,
                                result.warning_count, result.server_status, bool(result.insert_id)))
                    if not cur.nextset():
                        break
            return out

        direct = seen(self.cluster.db.port)
        self.assertEqual(len(direct), 6)
        self.assertEqual(seen(self.proxies[0].port), direct)

    def test_set_option_turns_splitting_on(self):
        """COM_SET_OPTION (mysql_set_server_option) enables several statements after the handshake."""
        self.cluster.reset({CAMPAIGN: 5})
        with self.connect() as c, c.cursor() as cur:
            c._execute_command(COMMAND.COM_SET_OPTION, struct.pack("<H", 0))  # noqa: SLF001 - MULTI_STATEMENTS_ON
            c._read_packet()  # noqa: SLF001 - the server's EOF
            got = self.results(cur, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}; "
                                    f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})")
            self.assertEqual(got, [1, 1])
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["rows"]), (4, 1))

    def test_concurrent_users_claim_exactly_the_stock(self):
        stock = 9
        self.cluster.reset({CAMPAIGN: stock})
        errors = []

        def user(uid, attempts):
            try:
                with self.multi(uid % self.SIDECARS) as c, c.cursor() as cur:
                    for _ in range(attempts):
                        got = self.results(cur, f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = "
                                                f"{CAMPAIGN}; INSERT INTO coupon_order (user_id, campaign_id) VALUES "
                                                f"({uid}, {CAMPAIGN})")
                        if got not in ([1, 1], [(ER_CLAIMGUARD, "claimguard: coupon_stock is sold out for this key")],
                                       [1, (ER_CLAIMGUARD, "claimguard: already claimed")]):
                            errors.append(f"user {uid}: {got}")
            except Exception as err:  # noqa: BLE001 - reported by the test
                errors.append(f"user {uid}: {err!r}")

        threads = [threading.Thread(target=user, args=(uid, 2)) for uid in range(1, 31)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for uid in range(100, 110):
            user(uid, 1)
        self.assertEqual(errors, [])
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["rows"], facts["remain"], facts["duplicate_pairs"]), (stock, 0, 0))
        self.assertEqual(self.refusals(), 0)


class ConnectorJ(Cluster):
    """The claim flow with MariaDB Connector/J batches (Debian's libmariadb-java), concurrent users through
    two sidecars on small stock: exactly the stock claimed, no duplicates, nothing leaked."""

    SOURCE = os.path.join(HERE, "jdbc", "ClaimBatches.java")

    @classmethod
    def setUpClass(cls):
        jars = sorted(glob.glob("/usr/share/java/mariadb-java-client-*.jar"))
        if not (jars and shutil.which("javac") and shutil.which("java")):
            raise unittest.SkipTest("needs javac, java and /usr/share/java/mariadb-java-client-*.jar")
        super().setUpClass()
        cls.jar = jars[-1]
        cls.classes = os.path.join(cls.work, "classes")
        os.makedirs(cls.classes, exist_ok=True)
        subprocess.run(["javac", "--release", "17", "-cp", cls.jar, "-d", cls.classes, cls.SOURCE], check=True,
                       timeout=180)

    def app(self, mode, users, campaigns=(CAMPAIGN, CAMPAIGN + 1)):
        cmd = ["java", "-cp", os.pathsep.join([self.classes, self.jar]), "ClaimBatches", mode, servers.HOST,
               str(self.proxies[0].port), str(self.proxies[1].port), cluster.APP_USER, cluster.APP_PASSWORD,
               cluster.DATABASE, str(campaigns[0]), str(campaigns[1]), str(users)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
        return done.returncode, done.stdout + done.stderr

    def assert_sold_exactly(self, stock, refusals_before):
        # No batch was refused (the app takes every 1644 for sold out or already claimed).
        self.assertEqual(self.refusals(), refusals_before)
        for campaign, units in stock.items():
            facts = self.cluster.facts(campaign)
            self.assertEqual(facts["duplicate_pairs"], 0, campaign)
            self.assertEqual((facts["rows"], facts["remain"]), (units, 0), campaign)

    def test_rewrite_batched_statements(self):
        """rewriteBatchedStatements=true: the order rows of a batch as one multi-row INSERT (was: 148 of 149
        batches refused, multi_row_insert)."""
        stock = {CAMPAIGN: 11, CAMPAIGN + 1: 6}
        self.cluster.reset(stock)
        before = self.refusals()
        code, out = self.app("rewrite", 30)
        self.assertEqual(code, 0, out)
        code, out = self.app("rewrite", 20)  # users 1..20 again: their duplicates give their units back
        self.assertEqual(code, 0, out)
        code, out = self.app_sweep()
        self.assertEqual(code, 0, out)
        self.assert_sold_exactly(stock, before)

    def app_sweep(self):
        """Users the race did not have: they claim what duplicates gave back, until sold out."""
        rc, out = 0, ""
        with self.connect() as c, c.cursor() as cur:
            for uid in range(500, 540):
                for campaign in (CAMPAIGN, CAMPAIGN + 1):
                    try:
                        cur.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {campaign}")
                        cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({uid}, {campaign})")
                    except pymysql.MySQLError as err:
                        if err.args[0] != ER_CLAIMGUARD:
                            rc, out = 1, repr(err)
        return rc, out

    def test_allow_multi_queries(self):
        """allowMultiQueries=true: UPDATE ...; INSERT ... in one query (was: every attempt refused, 0 sold)."""
        stock = {CAMPAIGN: 8, CAMPAIGN + 1: 5}
        self.cluster.reset(stock)
        before = self.refusals()
        code, out = self.app("multi", 30)
        self.assertEqual(code, 0, out)
        code, out = self.app_sweep()
        self.assertEqual(code, 0, out)
        self.assert_sold_exactly(stock, before)

    def bulk_commands(self):
        """COM_STMT_BULK_EXECUTE commands both sidecars received."""
        total = 0.0
        for proxy in self.proxies:
            status, body = servers.http_get(proxy.admin_port, "/metrics")
            self.assertEqual(status, 200)
            total += sum(float(m.group(1)) for m in
                         re.finditer(r'^claimguard_commands_total\{command="stmt_bulk_execute"\} (\S+)$', body, re.M))
        return total

    def test_bulk_stmts(self):
        """useBulkStmts=true: the order rows of a batch as one COM_STMT_BULK_EXECUTE, one claim per row (was:
        every bulk refused, bulk_execute)."""
        stock = {CAMPAIGN: 11, CAMPAIGN + 1: 6}
        self.cluster.reset(stock)
        before, bulks = self.refusals(), self.bulk_commands()
        code, out = self.app("bulk", 30)
        self.assertEqual(code, 0, out)
        code, out = self.app("bulk", 20)  # users 1..20 again: their duplicates give their units back
        self.assertEqual(code, 0, out)
        self.assertGreater(self.bulk_commands(), bulks)  # the batches did come as bulks
        code, out = self.app_sweep()
        self.assertEqual(code, 0, out)
        self.assert_sold_exactly(stock, before)

    def test_bulk_duplicate_row_gives_units_back(self):
        """A bulk with a row already claimed: the plain INSERT fails whole on the server (ERR 1062: none of its rows
        stays, measured), so every row's unit goes back and the app hears "already claimed"; under IGNORE the server
        skips that row (here one Redis holds) and only its unit goes back."""
        self.cluster.reset({CAMPAIGN: 10, CAMPAIGN + 1: 10})
        # user 903's order written past the sidecar: in the database, not in Redis
        self.cluster.sql(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (903, {CAMPAIGN})")
        before, bulks = self.refusals(), self.bulk_commands()
        code, out = self.app("bulkdup", 1)
        self.assertEqual(code, 0, out)
        self.assertGreaterEqual(self.bulk_commands(), bulks + 2, out)
        self.assertIn("INSERT: 1644", out)
        self.assertIn("already claimed", out)
        self.assertIn("INSERT IGNORE: [", out)
        facts = self.cluster.facts(CAMPAIGN)
        # 903 (no unit), 900's claim, then 901 and 902 under IGNORE: 3 units taken for 3 claims, none leaked
        self.assertEqual((facts["users"], facts["remain"], facts["duplicate_pairs"]), ([900, 901, 902, 903], 7, 0), out)
        self.assertEqual(self.refusals(), before)

    def test_bulk_of_stock_writes_refusal_says_what_to_do(self):
        """A bulk of stock decrements stays refused (bulk_execute), with what to send instead."""
        self.cluster.reset({CAMPAIGN: 5, CAMPAIGN + 1: 5})
        before = self.refusals()
        code, out = self.app("bulkstock", 1)
        self.assertEqual(code, 0, out)
        self.assertIn("bulk: 1644", out)
        self.assertIn("rewriteBatchedStatements=true", out)
        self.assertEqual(self.refusals(), before + 1)
        self.assertEqual((self.cluster.facts(CAMPAIGN)["remain"], self.cluster.facts(CAMPAIGN + 1)["remain"]), (5, 5))


class ConnectorC(Cluster):
    """A claim INSERT with MariaDB Connector/C array binding (STMT_ATTR_ARRAY_SIZE: COM_STMT_BULK_EXECUTE), through
    eight sidecars (issue 19: "through 8 sidecars"; PyMySQL and MySQLdb cannot send a bulk)."""

    SIDECARS = 8

    SOURCE = os.path.join(HERE, "capi", "claim_bulk.c")

    @classmethod
    def setUpClass(cls):
        if not (shutil.which("cc") and shutil.which("pkg-config")):
            raise unittest.SkipTest("needs cc and pkg-config")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmariadb"], capture_output=True, text=True,
                               check=False)
        if flags.returncode != 0:
            raise unittest.SkipTest("needs libmariadb (pkg-config libmariadb)")
        super().setUpClass()
        cls.program = os.path.join(cls.work, "claim_bulk")
        subprocess.run(["cc", "-o", cls.program, cls.SOURCE] + flags.stdout.split(), check=True, timeout=120)

    def app(self, first_user, sidecar=0):
        cmd = [self.program, servers.HOST, str(self.proxies[sidecar].port), cluster.APP_USER, cluster.APP_PASSWORD,
               cluster.DATABASE, str(CAMPAIGN), str(first_user)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        return done.returncode, done.stdout + done.stderr

    def test_bulk_without_takes_then_with_them(self):
        """No take behind the rows: the exhausted answer, nothing sent. After two takes the same bulk (without
        its types: libmariadb sent them with the first one only) goes in, each row with its take."""
        self.cluster.reset({CAMPAIGN: 5})
        before = self.refusals()
        code, out = self.app(20)
        self.assertEqual(code, 0, out)
        self.assertIn("before the takes: 1 1644 claimguard: coupon_stock is sold out for this key", out)
        self.assertIn("after the takes: 0 0  affected=2", out)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["users"], facts["remain"]), ([20, 21], 3), out)
        self.assertEqual(self.refusals(), before)

    def test_bulk_of_16_mib_is_refused_not_forwarded_unread(self):
        """A bulk in a packet of 16 MiB or more is not read for its rows: the rule's unmodeled policy (refuse), as for
        an execute that large (it was forwarded unread)."""
        self.cluster.reset({CAMPAIGN: 5})
        before = self.refusals()
        code, out = self.app("large")
        self.assertEqual(code, 0, out)
        self.assertIn("large: 1 1644", out)
        self.assertIn("16 MiB", out)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["rows"], 0, out)
        self.assertEqual(self.refusals(), before + 1)

    def test_concurrent_users_claim_exactly_the_stock(self):
        """Users on all eight sidecars at once on small stock, each a bulk of two orders around two takes: never more
        orders than units taken, no duplicates; a user left with one take gets the exhausted answer for its bulk
        and that unit waits in its sidecar's ledger, where claims without a take of their own then use it."""
        stock = 9
        self.cluster.reset({CAMPAIGN: stock})
        before = self.refusals()
        results = [None] * 2 * self.SIDECARS

        def run(i):
            results[i] = self.app(100 + 2 * i, sidecar=i % self.SIDECARS)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for code, out in results:
            self.assertEqual(code, 0, out)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["remain"], facts["duplicate_pairs"]), (0, 0))
        self.assertLessEqual(facts["rows"], stock)
        # The waiting units: one-row claims without a take of their own, on each sidecar until sold out.
        for sidecar in range(self.SIDECARS):
            with self.connect(sidecar) as c, c.cursor() as cur:
                for uid in range(600 + 20 * sidecar, 620 + 20 * sidecar):
                    try:
                        cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({uid}, {CAMPAIGN})")
                    except pymysql.MySQLError as err:
                        self.assertEqual(err.args[0], ER_CLAIMGUARD, err)
                        break
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((facts["rows"], facts["remain"], facts["duplicate_pairs"]), (stock, 0, 0))
        self.assertEqual(self.refusals(), before)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
