#!/usr/bin/env python3
"""Claims by INSERT ... SELECT from the stock row, and the counter recomputed from the claims after them,
through running claimguards, MariaDB and Redis (issue 19, "Refuse less": its last row).

Usage: it_insert_select.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB with the incident's schema and unique index (tests/incident/cluster.py), one Redis, eight
claimguards with the example rules (issue 19: "through 8 sidecars"). The app, as its users write it with
PyMySQL, a connection per user:

    INSERT INTO coupon_order (user_id, campaign_id)
        SELECT <user>, campaign_id FROM coupon_stock WHERE campaign_id = 1 AND remain > 0
    -- if a row went in:
    UPDATE coupon_stock SET remain = <stock> - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = 1)
        WHERE campaign_id = 1

- racy (autocommit, some bookkeeping between the two): directly two users both see remain > 0 and both
  insert (more claims than stock); through the eight, exactly the stock, remain 0, no duplicates, no leak;
- racy and keeping the counter itself (the claim, then remain = remain - 1): the same, each decrement
  absorbed (the claim's own take paid for the unit);
- correct (in a transaction after SELECT ... FOR UPDATE of the stock row): through the eight the same
  claims and remain as directly (exactly the stock).
60 users on 24 threads, stock 15, each user trying twice. Every sidecar served users of its own, and each
recompute after a claim was absorbed (claimguard_absorbed_recomputes_total).
Shapes whose meaning is not certain stay refused with the advice: an INSERT ... SELECT without the stock
key, a recompute with no claim of the connection in front of it.
"""

import argparse
import concurrent.futures
import os
import shutil
import sys
import threading
import time
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py: MariaDB + the coupon schema)
import itlib  # noqa: E402
import servers  # noqa: E402

CLIENT_TIMEOUT_S = 20
ER_CLAIMGUARD = 1644  # claimguard's refusal and "already claimed"
ER_DUP_ENTRY = 1062   # directly: the unique index
CAMPAIGN = 1
STOCK = 15
USERS = 60
THREADS = 24
SIDECARS = 8
BOOKKEEPING_S = 0.2  # what the racy app does between its claim and its recompute (a mail, a cache, a log)
ARGS = None

CLAIM = ("INSERT INTO coupon_order (user_id, campaign_id) SELECT %s, campaign_id FROM coupon_stock "
         "WHERE campaign_id = %s AND remain > 0")
DECREMENT = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s"
RECOMPUTE = ("UPDATE coupon_stock SET remain = %s - (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = %s) "
             "WHERE campaign_id = %s")


class InsertSelect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.start_redis()
        cls.proxies = cls.cluster.start_proxies(ARGS.claimguard, SIDECARS)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"  {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f}s", file=sys.stderr)

    def connect(self, port):
        return pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                               database=cluster.DATABASE, autocommit=True, connect_timeout=CLIENT_TIMEOUT_S,
                               read_timeout=CLIENT_TIMEOUT_S)

    def facts(self):
        return self.cluster.facts(CAMPAIGN)

    @staticmethod
    def racy(cur, user):
        """The racy app: the claim, some bookkeeping, the recompute. True when a row went in."""
        if cur.execute(CLAIM, (user, CAMPAIGN)) != 1:
            return False
        time.sleep(BOOKKEEPING_S)
        cur.execute(RECOMPUTE, (STOCK, CAMPAIGN, CAMPAIGN))
        return True

    @staticmethod
    def racy_decrementing(cur, user):
        """The racy app that keeps the counter itself: the claim, some bookkeeping, remain = remain - 1."""
        if cur.execute(CLAIM, (user, CAMPAIGN)) != 1:
            return False
        time.sleep(BOOKKEEPING_S)
        cur.execute(DECREMENT, (CAMPAIGN,))
        return True

    @staticmethod
    def correct(cur, user):
        """The correct app: the stock row locked first, claim and recompute in one transaction."""
        cur.execute("BEGIN")
        try:
            cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = %s FOR UPDATE", (CAMPAIGN,))
            inserted = cur.execute(CLAIM, (user, CAMPAIGN)) == 1
            if inserted:
                cur.execute(RECOMPUTE, (STOCK, CAMPAIGN, CAMPAIGN))
            cur.execute("COMMIT")
            return inserted
        except pymysql.err.MySQLError:
            cur.connection.rollback()
            raise

    def run_users(self, ports, app):
        """USERS users on THREADS threads, each on its own connection, trying twice. Returns {user: [answer of
        try 1, answer of try 2]}: True (a row went in), False (no row: 0 rows inserted), or the error."""
        answers, errors = {}, []
        lock = threading.Lock()
        # The first THREADS users start together once connected, as a flash sale's opening second does.
        connected, go = [0], threading.Event()

        def attempt(cur, u):
            try:
                return app(cur, u)
            except pymysql.err.MySQLError as e:
                return (e.args[0], e.args[1])

        def user(u):
            try:
                with self.connect(ports[u % len(ports)]) as c, c.cursor() as cur:
                    with lock:
                        connected[0] += 1
                        if connected[0] >= THREADS:
                            go.set()
                    go.wait(CLIENT_TIMEOUT_S)
                    got = [attempt(cur, u) for _ in range(2)]
                with lock:
                    answers[u] = got
            except Exception as e:  # noqa: BLE001  (reported below with the user)
                with lock:
                    errors.append(f"user {u}: {e!r}")

        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(user, range(1, USERS + 1)))
        self.assertEqual(errors, [])
        return answers

    def spread(self):
        """Per sidecar: (client connections it accepted, recomputes it absorbed)."""
        return [(itlib.metric(p.admin_port, "claimguard_client_connections_accepted_total"),
                 itlib.metric(p.admin_port, "claimguard_absorbed_recomputes_total", {"rule": "coupon_stock"}))
                for p in self.proxies]

    def assert_exact(self, answers, what):
        f = self.facts()
        self.assertEqual(f["duplicate_pairs"], 0, (what, f))
        self.assertEqual(f["rows"], min(STOCK, USERS), (what, f))  # no over-issue, every coupon claimed
        self.assertEqual(f["rows"] + f["remain"], STOCK, (what, f))  # no leak
        claimed = sorted(u for u, got in answers.items() if True in got)
        self.assertEqual(claimed, f["users"], what)  # a row to the app is a row in the table, and only then
        for u, got in answers.items():
            self.assertLessEqual(got.count(True), 1, (what, u, got))
            for a in got:  # a row, no row (sold out: the server's 0 rows), or "already claimed"
                self.assertTrue(a is True or a is False or a[0] == ER_CLAIMGUARD, (what, u, got))
                if isinstance(a, tuple):
                    self.assertIn("already claimed", a[1], (what, u, got))
        return f

    def test_1_racy_app_sells_exactly_the_stock(self):
        self.cluster.reset({CAMPAIGN: STOCK})
        self.run_users([self.cluster.db.port], self.racy)
        direct = self.facts()
        # Directly two users both see remain > 0 and both insert: more claims than coupons.
        self.assertGreater(direct["rows"], STOCK, direct)
        self.assertLess(direct["remain"], 0, direct)
        print(f"  directly: {direct['rows']} claims for {STOCK} coupons, remain {direct['remain']}", file=sys.stderr)

        self.cluster.reset({CAMPAIGN: STOCK})
        before = self.spread()
        answers = self.run_users([p.port for p in self.proxies], self.racy)
        f = self.assert_exact(answers, "racy")
        self.assertEqual(f["remain"], 0, f)
        after = self.spread()
        for i, ((c0, _), (c1, _)) in enumerate(zip(before, after)):
            self.assertGreater(c1, c0, f"sidecar {i + 1} served no connection: {before} -> {after}")
        # Each claim's recompute was absorbed (its take had moved the counter), on the claim's sidecar.
        self.assertEqual(sum(a for _, a in after) - sum(a for _, a in before), STOCK, (before, after))
        print(f"  through {SIDECARS}: {f['rows']} claims, remain {f['remain']}", file=sys.stderr)

    def test_1b_racy_app_decrementing_itself_sells_exactly_the_stock(self):
        # The claim's own take paid for the unit; the app's remain = remain - 1 after it is absorbed, not a
        # second take (which would sell half the stock).
        self.cluster.reset({CAMPAIGN: STOCK})
        self.run_users([self.cluster.db.port], self.racy_decrementing)
        direct = self.facts()
        self.assertGreater(direct["rows"], STOCK, direct)
        self.cluster.reset({CAMPAIGN: STOCK})
        before = self.spread()
        answers = self.run_users([p.port for p in self.proxies], self.racy_decrementing)
        f = self.assert_exact(answers, "racy, decrementing")
        self.assertEqual(f["remain"], 0, f)
        after = self.spread()
        self.assertEqual(sum(a for _, a in after) - sum(a for _, a in before), STOCK, (before, after))
        print(f"  decrementing itself: directly {direct['rows']} claims, remain {direct['remain']}; through "
              f"{SIDECARS}: {f['rows']} claims, remain {f['remain']}", file=sys.stderr)

    def test_2_correct_app_sells_what_it_sells_directly(self):
        self.cluster.reset({CAMPAIGN: STOCK})
        self.run_users([self.cluster.db.port], self.correct)
        direct = self.facts()
        self.assertEqual((direct["rows"], direct["remain"], direct["duplicate_pairs"]), (STOCK, 0, 0), direct)

        self.cluster.reset({CAMPAIGN: STOCK})
        answers = self.run_users([p.port for p in self.proxies], self.correct)
        f = self.assert_exact(answers, "correct")
        self.assertEqual((f["rows"], f["remain"]), (direct["rows"], direct["remain"]), (direct, f))

    def test_3_uncertain_shapes_stay_refused_with_advice(self):
        self.cluster.reset({CAMPAIGN: STOCK})
        with self.connect(self.proxies[0].port) as c, c.cursor() as cur:
            # No stock key in the WHERE: which stock row each claim consumes is not known.
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id "
                            "FROM coupon_stock WHERE remain > 0")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("INSERT ... VALUES", ctx.exception.args[1])
            # A recompute with no claim of this connection in front of it.
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(RECOMPUTE, (STOCK, CAMPAIGN, CAMPAIGN))
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("SET c = c - n WHERE key = ? AND c >= n", ctx.exception.args[1])
            # The claim, then its recompute: a row, the counter moved once.
            self.assertTrue(self.racy(cur, 1))
            # A second recompute has no take in front of it any more.
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(RECOMPUTE, (STOCK, CAMPAIGN, CAMPAIGN))
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            # The same user again: "already claimed", and nothing taken.
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(CLAIM, (1, CAMPAIGN))
            self.assertIn("already claimed", ctx.exception.args[1])
        f = self.facts()
        self.assertEqual((f["rows"], f["remain"], f["users"]), (1, STOCK - 1, [1]), f)

    def test_4_sold_out_is_zero_rows_as_directly(self):
        """Without stock the app hears what the server says when remain > 0 selects no row: OK, 0 rows."""
        self.cluster.reset({CAMPAIGN: 0})
        with self.connect(self.cluster.db.port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute(CLAIM, (5, CAMPAIGN)), 0)
        with self.connect(self.proxies[1].port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute(CLAIM, (5, CAMPAIGN)), 0)
            cur.execute("SELECT @@in_transaction")
            self.assertEqual(cur.fetchone()[0], 0)
        f = self.facts()
        self.assertEqual((f["rows"], f["remain"]), (0, 0), f)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--claimguard", required=True)
    parser.add_argument("--work-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    if not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        print("MariaDB is not installed", file=sys.stderr)
        return 1
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
