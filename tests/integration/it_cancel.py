#!/usr/bin/env python3
"""Cancellations (DELETE of claim rows) through running claimguards, MariaDB and Redis.

Usage: it_cancel.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB with the incident's schema and unique index (tests/incident/cluster.py), one Redis, one
claimguard with the example rules (on_cancel: keep_stock, the default) and eight with the same rules plus
on_cancel: return_stock (issue 19: "through 8 sidecars"). The app is PyMySQL, the incident's flow: read remain, write remain = <read - 1>,
insert the claim; a refund deletes the claim row (by user and campaign) and, in the refund flow, gives the
unit back itself with remain = remain + 1.
- P15: the refund's DELETE was refused (other_statement); now it goes through, the app's restock is a
  restock (keep_stock), and the user can claim again at once (the claim's Redis key was released).
- return_stock: a DELETE alone gives the unit back in the DELETE's transaction; the app's own restock
  after it (autocommit, or in its transaction) is absorbed, never applied twice.
- return_stock, a DELETE by the row's id (an ORM's delete of a row it loaded; text and prepared): the
  rows are read with their lock first, each stock key they name gets its units back, the app's restock of
  their sum after it is absorbed once; with ORDER BY / LIMIT it is still refused (cancel_without_stock_key).
- the refund flow with concurrent users over the eight sidecars (claim, cancel some, claim again; by user and
  campaign, and by the row's id): at the end
  remain + claim rows == the initial stock exactly, no user holds two rows, every re-claim after a cancel
  that found stock went in.
"""

import argparse
import os
import struct
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
import rawmysql  # noqa: E402
import servers  # noqa: E402

CLIENT_TIMEOUT_S = 20
ERR_REFUSED = 1644
CAMPAIGN = 1
BY_ID, BY_ID_OTHER = 3, 4  # test_return_stock_delete_by_row_id's campaigns
ER_LOCK_DEADLOCK = 1213
RETURNING_SIDECARS = 8
ARGS = None


def rules_returning_stock(source, dest):
    """A copy of the example rules whose claim rule gives a cancelled claim's unit back."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    marker = "    strictness: require_decrement"
    if text.count(marker) != 1:
        raise RuntimeError(f"{source}: expected one '{marker.strip()}' line")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text.replace(marker, "    on_cancel: return_stock\n" + marker))
    return dest


class Cancel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.start_redis()
        # keep_stock: the example rules as they are.
        cls.keep = cls.cluster.start_proxies(ARGS.claimguard, 1)[0]
        returning = rules_returning_stock(cluster.EXAMPLE_RULES, os.path.join(cls.work, "return_stock.yaml"))
        cls.returning = []
        for i in range(1, RETURNING_SIDECARS + 1):
            p = servers.Claimguard(ARGS.claimguard, cls.work, f"claimguard-return-{i}", cls.cluster.db.port,
                                   extra_args=["--rules", returning, "--redis",
                                               f"{servers.HOST}:{cls.cluster.redis.port}",
                                               "--audit-log", os.path.join(cls.work, f"audit-return-{i}.jsonl")])
            cls.cluster.proxies.append(p)
            p.start()
            cls.returning.append(p)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"  {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f}s", file=sys.stderr)

    def reset(self, stock):
        self.cluster.reset({CAMPAIGN: stock})

    def connect(self, proxy, autocommit=True):
        return pymysql.connect(host=servers.HOST, port=proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=autocommit,
                               connect_timeout=CLIENT_TIMEOUT_S, read_timeout=CLIENT_TIMEOUT_S)

    def facts(self):
        return self.cluster.facts(CAMPAIGN)

    def audit_actions(self, path):
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [line for line in f if '"action"' in line]

    @staticmethod
    def claim(cur, user, campaign=CAMPAIGN):
        """The incident's flow on one connection: read, write read - 1, insert. True when claimed."""
        cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = %s", (campaign,))
        remain = cur.fetchone()[0]
        if remain <= 0:
            return False
        try:
            cur.execute("UPDATE coupon_stock SET remain = %s WHERE campaign_id = %s", (remain - 1, campaign))
            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)", (user, campaign))
            return True
        except pymysql.err.MySQLError as e:
            if e.args[0] == ERR_REFUSED:  # sold out meanwhile, or already claimed
                return False
            raise

    @staticmethod
    def refund(cur, user, restock=True, transaction=False):
        """The legacy refund: DELETE the claim row, then (the refund flow) give the unit back itself."""
        if transaction:
            cur.execute("BEGIN")
        deleted = cur.execute("DELETE FROM coupon_order WHERE user_id = %s AND campaign_id = %s", (user, CAMPAIGN))
        if deleted and restock:
            cur.execute("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = %s", (CAMPAIGN,))
        if transaction:
            cur.execute("COMMIT")
        return deleted

    @staticmethod
    def refund_by_id(cur, user, restock=True, transaction=False, campaign=CAMPAIGN):
        """An ORM's refund: load the claim row, delete it by its id (session.delete(order)), then restock.
        A deadlock (1213: the give-back and a concurrent claim) is retried, as an app retries any 1213."""
        for _ in range(5):
            try:
                if transaction:
                    cur.execute("BEGIN")
                cur.execute("SELECT id FROM coupon_order WHERE user_id = %s AND campaign_id = %s", (user, campaign))
                row = cur.fetchone()
                deleted = cur.execute("DELETE FROM coupon_order WHERE id = %s", (row[0],)) if row else 0
                if deleted and restock:
                    cur.execute("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = %s", (campaign,))
                if transaction:
                    cur.execute("COMMIT")
                return deleted
            except pymysql.err.MySQLError as e:
                if e.args[0] != ER_LOCK_DEADLOCK:
                    raise
                if transaction:
                    cur.execute("ROLLBACK")
        raise AssertionError(f"user {user}: the refund deadlocked 5 times")

    def test_p15_refund_goes_through_with_keep_stock(self):
        """P15: DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 1 was refused (other_statement)."""
        self.reset(10)
        with self.connect(self.keep) as c, c.cursor() as cur:
            self.assertTrue(self.claim(cur, 1))
            self.assertEqual(self.facts()["remain"], 9)
            self.assertEqual(cur.execute("DELETE FROM coupon_order WHERE user_id = 1 AND campaign_id = 1"), 1)
            # keep_stock: the unit stays taken until the app gives it back itself, once.
            self.assertEqual(self.facts()["remain"], 9)
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = remain + 1 WHERE campaign_id = 1"), 1)
            self.assertEqual(self.facts()["remain"], 10)
            # The claim's Redis key (committed, 3 s ttl) is gone: the user claims again at once.
            self.assertTrue(self.claim(cur, 1))
        f = self.facts()
        self.assertEqual((f["remain"], f["rows"], f["duplicate_pairs"]), (9, 1, 0))
        self.assertGreaterEqual(itlib.metric(self.keep.admin_port, "claimguard_cancellations_total",
                                             {"rule": "coupon_order", "stock": "kept"}), 1)
        audit = self.audit_actions(os.path.join(self.work, "audit-1.jsonl"))
        self.assertTrue(any('"cancelled"' in line for line in audit), audit[-5:])

    def test_return_stock_delete_alone_gives_the_unit_back(self):
        self.reset(10)
        proxy = self.returning[0]
        with self.connect(proxy) as c, c.cursor() as cur:
            self.assertTrue(self.claim(cur, 2))
            self.assertEqual(self.refund(cur, 2, restock=False), 1)
            f = self.facts()
            self.assertEqual((f["remain"], f["rows"]), (10, 0))
            self.assertEqual(self.refund(cur, 2, restock=False), 0)  # cancelled already: nothing more back
            self.assertEqual(self.facts()["remain"], 10)
            # The cancelled claim's Redis key is gone: the user claims again at once, then cancels again.
            self.assertTrue(self.claim(cur, 2))
            self.assertEqual(self.refund(cur, 2, restock=False), 1)
            self.assertEqual(self.facts()["remain"], 10)
            # By the row's id: the rows are read first, their unit goes back.
            self.assertTrue(self.claim(cur, 3))
            self.assertEqual(self.refund_by_id(cur, 3, restock=False), 1)
            self.assertEqual(self.facts()["remain"], 10)
            # With ORDER BY / LIMIT the rows read need not be those deleted: still refused by policy.
            self.assertTrue(self.claim(cur, 3))
            with self.assertRaises(pymysql.err.MySQLError) as caught:
                cur.execute("DELETE FROM coupon_order WHERE user_id = 3 ORDER BY id LIMIT 1")
            self.assertEqual(caught.exception.args[0], ERR_REFUSED, caught.exception.args)
        f = self.facts()
        self.assertEqual((f["remain"], f["rows"]), (9, 1))
        self.assertGreaterEqual(itlib.metric(proxy.admin_port, "claimguard_cancellations_total",
                                             {"rule": "coupon_order", "stock": "returned"}), 1)

    def test_return_stock_absorbs_the_apps_own_restock(self):
        self.reset(10)
        proxy = self.returning[0]
        with self.connect(proxy) as c, c.cursor() as cur:
            # Autocommit: DELETE, then remain = remain + 1 on the same connection.
            self.assertTrue(self.claim(cur, 4))
            self.assertEqual(self.refund(cur, 4), 1)
            f = self.facts()
            self.assertEqual((f["remain"], f["rows"]), (10, 0))
            # In the app's transaction: the give-back is in it, the app's restock in it absorbed.
            self.assertTrue(self.claim(cur, 5))
            self.assertEqual(self.refund(cur, 5, transaction=True), 1)
            f = self.facts()
            self.assertEqual((f["remain"], f["rows"]), (10, 0))
            # A ROLLBACK undoes the DELETE and its give-back together.
            self.assertTrue(self.claim(cur, 6))
            cur.execute("BEGIN")
            self.assertEqual(cur.execute("DELETE FROM coupon_order WHERE user_id = 6 AND campaign_id = 1"), 1)
            cur.execute("ROLLBACK")
            f = self.facts()
            self.assertEqual((f["remain"], f["rows"], f["users"]), (9, 1, [6]))
        self.assertGreaterEqual(itlib.metric(proxy.admin_port, "claimguard_absorbed_give_backs_total"), 2)

    def test_return_stock_delete_by_row_id(self):
        """DELETE ... WHERE id = ? (text, and a server-side prepared one): the unit goes back to the stock row
        the deleted rows name, in the DELETE's transaction; rows of two campaigns give each its own back; the
        app's restock of the sum after it is absorbed once; the user claims again at once (Redis key released)."""
        # Campaigns of their own: the give-back credits earlier tests left (10 s) are for campaign 1.
        self.cluster.reset({BY_ID: 10, BY_ID_OTHER: 10})
        facts = lambda: self.cluster.facts(BY_ID)  # noqa: E731
        proxy = self.returning[0]
        with self.connect(proxy) as c, c.cursor() as cur:
            # The ORM's delete, autocommit then in a transaction with the app's own restock after it.
            self.assertTrue(self.claim(cur, 20, BY_ID))
            self.assertEqual(self.refund_by_id(cur, 20, restock=False, campaign=BY_ID), 1)
            # Gone already: nothing more back.
            self.assertEqual(self.refund_by_id(cur, 20, restock=False, campaign=BY_ID), 0)
            self.assertEqual(facts()["remain"], 10)
            self.assertTrue(self.claim(cur, 20, BY_ID))  # its Redis key went with the row
            self.assertEqual(self.refund_by_id(cur, 20, transaction=True, campaign=BY_ID), 1)
            f = facts()
            self.assertEqual((f["remain"], f["rows"]), (10, 0))
            # Three rows, two campaigns, one DELETE by ids; then the app restocks BY_ID by 2 at once.
            restock_2 = "UPDATE coupon_stock SET remain = remain + 2 WHERE campaign_id = %s"
            for user in (21, 22):
                self.assertTrue(self.claim(cur, user, BY_ID))
            self.assertTrue(self.claim(cur, 21, BY_ID_OTHER))
            cur.execute("SELECT id FROM coupon_order WHERE user_id IN (21, 22)")
            ids = [r[0] for r in cur.fetchall()]
            self.assertEqual(len(ids), 3)
            absorbed_before = itlib.metric(proxy.admin_port, "claimguard_absorbed_give_backs_total")
            self.assertEqual(cur.execute("DELETE FROM coupon_order WHERE id IN (%s, %s, %s)", tuple(ids)), 3)
            self.assertEqual(facts()["remain"], 10)
            self.assertEqual(self.cluster.facts(BY_ID_OTHER)["remain"], 10)
            self.assertEqual(cur.execute(restock_2, (BY_ID,)), 1)
            self.assertEqual(facts()["remain"], 10)  # absorbed: the units went back once
            self.assertEqual(itlib.metric(proxy.admin_port, "claimguard_absorbed_give_backs_total"),
                             absorbed_before + 1)
            # Once: the same restock again is a real one.
            self.assertEqual(cur.execute(restock_2, (BY_ID,)), 1)
            self.assertEqual(facts()["remain"], 12)
            self.cluster.sql(f"UPDATE coupon_stock SET remain = 10 WHERE campaign_id = {BY_ID};")

        # A server-side prepared DELETE ... WHERE id = ? (Connector/J's useServerPrepStmts): bound values.
        with self.connect(proxy) as c, c.cursor() as cur:
            self.assertTrue(self.claim(cur, 23, BY_ID))
            cur.execute("SELECT id FROM coupon_order WHERE user_id = 23")
            row_id = cur.fetchone()[0]
        client = rawmysql.RawClient(servers.HOST, proxy.port, timeout_s=CLIENT_TIMEOUT_S)
        try:
            client.login(cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE)
            self.assertEqual(prepared_execute(client, "DELETE FROM coupon_order WHERE id = ?", row_id), 1)
        finally:
            client.close()
        f = facts()
        self.assertEqual((f["remain"], f["rows"]), (10, 0))
        self.assertGreaterEqual(itlib.metric(proxy.admin_port, "claimguard_cancellations_total",
                                             {"rule": "coupon_order", "stock": "returned"}), 4)

    def test_refund_by_id_concurrent_users_over_eight_sidecars(self):
        """As the refund flow below, with the ORM's refund: load the row, delete it by id, restock."""
        self.refund_flow(self.refund_by_id)

    def test_refund_flow_concurrent_users_over_eight_sidecars(self):
        """Users claim, a third of those who got one refund it (half in a transaction), then claim again; the
        stock is smaller than the demand. The database must end with remain + claims == stock, one row per user."""
        self.refund_flow(self.refund)

    def refund_flow(self, refund):
        stock, users = 20, 36
        self.reset(stock)
        errors, reclaimed, refunded = [], [], []
        lock = threading.Lock()

        def user(u):
            proxy = self.returning[u % len(self.returning)]
            try:
                with self.connect(proxy) as c, c.cursor() as cur:
                    if not self.claim(cur, u) or u % 3 != 0:
                        return
                    if refund(cur, u, transaction=u % 2 == 0) != 1:
                        raise AssertionError(f"user {u}: the refund deleted no row")
                    with lock:
                        refunded.append(u)
                    if self.claim(cur, u):
                        with lock:
                            reclaimed.append(u)
            except Exception as e:  # noqa: BLE001  (reported below with the user)
                with lock:
                    errors.append(f"user {u}: {e!r}")

        threads = [threading.Thread(target=user, args=(u,)) for u in range(1, users + 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(CLIENT_TIMEOUT_S * 3)
        self.assertEqual(errors, [])
        f = self.facts()
        self.assertEqual(f["duplicate_pairs"], 0, f)
        self.assertEqual(f["remain"] + f["rows"], stock, f)  # no over-issue, no leak, no double give-back
        self.assertGreaterEqual(f["remain"], 0)
        self.assertTrue(refunded, "no user refunded: the test did not exercise cancellations")
        self.assertTrue(set(reclaimed) <= set(f["users"]), (reclaimed, f["users"]))


def prepared_execute(client, sql, *values):
    """COM_STMT_PREPARE then COM_STMT_EXECUTE with BIGINT parameters over rawmysql: the affected rows."""
    client.send_packet(0, bytes([rawmysql.COM_STMT_PREPARE]) + sql.encode())
    _, first = client.read_packet()
    if first[:1] != b"\x00":
        raise rawmysql.ProtocolError(f"prepare: {rawmysql.describe(first)}")
    stmt_id, columns, params = struct.unpack_from("<IHH", first, 1)
    for n in (params, columns):  # definitions, then an EOF (no CLIENT_DEPRECATE_EOF)
        for _ in range(n + 1 if n else 0):
            client.read_packet()
    assert len(values) == params
    body = struct.pack("<BIBI", rawmysql.COM_STMT_EXECUTE, stmt_id, 0, 1)
    body += b"\0" * ((params + 7) // 8) + b"\x01" + b"\x08\x00" * params
    body += b"".join(struct.pack("<q", v) for v in values)
    client.send_packet(0, body)
    _, reply = client.read_packet()
    if reply[:1] != b"\x00" or reply[1] >= 0xfb:
        raise rawmysql.ProtocolError(f"execute: {rawmysql.describe(reply)}")
    return reply[1]


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
