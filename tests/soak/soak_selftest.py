#!/usr/bin/env python3
"""The soak's own logic, without servers: a round's draw is deterministic (what --replay relies on), a lost
answer counts in the crash bound and is excused only by a fault that can drop a client, a refund whose
answer was lost is taken as maybe done, and the iptables rules cut the link the fault names.

Usage: soak_selftest.py [unittest args]   (ctest soak.selftest)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import soak  # noqa: E402
import grammar  # noqa: E402  (tests/model, on the path soak.py set)


class Run:
    """The parts of app.AppRun that lost_answers reads."""

    def __init__(self, trace):
        self.trace = trace


def stmt(sql, result, t=100.0, ms=10.0, sidecar=0, conn="c1"):
    return {"t": t, "ms": ms, "sql": sql, "result": result, "sidecar": sidecar, "conn": conn, "user": 1}


class DrawTest(unittest.TestCase):
    def setUp(self):
        self.enabled = grammar.resolve_families("", True)

    def test_a_round_is_the_same_every_time(self):
        a_apps, a_faults = soak.draw_round(5, 3, self.enabled, list(soak.FAULT_KINDS), 30, 8)
        b_apps, b_faults = soak.draw_round(5, 3, self.enabled, list(soak.FAULT_KINDS), 30, 8)
        self.assertEqual(a_faults, b_faults)
        self.assertEqual([a_apps.get(i) for i in range(5)], [b_apps.get(i) for i in range(5)])

    def test_rounds_and_seeds_differ(self):
        kinds = list(soak.FAULT_KINDS)
        schedules = {repr(soak.draw_round(seed, rnd, self.enabled, kinds, 30, 8)[1])
                     for seed in (1, 2) for rnd in (0, 1, 2)}
        self.assertGreater(len(schedules), 4)

    def test_a_round_runs_under_one_rules_file(self):
        apps, _ = soak.draw_round(9, 0, self.enabled, list(soak.FAULT_KINDS), 30, 8)
        keys = {grammar.options_key(apps.get(i)) for i in range(20)}
        self.assertEqual(keys, {apps.okey})

    def test_known_open_families_are_left_out_of_rounds_with_their_fault(self):
        # The list is empty today: the mechanism is tested with the entries it once held.
        saved = soak.KNOWN_OPEN_UNDER
        soak.KNOWN_OPEN_UNDER = {"sidecar_kill": {"key.string_case": "test", "carrier.view": "test"}}
        try:
            known = set(soak.KNOWN_OPEN_UNDER["sidecar_kill"])
            seen = {True: set(), False: set()}
            for known_open in (False, True):
                for rnd in range(4):  # a round's rules file may rule a family out: look at several
                    apps, faults = soak.draw_round(3, rnd, self.enabled, ["sidecar_kill"], 30, 8, known_open)
                    self.assertTrue(all(f["kind"] == "sidecar_kill" for f in faults))
                    for i in range(60):
                        seen[known_open] |= known & set(grammar.families_of(apps.get(i)))
        finally:
            soak.KNOWN_OPEN_UNDER = saved
        self.assertEqual(seen[False], set(), "drawn in a round with a sidecar_kill")
        self.assertTrue({"key.string_case", "carrier.view"} <= seen[True], f"--known-open draws {seen[True]}")

    def test_faults_are_within_the_round_and_of_the_asked_kinds(self):
        for rnd in range(30):
            _, faults = soak.draw_round(11, rnd, self.enabled, ["db_rst", "sidecar_kill"], 20, 8)
            self.assertTrue(1 <= len(faults) <= 3)
            for f in faults:
                self.assertIn(f["kind"], ("db_rst", "sidecar_kill"))
                self.assertTrue(2 <= f["at"] <= 12, f)
                if f["kind"] == "sidecar_kill":
                    self.assertTrue(0 <= f["sidecar"] < 8)


class LostAnswersTest(unittest.TestCase):
    def test_lost_answers_count_and_other_errors_do_not(self):
        run = Run([stmt("-- connect", "sidecar 0"),
                   stmt("UPDATE s SET remain = remain - 1", "ERR 2013 Lost connection to server during query"),
                   stmt("INSERT INTO o VALUES (1)", "ERR 1927 claimguard: Lost connection to the database"),
                   stmt("-- reset", "ERR (2006, 'MySQL server has gone away')"),
                   stmt("INSERT INTO o VALUES (2)", "ERR 1062 Duplicate entry"),
                   stmt("UPDATE s SET remain = remain - 1", "ERR 1205 Lock wait timeout exceeded"),
                   stmt("-- change_user", "ERR change_user() argument 3 must be str, not None"),
                   stmt("SELECT remain FROM s", "rows remain=3")])
        lost, unexplained = soak.Soak.lost_answers(run, [])
        self.assertEqual(len(lost), 3)
        self.assertEqual(len(unexplained), 3, "no fault: none of them is explained")

    def test_a_sidecar_kill_explains_only_its_own_sidecar(self):
        run = Run([stmt("UPDATE s", "ERR 2013 Lost", t=100.0, sidecar=2),
                   stmt("UPDATE s", "ERR 2013 Lost", t=100.0, sidecar=3)])
        fault = {"kind": "sidecar_kill", "sidecar": 2, "start": 99.5, "end": 101.0}
        lost, unexplained = soak.Soak.lost_answers(run, [fault])
        self.assertEqual(len(lost), 2)
        self.assertEqual(len(unexplained), 1)
        self.assertIn("sidecar c4", unexplained[0])

    def test_a_database_fault_explains_every_sidecar_but_only_around_its_time(self):
        fault = {"kind": "db_rst", "start": 50.0, "end": 52.0}
        during = Run([stmt("COMMIT", "ERR 1927 Lost", t=51.0, sidecar=5)])
        long_after = Run([stmt("COMMIT", "ERR 1927 Lost", t=52.0 + soak.DROP_GRACE_S + 5, sidecar=5)])
        self.assertEqual(soak.Soak.lost_answers(during, [fault])[1], [])
        self.assertEqual(len(soak.Soak.lost_answers(long_after, [fault])[1]), 1)

    def test_redis_faults_and_lock_waits_explain_no_dropped_connection(self):
        run = Run([stmt("UPDATE s", "ERR 2013 Lost", t=10.0)])
        faults = [{"kind": k, "start": 9.0, "end": 11.0} for k in ("redis_kill", "redis_stop", "redis_rst",
                                                                   "redis_drop", "slow_db", "slow_redis")]
        self.assertEqual(len(soak.Soak.lost_answers(run, faults)[1]), 1)

    def test_a_refund_with_a_lost_answer_may_have_happened(self):
        told = {(1, 10): ["got", "dup", "cancel_error:2013"], (2, 10): ["got", "cancel_error:1205"]}
        soak.refunds_lost_as_cancelled(told)
        self.assertEqual(told[(1, 10)], ["got", "dup", "cancelled"])
        self.assertEqual(told[(2, 10)], ["got", "cancel_error:1205"], "a refund refused by the server did not happen")


class IptablesTest(unittest.TestCase):
    def test_rst_answers_the_sidecars_packets_and_drop_cuts_both_ways(self):
        rst = soak.Iptables.rules("db_rst", 3306)
        self.assertEqual(rst, [["-p", "tcp", "--dport", "3306", "-j", "REJECT", "--reject-with", "tcp-reset"]])
        drop = soak.Iptables.rules("redis_drop", 6379)
        self.assertIn(["-p", "tcp", "--dport", "6379", "-j", "DROP"], drop)
        self.assertIn(["-p", "tcp", "--sport", "6379", "-j", "DROP"], drop)


if __name__ == "__main__":
    unittest.main()
