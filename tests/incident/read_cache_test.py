#!/usr/bin/env python3
"""The naive app's flash sale through 8 sidecars whose stock rule has read_cache (issue 11 part 1).

Usage: read_cache_test.py --claimguard PATH --work-dir DIR [--seconds S]

One MariaDB with the coupon schema (cluster.py), 8 claimguard sidecars with the example rules plus
`read_cache: 50ms`, 24 PyMySQL threads running the legacy claim (SELECT remain; UPDATE remain = <read - 1>;
INSERT the order) for random users of a pool smaller than the attempts (so users try twice). A DBA
restocks directly in MariaDB twice: once during the sale and once after it sold out (the sidecars then
answer 0 from their caches until the TTL passes). The attempts go on until the restocked units are
sold. Invariants: no over-issue, initial + restocked - remain == orders, no user twice, remain 0 at the
end (the restocked units got sold). Prints the database's SELECTs per attempt and the cache's
hits/misses/refreshes summed over the sidecars.
"""

import argparse
import os
import random
import re
import sys
import threading
import time

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402  (also puts tests/integration on sys.path)
import itlib  # noqa: E402
import it_read_cache  # noqa: E402  (rules_with_read_cache)

SIDECARS = 8
THREADS = 24
CAMPAIGN = 11
INITIAL = 100
RESTOCK_DURING = 30      # added directly in MariaDB when remain first drops to RESTOCK_AT or below
RESTOCK_AT = 30
RESTOCK_SOLD_OUT = 20    # added once the sale sold out
USERS = 600              # more than the stock; fewer than the attempts
TTL_MS = 50
DEADLINE_S = 60          # the harness's own limit (all servers stopped by then)
ER_SIGNAL = 1644         # the rules' sold-out and already-claimed answers
SOLD_OUT_ATTEMPTS = 300  # attempts after the last restock was sold (reads only: the cache answers them)


def naive_claim(conn, user):
    """The legacy claim: 'claimed', 'read_zero', 'refused' (sold out at the UPDATE) or 'duplicate'."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
        remain = cur.fetchone()[0]
        if remain <= 0:
            return "read_zero"
        try:
            cur.execute(f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {CAMPAIGN}")
        except pymysql.MySQLError as e:
            if e.args[0] == ER_SIGNAL:
                return "refused"
            raise
        try:
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN})")
        except pymysql.MySQLError as e:
            if e.args[0] == ER_SIGNAL:
                return "duplicate"
            raise
        return "claimed"


class Sale:
    def __init__(self, proxies):
        self.proxies = proxies
        self.lock = threading.Lock()
        self.outcomes = {}
        self.attempts = 0
        self.errors = []
        self.stop = threading.Event()
        self.restocked = 0
        self.phase = "selling"  # selling -> restocked_during -> restocked_after -> done
        self.after_last = 0     # attempts since the last restock was sold
        # The database said 0 for 3 TTLs in a row after that: every cache has seen it, and a unit a
        # duplicate gave back just before (which other sidecars learn within the TTL) was sold again.
        self.drained = False

    def worker(self, index):
        rng = random.Random(index)
        proxy = self.proxies[index % len(self.proxies)]
        conn = pymysql.connect(host=cluster.HOST, port=proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True)
        try:
            while not self.stop.is_set():
                try:
                    outcome = naive_claim(conn, rng.randrange(1, USERS + 1))
                except pymysql.MySQLError as e:
                    with self.lock:
                        self.errors.append(repr(e))
                    continue
                with self.lock:
                    self.attempts += 1
                    self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
                    if self.phase == "done" and self.drained:
                        self.after_last += 1
                        if self.after_last >= SOLD_OUT_ATTEMPTS:
                            self.stop.set()
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    c = cluster.start_harness(args.work_dir, DEADLINE_S)
    checks = cluster.Checks()
    started = time.monotonic()
    try:
        c.start_db()
        rules = it_read_cache.rules_with_read_cache(cluster.EXAMPLE_RULES, os.path.join(c.dir, "rules.yaml"), TTL_MS)
        proxies = c.start_proxies(args.claimguard, SIDECARS, rules=rules, audit=False)
        c.reset({CAMPAIGN: INITIAL})
        selects_before = int(c.db.sql("SHOW GLOBAL STATUS LIKE 'Com_select';").split()[-1])
        sale = Sale(proxies)
        threads = [threading.Thread(target=sale.worker, args=(i,), daemon=True) for i in range(THREADS)]
        began = time.monotonic()
        zero_since = None
        for t in threads:
            t.start()
        # The DBA, directly in MariaDB: a restock during the sale, one after it sold out.
        while not sale.stop.is_set() and time.monotonic() - began < DEADLINE_S - 20:
            remain = int(c.sql(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};").split()[0])
            with sale.lock:
                phase = sale.phase
            if phase == "selling" and remain <= RESTOCK_AT:
                c.sql(f"UPDATE coupon_stock SET remain = remain + {RESTOCK_DURING} WHERE campaign_id = {CAMPAIGN};")
                with sale.lock:
                    sale.restocked += RESTOCK_DURING
                    sale.phase = "restocked_during"
                print(f"    +{time.monotonic() - began:.2f}s restocked {RESTOCK_DURING} at remain {remain}")
            elif phase == "restocked_during" and remain == 0:
                time.sleep(0.2)  # sold out for a while: the sidecars answer 0 from their caches
                c.sql(f"UPDATE coupon_stock SET remain = remain + {RESTOCK_SOLD_OUT} WHERE campaign_id = {CAMPAIGN};")
                with sale.lock:
                    sale.restocked += RESTOCK_SOLD_OUT
                    sale.phase = "restocked_after"
                print(f"    +{time.monotonic() - began:.2f}s restocked {RESTOCK_SOLD_OUT} after it sold out")
            elif phase == "restocked_after" and remain == 0:
                with sale.lock:
                    sale.phase = "done"
                zero_since = time.monotonic()
                print(f"    +{time.monotonic() - began:.2f}s the restocked units are sold")
            elif phase == "done":
                if remain != 0:
                    zero_since = None  # a unit given back after a duplicate: it sells again
                elif zero_since is None:
                    zero_since = time.monotonic()
                elif time.monotonic() - zero_since >= 3 * TTL_MS / 1000:
                    with sale.lock:
                        sale.drained = True
            time.sleep(0.02)
        sale.stop.set()
        for t in threads:
            t.join(timeout=10)
        elapsed = time.monotonic() - began
        selects = int(c.db.sql("SHOW GLOBAL STATUS LIKE 'Com_select';").split()[-1]) - selects_before
        facts = c.facts(CAMPAIGN)
        cache = {r: sum(itlib.metric(p.admin_port, "claimguard_read_cache_total", {"rule": "coupon_stock", "result": r})
                        for p in proxies) for r in ("hit", "miss", "refresh", "bypass")}
        print(f"    {sale.attempts} attempts in {elapsed:.1f}s by {THREADS} threads through {SIDECARS} sidecars: "
              f"{sale.outcomes}")
        print(f"    read cache over the sidecars: {cache}; SELECTs that reached MariaDB: {selects} "
              f"({selects / max(1, sale.attempts):.3f} per attempt, the harness's own polls included)")
        total = INITIAL + sale.restocked
        checks.equal(sale.errors, [], "no unexpected errors")
        checks.equal(sale.phase, "done", "both restocks happened and the restocked units were sold")
        checks.check(facts["rows"] <= total, "no over-issue", f"{facts['rows']} orders, {total} units")
        checks.equal(total - facts["remain"], facts["rows"], "initial + restocked - remain == orders")
        checks.equal(facts["duplicate_pairs"], 0, "no user twice")
        checks.equal(facts["remain"], 0, "sold out at the end")
        checks.equal(sale.outcomes.get("claimed", 0), facts["rows"], "every claimed answer is an order row")
        checks.check(cache["hit"] > cache["miss"] + cache["refresh"], "most reads answered by the sidecars",
                     str(cache))
        checks.check(selects < sale.attempts / 2, "fewer SELECTs reach MariaDB than half the attempts",
                     f"{selects} for {sale.attempts}")
    except cluster.HarnessError as e:
        checks.check(False, "harness", str(e))
    finally:
        c.stop()
    print(f"    {checks.passed} checks passed, {len(checks.failed)} failed, {time.monotonic() - started:.1f}s")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
