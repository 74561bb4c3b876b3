#!/usr/bin/env python3
"""Unit tests of scripts/bench_flash.py's pure parts: cell names, the stock-rule lines of a set-up, the rules
without version_column of reserve, /metrics parsing, what a cell's features did, and issue 20's goal lines.
No server is started. Usage: bench_flash_test.py [unittest args]"""

import os
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import bench_flash as bf  # noqa: E402


class Cells(unittest.TestCase):
    def test_direct_and_one_sidecar(self):
        c = bf.parse_cell("fixed_tx_direct")
        self.assertEqual((c.flow, c.via, c.features, c.sidecars, c.setup), ("fixed_tx", "direct", (), 0, "direct"))
        self.assertTrue(c.safe)
        self.assertFalse(bf.parse_cell("naive_direct").safe)
        c = bf.parse_cell("naive_claimguard+read_cache+admission")
        self.assertEqual((c.flow, c.via, c.features, c.sidecars), ("naive", "rules_redis+admission+read_cache",
                                                                     ("admission", "read_cache"), 1))
        self.assertEqual(c.setup, c.via)

    def test_n_sidecars(self):
        c = bf.parse_cell("naive_claimguard8+group_update")
        self.assertEqual((c.flow, c.via, c.sidecars, c.setup),
                         ("naive", "rules_redis+group_update", 8, "rules_redis+group_updatex8"))
        self.assertEqual(bf.parse_cell("naive_tx_claimguard8+reserve").flow, "naive_tx")
        # One sidecar however written: the same set-up.
        one = bf.parse_cell("naive_claimguard+reserve")
        self.assertEqual(bf.parse_cell("naive_claimguard1+reserve").setup, one.setup)
        self.assertEqual(bf.parse_cell("naive_claimguard12").sidecars, 12)

    def test_bad_cells(self):
        for name in ("naive", "naive_relay", "slow_direct", "naive_direct+read_cache", "naive_claimguard+nope",
                     "naive_claimguard0", "naive_claimguard08", "naive_claimguardx", "naive_claimguard65",
                     "naive_claimguard+reserve+reserve"):
            with self.subTest(name=name), self.assertRaises(ValueError):
                bf.parse_cell(name)

    def test_every_default_cell_parses(self):
        sys.argv = ["bench_flash.py", "--claimguard", "x", "--load", "y", "--doc", "z"]
        args = bf.parse_args()
        names = [c.name for suite in bf.SUITES for c in args.cells[suite]]
        self.assertIn("naive_claimguard8+read_cache+group_update", names)
        self.assertIn("naive_tx_claimguard8+reserve", names)
        self.assertEqual(args.herd_stocks, [100, 10000])
        self.assertEqual(args.threads["autocommit"], [1, 8, 64])


class StockLines(unittest.TestCase):
    def test_group_update_brings_admission(self):
        lines = bf.stock_lines(bf.FEATURES, ("group_update",))
        self.assertEqual([line.split(":")[0] for line in lines], ["admission", "group_update"])

    def test_a_named_admission_wins(self):
        lines = bf.stock_lines(bf.FEATURES, ("admission", "group_update", "read_cache"))
        self.assertEqual(lines, bf.FEATURES["admission"] + [bf.FEATURES["group_update"][1]] + bf.FEATURES["read_cache"])
        self.assertEqual(sum(line.startswith("admission:") for line in lines), 1)

    def test_a_features_own_field_wins_whatever_the_order(self):
        # group_update sorts before read_cache; read_cache's own line still gives the read_cache field.
        mine = dict(bf.FEATURES, group_update=["read_cache: 1s"] + bf.FEATURES["group_update"])
        lines = bf.stock_lines(mine, ("group_update", "read_cache"))
        self.assertEqual([line for line in lines if line.startswith("read_cache:")], ["read_cache: 50ms"])
        self.assertEqual(len(lines), 2 + len(bf.FEATURES["read_cache"]))

    def test_overridden_lines(self):
        mine = dict(bf.FEATURES, group_update=["group_update: {max_batch: 8}"])
        self.assertEqual(bf.stock_lines(mine, ("group_update",)), ["group_update: {max_batch: 8}"])

    def test_reserve_rules_have_no_version_column(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = bf.reserve_base_rules(os.path.join(tmp, "r.yaml"))
            with open(path, encoding="utf-8") as f:
                text = f.read()
        self.assertNotIn("version_column", text)
        self.assertIn("counter_column: remain", text)


class Metrics(unittest.TestCase):
    BODY = """# HELP claimguard_group_update_batches_total x
# TYPE claimguard_group_update_batches_total counter
claimguard_group_update_batches_total{rule="coupon_stock"} 10
claimguard_group_update_takes_total{rule="coupon_stock"} 45
claimguard_reserve_takes_total{rule="coupon_stock",result="served"} 7
claimguard_reserve_refills_total 2
"""

    def test_parse(self):
        m = bf.parse_metrics(self.BODY)
        self.assertEqual(m[bf.METRICS["group_batches"]], 10.0)
        self.assertEqual(m[bf.METRICS["group_takes"]], 45.0)
        self.assertEqual(m[bf.METRICS["reserve_served"]], 7.0)
        self.assertEqual(m[bf.METRICS["reserve_refills"]], 2.0)

    def test_feature_work(self):
        text, idle = bf.feature_work(("group_update",), {"group_batches": 10, "group_takes": 45}, 45)
        self.assertEqual(idle, [])
        self.assertIn("45 takes in 10 batches (4.5 per batch)", text)
        # Batches of one take each: nothing was grouped.
        text, idle = bf.feature_work(("group_update",), {"group_batches": 5, "group_takes": 5}, 5)
        self.assertEqual(idle, ["group_update"])
        self.assertIn("DID NOTHING: group_update", text)
        text, idle = bf.feature_work(("read_cache", "reserve"), {"read_cache_hits": 3}, 9)
        self.assertEqual(idle, ["reserve"])
        text, idle = bf.feature_work(("reserve",), {"reserve_served": 9}, 9)
        self.assertEqual(idle, [])
        self.assertIn("9 served (100% of claims)", text)
        self.assertEqual(bf.feature_work((), {}, 1), ("", []))


def result(suite, cell, threads, claims, stock=bf.HOT_STOCK, mariadb_cpu_s=1.0, idle=(), rejected=0.0):
    return {"suite": suite, "cell": cell, "threads": threads, "stock": stock, "claims_per_s": claims,
            "claims_per_s_until_last_claim": claims, "claimed": 1000, "cpu_s": {"mariadbd": mariadb_cpu_s},
            "idle_features": list(idle), "statements_per_rejected": rejected, "statements_per_attempt": 0.01}


class Goals(unittest.TestCase):
    def test_autocommit_goals_depend_on_the_storage(self):
        rs = [result("autocommit", "fixed_direct", 64, 1000), result("autocommit", "naive_claimguard8+group_update",
                                                                      64, 2000, mariadb_cpu_s=0.5)]
        disk = bf.goals(rs, slow=False)
        self.assertIn("2.00 x fixed_direct, goal >= 1.2: met", disk[0])
        self.assertIn("0.50 x fixed_direct's, goal <= 0.6: met", disk[1])
        slow = bf.goals(rs, slow=True)
        self.assertIn("goal >= 3.0: not met", slow[0])
        self.assertIn("no goal with 1 ms flushes", slow[1])

    def test_herd_compares_the_same_stock_and_threads(self):
        rs = [result("herd", "fixed_direct", 64, 1000, stock=100), result("herd", "fixed_direct", 64, 100, stock=10000),
              result("herd", "naive_claimguard+read_cache+group_update", 64, 1500, stock=100, rejected=0.0005),
              result("herd", "naive_claimguard+read_cache+group_update", 64, 150, stock=10000, rejected=0.01)]
        lines = bf.goals(rs, slow=False)
        self.assertIn("herd of 100 coupons", lines[0])
        self.assertIn("1.50 x fixed_direct, goal >= 1.2: met", lines[0])
        self.assertIn("goal <= 0.001: met", lines[1])
        self.assertIn("1.50 x fixed_direct", lines[2])
        self.assertIn("goal <= 0.001: not met", lines[3])

    def test_a_feature_that_did_nothing_is_said(self):
        rs = [result("hotrow", "fixed_tx_direct", 64, 100),
              result("hotrow", "naive_tx_claimguard+reserve", 64, 600, idle=["reserve"])]
        (line,) = bf.goals(rs, slow=True)
        self.assertIn("6.00 x fixed_tx_direct, goal >= 5.0: met (stretch 10x: not met)", line)
        self.assertIn("(reserve did nothing in this cell)", line)

    def test_issue11_statements_per_attempt_only_on_its_herd(self):
        rs = [result("herd", "naive_claimguard+read_cache", 64, 1, stock=100),
              result("herd", "naive_claimguard+read_cache", 64, 1, stock=10000)]
        (line,) = bf.goals_issue11(rs)
        self.assertIn("herd of 100 coupons", line)
        self.assertIn("0.01 DB statements per attempt, goal <= 0.1: met", line)

    def test_no_reference_no_ratio(self):
        (line,) = bf.goals([result("autocommit", "naive_claimguard", 8, 10)], slow=False)
        self.assertIn("fixed_direct not measured", line)


if __name__ == "__main__":
    unittest.main()
