#!/usr/bin/env python3
"""defer_decrement (issue 11 part 3): takes in transactions answered OK and sent just before COMMIT.

Usage: defer_test.py --claimguard PATH --stmt-client PATH --work-dir DIR [unittest args]

One MariaDB with the coupon schema (cluster.py). Wire: two claimguards, the example rules with
defer_decrement on and off; PyMySQL transactions through them and a direct root connection with
innodb_lock_wait_timeout=1 that updates the same stock row while the app transaction sits between its
UPDATE and its COMMIT: it does not wait with defer on, it times out (1205) with defer off. Also: a read
in the transaction sees the app's own write, sold out is reported at COMMIT (ROLLBACK + exhausted, the
order row gone), ROLLBACK drops the take, libmariadb prepared statements with a bound key, metrics. Race: 8 sidecars with defer on, a transactional naive
app (BEGIN; SELECT; UPDATE SET remain = <read - 1>; INSERT order; COMMIT) on many threads until sold
out: no over-issue, initial - remain == orders, no user twice, every UPDATE answered 1 row, "sold out"
only at COMMIT.
"""

import argparse
import os
import subprocess
import sys
import threading
import time
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import cluster  # noqa: E402
import itlib  # noqa: E402
import servers  # noqa: E402

ER_SOLD_OUT = 1644
ER_LOCK_WAIT_TIMEOUT = 1205
LOCK_WAIT_TIMEOUT_S = 1
NO_WAIT_S = 0.5               # a direct UPDATE of a row nobody locks answers well within this
CLIENT_TIMEOUT_S = 20
SIDECARS = 8
THREADS = 24
RACE_STOCK = 40
RACE_USERS = 160              # four buyers per coupon: the sale sells out
RACE_CAMPAIGN = 900
DEFERRED = "claimguard_deferred_takes_total"

ARGS = None


def rules_with_defer(dest, on):
    return cluster.rules_with_stock_lines(dest, [f"defer_decrement: {'true' if on else 'false'}"])


class Defer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.rules_on = rules_with_defer(os.path.join(cls.work, "defer-on.yaml"), True)
        cls.rules_off = rules_with_defer(os.path.join(cls.work, "defer-off.yaml"), False)
        cls.on = cls.proxy("defer-on", cls.rules_on)
        cls.off = cls.proxy("defer-off", cls.rules_off)

    @classmethod
    def proxy(cls, name, rules):
        p = servers.Claimguard(ARGS.claimguard, cls.cluster.dir, name, cls.cluster.db.port,
                               extra_args=["--rules", rules])
        cls.cluster.proxies.append(p)
        p.start()
        return p

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"\n    {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.2f}s", end="")

    def app(self, proxy):
        return pymysql.connect(host=servers.HOST, port=proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               connect_timeout=CLIENT_TIMEOUT_S, read_timeout=CLIENT_TIMEOUT_S)

    def direct(self):
        return pymysql.connect(host=servers.HOST, port=self.cluster.db.port, user=cluster.ADMIN_USER,
                               password=cluster.ADMIN_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               connect_timeout=CLIENT_TIMEOUT_S, read_timeout=CLIENT_TIMEOUT_S)

    def set_stock(self, campaign, remain):
        self.cluster.sql(f"DELETE FROM coupon_order WHERE campaign_id = {campaign}; "
                         f"DELETE FROM coupon_stock WHERE campaign_id = {campaign}; "
                         f"INSERT INTO coupon_stock (campaign_id, remain, version) VALUES ({campaign}, {remain}, 0);")

    def other_writer(self):
        """A direct UPDATE of the stock row from another connection: (seconds, error code or None)."""
        with self.direct() as d, d.cursor() as cur:
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT_S}")
            started = time.monotonic()
            try:
                cur.execute("UPDATE coupon_stock SET version = version + 1 WHERE campaign_id = 1")
                return time.monotonic() - started, None
            except pymysql.MySQLError as e:
                return time.monotonic() - started, e.args[0]

    def hold_between_update_and_commit(self, proxy):
        self.set_stock(1, 10)
        with self.app(proxy) as a, a.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = 1")  # the read its write comes from
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = 9 WHERE campaign_id = 1"), 1)
            waited, err = self.other_writer()
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, 1)")
            cur.execute("COMMIT")
        facts = self.cluster.facts(1)
        self.assertEqual((facts["remain"], facts["rows"]), (9, 1))
        return waited, err

    def test_row_lock_not_held_with_defer(self):
        waited, err = self.hold_between_update_and_commit(self.on)
        self.assertIsNone(err)
        self.assertLess(waited, NO_WAIT_S)

    def test_row_lock_held_without_defer(self):
        # The test that fails without the feature: the same flow through the rules without it.
        waited, err = self.hold_between_update_and_commit(self.off)
        self.assertEqual(err, ER_LOCK_WAIT_TIMEOUT)
        self.assertGreaterEqual(waited, LOCK_WAIT_TIMEOUT_S * 0.9)

    def test_read_in_the_transaction_sees_its_own_write(self):
        self.set_stock(2, 10)
        flushed = itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "flushed"})
        with self.app(self.on) as a, a.cursor() as cur:
            cur.execute("BEGIN")
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 2"), 1)
            cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = 2")
            self.assertEqual(cur.fetchone()[0], 9)
            cur.execute("SELECT ROW_COUNT()")
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (2, 2)")
            cur.execute("COMMIT")
        self.assertEqual(itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "flushed"}),
                         flushed + 1)
        facts = self.cluster.facts(2)
        self.assertEqual((facts["remain"], facts["rows"]), (9, 1))

    def test_sold_out_is_reported_at_commit(self):
        self.set_stock(3, 1)
        with self.app(self.on) as a, self.app(self.on) as b, a.cursor() as ca, b.cursor() as cb:
            for cur, user in ((ca, 31), (cb, 32)):
                cur.execute("BEGIN")
                cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = 3")  # the read its write comes from
                self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = 0 WHERE campaign_id = 3"), 1)
                cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, 3)")
            cb.execute("COMMIT")  # b takes the last coupon first
            with self.assertRaises(pymysql.MySQLError) as ctx:
                ca.execute("COMMIT")
            self.assertEqual(ctx.exception.args[0], ER_SOLD_OUT)
            self.assertIn("sold out", ctx.exception.args[1])
            ca.execute("SELECT @@in_transaction")
            self.assertEqual(ca.fetchone()[0], 0)  # rolled back, the connection is usable
        facts = self.cluster.facts(3)
        self.assertEqual((facts["remain"], facts["users"]), (0, [32]))

    def test_rollback_drops_the_take(self):
        self.set_stock(4, 5)
        dropped = itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "dropped"})
        with self.app(self.on) as a, a.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = 4")  # the read its write comes from
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = 4 WHERE campaign_id = 4"), 1)
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (4, 4)")
            cur.execute("ROLLBACK")
        facts = self.cluster.facts(4)
        self.assertEqual((facts["remain"], facts["rows"]), (5, 0))
        self.assertEqual(itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "dropped"}),
                         dropped + 1)

    def test_autocommit_is_never_deferred(self):
        self.set_stock(5, 3)
        committed = itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "committed"})
        with self.app(self.on) as a, a.cursor() as cur:
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = 2 WHERE campaign_id = 5"), 1)
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (5, 5)")
        self.assertEqual(itlib.metric(self.on.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "committed"}),
                         committed)
        self.assertEqual(self.cluster.facts(5)["remain"], 2)

    def test_prepared_statements_with_bound_key(self):
        # libmariadb COM_STMT_PREPARE/EXECUTE (tests/integration/unix/stmt_client.cpp): the kept take
        # carries the bound key as a literal; the read after it sees the app's own write.
        self.set_stock(6, 10)
        statements = ["START TRANSACTION", "UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?|9|6",
                      "SELECT remain FROM coupon_stock WHERE campaign_id = ?|6",
                      "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?|1|6",
                      "INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)|61|6", "COMMIT",
                      "SELECT remain FROM coupon_stock WHERE campaign_id = ?|6"]
        r = subprocess.run([ARGS.stmt_client, "tcp", servers.HOST, str(self.on.port), cluster.APP_USER,
                            cluster.APP_PASSWORD, cluster.DATABASE, *statements],
                           capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False)
        lines = r.stdout.splitlines()
        self.assertEqual(lines, ["OK 0", "OK 1", "ROWS [9]", "OK 1", "OK 1", "OK 0", "ROWS [8]"], r.stderr)
        facts = self.cluster.facts(6)
        self.assertEqual((facts["remain"], facts["rows"]), (8, 1))  # two takes (one waits for its claim), one order

    def test_race_through_eight_sidecars(self):
        sidecars = []
        for i in range(SIDECARS):
            sidecars.append(self.proxy(f"race-{i + 1}", self.rules_on))
        self.set_stock(RACE_CAMPAIGN, RACE_STOCK)
        users = list(range(1000, 1000 + RACE_USERS))
        lock = threading.Lock()
        outcome = {"committed": 0, "sold_out_at_commit": 0, "sold_out_at_read": 0, "update_not_1": 0,
                   "other_errors": []}

        def attempt(cur, user):
            cur.execute("BEGIN")
            cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {RACE_CAMPAIGN}")
            remain = cur.fetchone()[0]
            if remain <= 0:
                cur.execute("ROLLBACK")
                return "sold_out_at_read"
            try:
                n = cur.execute(f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {RACE_CAMPAIGN}")
                if n != 1:
                    cur.execute("ROLLBACK")
                    return "update_not_1"
                cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {RACE_CAMPAIGN})")
            except pymysql.MySQLError as e:
                cur.execute("ROLLBACK")
                return ("error before COMMIT", e.args[0], e.args[1])
            try:
                cur.execute("COMMIT")
                return "committed"
            except pymysql.MySQLError as e:
                if e.args[0] == ER_SOLD_OUT:
                    return "sold_out_at_commit"
                return ("error at COMMIT", e.args[0], e.args[1])

        def worker(index):
            proxy = sidecars[index % SIDECARS]
            with self.app(proxy) as conn, conn.cursor() as cur:
                while True:
                    with lock:
                        if not users:
                            return
                        user = users.pop()
                    r = attempt(cur, user)
                    with lock:
                        if isinstance(r, tuple):
                            outcome["other_errors"].append(r)
                        else:
                            outcome[r] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        facts = self.cluster.facts(RACE_CAMPAIGN)
        print(f"\n    race: {elapsed:.1f}s {outcome} facts remain={facts['remain']} rows={facts['rows']}", end="")
        self.assertEqual(outcome["other_errors"], [])
        self.assertEqual(outcome["update_not_1"], 0)
        self.assertLessEqual(facts["rows"], RACE_STOCK)
        self.assertGreaterEqual(facts["remain"], 0)
        self.assertEqual(RACE_STOCK - facts["remain"], facts["rows"])
        self.assertEqual(facts["duplicate_pairs"], 0)
        self.assertEqual(outcome["committed"], facts["rows"])
        self.assertEqual(facts["remain"], 0)  # four buyers per coupon: sold out
        deferred = sum(itlib.metric(p.admin_port, DEFERRED, {"rule": "coupon_stock", "result": "deferred"})
                       for p in sidecars)
        self.assertGreaterEqual(deferred, facts["rows"])


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claimguard", required=True)
    parser.add_argument("--stmt-client", required=True)
    parser.add_argument("--work-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
