#!/usr/bin/env python3
"""Per-key admission (issue 11 part 2) through real claimguard sidecars and a real MariaDB.

Usage: it_admission.py --claimguard PATH --work-dir DIR [unittest args]

The app's transactions hold the hot stock row (BEGIN; UPDATE coupon_stock ...; app work; INSERT the
claim; COMMIT) while 64 PyMySQL clients want it at once and innodb_lock_wait_timeout is 2 s. Without
`admission:` InnoDB's lock wait decides, and some clients get ERR 1205; with it the sidecar's queue
orders the transactions and none does. Sold out answers the queue without the database; clients that
hang up while queued and sessions that end inside their transaction leave no slot behind; 8 sidecars
with admission, 3 of them killed (SIGKILL) with full queues, issue nothing twice and leak nothing.
MariaDB and the coupon schema come from tests/incident/cluster.py. Numbers are printed.
"""

import os
import random
import re
import signal
import socket
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

LOCK_WAIT_TIMEOUT_S = 2       # innodb_lock_wait_timeout for the test
CLIENTS = 64                  # concurrent app connections on one key
APP_WORK_S = 0.05             # the app's work inside its transaction, row held
MAX_IN_FLIGHT = 2
QUEUE_TIMEOUT = "15s"         # above 64 x the transaction time: nobody times out in the queue
STOCK_PLENTY = 100000
STOCK_FEW = 5
RESTOCK = 3
RECHECK_S = 0.2               # above the gate's sold_out_recheck (100 ms)
CAMPAIGN_OFF, CAMPAIGN_ON, CAMPAIGN_SOLD_OUT, CAMPAIGN_LEAK, CAMPAIGN_CLUSTER, CAMPAIGN_SHARE = 1, 2, 3, 4, 5, 6
ANSWER_TIMEOUT_S = 30         # no statement may block longer (a hang is a failure)
SIDECARS = 8
CLIENTS_PER_SIDECAR = 8
CLUSTER_STOCK = 60
KILLED = 3                    # sidecars killed with SIGKILL mid-race
KILL_AFTER_S = 1.0
SELL_OUT_WITHIN_S = 30.0
AFTER_SALE_S = 0.5
SOLD_OUT_PAUSE_S = 0.01
ER_LOCK_WAIT_TIMEOUT = 1205
QUEUE_TIMEOUT_OUTCOME = "1205-queue"  # claimguard's ERR 1205 after queue_timeout
ER_SOLD_OUT = 1644            # rules/examples/coupon.yaml's exhausted answer
ER_LOCK_DEADLOCK = 1213

ARGS = None


def admission_rules(dest, max_in_flight=MAX_IN_FLIGHT, queue_timeout=QUEUE_TIMEOUT):
    """rules/examples/coupon.yaml with an admission: block in its stock rule."""
    return cluster.rules_with_stock_lines(
        dest, ["admission:", f"  max_in_flight: {max_in_flight}", f"  queue_timeout: {queue_timeout}"])


def connect(port):
    return pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                           database=cluster.DATABASE, autocommit=True, read_timeout=ANSWER_TIMEOUT_S,
                           write_timeout=ANSWER_TIMEOUT_S, connect_timeout=10)


def metric(proxy, name):
    """A counter (the coupon_stock rule's sample) or a gauge (its one sample) of the sidecar's /metrics; 0 when
    absent."""
    return itlib.metric(proxy.admin_port, name, {"rule": "coupon_stock"} if name.endswith("_total") else None)


def claim_in_transaction(conn, campaign, user):
    """The app's flow: BEGIN; take one; work; insert the claim; COMMIT. Returns 'ok' or the ERR code."""
    cur = conn.cursor()
    try:
        cur.execute("BEGIN")
        cur.execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s", (campaign,))
        time.sleep(APP_WORK_S)
        cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)", (user, campaign))
        cur.execute("COMMIT")
        return "ok"
    except pymysql.err.MySQLError as e:
        code = e.args[0]
        if code == ER_LOCK_WAIT_TIMEOUT and len(e.args) > 1 and str(e.args[1]).startswith("claimguard:"):
            code = QUEUE_TIMEOUT_OUTCOME  # the sidecar's queue, not InnoDB's lock wait
    try:
        cur.execute("ROLLBACK")
    except pymysql.err.MySQLError:
        pass
    return code


def herd(port, campaign, clients=CLIENTS, first_user=1):
    """`clients` connections, each one claim_in_transaction at the same moment. {outcome: count}, seconds."""
    conns = [connect(port) for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    results = [None] * clients

    def run(i):
        start.wait()
        results[i] = claim_in_transaction(conns[i], campaign, first_user + i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began = time.monotonic()
    for t in threads:
        t.join(ANSWER_TIMEOUT_S * 3)
    took = time.monotonic() - began
    for c in conns:
        c.close()
    counts = {}
    for r in results:
        counts[r] = counts.get(r, 0) + 1
    return counts, took


class Admission(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work)
        cls.proxies = {}
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.reset({CAMPAIGN_OFF: STOCK_PLENTY, CAMPAIGN_ON: STOCK_PLENTY, CAMPAIGN_SOLD_OUT: STOCK_FEW,
                               CAMPAIGN_LEAK: STOCK_PLENTY, CAMPAIGN_CLUSTER: CLUSTER_STOCK,
                               CAMPAIGN_SHARE: STOCK_PLENTY})
            cls.cluster.sql(f"SET GLOBAL innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT_S};")
            rules_on = admission_rules(os.path.join(cls.work, "admission.yaml"))
            rules_one = admission_rules(os.path.join(cls.work, "admission-one.yaml"), max_in_flight=1,
                                        queue_timeout="10s")
            # "on" runs 2 I/O threads: a slot freed on one thread wakes a waiter on the other.
            for name, rules, threads in (("off", cluster.EXAMPLE_RULES, 1), ("on", rules_on, 2), ("one", rules_one, 1)):
                p = servers.Claimguard(ARGS.claimguard, cls.work, f"claimguard-{name}", cls.cluster.db.port,
                                       extra_args=["--rules", rules, "--threads", str(threads),
                                                   "--audit-log", os.path.join(cls.work, f"audit-{name}.jsonl")])
                cls.proxies[name] = p
                p.start()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        reports = []
        for p in list(cls.proxies.values()) + cls.cluster.proxies:
            try:
                p.stop()
            except AssertionError as e:
                reports.append(str(e))
        cls.cluster.db.stop()
        if reports:
            raise AssertionError("\n".join(reports))

    def assert_invariants(self, campaign, initial):
        facts = self.cluster.facts(campaign)
        self.assertLessEqual(facts["rows"], initial, "over-issued")
        self.assertEqual(initial - facts["remain"], facts["rows"], "initial - remain == claim rows")
        self.assertEqual(facts["duplicate_pairs"], 0, "a user claimed twice")
        return facts

    def test_hot_row_transactions_without_and_with_admission(self):
        off, took_off = herd(self.proxies["off"].port, CAMPAIGN_OFF)
        on, took_on = herd(self.proxies["on"].port, CAMPAIGN_ON)
        waits = metric(self.proxies["on"], "claimguard_admission_waits_total")
        print(f"\n    without admission: {off} in {took_off:.2f}s; with admission (max_in_flight {MAX_IN_FLIGHT}): "
              f"{on} in {took_on:.2f}s, {waits:.0f} waited in the queue")
        self.assertGreater(off.get(ER_LOCK_WAIT_TIMEOUT, 0), 0,
                           f"without admission some transactions should end in 1205: {off}")
        self.assertEqual(on, {"ok": CLIENTS}, "with admission every transaction commits")
        self.assertGreater(waits, 0)
        self.assertEqual(metric(self.proxies["on"], "claimguard_admission_queued"), 0)
        facts_off = self.assert_invariants(CAMPAIGN_OFF, STOCK_PLENTY)
        facts_on = self.assert_invariants(CAMPAIGN_ON, STOCK_PLENTY)
        self.assertEqual(facts_off["rows"], off.get("ok", 0))
        self.assertEqual(facts_on["rows"], CLIENTS)

    def test_sold_out_answers_the_queue_without_the_database(self):
        before = metric(self.proxies["one"], "claimguard_admission_sold_out_answers_total")
        counts, took = herd(self.proxies["one"].port, CAMPAIGN_SOLD_OUT, first_user=1000)
        answered = metric(self.proxies["one"], "claimguard_admission_sold_out_answers_total") - before
        print(f"\n    {STOCK_FEW} coupons, {CLIENTS} clients: {counts} in {took:.2f}s; "
              f"{answered:.0f} answered sold out by the queue")
        self.assertEqual(counts.get("ok", 0), STOCK_FEW)
        self.assertEqual(counts.get(ER_SOLD_OUT, 0), CLIENTS - STOCK_FEW, counts)
        self.assertGreater(answered, 0, "the queue answered sold out without the database")
        facts = self.assert_invariants(CAMPAIGN_SOLD_OUT, STOCK_FEW)
        self.assertEqual(facts["remain"], 0)
        # A restock this sidecar did not see (the DBA, directly): seen within the re-check interval.
        self.cluster.sql(f"UPDATE coupon_stock SET remain = remain + {RESTOCK} WHERE campaign_id = {CAMPAIGN_SOLD_OUT};")
        time.sleep(RECHECK_S)
        again, _ = herd(self.proxies["one"].port, CAMPAIGN_SOLD_OUT, clients=RESTOCK, first_user=2000)
        self.assertEqual(again, {"ok": RESTOCK}, "the restock was seen")
        facts = self.cluster.facts(CAMPAIGN_SOLD_OUT)
        self.assertEqual((facts["rows"], facts["remain"]), (STOCK_FEW + RESTOCK, 0))

    def test_disconnects_and_session_ends_leave_no_slot_behind(self):
        proxy = self.proxies["one"]  # max_in_flight 1: one leaked slot blocks the key
        holder = connect(proxy.port)
        holder.cursor().execute("BEGIN")
        holder.cursor().execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s", (CAMPAIGN_LEAK,))
        # Queued clients that hang up: raw sockets closed under a blocked PyMySQL call.
        queued = [connect(proxy.port) for _ in range(4)]
        errors = []

        def wait_in_queue(c):
            try:
                c.cursor().execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s",
                                   (CAMPAIGN_LEAK,))
                errors.append("answered")
            except Exception as e:  # noqa: BLE001 - the hang-up itself
                errors.append(type(e).__name__)

        threads = [threading.Thread(target=wait_in_queue, args=(c,)) for c in queued]
        for t in threads:
            t.start()
        itlib.wait_for(lambda: metric(proxy, "claimguard_admission_queued") >= 4, 10, "4 statements queued")
        for c in queued:
            c._sock.shutdown(socket.SHUT_RDWR)  # the client goes away while its statement waits
        for t in threads:
            t.join(10)
        itlib.wait_for(lambda: metric(proxy, "claimguard_admission_queued") == 0, 5, "the queue emptied")
        # The holder's session ends inside its transaction (no COMMIT): its slot goes with it.
        holder.close()
        began = time.monotonic()
        after = connect(proxy.port)
        after.cursor().execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s", (CAMPAIGN_LEAK,))
        took = time.monotonic() - began
        after.close()
        print(f"\n    4 queued clients hung up ({errors}); after the holder's disconnect the next decrement "
              f"took {took * 1000:.0f} ms")
        self.assertLess(took, 2.0, "the key's slot was given back (no wait for queue_timeout)")
        # ROLLBACK, and COMMIT with autocommit off (the transaction the UPDATE opened), end the turn too.
        for end in ("ROLLBACK", "COMMIT"):
            app = connect(proxy.port)
            app.autocommit(False)
            app.cursor().execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s", (CAMPAIGN_LEAK,))
            app.cursor().execute(end)
            began = time.monotonic()
            after = connect(proxy.port)
            after.cursor().execute("UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s",
                                   (CAMPAIGN_LEAK,))
            self.assertLess(time.monotonic() - began, 2.0, f"{end} gave the slot back")
            after.close()
            app.close()
        facts = self.cluster.facts(CAMPAIGN_LEAK)
        self.assertEqual(facts["remain"], STOCK_PLENTY - 4, "the autocommit decrements and the COMMIT only")

    def test_a_share_lock_holder_never_waits_behind_its_own_waiter(self):
        """Two transactions read the row LOCK IN SHARE MODE, then decrement it (correct directly: InnoDB
        finds the deadlock, the app retries). The second decrement must not wait in the queue behind the
        first, whose slot waits in InnoDB for the second's S lock: a cycle only timeouts would break
        (innodb_lock_wait_timeout here, queue_timeout 10 s)."""
        proxy = self.proxies["one"]
        before = metric(proxy, "claimguard_admission_lock_held_total")
        a, b = connect(proxy.port), connect(proxy.port)
        read = "SELECT remain FROM coupon_stock WHERE campaign_id = %s LOCK IN SHARE MODE"
        take = "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = %s"
        for c in (a, b):
            c.cursor().execute("BEGIN")
            c.cursor().execute(read, (CAMPAIGN_SHARE,))
        outcome = {}

        def run(name, conn):
            try:
                conn.cursor().execute(take, (CAMPAIGN_SHARE,))
                outcome[name] = "ok"
            except pymysql.err.MySQLError as e:
                outcome[name] = e.args[0] if not str(e.args[1]).startswith("claimguard:") else f"{e.args[0]}-claimguard"

        tb = threading.Thread(target=run, args=("b", b))
        tb.start()  # b holds the key's slot and waits in InnoDB for a's S lock
        itlib.wait_for(lambda: int(self.cluster.sql(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").split()[-1]) >= 1,
            5, "b waits for a's share lock")
        run("a", a)
        tb.join(ANSWER_TIMEOUT_S)
        for c in (a, b):
            try:
                c.cursor().execute("COMMIT")
            except pymysql.err.MySQLError:
                pass
            c.close()
        print(f"\n    two share-lock holders decrementing through max_in_flight 1: {outcome}")
        self.assertEqual(sorted(map(str, outcome.values())), sorted(["ok", str(ER_LOCK_DEADLOCK)]),
                         "InnoDB's deadlock answer for one, the take for the other (no lock wait timeout, no "
                         "queue timeout)")
        self.assertGreater(metric(proxy, "claimguard_admission_lock_held_total"), before,
                           "the decrement let through at once is counted")
        facts = self.cluster.facts(CAMPAIGN_SHARE)
        self.assertEqual(facts["remain"], STOCK_PLENTY - 1)

    def test_eight_sidecars_with_admission_some_killed_mid_race(self):
        rules = admission_rules(os.path.join(self.work, "admission-cluster.yaml"), max_in_flight=1,
                                queue_timeout="3s")
        proxies = self.cluster.start_proxies(ARGS.claimguard, SIDECARS, rules=rules, audit=False)
        stop = threading.Event()
        outcomes = {}
        lock = threading.Lock()
        next_user = [100000]

        def client(proxy):
            try:
                conn = connect(proxy.port)
            except pymysql.err.MySQLError:
                return
            while not stop.is_set():
                with lock:
                    next_user[0] += 1
                    user = next_user[0]
                r = claim_in_transaction(conn, CAMPAIGN_CLUSTER, user)
                with lock:
                    outcomes[r] = outcomes.get(r, 0) + 1
                if r not in ("ok", ER_SOLD_OUT, ER_LOCK_WAIT_TIMEOUT, QUEUE_TIMEOUT_OUTCOME):
                    return  # the sidecar went away
                if r == ER_SOLD_OUT:
                    time.sleep(SOLD_OUT_PAUSE_S)  # the herd keeps asking after the sale, a little slower

        threads = [threading.Thread(target=client, args=(p,)) for p in proxies for _ in range(CLIENTS_PER_SIDECAR)]
        for t in threads:
            t.start()
        time.sleep(KILL_AFTER_S)
        killed = proxies[:KILLED]
        queued_when_killed = [metric(p, "claimguard_admission_queued") for p in killed]
        for p in killed:
            servers.kill_pidfile(p.pid_file, "claimguard", sig=signal.SIGKILL)
            p.proc.wait()
        # The survivors go on until the sale is over (and a little after: the herd keeps asking).
        itlib.wait_for(lambda: self.cluster.facts(CAMPAIGN_CLUSTER)["remain"] == 0, SELL_OUT_WITHIN_S,
                       "the surviving sidecars sold the rest", interval_s=0.2)
        time.sleep(AFTER_SALE_S)
        stop.set()
        for t in threads:
            t.join(ANSWER_TIMEOUT_S)
        facts = self.assert_invariants(CAMPAIGN_CLUSTER, CLUSTER_STOCK)
        survivors = proxies[KILLED:]
        waits = sum(metric(p, "claimguard_admission_waits_total") for p in survivors)
        sold_out = sum(metric(p, "claimguard_admission_sold_out_answers_total") for p in survivors)
        print(f"\n    {SIDECARS} sidecars x {CLIENTS_PER_SIDECAR} clients, {KILLED} killed at +{KILL_AFTER_S}s "
              f"(queued then: {queued_when_killed}): {outcomes}; rows {facts['rows']}, remain {facts['remain']}; "
              f"survivors: {waits:.0f} waits, {sold_out:.0f} sold-out answers by the queue")
        lost = sum(n for r, n in outcomes.items()
                   if r not in ("ok", ER_SOLD_OUT, ER_LOCK_WAIT_TIMEOUT, QUEUE_TIMEOUT_OUTCOME))
        # A COMMIT whose answer the kill cut off may have committed: at most those rows beyond the "ok"s.
        self.assertGreaterEqual(facts["rows"], outcomes.get("ok", 0), "every committed claim is a row")
        self.assertLessEqual(facts["rows"], outcomes.get("ok", 0) + lost, "no row without its claim")
        self.assertEqual(facts["remain"], 0, "the survivors sold the rest")
        for p in survivors:
            self.assertEqual(metric(p, "claimguard_admission_queued"), 0, f"{p.name}: nothing left queued")
        for p in survivors:
            p.stop()
        self.cluster.proxies = []


def main():
    def keep(args):
        global ARGS
        ARGS = args
    random.seed(11)
    itlib.run_fixture_cases(Admission, "admission", __doc__, keep)


if __name__ == "__main__":
    main()
