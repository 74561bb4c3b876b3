#!/usr/bin/env python3
"""Claims whose stock a trigger on the claim table decrements (decremented_by_trigger), through running
claimguards, MariaDB and Redis.

Usage: it_trigger.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB with the incident's schema and unique index (tests/incident/cluster.py), one Redis, eight
claimguards with the example rules plus `decremented_by_trigger: true` on coupon_order (issue 19: "through
8 sidecars"). The app only inserts the claim row (autocommit, or BEGIN; INSERT; COMMIT) and lets a trigger
on coupon_order take the coupon. Three triggers, one at a time:
- guarded with SIGNAL (correct directly): through claimguard the same claims as directly, the trigger's
  own SIGNAL for the users after the last coupon; through all eight sidecars;
- guarded without SIGNAL (the row goes in, nothing is taken: over-issues directly), through two sidecars,
  and unguarded (remain goes below 0 directly), through all eight: through claimguard exactly the stock,
  remain never below 0.
Each with 60 users on 24 threads spread over the sidecars, stock 15, every user trying twice: claim rows ==
min(stock, users), no duplicates, rows + remain == the initial stock; through eight, every sidecar decided
claims of its own (its metrics).
Without the field the same claim is answered sold out (require_decrement: no take of the sidecar's).
`claimguard check`: the field without the trigger is an error (exit 1); the trigger without the field a
warning that says to set it (exit 0).
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
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
ERR_SIGNAL = 1644  # the trigger's SIGNAL SQLSTATE '45000', and claimguard's sold-out / duplicate answers
CAMPAIGN = 1
STOCK = 15
USERS = 60
THREADS = 24
SIDECARS = 8  # the trigger sidecars (issue 19's "through 8 sidecars")
ARGS = None

GUARDED_SIGNAL = """
CREATE TRIGGER trg_claim BEFORE INSERT ON coupon_order FOR EACH ROW BEGIN
  UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = NEW.campaign_id AND remain > 0;
  IF ROW_COUNT() = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'trigger: sold out'; END IF;
END"""
GUARDED_QUIET = """
CREATE TRIGGER trg_claim AFTER INSERT ON coupon_order FOR EACH ROW
  UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = NEW.campaign_id AND remain > 0"""
UNGUARDED = """
CREATE TRIGGER trg_claim AFTER INSERT ON coupon_order FOR EACH ROW
  UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = NEW.campaign_id"""


def rules_with_field(source, dest):
    """A copy of the example rules whose claim rule's stock a trigger decrements."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    marker = "    strictness: require_decrement"
    if text.count(marker) != 1:
        raise RuntimeError(f"{source}: expected one '{marker.strip()}' line")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text.replace(marker, "    decremented_by_trigger: true\n" + marker))
    return dest


class Trigger(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.start_redis()
        cls.rules = rules_with_field(cluster.EXAMPLE_RULES, os.path.join(cls.work, "trigger.yaml"))
        cls.proxies = []
        for i in range(1, SIDECARS + 1):
            p = servers.Claimguard(ARGS.claimguard, cls.work, f"claimguard-trigger-{i}", cls.cluster.db.port,
                                   extra_args=["--rules", cls.rules, "--redis",
                                               f"{servers.HOST}:{cls.cluster.redis.port}",
                                               "--audit-log", os.path.join(cls.work, f"audit-trigger-{i}.jsonl")])
            cls.cluster.proxies.append(p)
            p.start()
            cls.proxies.append(p)
        # The example rules as they are: no field.
        cls.plain = cls.cluster.start_proxies(ARGS.claimguard, 1)[-1]

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"  {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f}s", file=sys.stderr)

    def use_trigger(self, ddl):
        self.cluster.sql("DROP TRIGGER IF EXISTS trg_claim;\nDELIMITER //\n" + ddl + "//\nDELIMITER ;\n")

    def connect(self, port):
        return pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                               database=cluster.DATABASE, autocommit=True, connect_timeout=CLIENT_TIMEOUT_S,
                               read_timeout=CLIENT_TIMEOUT_S)

    def facts(self):
        return self.cluster.facts(CAMPAIGN)

    def spread(self):
        """Per trigger sidecar: (client connections it accepted, claims it decided by the trigger: claimed or
        exhausted, from its metrics)."""
        def decided(p):
            return sum(itlib.metric(p.admin_port, "claimguard_trigger_claims_total",
                                    {"rule": "coupon_order", "result": r}) for r in ("claimed", "exhausted"))
        return [(itlib.metric(p.admin_port, "claimguard_client_connections_accepted_total"), decided(p))
                for p in self.proxies]

    def assert_every_sidecar_used(self, before, decided):
        """Each of the eight sidecars served users in this test (the load was spread, none idle), and, when
        `decided`, decided trigger claims of its own (an unguarded trigger: each user's first INSERT is
        claimed or exhausted; a guarded one may answer a sidecar's late users with its SIGNAL only)."""
        after = self.spread()
        self.assertEqual(len(after), SIDECARS)
        for i, ((c0, d0), (c1, d1)) in enumerate(zip(before, after)):
            self.assertGreater(c1, c0, f"sidecar {i + 1} served no connection: {before} -> {after}")
            if decided:
                self.assertGreater(d1, d0, f"sidecar {i + 1} decided no trigger claim: {before} -> {after}")

    @staticmethod
    def claim(cur, user, transaction):
        """The app: insert the claim row and let the trigger take the coupon. The error code, or None."""
        try:
            if transaction:
                cur.execute("BEGIN")
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)", (user, CAMPAIGN))
            if transaction:
                cur.execute("COMMIT")
            return None
        except pymysql.err.MySQLError as e:
            if transaction:
                cur.connection.rollback()
            return (e.args[0], e.args[1])

    def run_users(self, ports):
        """USERS users on THREADS threads, each on its own connection, trying twice (autocommit, or every
        third user in a transaction). Returns {user: [answer of try 1, answer of try 2]}; None is success."""
        answers, errors = {}, []
        lock = threading.Lock()

        def user(u):
            try:
                with self.connect(ports[u % len(ports)]) as c, c.cursor() as cur:
                    got = [self.claim(cur, u, u % 3 == 0) for _ in range(2)]
                with lock:
                    answers[u] = got
            except Exception as e:  # noqa: BLE001  (reported below with the user)
                with lock:
                    errors.append(f"user {u}: {e!r}")

        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(user, range(1, USERS + 1)))
        self.assertEqual(errors, [])
        return answers

    def assert_exact(self, answers, what):
        f = self.facts()
        self.assertEqual(f["duplicate_pairs"], 0, (what, f))
        self.assertEqual(f["rows"], min(STOCK, USERS), (what, f))  # no over-issue, every coupon claimed
        self.assertEqual(f["rows"] + f["remain"], STOCK, (what, f))  # no leak
        self.assertGreaterEqual(f["remain"], 0, (what, f))
        claimed = sorted(u for u, got in answers.items() if None in got)
        self.assertEqual(claimed, f["users"], what)  # an OK to the app is a row in the table, and only then
        for u, got in answers.items():
            self.assertTrue(got.count(None) <= 1, (what, u, got))
            for a in got:
                self.assertTrue(a is None or a[0] == ERR_SIGNAL, (what, u, got))
        return f

    def test_1_guarded_with_signal_as_directly(self):
        self.use_trigger(GUARDED_SIGNAL)
        self.cluster.reset({CAMPAIGN: STOCK})
        direct = self.run_users([self.cluster.db.port])
        want = self.facts()
        self.assertEqual((want["rows"], want["remain"], want["duplicate_pairs"]), (STOCK, 0, 0), want)
        self.assertTrue(any(a and "trigger: sold out" in a[1] for got in direct.values() for a in got))
        self.cluster.reset({CAMPAIGN: STOCK})
        before = self.spread()
        answers = self.run_users([p.port for p in self.proxies])
        self.assert_exact(answers, "guarded with SIGNAL")
        self.assert_every_sidecar_used(before, decided=False)
        # After the last coupon the app gets the trigger's own SIGNAL, as directly.
        self.assertTrue(any(a and "trigger: sold out" in a[1] for got in answers.values() for a in got), answers)
        claimed = sum(itlib.metric(p.admin_port, "claimguard_trigger_claims_total",
                                   {"rule": "coupon_order", "result": "claimed"}) for p in self.proxies)
        self.assertGreaterEqual(claimed, STOCK)

    def test_2_guarded_without_signal_gives_exactly_the_stock(self):
        self.use_trigger(GUARDED_QUIET)
        self.cluster.reset({CAMPAIGN: STOCK})
        self.run_users([self.cluster.db.port])
        direct = self.facts()
        self.assertEqual(direct["rows"], USERS, direct)  # directly every user gets a row: over-issued
        self.cluster.reset({CAMPAIGN: STOCK})
        answers = self.run_users([p.port for p in self.proxies[:2]])
        self.assert_exact(answers, "guarded without SIGNAL")
        exhausted = sum(itlib.metric(p.admin_port, "claimguard_trigger_claims_total",
                                     {"rule": "coupon_order", "result": "exhausted"}) for p in self.proxies)
        self.assertGreaterEqual(exhausted, USERS - STOCK)

    def test_3_unguarded_gives_exactly_the_stock(self):
        self.use_trigger(UNGUARDED)
        self.cluster.reset({CAMPAIGN: STOCK})
        self.run_users([self.cluster.db.port])
        direct = self.facts()
        self.assertLess(direct["remain"], 0, direct)  # directly the counter goes below the floor
        self.cluster.reset({CAMPAIGN: STOCK})
        before = self.spread()
        answers = self.run_users([p.port for p in self.proxies])
        self.assert_exact(answers, "unguarded")
        self.assert_every_sidecar_used(before, decided=True)

    def test_4_insert_id_and_status_are_the_inserts(self):
        """The app gets the INSERT's own OK: its insert id, and autocommit status after claimguard's COMMIT."""
        self.use_trigger(GUARDED_SIGNAL)
        self.cluster.reset({CAMPAIGN: STOCK})
        with self.connect(self.proxies[0].port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, %s)",
                                         (CAMPAIGN,)), 1)
            row_id = int(self.cluster.sql("SELECT id FROM coupon_order WHERE user_id = 1;").strip())
            self.assertEqual(cur.lastrowid, row_id)
            self.assertFalse(c.server_status & 1, "the OK says in transaction: not the status after our COMMIT")
            cur.execute("SELECT @@in_transaction")
            self.assertEqual(cur.fetchone()[0], 0)
            # Inside the app's transaction, rolled back by the app: no row, the coupon back.
            cur.execute("BEGIN")
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (2, %s)", (CAMPAIGN,))
            cur.execute("ROLLBACK")
        f = self.facts()
        self.assertEqual((f["rows"], f["remain"]), (1, STOCK - 1), f)

    def test_5_without_the_field_the_claim_is_sold_out(self):
        self.use_trigger(GUARDED_SIGNAL)
        self.cluster.reset({CAMPAIGN: STOCK})
        with self.connect(self.plain.port) as c, c.cursor() as cur:
            got = self.claim(cur, 1, False)
        self.assertIsNotNone(got)
        self.assertIn("sold out", got[1])
        f = self.facts()
        self.assertEqual((f["rows"], f["remain"]), (0, STOCK), f)

    def check(self, rules):
        env = dict(os.environ, CLAIMGUARD_CHECK_PASSWORD=cluster.ADMIN_PASSWORD)
        r = subprocess.run([ARGS.claimguard, "check", "--rules", rules, "--backend",
                            f"{servers.HOST}:{self.cluster.db.port}", "--user", cluster.ADMIN_USER, "--database",
                            cluster.DATABASE], env=env, capture_output=True, text=True, timeout=60, check=False)
        return r.returncode, r.stdout + r.stderr

    def test_6_check_expects_the_trigger(self):
        self.cluster.sql("DROP TRIGGER IF EXISTS trg_claim;")
        code, out = self.check(self.rules)
        self.assertEqual(code, 1, out)
        self.assertIn("rule coupon_order, decremented_by_trigger: no trigger on coupon_order names coupon_stock",
                      out)
        self.use_trigger(GUARDED_SIGNAL)
        code, out = self.check(self.rules)
        self.assertEqual(code, 0, out)
        self.assertIn("expected: claim rule coupon_order has decremented_by_trigger: true", out)
        code, out = self.check(cluster.EXAMPLE_RULES)
        self.assertEqual(code, 0, out)
        self.assertIn("set decremented_by_trigger: true on claim rule coupon_order", out)


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
