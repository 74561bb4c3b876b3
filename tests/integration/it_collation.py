#!/usr/bin/env python3
"""String keys under the key column's collation, through a running claimguard (issue 17).

Usage: it_collation.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB 10.11 (tests/incident/cluster.py) with two stock tables keyed by a VARCHAR campaign_code and
their claim tables: promo_* in utf8mb4_general_ci (MariaDB's default) and promo_bin_* in utf8mb4_bin. One
claimguard with schema_check_user set (so the schema check reads the key columns' COLLATION_NAME):
- ci: a take with 'sale-2026' backs a claim with 'SALE-2026' (and 'SALE-2026 '); remain and orders agree;
- bin: a take with 'sale-2026' never backs a claim with 'SALE-2026' (another row for the database): the claim
  is blocked, nothing over-issued; the claim with the take's own spelling then uses it;
- the server's own answers to the equalities claimguard relies on (PAD SPACE _bin, NO PAD variants).
"""

import argparse
import json
import os
import shutil
import sys
import time
import unittest
import urllib.request

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py: MariaDB + the coupon schema)
import itlib  # noqa: E402
import servers  # noqa: E402

STOCK = 10
CHECK_USER = "cg_check"
CHECK_PASSWORD = "check-Pw1"
CLIENT_TIMEOUT_S = 10
ERR_SOLD_OUT = 1644

TABLES = """
CREATE TABLE promo_stock (
  campaign_code VARCHAR(32) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,
  remain INT NOT NULL, version INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4;
CREATE TABLE promo_order (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL,
  campaign_code VARCHAR(32) COLLATE utf8mb4_general_ci NOT NULL,
  UNIQUE KEY uq_promo_order (user_id, campaign_code)) DEFAULT CHARSET=utf8mb4;
CREATE TABLE promo_bin_stock (
  campaign_code VARCHAR(32) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  remain INT NOT NULL, version INT NOT NULL DEFAULT 0) DEFAULT CHARSET=utf8mb4;
CREATE TABLE promo_bin_order (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL,
  campaign_code VARCHAR(32) COLLATE utf8mb4_bin NOT NULL,
  UNIQUE KEY uq_promo_bin_order (user_id, campaign_code)) DEFAULT CHARSET=utf8mb4;
"""

CHECK_GRANTS = f"""
CREATE USER '{CHECK_USER}'@'%' IDENTIFIED BY '{CHECK_PASSWORD}';
GRANT SELECT, SHOW VIEW, TRIGGER, EVENT ON {cluster.DATABASE}.* TO '{CHECK_USER}'@'%';
GRANT SELECT ON mysql.proc TO '{CHECK_USER}'@'%';
FLUSH PRIVILEGES;
"""


def rule_pair(prefix):
    return f"""
  - name: {prefix}_stock
    table: {prefix}_stock
    key_columns: [campaign_code]
    counter_column: remain
    version_column: version
    floor: 0
    units: 1
    unmodeled: refuse
    exhausted:
      type: error
      code: {ERR_SOLD_OUT}
      sqlstate: "45000"
      message: "claimguard: {prefix}_stock is sold out for this key"
"""


def claim_rule(prefix):
    return f"""
  - name: {prefix}_order
    table: {prefix}_order
    idempotency_columns: [user_id, campaign_code]
    consumes:
      rule: {prefix}_stock
      columns:
        campaign_code: campaign_code
    duplicate:
      type: error
      code: {ERR_SOLD_OUT}
      sqlstate: "45000"
      message: "claimguard: already claimed"
    strictness: require_decrement
    unmodeled: refuse
"""


RULES = ("default_mode: enforce\n\nstock_rules:" + rule_pair("promo") + rule_pair("promo_bin") +
         "\nclaim_rules:" + claim_rule("promo") + claim_rule("promo_bin"))

ARGS = None


class Collation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.sql(TABLES)
        cls.cluster.db.sql(CHECK_GRANTS)
        cls.rules = os.path.join(cls.work, "rules.yaml")
        with open(cls.rules, "w", encoding="utf-8") as f:
            f.write(RULES)
        cls.audit = os.path.join(cls.work, "audit.jsonl")
        cls.proxy = servers.Claimguard(ARGS.claimguard, cls.work, "claimguard", cls.cluster.db.port,
                                       extra_args=["--rules", cls.rules, "--schema-check", "warn",
                                                   "--schema-check-user", CHECK_USER,
                                                   "--schema-check-password", CHECK_PASSWORD,
                                                   "--schema-check-database", cluster.DATABASE,
                                                   "--audit-log", cls.audit])
        cls.cluster.proxies.append(cls.proxy)
        cls.proxy.start()
        # The first check hands the snapshot the key columns' comparisons (/rules shows them).
        itlib.wait_for(lambda: cls.key_compare() == {"promo_stock": ["ci_pad"], "promo_bin_stock": ["bytes_pad"]},
                       CLIENT_TIMEOUT_S, "the schema check read the key collations")

    @classmethod
    def key_compare(cls):
        url = f"http://{servers.HOST}:{cls.proxy.admin_port}/rules"
        with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT_S) as r:
            body = json.loads(r.read().decode())
        return {s["name"]: s.get("key_compare") for s in body["stock_rules"]}

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()
        self.cluster.sql("TRUNCATE TABLE promo_order; TRUNCATE TABLE promo_bin_order; DELETE FROM promo_stock; "
                         "DELETE FROM promo_bin_stock; "
                         f"INSERT INTO promo_stock VALUES ('sale-2026', {STOCK}, 0); "
                         f"INSERT INTO promo_bin_stock VALUES ('sale-2026', {STOCK}, 0);")

    def tearDown(self):
        print(f"  {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f}s", file=sys.stderr)

    def connect(self):
        return pymysql.connect(host=servers.HOST, port=self.proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               connect_timeout=CLIENT_TIMEOUT_S, read_timeout=CLIENT_TIMEOUT_S)

    def db_facts(self, prefix):
        out = self.cluster.sql(f"SELECT remain FROM {prefix}_stock; SELECT COUNT(*) FROM {prefix}_order;").split()
        return int(out[0]), int(out[1])

    def take(self, prefix, spelling, value):
        """The incident's absolute write on its own connection (a pool lending one per statement)."""
        with self.connect() as c, c.cursor() as cur:
            return cur.execute(f"UPDATE {prefix}_stock SET remain = %s WHERE campaign_code = %s", (value, spelling))

    def claim(self, prefix, user, spelling):
        with self.connect() as c, c.cursor() as cur:
            return cur.execute(f"INSERT INTO {prefix}_order (user_id, campaign_code) VALUES (%s, %s)", (user, spelling))

    def test_1_server_compares_as_claimguard_assumes(self):
        """The equalities the canonical forms rely on, asked of the server itself (key_collation_test's table)."""
        cases = [("'sale-2026' = 'SALE-2026 ' COLLATE utf8mb4_general_ci", 1),
                 ("'sale-2026' = 'SALE-2026 ' COLLATE utf8mb4_unicode_ci", 1),
                 ("'sale-2026' = 'sale-2026 ' COLLATE utf8mb4_bin", 1),  # _bin is PAD SPACE
                 ("'sale-2026' = 'SALE-2026' COLLATE utf8mb4_bin", 0),
                 ("'sale-2026' = 'sale-2026 ' COLLATE utf8mb4_nopad_bin", 0),
                 ("'sale-2026' = 'SALE-2026' COLLATE utf8mb4_general_nopad_ci", 1),
                 ("'sale-2026' = 'SALE-2026 ' COLLATE utf8mb4_general_nopad_ci", 0),
                 ("'I' = 'i' COLLATE utf8mb4_turkish_ci", 0),  # why turkish_ci is not folded
                 ("'caf\u00e9' = 'CAF\u00c9' COLLATE utf8mb4_general_ci", 1)]  # equal, but kept apart (safe)
        for expr, expected in cases:
            got = int(self.cluster.sql(f"SET NAMES utf8mb4; SELECT {expr};").split()[-1])
            self.assertEqual(got, expected, expr)

    def test_2_ci_take_backs_a_claim_spelled_otherwise(self):
        self.assertEqual(self.take("promo", "sale-2026", STOCK - 1), 1)
        self.assertEqual(self.claim("promo", 1, "SALE-2026"), 1)
        self.assertEqual(self.take("promo", "Sale-2026", STOCK - 2), 1)
        self.assertEqual(self.claim("promo", 2, "SALE-2026 "), 1)
        remain, orders = self.db_facts("promo")
        self.assertEqual(remain, STOCK - 2)
        self.assertEqual(STOCK - remain, orders)  # no leak, no over-issue

    def test_3_bin_take_never_backs_another_row(self):
        self.assertEqual(self.take("promo_bin", "sale-2026", STOCK - 1), 1)
        with self.assertRaises(pymysql.err.MySQLError) as caught:
            self.claim("promo_bin", 1, "SALE-2026")
        self.assertEqual(caught.exception.args[0], ERR_SOLD_OUT, caught.exception.args)
        remain, orders = self.db_facts("promo_bin")
        self.assertEqual((remain, orders), (STOCK - 1, 0))  # the unit waits for its own row's claim
        # PAD SPACE: trailing spaces are the same row under utf8mb4_bin too, and use the take.
        self.assertEqual(self.claim("promo_bin", 2, "sale-2026 "), 1)
        remain, orders = self.db_facts("promo_bin")
        self.assertEqual((remain, orders), (STOCK - 1, 1))


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
