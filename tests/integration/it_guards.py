#!/usr/bin/env python3
"""Guards in any equivalent form, through eight claimguard sidecars (issue 19: "through 8 sidecars"), a real
MariaDB, Redis and PyMySQL.

Usage: it_guards.py --claimguard PATH --work-dir DIR [unittest args]

The issue's correct apps that claimguard used to refuse (`unmodeled: refuse`, 0 sold): the guarded
decrement written with arithmetic (P12: `remain - 2 >= 0`; MyBatis' `remain - #{num} >= 0`, sent
with literals by a client-side prepared statement, or prepared on the server and judged on the
values bound at COM_STMT_EXECUTE), and the guarded decrement joined with its
campaign (`UPDATE coupon_stock s JOIN campaign c ... AND s.remain > 0 AND c.status = 'ON'`). Many
clients at once on a small stock: through the sidecars the app sells exactly what it sells directly
(the stock), every sale has its claim row, no refusal is counted, and the app's own "0 rows" answers
stay what it would see directly (its campaign OFF is not "sold out"). The racy join (no guard) gets
the guard on the stock table's alias and sells exactly the stock.
MariaDB and the coupon schema come from tests/incident/cluster.py (rules/examples/coupon.yaml).
"""

import argparse
import os
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
CAMPAIGN = 77
CLIENTS = 24
SIDECARS = 8  # the concurrent users are spread over all of them
ARGS = None

P12 = "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = %s AND remain - 2 >= 0"
MYBATIS = "UPDATE coupon_stock SET remain = remain - %s WHERE campaign_id = %s AND remain - %s >= 0"
JOIN_GUARDED = ("UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id SET s.remain = s.remain - 1 "
                "WHERE s.campaign_id = %s AND s.remain > 0 AND c.status = 'ON'")
JOIN_RACY = ("UPDATE coupon_stock s, campaign c SET s.remain = s.remain - 1 "
             "WHERE s.campaign_id = %s AND c.id = s.campaign_id AND c.status = 'ON'")


class Prepared:
    """A server-side prepared statement over rawmysql (COM_STMT_PREPARE / COM_STMT_EXECUTE with
    BIGINT parameters), as MyBatis on Connector/J with useServerPrepStmts sends it."""

    def __init__(self, client, sql):
        self.client = client
        client.send_packet(0, bytes([rawmysql.COM_STMT_PREPARE]) + sql.encode())
        _, first = client.read_packet()
        if first[:1] != b"\x00":
            raise rawmysql.ProtocolError(f"prepare: {rawmysql.describe(first)}")
        self.id, columns, self.params = struct.unpack_from("<IHH", first, 1)
        for n in (self.params, columns):  # definitions, then an EOF (no CLIENT_DEPRECATE_EOF)
            for _ in range(n + 1 if n else 0):
                client.read_packet()

    def execute(self, *values):
        """Affected rows, or ("error", code)."""
        assert len(values) == self.params
        body = struct.pack("<BIBI", rawmysql.COM_STMT_EXECUTE, self.id, 0, 1)
        body += b"\0" * ((self.params + 7) // 8) + b"\x01" + b"\x08\x00" * self.params
        body += b"".join(struct.pack("<q", v) for v in values)
        self.client.send_packet(0, body)
        _, reply = self.client.read_packet()
        if reply[:1] == b"\xff":
            return ("error", struct.unpack_from("<H", reply, 1)[0])
        if reply[:1] != b"\x00" or reply[1] >= 0xfb:
            raise rawmysql.ProtocolError(f"execute: {rawmysql.describe(reply)}")
        return reply[1]


class Guards(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work)
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.sql("CREATE TABLE campaign (id INT PRIMARY KEY, status VARCHAR(8) NOT NULL);")
            cls.cluster.start_redis()
            cls.proxies = cls.cluster.start_proxies(ARGS.claimguard, SIDECARS)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def connect(self, port):
        return pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                               database=cluster.DATABASE, autocommit=True, read_timeout=30, write_timeout=30)

    def set_stock(self, remain, status="ON"):
        self.cluster.reset({CAMPAIGN: remain})
        self.cluster.sql(f"DELETE FROM campaign; INSERT INTO campaign VALUES ({CAMPAIGN}, '{status}');")

    def metric(self, name, labels=None):
        return sum(itlib.metric(p.admin_port, name, labels) for p in self.proxies)

    def sell(self, ports, sql, args):
        """CLIENTS users at once, each on its own connection (ports taken in turn): the correct app's
        flow, the guarded UPDATE then, when it changed a row, the user's claim. Returns (sold, answers):
        how many UPDATEs changed a row, and every other answer (0 rows or an error)."""
        sold = []
        answers = []
        lock = threading.Lock()
        start = threading.Barrier(CLIENTS)

        def user(i):
            conn = self.connect(ports[i % len(ports)])
            try:
                with conn.cursor() as cur:
                    start.wait()
                    try:
                        rows = cur.execute(sql, args)
                        if rows == 1:
                            cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)",
                                        (1000 + i, CAMPAIGN))
                        outcome = rows
                    except pymysql.MySQLError as e:
                        outcome = ("error", e.args[0])
                with lock:
                    (sold if outcome == 1 else answers).append(outcome)
            finally:
                conn.close()

        threads = [threading.Thread(target=user, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a client hung")
        return len(sold), answers

    def sidecar_ports(self):
        return [p.port for p in self.proxies]

    def check_correct_app(self, sql, args, stock, units):
        """The same load directly and through the sidecars: the same sales (the whole stock), the same
        answers to the rest (0 rows, no error), a claim row per sale, and nothing refused."""
        expected = stock // units
        self.set_stock(stock)
        direct_sold, direct_answers = self.sell([self.cluster.db.port], sql, args)
        self.assertEqual(direct_sold, expected)
        self.assertEqual(sorted(direct_answers), [0] * (CLIENTS - expected))

        self.set_stock(stock)
        refused = self.metric("claimguard_unmodeled_total")
        tracked = self.metric("claimguard_tracked_decrements_total")
        sold, answers = self.sell(self.sidecar_ports(), sql, args)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual(sold, expected)
        self.assertEqual(sorted(answers), [0] * (CLIENTS - expected))  # the app's own 0 rows, never an ERR
        self.assertEqual((facts["remain"], facts["rows"], facts["duplicate_pairs"]), (stock - expected * units, expected, 0))
        self.assertEqual(self.metric("claimguard_unmodeled_total"), refused)
        # Forwarded as written (the app's own guard), and its sales learned from the rows.
        self.assertEqual(self.metric("claimguard_tracked_decrements_total"), tracked + expected)

    def test_p12_arithmetic_guard_sells_exactly_the_stock(self):
        self.check_correct_app(P12, (CAMPAIGN,), stock=10, units=2)

    def test_mybatis_client_side_prepared_guard_sells_exactly_the_stock(self):
        # MyBatis' #{num} through Connector/J's client-side prepared statement: literals on the wire.
        self.check_correct_app(MYBATIS, (3, CAMPAIGN, 3), stock=10, units=3)

    def sell_prepared(self, ports, amount, guard):
        """sell() with MyBatis' statement prepared on the server and its values bound at execute."""
        sold = []
        answers = []
        lock = threading.Lock()
        start = threading.Barrier(CLIENTS)

        def user(i):
            client = rawmysql.RawClient(servers.HOST, ports[i % len(ports)], timeout_s=30)
            try:
                client.login(cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE)
                stmt = Prepared(client, MYBATIS.replace("%s", "?"))
                start.wait()
                outcome = stmt.execute(amount, CAMPAIGN, guard)
                if outcome == 1:
                    reply = client.query(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({1000 + i}, {CAMPAIGN})")
                    if reply[0][:1] != b"\x00":
                        outcome = ("claim", rawmysql.describe(reply[0]))
                with lock:
                    (sold if outcome == 1 else answers).append(outcome)
            finally:
                client.close()

        threads = [threading.Thread(target=user, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a client hung")
        return len(sold), answers

    def test_mybatis_server_side_prepared_guard_sells_exactly_the_stock(self):
        # `remain - ? >= 0` is judged on the bound values: the same amount guards the decrement, so
        # the app's statement goes as written (tracked), as directly.
        self.set_stock(10)
        direct_sold, direct_answers = self.sell_prepared([self.cluster.db.port], 3, 3)
        self.assertEqual((direct_sold, sorted(direct_answers)), (3, [0] * (CLIENTS - 3)))
        self.set_stock(10)
        refused = self.metric("claimguard_unmodeled_total")
        tracked = self.metric("claimguard_tracked_decrements_total")
        sold, answers = self.sell_prepared(self.sidecar_ports(), 3, 3)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((sold, sorted(answers)), (3, [0] * (CLIENTS - 3)))
        self.assertEqual((facts["remain"], facts["rows"], facts["duplicate_pairs"]), (1, 3, 0))
        self.assertEqual(self.metric("claimguard_unmodeled_total"), refused)
        self.assertEqual(self.metric("claimguard_tracked_decrements_total"), tracked + 3)

    def test_mybatis_server_side_prepared_weak_guard_gets_the_guard(self):
        # Bound lower than the amount (`remain - 1 >= 0` for 3 units): not a guard; the take adds its own.
        self.set_stock(10)
        rewrites = self.metric("claimguard_rewrites_total")
        sold, answers = self.sell_prepared(self.sidecar_ports(), 3, 1)
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual((sold, sorted(answers)), (3, [("error", ER_CLAIMGUARD)] * (CLIENTS - 3)))
        self.assertEqual((facts["remain"], facts["rows"]), (1, 3))
        self.assertEqual(self.metric("claimguard_rewrites_total"), rewrites + 3)

    def test_mybatis_guard_lower_than_the_amount_gets_the_guard(self):
        # `remain - 1 >= 0` does not guard a decrement by 3: the take adds `remain >= 3`; the app gets
        # "sold out" where, directly, it would have driven the counter below zero.
        self.set_stock(4)
        with self.connect(self.proxies[0].port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute(MYBATIS, (3, CAMPAIGN, 1)), 1)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(MYBATIS, (3, CAMPAIGN, 1))
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["remain"], 1)

    def test_join_guarded_sells_exactly_the_stock(self):
        self.check_correct_app(JOIN_GUARDED, (CAMPAIGN,), stock=5, units=1)

    def test_join_guarded_campaign_off_is_the_apps_own_zero_rows(self):
        self.set_stock(5, status="OFF")
        with self.connect(self.proxies[0].port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute(JOIN_GUARDED, (CAMPAIGN,)), 0)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["remain"], 5)

    def test_join_racy_gets_the_guard_and_sells_exactly_the_stock(self):
        self.set_stock(5)
        rewrites = self.metric("claimguard_rewrites_total")
        sold, answers = self.sell(self.sidecar_ports(), JOIN_RACY, (CAMPAIGN,))
        facts = self.cluster.facts(CAMPAIGN)
        self.assertEqual(sold, 5)
        self.assertEqual(sorted(answers), [("error", ER_CLAIMGUARD)] * (CLIENTS - 5))  # sold out, never below 0
        self.assertEqual((facts["remain"], facts["rows"], facts["duplicate_pairs"]), (0, 5, 0))
        self.assertEqual(self.metric("claimguard_rewrites_total"), rewrites + 5)

    def test_join_racy_campaign_off_is_not_sold_out(self):
        # Zero rows with stock left: the app's own condition (c.status) failed. Its 0 rows stand.
        self.set_stock(5, status="OFF")
        conflicts = self.metric("claimguard_conflicts_total")
        with self.connect(self.proxies[1].port) as c, c.cursor() as cur:
            self.assertEqual(cur.execute(JOIN_RACY, (CAMPAIGN,)), 0)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["remain"], 5)
        self.assertEqual(self.metric("claimguard_conflicts_total"), conflicts + 1)

    def test_join_without_the_full_key_is_refused(self):
        # The key pinned only through the join condition: not a take the engine can follow.
        self.set_stock(5)
        refused = self.metric("claimguard_unmodeled_total", None)
        with self.connect(self.proxies[0].port) as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("UPDATE coupon_stock s JOIN campaign c ON c.id = s.campaign_id "
                            "SET s.remain = s.remain - 1 WHERE c.id = %s AND s.remain > 0", (CAMPAIGN,))
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["remain"], 5)
        self.assertEqual(self.metric("claimguard_unmodeled_total"), refused + 1)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
