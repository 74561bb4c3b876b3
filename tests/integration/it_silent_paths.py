#!/usr/bin/env python3
"""Issue 17's reproducers R6-R11 through one claimguard sidecar, a real MariaDB and PyMySQL.

Usage: it_silent_paths.py --claimguard PATH --work-dir DIR [unittest args]

Each case sets campaign 77 as the reproducer says, sends the app's statements through the sidecar and
checks what the database holds and what the app was told: a version conflict is not "sold out" (R6),
an absolute write above the counter is refused and takes nothing (R7), an amount a fresh read
contradicts is refused (R8), a take undone by ROLLBACK TO SAVEPOINT backs no claim (R10), SQL-level
PREPARE/EXECUTE of a write is refused by the rule's policy (R11), and every refusal is counted.
MariaDB and the coupon schema come from tests/incident/cluster.py (rules/examples/coupon.yaml).
"""

import argparse
import os
import re
import sys
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402
import itlib  # noqa: E402
import servers  # noqa: E402

ER_CLAIMGUARD = 1644
CAMPAIGN = 77
ARGS = None


def unmodeled(proxy, reason):
    status, body = servers.http_get(proxy.admin_port, "/metrics")
    assert status == 200
    total = 0.0
    for m in re.finditer(r'^claimguard_unmodeled_total\{([^}]*)\} (\S+)$', body, re.M):
        if f'reason="{reason}"' in m.group(1):
            total += float(m.group(2))
    return total


class SilentPaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work)
        # ERR 1205 rolls the whole transaction back (see test_lock_wait_timeout_...); the other cases
        # wait for no lock.
        cls.cluster.db.extra_args.append("--innodb-rollback-on-timeout=ON")
        try:
            cls.cluster.start_db(unique_index=True)
            cls.cluster.start_redis()
            cls.proxy = cls.cluster.start_proxies(ARGS.claimguard, 1)[0]
            trusted = os.path.join(cls.work, "trusted.yaml")
            with open(cluster.EXAMPLE_RULES, encoding="utf-8") as src, open(trusted, "w", encoding="utf-8") as out:
                out.write(src.read() + f"\ntrusted_users: [{cluster.ADMIN_USER}]\n")
            cls.trusting = cls.cluster.start_proxies(ARGS.claimguard, 1, rules=trusted)[-1]
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def connect(self):
        return pymysql.connect(host=servers.HOST, port=self.proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               read_timeout=20, write_timeout=20)

    def set_stock(self, remain, version=0):
        self.cluster.sql(f"TRUNCATE TABLE coupon_order; DELETE FROM coupon_stock; "
                         f"INSERT INTO coupon_stock VALUES ({CAMPAIGN}, {remain}, {version});")

    def stock(self):
        return self.cluster.facts(CAMPAIGN)

    def test_r6_version_conflict_of_a_relative_write_is_not_sold_out(self):
        self.set_stock(99, version=1)
        with self.connect() as c, c.cursor() as cur:
            rows = cur.execute("UPDATE coupon_stock SET remain = remain - 1, version = version + 1 "
                               f"WHERE campaign_id = {CAMPAIGN} AND version = 0")
            self.assertEqual(rows, 0)  # the server's 0 rows: the app retries; no ERR
        self.assertEqual(self.stock()["remain"], 99)

    def test_r7_absolute_write_above_the_counter_is_refused(self):
        self.set_stock(99)
        before = unmodeled(self.proxy, "absolute_not_lower")
        with self.connect() as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"UPDATE coupon_stock SET remain = 150 WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("not a take", ctx.exception.args[1])
            self.assertNotIn("sold out", ctx.exception.args[1])
        self.assertEqual(self.stock()["remain"], 99)
        self.assertEqual(unmodeled(self.proxy, "absolute_not_lower"), before + 1)

    def test_r8_amount_a_fresh_read_contradicts_is_refused(self):
        self.set_stock(98)
        before = unmodeled(self.proxy, "amount_mismatch")
        with self.connect() as c, c.cursor() as cur:
            cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(cur.fetchone()[0], 98)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"UPDATE coupon_stock SET remain = 96 WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.stock()["remain"], 98)
        self.assertEqual(unmodeled(self.proxy, "amount_mismatch"), before + 1)

    def test_incident_write_after_a_fresh_read_takes_one(self):
        self.set_stock(10)
        with self.connect() as c, c.cursor() as cur:
            cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(cur.execute(f"UPDATE coupon_stock SET remain = 9 WHERE campaign_id = {CAMPAIGN}"), 1)
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (1, {CAMPAIGN})")
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"]), (9, 1))

    def test_r10_savepoint_rollback_undoes_the_take(self):
        self.set_stock(99)
        with self.connect() as a, self.connect() as b, a.cursor() as ca, b.cursor() as cb:
            ca.execute("START TRANSACTION")
            ca.execute("SAVEPOINT s")
            ca.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(ca.execute(f"UPDATE coupon_stock SET remain = 98 WHERE campaign_id = {CAMPAIGN}"), 1)
            ca.execute("ROLLBACK TO SAVEPOINT s")
            ca.execute("COMMIT")
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cb.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (50, {CAMPAIGN})")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"]), (99, 0))

    def test_r11_sql_prepare_of_a_write_is_refused(self):
        self.set_stock(99)
        before = unmodeled(self.proxy, "sql_prepare")
        with self.connect() as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("PREPARE u FROM 'UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?'")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            cur.execute(f"SET @r = 99, @c = {CAMPAIGN}")
            for _ in range(2):
                with self.assertRaises(pymysql.MySQLError):
                    cur.execute("EXECUTE u USING @r, @c")  # never prepared on the server
            cur.execute("PREPARE r FROM 'SELECT remain FROM coupon_stock WHERE campaign_id = ?'")
            cur.execute("EXECUTE r USING @c")  # a read is never refused
            self.assertEqual(cur.fetchone()[0], 99)
        self.assertEqual(self.stock()["remain"], 99)
        self.assertEqual(unmodeled(self.proxy, "sql_prepare"), before + 1)

    def test_stock_row_upsert_is_refused(self):
        self.set_stock(99)
        with self.connect() as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute(f"INSERT INTO coupon_stock (campaign_id, remain) VALUES ({CAMPAIGN}, 5) "
                            "ON DUPLICATE KEY UPDATE remain = VALUES(remain)")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
        self.assertEqual(self.stock()["remain"], 99)

    def test_qualified_claim_without_column_list_from_another_or_no_database(self):
        """`INSERT INTO incident.coupon_order VALUES (NULL, ...)` from a session whose default database is another
        one, or none: the claim table's columns are asked of `incident` (the statement's qualifier). They were
        asked of the session's database (DATABASE()), found nothing there, and the claim of a correct app was
        refused ("a claim insert without a column list"); found by the model test (claim.no_columns with
        schema.other_db / schema.no_db)."""
        self.set_stock(5)
        self.cluster.sql("CREATE DATABASE IF NOT EXISTS other; GRANT SELECT ON other.* TO 'cg_app'@'%';")
        before = unmodeled(self.proxy, "no_column_list")
        for user, database in ((7401, "other"), (7402, None)):
            with pymysql.connect(host=servers.HOST, port=self.proxy.port, user=cluster.APP_USER,
                                 password=cluster.APP_PASSWORD, database=database, autocommit=True,
                                 read_timeout=20, write_timeout=20) as c, c.cursor() as cur:
                self.assertEqual(cur.execute("UPDATE incident.coupon_stock SET remain = remain - 1 "
                                             f"WHERE campaign_id = {CAMPAIGN}"), 1)
                self.assertEqual(cur.execute("INSERT INTO incident.coupon_order VALUES "
                                             f"(NULL, {user}, {CAMPAIGN}, NOW())"), 1, database)
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"], facts["users"]), (3, 2, [7401, 7402]))
        self.assertEqual(unmodeled(self.proxy, "no_column_list"), before)

    def test_insert_select_and_counter_from_subquery_are_refused_with_advice(self):
        # Issue "Refuse less": the two shapes get their own code and an ERR that says what to write.
        self.set_stock(5)
        before_insert = unmodeled(self.proxy, "insert_select")
        before_counter = unmodeled(self.proxy, "counter_from_subquery")
        with self.connect() as c, c.cursor() as cur:
            with self.assertRaises(pymysql.MySQLError) as ctx:
                # No stock key in the WHERE (the key pinned is a claim modelled since: it_insert_select).
                cur.execute("INSERT INTO coupon_order (user_id, campaign_id) SELECT 1, campaign_id "
                            "FROM coupon_stock WHERE remain > 0")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("refuses this statement", ctx.exception.args[1])
            self.assertIn("INSERT ... SELECT", ctx.exception.args[1])
            self.assertIn("UPDATE stock SET c = c - 1 WHERE key = ? AND c >= 1", ctx.exception.args[1])
            self.assertIn("INSERT ... VALUES", ctx.exception.args[1])
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("INSERT IGNORE INTO coupon_order (user_id, campaign_id) (SELECT 2, 77)")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            with self.assertRaises(pymysql.MySQLError) as ctx:
                cur.execute("UPDATE coupon_stock SET remain = 100 - (SELECT COUNT(*) FROM coupon_order "
                            f"WHERE campaign_id = {CAMPAIGN}) WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertIn("recomputed from a subquery", ctx.exception.args[1])
            self.assertIn("SET c = c - n WHERE key = ? AND c >= n", ctx.exception.args[1])
            # What the advice says to write instead goes through: the decrement, then the claim.
            self.assertEqual(cur.execute("UPDATE coupon_stock SET remain = remain - 1 "
                                         f"WHERE campaign_id = {CAMPAIGN} AND remain >= 1"), 1)
            # A user no other case claims for (the Redis lock of an earlier case's claim may live on).
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (7301, {CAMPAIGN})")
        facts = self.stock()
        self.assertEqual((facts["remain"], facts["rows"]), (4, 1))
        # One count per refused statement (under the first rule it names).
        self.assertEqual(unmodeled(self.proxy, "insert_select"), before_insert + 2)
        self.assertEqual(unmodeled(self.proxy, "counter_from_subquery"), before_counter + 1)

    def test_units_waiting_for_a_claim_are_a_metric(self):
        self.set_stock(10)
        with self.connect() as c, c.cursor() as cur:
            self.assertEqual(cur.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}"), 1)

        def waiting():
            status, body = servers.http_get(self.proxy.admin_port, "/metrics")
            m = re.search(r'^claimguard_ledger_waiting_units\{rule="coupon_stock"\} (\S+)$', body, re.M)
            return float(m.group(1)) if m else None

        itlib.wait_for(lambda: waiting() == 1.0, 15, "claimguard_ledger_waiting_units 1 after a take with no claim")
        with self.connect() as c, c.cursor() as cur:
            cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (9, {CAMPAIGN})")
        itlib.wait_for(lambda: waiting() == 0.0, 15, "claimguard_ledger_waiting_units 0 once the claim used the take")

    def test_lock_wait_timeout_that_rolled_back_the_transaction_ends_it(self):
        # With innodb_rollback_on_timeout the server rolls the transaction back on ERR 1205, which
        # carries no status flags. An app that goes on (its retry of the INSERT autocommits) must not
        # get a claim paired with the take the rollback undid.
        self.set_stock(99)
        blocker = pymysql.connect(host=servers.HOST, port=self.cluster.db.port, user=cluster.APP_USER,
                                  password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=False)
        try:
            with blocker.cursor() as b:  # holds the (user 9, campaign 77) unique entry
                b.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (9, {CAMPAIGN})")
            with self.connect() as c, c.cursor() as cur:
                cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
                cur.execute("BEGIN")
                cur.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}")
                with self.assertRaises(pymysql.err.OperationalError) as ctx:
                    cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (9, {CAMPAIGN})")
                self.assertEqual(ctx.exception.args[0], 1205)
                self.assertEqual(self.stock()["remain"], 99, "the server rolled the take back")
                blocker.rollback()
                told = "ok"
                try:
                    cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (9, {CAMPAIGN})")
                    cur.execute("COMMIT")
                except pymysql.err.MySQLError as e:
                    told = e.args[0]
            facts = self.stock()
            print(f"\n    the claim after the rolled-back transaction: {told}; {facts}")
            self.assertEqual(99 - facts["remain"], facts["rows"], "no claim without its unit")
        finally:
            blocker.close()

    def test_already_claimed_only_for_a_committed_claim(self):
        # Row 17 (SQLAlchemy / Hibernate @Version with retries): A inserts the claim first, then loses
        # its version race and rolls back; B, whose claim arrived while A's was not committed, must not
        # be told "already claimed" (directly its INSERT waits for A's row lock and goes in).
        self.set_stock(99, version=1)
        a, b = self.connect(), self.connect()
        try:
            a.autocommit(False)
            b.autocommit(False)
            with a.cursor() as ca, b.cursor() as cb:
                ca.execute(f"SELECT remain, version FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                ca.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (5, {CAMPAIGN})")
                self.assertEqual(cb.execute("UPDATE coupon_stock SET remain = 98, version = 2 "
                                            f"WHERE campaign_id = {CAMPAIGN} AND version = 1"), 1)
                outcome = {}

                def insert_b():
                    try:
                        cb.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (5, {CAMPAIGN})")
                        b.commit()
                        outcome["b"] = "claimed"
                    except pymysql.err.MySQLError as e:
                        outcome["b"] = f"{e.args[0]} {e.args[1]}"
                        b.rollback()

                import threading
                t = threading.Thread(target=insert_b)
                t.start()
                itlib.wait_for(lambda: int(self.cluster.sql(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
                ).split()[-1]) >= 1 or not t.is_alive(), 10, "B's INSERT waits for A's row lock")
                try:  # B holds the stock row, A the claim row B waits for: InnoDB may pick A as the victim
                    self.assertEqual(ca.execute("UPDATE coupon_stock SET remain = 98, version = 1 "
                                                f"WHERE campaign_id = {CAMPAIGN} AND version = 0"), 0)
                except pymysql.err.OperationalError as e:
                    self.assertEqual(e.args[0], 1213)
                a.rollback()
                t.join(20)
            facts = self.stock()
            print(f"\n    B after A's rollback: {outcome.get('b')}; {facts}")
            self.assertEqual(outcome.get("b"), "claimed")
            self.assertEqual(facts["rows"], 1)
            self.assertEqual(99 - facts["remain"], facts["rows"])
        finally:
            a.close()
            b.close()

    def test_a_duplicate_inside_insert_returning_is_already_claimed(self):
        # Django's create() on MariaDB 10.5+ sends INSERT ... RETURNING id. A duplicate ends that reply with
        # ERR 1062 after the result set's column definitions: the app must hear the rule's "already
        # claimed" and the unit go back, as for a plain INSERT (found by the app zoo, apps.django update:
        # the raw 1062 was relayed and no duplicate counted).
        user = 4242  # a user no other case claims: its Redis key is not committed yet
        self.set_stock(99)
        a, b = self.connect(), self.connect()

        def db_duplicates():
            status, body = servers.http_get(self.proxy.admin_port, "/metrics")
            self.assertEqual(status, 200)
            m = re.search(r'^claimguard_duplicates_total\{[^}]*guard="db"[^}]*\} (\S+)$', body, re.M)
            return float(m.group(1)) if m else 0.0

        before = db_duplicates()
        try:
            with a.cursor() as ca, b.cursor() as cb:
                cb.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                self.assertEqual(cb.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}"), 1)
                a.autocommit(False)
                ca.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                self.assertEqual(ca.execute(f"UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = {CAMPAIGN}"), 1)
                ca.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN}) RETURNING id")
                outcome = {}

                def insert_b():  # the key is pending in Redis: the database's unique index decides
                    try:
                        cb.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN}) "
                                   "RETURNING id")
                        outcome["b"] = "claimed"
                    except pymysql.err.MySQLError as e:
                        outcome["b"] = (e.args[0], e.args[1])

                import threading
                t = threading.Thread(target=insert_b)
                t.start()
                itlib.wait_for(lambda: int(self.cluster.sql(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
                ).split()[-1]) >= 1 or not t.is_alive(), 10, "B's INSERT waits for A's claim row")
                a.commit()
                t.join(20)
            facts = self.stock()
            print(f"\n    B's duplicate INSERT ... RETURNING: {outcome.get('b')}; {facts}")
            self.assertEqual(outcome.get("b"), (ER_CLAIMGUARD, "claimguard: already claimed"))
            self.assertEqual(facts["rows"], 1)
            self.assertEqual(facts["remain"], 98)  # A's unit taken, B's given back
            self.assertEqual(db_duplicates(), before + 1)
        finally:
            a.close()
            b.close()

    def test_trust_follows_com_change_user(self):
        import MySQLdb  # libmariadb's COM_CHANGE_USER (python3-mysqldb)
        self.set_stock(99)
        conn = MySQLdb.connect(host=servers.HOST, port=self.trusting.port, user=cluster.ADMIN_USER,
                               password=cluster.ADMIN_PASSWORD, database=cluster.DATABASE, autocommit=True)
        try:
            cur = conn.cursor()
            cur.execute(f"UPDATE coupon_stock SET remain = 150 WHERE campaign_id = {CAMPAIGN}")  # a trusted restock
            self.assertEqual(self.stock()["remain"], 150)
            conn.change_user(cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE)  # a pool re-authenticates
            cur = conn.cursor()
            with self.assertRaises(MySQLdb.MySQLError) as ctx:
                cur.execute(f"UPDATE coupon_stock SET remain = 200 WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(ctx.exception.args[0], ER_CLAIMGUARD)
            self.assertEqual(self.stock()["remain"], 150)
            conn.change_user(cluster.ADMIN_USER, cluster.ADMIN_PASSWORD, cluster.DATABASE)  # and back
            cur = conn.cursor()
            cur.execute(f"UPDATE coupon_stock SET remain = 160 WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(self.stock()["remain"], 160)
        finally:
            conn.close()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
