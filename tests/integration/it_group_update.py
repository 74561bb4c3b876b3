#!/usr/bin/env python3
"""group_update (issue 20 item 1): coalesced takes through 8 real claimguard sidecars, MariaDB and Redis.

Usage: it_group_update.py --claimguard PATH --work-dir DIR [unittest args]

The naive app in autocommit: SELECT remain; if some are left, UPDATE coupon_stock SET remain = <read - 1>,
version = version + 1; then INSERT the claim. 64 threads (8 per sidecar) of it on one campaign of 100
coupons, users drawn from a pool so some claim twice, until the sale is over and a little after. With
admission and group_update the sidecars send the queued takes of the key as one UPDATE: every claim
has its unit and no more (claims == stock, remain 0), no user holds two coupons, a duplicate's unit
goes back, the version column counts every take and give-back (STOCK + 2 x duplicates), and the batch metric shows batches of
more than one take. A second run SIGKILLs 3 of the 8 sidecars mid-sale: never over-issued, and the
units taken without a claim stay within the documented bound (the killed sidecars' clients' takes).
A third sale sends the same flow as prepared statements (claimguard-load --protocol prepared, libmariadb's
mysql_stmt_*: COM_STMT_EXECUTE with bound values): its takes are grouped the same way.
MariaDB, Redis and the coupon schema come from tests/incident/cluster.py. Numbers are printed.

Usage adds --load PATH (the claimguard-load binary).
"""

import argparse
import os
import random
import re
import signal
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

SIDECARS = 8
CLIENTS_PER_SIDECAR = 8       # 64 app threads
STOCK = 100
USERS = 600                   # users drawn at random: some try twice
CAMPAIGN_SALE, CAMPAIGN_KILL, CAMPAIGN_PREPARED = 1, 2, 3
KILLED = 3
KILL_AFTER_S = 0.5
SELL_OUT_WITHIN_S = 60.0
AFTER_SALE_S = 0.5
SOLD_OUT_PAUSE_S = 0.005
ANSWER_TIMEOUT_S = 30
ER_SOLD_OUT = 1644            # rules/examples/coupon.yaml's exhausted answer
ER_DUP_ENTRY = 1062
DUPLICATE = "duplicate"       # the claim INSERT refused: the user holds a coupon already

ARGS = None
LOAD = None                   # the claimguard-load binary (--load)


def group_rules(dest):
    """rules/examples/coupon.yaml with admission, group_update and the read cache on its stock rule."""
    return cluster.rules_with_stock_lines(dest, [
        "admission: {max_in_flight: 1, queue_timeout: 10s}",
        "group_update: {max_batch: 32, max_wait: 2ms}",
        "read_cache: 20ms",
    ])


def connect(port):
    return pymysql.connect(host=servers.HOST, port=port, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                           database=cluster.DATABASE, autocommit=True, read_timeout=ANSWER_TIMEOUT_S,
                           write_timeout=ANSWER_TIMEOUT_S, connect_timeout=10)


def metric(proxy, name):
    """The coupon_stock rule's sample of a counter of the sidecar's /metrics (0 when absent)."""
    return itlib.metric(proxy.admin_port, name, {"rule": "coupon_stock"})


def naive_claim(cur, campaign, user):
    """The app as written: read, write what it computed, insert the claim. Its outcome."""
    try:
        cur.execute("SELECT remain FROM coupon_stock WHERE campaign_id = %s", (campaign,))
        remain = cur.fetchone()[0]
        if remain <= 0:
            return "none-left"
        cur.execute("UPDATE coupon_stock SET remain = %s, version = version + 1 WHERE campaign_id = %s",
                    (remain - 1, campaign))
        if cur.rowcount != 1:
            return f"rows-{cur.rowcount}"
    except pymysql.err.MySQLError as e:
        return e.args[0]
    try:
        cur.execute("INSERT INTO coupon_order (user_id, campaign_id) VALUES (%s, %s)", (user, campaign))
        return "ok"
    except pymysql.err.MySQLError as e:
        # The rule's duplicate answer (coupon.yaml: 1644 "already claimed"), or the unique index's 1062.
        return DUPLICATE if e.args[0] in (ER_SOLD_OUT, ER_DUP_ENTRY) else e.args[0]


def run_sale(proxies, campaign, watch, kill=None):
    """CLIENTS_PER_SIDECAR threads per sidecar claim until `campaign` is sold out (and AFTER_SALE_S more).
    `kill(proxies)` runs KILL_AFTER_S in. {outcome: count}."""
    stop = threading.Event()
    outcomes = {}
    lock = threading.Lock()
    rnd = random.Random(20 + campaign)

    def client(proxy):
        try:
            conn = connect(proxy.port)
        except pymysql.err.MySQLError:
            return
        cur = conn.cursor()
        while not stop.is_set():
            with lock:
                user = rnd.randint(1, USERS)
            try:
                r = naive_claim(cur, campaign, user)
            except Exception:  # noqa: BLE001 - a connection cut under the driver (a killed sidecar)
                r = "gone"
            with lock:
                outcomes[r] = outcomes.get(r, 0) + 1
            if r == "gone" or (isinstance(r, int) and (r == 0 or r >= 2000)):
                return  # the sidecar went away
            if r in ("none-left", ER_SOLD_OUT):
                time.sleep(SOLD_OUT_PAUSE_S)
        conn.close()

    threads = [threading.Thread(target=client, args=(p,)) for p in proxies for _ in range(CLIENTS_PER_SIDECAR)]
    for t in threads:
        t.start()
    if kill:
        time.sleep(KILL_AFTER_S)
        kill(proxies)
    itlib.wait_for(lambda: watch.facts(campaign)["remain"] == 0, SELL_OUT_WITHIN_S, "the sale sold out",
                   interval_s=0.2)
    time.sleep(AFTER_SALE_S)
    stop.set()
    for t in threads:
        t.join(ANSWER_TIMEOUT_S * 2)
    return outcomes


class GroupUpdate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work)
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.start_redis()
            cls.cluster.reset({CAMPAIGN_SALE: STOCK, CAMPAIGN_KILL: STOCK, CAMPAIGN_PREPARED: STOCK})
            cls.rules = group_rules(os.path.join(cls.work, "group-update.yaml"))
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def start_sidecars(self):
        # A failed test's sidecars are still running (and listed): stopped first, before new ones reuse their
        # names and pid files (the cluster stops the listed ones at the end).
        self.stop_sidecars(self.cluster.proxies)
        return self.cluster.start_proxies(ARGS.claimguard, SIDECARS, rules=self.rules, audit=False,
                                          extra_args=["--threads", "2"])

    def stop_sidecars(self, proxies):
        for p in list(proxies):
            p.stop()
        self.cluster.proxies = []

    def test_sale_through_eight_sidecars_grouped(self):
        proxies = self.start_sidecars()
        began = time.monotonic()
        outcomes = run_sale(proxies, CAMPAIGN_SALE, self.cluster)
        took = time.monotonic() - began
        facts = self.cluster.facts(CAMPAIGN_SALE)
        batches = sum(metric(p, "claimguard_group_update_batches_total") for p in proxies)
        takes = sum(metric(p, "claimguard_group_update_takes_total") for p in proxies)
        dups = outcomes.get(DUPLICATE, 0)
        print(f"\n    {SIDECARS} sidecars x {CLIENTS_PER_SIDECAR} threads, {STOCK} coupons: {outcomes} in "
              f"{took:.2f}s; rows {facts['rows']}, remain {facts['remain']}, version {facts['version']}; "
              f"{batches:.0f} batches of {takes:.0f} takes (mean {takes / max(batches, 1):.1f})")
        self.assertEqual(facts["rows"], STOCK, "claims == stock")
        self.assertEqual(facts["remain"], 0)
        self.assertEqual(facts["duplicate_pairs"], 0, "a user claimed twice")
        self.assertEqual(outcomes.get("ok", 0), STOCK, "every claim answered OK is a row")
        self.assertGreater(dups, 0, "some users tried twice (the pool is small enough)")
        # Every take bumped the version once (a batch by its number of takes), and so did every give-back
        # of a duplicate's unit: the claims' takes, the duplicates' takes, the duplicates' give-backs.
        self.assertEqual(facts["version"], STOCK + 2 * dups, "version == takes + give-backs")
        self.assertGreater(batches, 0, "batches were sent")
        self.assertGreater(takes, batches, "a batch held more than one take")
        unexpected = {k: v for k, v in outcomes.items() if k not in ("ok", "none-left", ER_SOLD_OUT, DUPLICATE)}
        self.assertEqual(unexpected, {}, "only claims, sold out and duplicates")
        self.stop_sidecars(proxies)

    def test_prepared_statements_are_grouped_too(self):
        proxies = self.start_sidecars()
        claimed = duplicates = rounds = 0
        # Rounds of 600 users trying twice until the stock is gone: a duplicate's unit goes back, and the last
        # units a late give-back returns are sold to the next round's users (as a sale's next visitors).
        while self.cluster.facts(CAMPAIGN_PREPARED)["remain"] > 0 and rounds < 5:
            cmd = [LOAD, "--protocol", "prepared", "--flow", "naive", "--campaign", str(CAMPAIGN_PREPARED),
                   "--user", cluster.APP_USER, "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE,
                   "--threads", str(SIDECARS * CLIENTS_PER_SIDECAR), "--first-user", str(1 + rounds * USERS),
                   "--users", str(USERS), "--attempts-per-user", "2", "--seed", str(20 + rounds), "--json"]
            for p in proxies:
                cmd += ["--target", f"{servers.HOST}:{p.port}"]
            report = cluster.run_load(cmd, 120)
            self.assertEqual(report["other_errors"], 0, report["errors"])
            claimed += report["claimed"]
            duplicates += report["duplicate"]
            rounds += 1
        facts = self.cluster.facts(CAMPAIGN_PREPARED)
        batches = sum(metric(p, "claimguard_group_update_batches_total") for p in proxies)
        takes = sum(metric(p, "claimguard_group_update_takes_total") for p in proxies)
        print(f"\n    prepared, {rounds} round(s): claimed {claimed}, already claimed {duplicates}; rows {facts['rows']}, "
              f"remain {facts['remain']}; {batches:.0f} batches of {takes:.0f} takes")
        self.assertEqual(facts["rows"], STOCK, "claims == stock")
        self.assertEqual(facts["remain"], 0)
        self.assertEqual(facts["duplicate_pairs"], 0, "a user claimed twice")
        self.assertEqual(claimed, STOCK, "every claim answered OK is a row")
        self.assertGreater(duplicates, 0, "some users tried twice")
        self.assertGreater(takes, batches, "a batch held more than one prepared take")
        self.stop_sidecars(proxies)

    def test_sidecars_killed_mid_sale_never_over_issue(self):
        proxies = self.start_sidecars()
        killed = proxies[:KILLED]

        def kill(_):
            for p in killed:
                servers.kill_pidfile(p.pid_file, "claimguard", sig=signal.SIGKILL)
                p.proc.wait()
            self.cluster.proxies = proxies[KILLED:]  # only the survivors are stopped at the end

        outcomes = run_sale(proxies, CAMPAIGN_KILL, self.cluster, kill=kill)
        facts = self.cluster.facts(CAMPAIGN_KILL)
        taken = STOCK - facts["remain"]
        leaked = taken - facts["rows"]
        bound = KILLED * CLIENTS_PER_SIDECAR  # at most one take without its claim per killed client
        print(f"\n    {KILLED} of {SIDECARS} sidecars killed at +{KILL_AFTER_S}s: {outcomes}; rows {facts['rows']}, "
              f"remain {facts['remain']}, taken without a claim {leaked} (bound {bound})")
        self.assertLessEqual(facts["rows"], STOCK, "over-issued")
        self.assertEqual(facts["duplicate_pairs"], 0, "a user claimed twice")
        self.assertGreaterEqual(leaked, 0, "a claim without its unit")
        self.assertLessEqual(leaked, bound, "leak within the crash bound")
        self.assertGreaterEqual(facts["rows"], outcomes.get("ok", 0), "every claim answered OK is a row")
        self.stop_sidecars(proxies[KILLED:])


def main():
    global LOAD
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--load", required=True)
    known, sys.argv[1:] = ap.parse_known_args()
    LOAD = known.load

    def keep(args):
        global ARGS
        ARGS = args
    random.seed(20)
    itlib.run_fixture_cases(GroupUpdate, "group_update", __doc__, keep)


if __name__ == "__main__":
    main()
