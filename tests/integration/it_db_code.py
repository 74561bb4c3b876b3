#!/usr/bin/env python3
"""Database code and the live schema through a running claimguard (issue 17, items 1 and 3).

Usage: it_db_code.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB 10.11 with the coupon schema (tests/incident/cluster.py) plus a procedure, a view, a
trigger and an event that reach coupon_stock, and a check user holding exactly the grants
docs/OPERATIONS.md lists. claimguard with schema_check_user set:
- `CALL claim_coupon(1, 77)` (text, and COM_STMT_PREPARE), `UPDATE v_stock SET remain = 5 ...` and a write of
  the trigger's table are refused with an ERR naming the rule, an audit line and claimguard_unmodeled_total
  (reason routine / view / trigger); a SELECT from the view is forwarded; the stock is untouched;
- after `DROP PROCEDURE claim_coupon` and a reload, CALL reaches the server again;
- schema_check: refuse with `counter_column: remainder`: not ready, and /readiness names the file:line;
  a reload to such rules is refused and the old rules keep running;
- schema_check: refuse on a database without the claim's UNIQUE index: not ready, then ready once the index
  is created (no restart, no reload: the check retries while it fails);
- schema_check: refuse while MariaDB is down: not ready ("could not run"), ready once it is back (retried).
"""

import argparse
import json
import os
import shutil
import struct
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py: MariaDB + the coupon schema)
import itlib  # noqa: E402
import rawmysql  # noqa: E402
import servers  # noqa: E402

CAMPAIGN = 77
STOCK = 10
CHECK_USER = "cg_check"
CHECK_PASSWORD = "check-Pw1"
NO_INDEX_DATABASE = "noindex"  # the legacy schema without the claim's UNIQUE index
CLIENT_TIMEOUT_S = 10
# The schema check retries a failing check after 1, 2, 4, ... s (at most 30 s): the index below is
# created within the first few seconds, so the flip comes well within this.
READY_TIMEOUT_S = 35
UNMODELED = "claimguard_unmodeled_total"
ERR_SP_DOES_NOT_EXIST = 1305
ERR_REFUSED = 1644  # claimguard's unmodeled refusal

# The mariadb CLI splits at ';': the compound body needs another delimiter.
CLAIM_PROCEDURE = """
DELIMITER //
CREATE PROCEDURE claim_coupon(IN u BIGINT, IN c BIGINT)
BEGIN
  UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = c AND remain > 0;
  INSERT INTO coupon_order (user_id, campaign_id) VALUES (u, c);
END//
DELIMITER ;
"""
DATABASE_CODE = """
CREATE TABLE ticket (id INT PRIMARY KEY AUTO_INCREMENT, campaign_id BIGINT NOT NULL);
""" + CLAIM_PROCEDURE + """
CREATE PROCEDURE hello() SELECT 'hello';
CREATE VIEW v_stock AS SELECT campaign_id, remain FROM `coupon_stock`;
CREATE TRIGGER trg_ticket AFTER INSERT ON ticket FOR EACH ROW
  UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = NEW.campaign_id;
CREATE EVENT ev_refill ON SCHEDULE EVERY 1 DAY DISABLE DO UPDATE coupon_stock SET remain = 100;
"""

# What docs/OPERATIONS.md tells a DBA to grant the check user (MariaDB before 11.3).
CHECK_GRANTS = f"""
CREATE USER '{CHECK_USER}'@'%' IDENTIFIED BY '{CHECK_PASSWORD}';
GRANT SELECT, SHOW VIEW, TRIGGER, EVENT ON {cluster.DATABASE}.* TO '{CHECK_USER}'@'%';
GRANT SELECT, SHOW VIEW, TRIGGER, EVENT ON {NO_INDEX_DATABASE}.* TO '{CHECK_USER}'@'%';
GRANT SELECT ON mysql.proc TO '{CHECK_USER}'@'%';
GRANT EXECUTE ON {cluster.DATABASE}.* TO '{cluster.APP_USER}'@'%';
FLUSH PRIVILEGES;
"""

ARGS = None


def http(port, path, method="GET"):
    req = urllib.request.Request(f"http://{servers.HOST}:{port}{path}", method=method,
                                 data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT_S) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def example_rules_with(dest, old=None, new=None):
    with open(cluster.EXAMPLE_RULES, encoding="utf-8") as f:
        text = f.read()
    if old is not None:
        if old not in text:
            raise AssertionError(f"{old!r} is not in the example rules")
        text = text.replace(old, new)
    with open(dest + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(dest + ".tmp", dest)  # one rename: a watcher never reads half a file
    return dest


TYPO = ("counter_column: remain ", "counter_column: remainder")


class DatabaseCode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.sql(DATABASE_CODE)
        cls.cluster.db.sql(f"CREATE DATABASE {NO_INDEX_DATABASE};")
        with open(cluster.LEGACY_SCHEMA, encoding="utf-8") as f:
            cls.cluster.db.sql(f.read(), database=NO_INDEX_DATABASE)
        cls.cluster.db.sql(CHECK_GRANTS)
        cls.rules = example_rules_with(os.path.join(cls.work, "rules.yaml"))
        cls.audit = os.path.join(cls.work, "audit.jsonl")
        cls.proxy = cls.start_proxy("claimguard", cls.rules, "warn", ["--audit-log", cls.audit])

    @classmethod
    def start_proxy(cls, name, rules, mode, extra=(), database=cluster.DATABASE):
        p = servers.Claimguard(ARGS.claimguard, cls.work, name, cls.cluster.db.port,
                               extra_args=["--rules", rules, "--schema-check", mode,
                                           "--schema-check-user", CHECK_USER,
                                           "--schema-check-password", CHECK_PASSWORD,
                                           "--schema-check-database", database] + list(extra))
        cls.cluster.proxies.append(p)
        p.start()
        return p

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()
        self.cluster.reset({CAMPAIGN: STOCK})

    def tearDown(self):
        print(f"  {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.1f}s", file=sys.stderr)

    def connect(self, proxy):
        return pymysql.connect(host=servers.HOST, port=proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               connect_timeout=CLIENT_TIMEOUT_S, read_timeout=CLIENT_TIMEOUT_S)

    def remain(self):
        return int(self.cluster.sql(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};").strip())

    def refused(self, reason):
        return itlib.metric(self.proxy.admin_port, UNMODELED,
                            {"rule": "coupon_stock", "reason": reason, "policy": "refuse"})

    def audit_lines(self):
        if not os.path.exists(self.audit):
            return []
        with open(self.audit, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_database_code(self, proxy):
        """The first check has given the snapshot its database code (the log says so)."""
        def logged():
            with open(proxy.log, encoding="utf-8", errors="replace") as f:
                return "procedure incident.claim_coupon reaches rule coupon_stock" in f.read()
        itlib.wait_for(logged, CLIENT_TIMEOUT_S, f"{proxy.name} found the database code")

    def assert_refused(self, sql, reason, names):
        """`sql` through the proxy: ERR 1644 naming the rule and `names`, an audit line, the metric counted."""
        before = self.refused(reason)
        audited = len(self.audit_lines())
        with self.connect(self.proxy) as c, c.cursor() as cur:
            with self.assertRaises(pymysql.err.MySQLError) as caught:
                cur.execute(sql)
        code, message = caught.exception.args[0], caught.exception.args[1]
        self.assertEqual(code, ERR_REFUSED, message)
        self.assertIn("rule coupon_stock refuses this statement (unmodeled: refuse)", message)
        self.assertIn(names, message)
        self.assertEqual(self.refused(reason), before + 1)
        lines = itlib.wait_for(lambda: self.audit_lines()[audited:], CLIENT_TIMEOUT_S, "the audit line")
        self.assertEqual(lines[-1]["action"], "refused-unmodeled", lines)
        self.assertEqual(lines[-1]["rule"], "coupon_stock", lines)
        self.assertIn(names, lines[-1]["note"], lines)
        self.assertEqual(self.remain(), STOCK)

    # --- statements reaching database code ---------------------------------------------------------

    def test_1_call_of_the_procedure_is_refused_text_and_prepared(self):
        self.wait_database_code(self.proxy)
        found = {(c["kind"], c["name"], c["rule"]) for c in json.loads(http(self.proxy.admin_port, "/rules")[1])[
            "database_code"]}
        self.assertEqual(found, {("procedure", "claim_coupon", "coupon_stock"),
                                 ("procedure", "claim_coupon", "coupon_order"), ("view", "v_stock", "coupon_stock"),
                                 ("trigger", "trg_ticket", "coupon_stock"), ("event", "ev_refill", "coupon_stock")})
        self.assert_refused(f"CALL claim_coupon(1, {CAMPAIGN})", "routine", "procedure claim_coupon")
        # COM_STMT_PREPARE: refused at prepare time, it never gets a statement id.
        before = self.refused("routine")
        raw = rawmysql.RawClient(servers.HOST, self.proxy.port, CLIENT_TIMEOUT_S)
        try:
            raw.login(cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE)
            raw.send_packet(0, bytes([rawmysql.COM_STMT_PREPARE]) + b"CALL claim_coupon(?, ?)")
            _, reply = raw.read_packet()
            self.assertEqual(reply[:1], b"\xff", rawmysql.describe(reply))
            self.assertEqual(struct.unpack_from("<H", reply, 1)[0], ERR_REFUSED)
            self.assertIn(b"procedure claim_coupon", reply)
            # The connection still works.
            self.assertNotEqual(raw.query("SELECT 1")[0][:1], b"\xff")
        finally:
            raw.close()
        self.assertEqual(self.refused("routine"), before + 1)
        self.assertEqual(self.cluster.facts(CAMPAIGN)["rows"], 0)
        # A procedure that reaches no protected table is forwarded.
        with self.connect(self.proxy) as c, c.cursor() as cur:
            cur.execute("CALL hello()")
            self.assertEqual(cur.fetchone()[0], "hello")

    def test_2_writes_through_the_view_are_refused_reads_forwarded(self):
        self.wait_database_code(self.proxy)
        self.assert_refused(f"UPDATE v_stock SET remain = 5 WHERE campaign_id = {CAMPAIGN}", "view", "view v_stock")
        self.assert_refused(f"DELETE FROM v_stock WHERE campaign_id = {CAMPAIGN}", "view", "view v_stock")
        with self.connect(self.proxy) as c, c.cursor() as cur:
            cur.execute(f"SELECT remain FROM v_stock WHERE campaign_id = {CAMPAIGN}")
            self.assertEqual(cur.fetchone()[0], STOCK)

    def test_3_write_of_a_table_whose_trigger_writes_the_stock_is_refused(self):
        self.wait_database_code(self.proxy)
        self.assert_refused(f"INSERT INTO ticket (campaign_id) VALUES ({CAMPAIGN})", "trigger", "trigger trg_ticket")
        with self.connect(self.proxy) as c, c.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM ticket")
            self.assertEqual(cur.fetchone()[0], 0)

    def test_4_after_drop_procedure_and_a_reload_call_reaches_the_server(self):
        self.wait_database_code(self.proxy)
        self.cluster.sql("DROP PROCEDURE claim_coupon;")
        try:
            status, body = http(self.proxy.control_port, "/-/reload", "POST")
            self.assertEqual(status, 200, body)
            before = self.refused("routine")
            with self.connect(self.proxy) as c, c.cursor() as cur:
                with self.assertRaises(pymysql.err.MySQLError) as caught:
                    cur.execute(f"CALL claim_coupon(1, {CAMPAIGN})")
                self.assertEqual(caught.exception.args[0], ERR_SP_DOES_NOT_EXIST, caught.exception.args)
                cur.execute("CALL hello()")
                self.assertEqual(cur.fetchone()[0], "hello")
            self.assertEqual(self.refused("routine"), before)
            # The view and the trigger still reach the stock.
            self.assert_refused(f"UPDATE v_stock SET remain = 5 WHERE campaign_id = {CAMPAIGN}", "view", "v_stock")
        finally:
            self.cluster.sql(CLAIM_PROCEDURE)
            self.assertEqual(http(self.proxy.control_port, "/-/reload", "POST")[0], 200)

    # --- the rules against the live schema ---------------------------------------------------------

    def test_5_counter_column_typo_refuses_readiness_and_a_reload_to_it(self):
        bad = example_rules_with(os.path.join(self.work, "rules-typo.yaml"), *TYPO)
        typo = self.start_proxy("claimguard-typo", bad, "refuse")
        want = f"{bad}:12:21: error: rule coupon_stock, counter_column: coupon_stock.remainder: no such column"

        def not_ready_saying_why():
            status, body = servers.http_get(typo.admin_port, "/readiness")
            return status == 503 and want in body and body
        itlib.wait_for(not_ready_saying_why, CLIENT_TIMEOUT_S, "readiness 503 naming the typo")

        # A proxy running good rules refuses a reload to the typo and keeps its rules.
        rules = example_rules_with(os.path.join(self.work, "rules-refuse.yaml"))
        good = self.start_proxy("claimguard-refuse", rules, "refuse")
        itlib.wait_for(lambda: servers.http_get(good.admin_port, "/readiness")[0] == 200, CLIENT_TIMEOUT_S,
                       "readiness 200 with good rules")
        version = json.loads(http(good.admin_port, "/rules")[1])["version"]
        example_rules_with(rules, *TYPO)
        status, body = http(good.control_port, "/-/reload", "POST")
        self.assertEqual(status, 400, body)
        self.assertIn("counter_column: coupon_stock.remainder: no such column", body)
        self.assertEqual(json.loads(http(good.admin_port, "/rules")[1])["version"], version)
        self.assertEqual(servers.http_get(good.admin_port, "/readiness")[0], 200)
        # The old rules still protect the stock: the incident's literal write is a take of one.
        with self.connect(good) as c, c.cursor() as cur:
            cur.execute(f"UPDATE coupon_stock SET remain = 3 WHERE campaign_id = {CAMPAIGN}")
        self.assertEqual(self.remain(), STOCK - 1)

    def test_6_readiness_follows_the_index_being_created(self):
        p = self.start_proxy("claimguard-noindex", self.rules, "refuse", database=NO_INDEX_DATABASE)

        def readiness(want_status, want_text):
            status, body = servers.http_get(p.admin_port, "/readiness")
            return status == want_status and want_text in body and body
        itlib.wait_for(lambda: readiness(503, "unique index"), CLIENT_TIMEOUT_S, "readiness 503: no unique index")
        with open(cluster.UNIQUE_INDEX_MIGRATION, encoding="utf-8") as f:
            self.cluster.db.sql(f.read(), database=NO_INDEX_DATABASE)
        itlib.wait_for(lambda: readiness(200, "ok"), READY_TIMEOUT_S, "readiness 200 once the index exists",
                       interval_s=0.2)

    def test_0_a_sidecar_just_started_decides_nothing_before_its_first_schema_check(self):
        """A sidecar (re)started knows the database code (and key collations) only once its first schema check
        reached the database: sessions that arrive before wait for it. The check user may hold one connection
        and the test holds it for a moment, so the first check cannot run; an app that connects meanwhile and
        writes through the view must be refused, not forwarded unseen (the soak's restart window: a restarted
        sidecar let two writes through v_stock in the second before its check)."""
        self.cluster.db.sql(f"ALTER USER '{CHECK_USER}'@'%' WITH MAX_USER_CONNECTIONS 1;")
        blocker = pymysql.connect(host=servers.HOST, port=self.cluster.db.port, user=CHECK_USER,
                                  password=CHECK_PASSWORD)
        released = threading.Event()

        def release_later():
            time.sleep(1.5)
            blocker.close()
            released.set()
        try:
            p = servers.Claimguard(ARGS.claimguard, self.work, "claimguard-restarted", self.cluster.db.port,
                                   extra_args=["--rules", self.rules, "--schema-check", "warn",
                                               "--schema-check-user", CHECK_USER,
                                               "--schema-check-password", CHECK_PASSWORD,
                                               "--schema-check-database", cluster.DATABASE,
                                               "--audit-log", os.path.join(self.work, "restarted.jsonl")])
            self.cluster.proxies.append(p)
            threading.Thread(target=release_later, daemon=True).start()
            p.start()  # its greeting waits for the first check
            with self.connect(p) as c, c.cursor() as cur:
                with self.assertRaises(pymysql.err.MySQLError) as caught:
                    cur.execute(f"UPDATE v_stock SET remain = 5 WHERE campaign_id = {CAMPAIGN}")
            self.assertTrue(released.is_set(), "the session was served before the check user was free")
            self.assertEqual(caught.exception.args[0], ERR_REFUSED, caught.exception.args)
            self.assertIn("view v_stock", caught.exception.args[1])
            self.assertEqual(self.remain(), STOCK)
        finally:
            released.wait(5)
            self.cluster.db.sql(f"ALTER USER '{CHECK_USER}'@'%' WITH MAX_USER_CONNECTIONS 0;")

    def test_7_a_check_that_could_not_reach_the_database_is_retried(self):
        """Last: it stops the shared MariaDB for a moment."""
        p = self.start_proxy("claimguard-unreachable", self.rules, "refuse")

        def readiness(want_status, want_text):
            status, body = servers.http_get(p.admin_port, "/readiness")
            return status == want_status and want_text in body and body
        itlib.wait_for(lambda: readiness(200, "ok"), CLIENT_TIMEOUT_S, "readiness 200 at first")
        self.cluster.db.stop()
        try:
            # A reload checks again: the database is not there.
            status, body = http(p.control_port, "/-/reload", "POST")
            self.assertEqual(status, 200, body)  # applied unchecked, checked again until it runs
            itlib.wait_for(lambda: readiness(503, "the schema check could not run"), CLIENT_TIMEOUT_S,
                           "readiness 503: the check could not run")
        finally:
            self.cluster.db.start()
        itlib.wait_for(lambda: readiness(200, "ok"), READY_TIMEOUT_S, "readiness 200 once the database is back",
                       interval_s=0.2)
        with open(p.log, encoding="utf-8", errors="replace") as f:
            self.assertIn("(retrying)", f.read())

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
