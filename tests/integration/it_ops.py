#!/usr/bin/env python3
"""Operations against a real claimguard: validate, rules reload (watcher, SIGHUP, POST /-/reload,
ConfigMap ..data swap), graceful shutdown (SIGTERM, `claimguard shutdown`) and JSON logs.

Starts its own MariaDB (only for the cases that need one) and its own claimguard processes.
Usage: it_ops.py --claimguard PATH --work-dir DIR [unittest args]
"""

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import itlib  # noqa: E402
import servers  # noqa: E402
from itlib import metric, wait_for  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_CONFIG = os.path.join(SOURCE_DIR, "config", "claimguard.example.yaml")
EXAMPLE_RULES = os.path.join(SOURCE_DIR, "rules", "examples", "coupon.yaml")

ANSWER_TIMEOUT_S = 10.0   # a query, an admin request, a CLI run
RELOAD_TIMEOUT_S = 10.0   # "within a few seconds": the watcher debounces, then reloads
EXIT_TIMEOUT_S = 30.0     # the proxy exits after a shutdown request
MAX_SHUTDOWN_DELAY = "5s"
LOG_PASSWORD = "Sekret-pw-7f3a91"      # a password that must never reach the log
WRONG_PASSWORD = "Wrong-pw-c0ffee55"   # a failed login's password must not either

ARGS = None


def http(port, path, method="GET"):
    """(status, body) of an admin request; status 0 when nothing answers."""
    req = urllib.request.Request(f"http://{servers.HOST}:{port}{path}", method=method,
                                 data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=ANSWER_TIMEOUT_S) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return 0, ""


def reloads(admin_port, result=None):
    return metric(admin_port, "claimguard_rules_reloads_total", None if result is None else {"result": result})


def rules_info(admin_port):
    status, body = http(admin_port, "/rules")
    if status != 200:
        raise AssertionError(f"/rules answered {status}: {body}")
    return json.loads(body)


def coupon_rules(mode="enforce", message="sold out"):
    """The example coupon rules with a chosen default_mode and stock message (each gives another version)."""
    with open(EXAMPLE_RULES, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("default_mode: enforce", f"default_mode: {mode}")
    return text.replace("coupon_stock is sold out for this key", message)


def write_file(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run_cli(*args):
    return subprocess.run([ARGS.claimguard, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=ANSWER_TIMEOUT_S * 3, check=False, text=True)


class Ops(unittest.TestCase):
    db = None

    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)

    @classmethod
    def tearDownClass(cls):
        if cls.db is not None:
            cls.db.stop()

    # --- helpers -------------------------------------------------------------------------------

    def database(self):
        cls = type(self)
        if cls.db is None:
            db = servers.MariaDB(os.path.join(self.work, "mariadb"))
            os.makedirs(db.dir)
            db.install()
            db.start()
            cls.db = db
            db.create_test_users()
            db.sql(f"CREATE TABLE {servers.DATABASE}.ops_t (id INT PRIMARY KEY, v INT)")
        return cls.db

    def rules_dir(self):
        path = os.path.join(self.work, "rules_" + self._testMethodName)
        os.makedirs(path)
        write_file(os.path.join(path, "coupon.yaml"), coupon_rules())
        return path

    def start_proxy(self, name, *extra, log_level="info"):
        db = self.database()
        proxy = servers.Claimguard(ARGS.claimguard, self.work, name, db.port, log_level=log_level,
                                   extra_args=["--schema-check", "off", *extra]).start()
        def stop():
            proxy.stop(signal.SIGKILL)
            proxy.proc.wait(timeout=EXIT_TIMEOUT_S)
        self.addCleanup(stop)
        return proxy

    def connect(self, proxy, **kwargs):
        options = dict(host=servers.HOST, port=proxy.port, user=servers.NATIVE_USER,
                       password=servers.NATIVE_PASSWORD, database=servers.DATABASE,
                       connect_timeout=ANSWER_TIMEOUT_S, read_timeout=ANSWER_TIMEOUT_S,
                       write_timeout=ANSWER_TIMEOUT_S, autocommit=True)
        options.update(kwargs)
        conn = pymysql.connect(**options)
        self.addCleanup(lambda: conn.open and conn.close())
        return conn

    def query(self, conn, sql):
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()

    def assert_queries_work(self, proxy):
        conn = self.connect(proxy)
        self.assertEqual(self.query(conn, "SELECT 41 + 1"), ((42,),))

    # --- validate --------------------------------------------------------------------------------

    def test_validate_example_config_with_example_rules(self):
        r = run_cli("validate", "--config", EXAMPLE_CONFIG, "--rules", EXAMPLE_RULES)
        self.assertEqual(r.returncode, 0, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.assertIn("ok: config valid", r.stdout)

    def test_validate_bad_rules_and_bad_config_report_file_line_column(self):
        lines = coupon_rules().splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip().startswith("counter_column:"))
        indent = len(lines[at]) - len(lines[at].lstrip())
        lines.insert(at, " " * indent + "bogus_field: 1")
        bad_rules = os.path.join(self.work, "bad_rules.yaml")
        write_file(bad_rules, "\n".join(lines) + "\n")
        r = run_cli("validate", "--config", EXAMPLE_CONFIG, "--rules", bad_rules)
        self.assertEqual(r.returncode, 1, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.assertIn(f"{bad_rules}:{at + 1}:{indent + 1}:", r.stderr)

        bad_config = os.path.join(self.work, "bad_config.yaml")
        write_file(bad_config, "listen: 127.0.0.1:3306\n\n  \nmax_conections: 5\n")
        r = run_cli("validate", "--config", bad_config, "--rules", EXAMPLE_RULES)
        self.assertEqual(r.returncode, 1, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.assertIn(f"{bad_config}:4:1:", r.stderr)
        self.assertIn("max_conections", r.stderr)

    # --- rules reload ----------------------------------------------------------------------------

    def test_bad_rules_file_keeps_the_old_rules_and_the_fix_is_picked_up(self):
        rules = self.rules_dir()
        proxy = self.start_proxy("reload_bad", "--rules-dir", rules)
        before = rules_info(proxy.admin_port)
        self.assertEqual(before["default_mode"], "enforce")
        self.assertEqual(metric(proxy.admin_port, "claimguard_rules_last_reload_successful"), 1)
        failures = reloads(proxy.admin_port, "failure")

        # (a) a broken file: the watcher reloads, the reload fails, the old rules stay.
        write_file(os.path.join(rules, "coupon.yaml"), coupon_rules().replace("stock_rules:", "stock_rules: [", 1))
        wait_for(lambda: reloads(proxy.admin_port, "failure") > failures, RELOAD_TIMEOUT_S, "failed reload counted")
        self.assertEqual(metric(proxy.admin_port, "claimguard_rules_last_reload_successful"), 0)
        self.assertEqual(rules_info(proxy.admin_port)["version"], before["version"])
        self.assert_queries_work(proxy)
        self.assertIsNone(proxy.proc.poll(), "claimguard exited on a bad rules file")

        # (b) the fix (a different, valid rule set) is seen by the watcher.
        write_file(os.path.join(rules, "coupon.yaml"), coupon_rules(mode="observe"))
        after = wait_for(lambda: (lambda i: i if i["version"] != before["version"] else None)(
            rules_info(proxy.admin_port)), RELOAD_TIMEOUT_S, "fixed rules loaded")
        self.assertEqual(after["default_mode"], "observe")
        self.assertEqual(metric(proxy.admin_port, "claimguard_rules_last_reload_successful"), 1)
        self.assert_queries_work(proxy)

    def test_sighup_and_post_reload_each_count_one_reload(self):
        rules = self.rules_dir()
        proxy = self.start_proxy("reload_triggers", "--rules-dir", rules, "--watch-rules=false")
        start = reloads(proxy.admin_port)
        self.assertGreaterEqual(reloads(proxy.admin_port, "success"), 1, "the start-up load is counted")

        proxy.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: reloads(proxy.admin_port) >= start + 1, RELOAD_TIMEOUT_S, "SIGHUP reload counted")
        self.assertEqual(reloads(proxy.admin_port), start + 1)

        status, body = http(proxy.control_port, "/-/reload", method="POST")
        self.assertEqual(status, 200, body)
        self.assertEqual(reloads(proxy.admin_port), start + 2)

        # A POST with a broken file answers 400 and counts a failure.
        write_file(os.path.join(rules, "coupon.yaml"), "stock_rules: [\n")
        failures = reloads(proxy.admin_port, "failure")
        status, body = http(proxy.control_port, "/-/reload", method="POST")
        self.assertEqual(status, 400, body)
        self.assertIn("coupon.yaml:", body)
        self.assertEqual(reloads(proxy.admin_port, "failure"), failures + 1)
        self.assertEqual(reloads(proxy.admin_port), start + 3)
        self.assertIsNone(proxy.proc.poll())

    def test_configmap_data_symlink_swap_is_picked_up(self):
        rules = os.path.join(self.work, "configmap")
        os.makedirs(os.path.join(rules, "..2026_a"))
        write_file(os.path.join(rules, "..2026_a", "coupon.yaml"), coupon_rules())
        os.symlink("..2026_a", os.path.join(rules, "..data"))
        os.symlink("..data/coupon.yaml", os.path.join(rules, "coupon.yaml"))
        proxy = self.start_proxy("configmap", "--rules-dir", rules)
        before = rules_info(proxy.admin_port)
        self.assertEqual(before["default_mode"], "enforce")

        # What kubelet does: a new timestamped dir, a temp symlink to it, renamed over ..data.
        os.makedirs(os.path.join(rules, "..2026_b"))
        write_file(os.path.join(rules, "..2026_b", "coupon.yaml"), coupon_rules(mode="observe"))
        os.symlink("..2026_b", os.path.join(rules, "..data_tmp"))
        os.replace(os.path.join(rules, "..data_tmp"), os.path.join(rules, "..data"))
        shutil.rmtree(os.path.join(rules, "..2026_a"))

        after = wait_for(lambda: (lambda i: i if i["default_mode"] == "observe" else None)(
            rules_info(proxy.admin_port)), RELOAD_TIMEOUT_S, "swapped ConfigMap loaded")
        self.assertNotEqual(after["version"], before["version"])
        self.assertEqual(metric(proxy.admin_port, "claimguard_rules_last_reload_successful"), 1)
        self.assert_queries_work(proxy)

    # --- safe edits: the kill switch, overlays, the watcher, an empty set, the version ------------

    def stock_table(self):
        """coupon_stock with one campaign and nothing left (a take is refused in enforce)."""
        db = self.database()
        db.sql("CREATE TABLE IF NOT EXISTS coupon_stock (campaign_id INT PRIMARY KEY, remain INT NOT NULL, "
               "version INT NOT NULL DEFAULT 0)", database=servers.DATABASE)
        db.sql("REPLACE INTO coupon_stock VALUES (1, 0, 0)", database=servers.DATABASE)

    def remain(self):
        return int(self.database().sql("SELECT remain FROM coupon_stock WHERE campaign_id = 1",
                                       database=servers.DATABASE).strip())

    def take_one(self, conn):
        """None when the decrement went through, else the error code."""
        try:
            self.query(conn, "UPDATE coupon_stock SET remain = remain - 1 WHERE campaign_id = 1")
            return None
        except pymysql.err.MySQLError as e:
            return e.args[0]

    def test_kill_switch_puts_every_rule_in_observe_without_a_reload(self):
        self.stock_table()
        rules = self.rules_dir()
        proxy = self.start_proxy("kill_switch", "--rules-dir", rules)
        conn = self.connect(proxy)
        self.assertEqual(self.take_one(conn), 1644, "enforce: sold out")
        self.assertEqual(metric(proxy.admin_port, "claimguard_mode_override"), 0)
        loads = reloads(proxy.admin_port)

        r = run_cli("mode-override", "observe", "--control", f"{servers.HOST}:{proxy.control_port}")
        self.assertEqual(r.returncode, 0, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.assertIn("every rule observes", r.stdout)
        # The same connection's next command observes: forwarded as written (the counter goes below 0).
        self.assertIsNone(self.take_one(conn))
        self.assertEqual(self.remain(), -1)
        info = rules_info(proxy.admin_port)
        self.assertEqual(info["mode_override"], "observe")
        self.assertEqual({s["mode"] for s in info["stock_rules"] + info["claim_rules"]}, {"observe"})
        self.assertEqual(metric(proxy.admin_port, "claimguard_mode_override"), 1)
        self.assertEqual(reloads(proxy.admin_port), loads, "the kill switch is not a reload")

        # It survives a reload; a second "observe" changes nothing and says so.
        self.assertEqual(http(proxy.control_port, "/-/reload", method="POST")[0], 200)
        self.assertEqual(rules_info(proxy.admin_port)["mode_override"], "observe")
        status, body = http(proxy.control_port, "/-/mode-override/observe", method="POST")
        self.assertEqual((status, body), (200, "mode override: already observing"))
        self.database().sql("UPDATE coupon_stock SET remain = 0", database=servers.DATABASE)
        self.assertIsNone(self.take_one(conn))

        r = run_cli("mode-override", "off", "--control", f"{servers.HOST}:{proxy.control_port}")
        self.assertEqual(r.returncode, 0, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.database().sql("UPDATE coupon_stock SET remain = 0", database=servers.DATABASE)
        self.assertEqual(self.take_one(conn), 1644, "enforce again")
        self.assertEqual(self.remain(), 0)
        self.assertIsNone(rules_info(proxy.admin_port)["mode_override"])
        # The admin listener does not take it (control only); a bad mode is a usage error.
        self.assertEqual(http(proxy.admin_port, "/-/mode-override/observe", method="POST")[0], 404)
        self.assertEqual(run_cli("mode-override", "enforce").returncode, 2)

    def test_kill_switch_at_start_up_from_the_environment(self):
        self.stock_table()
        rules = self.rules_dir()
        os.environ["CLAIMGUARD_MODE_OVERRIDE"] = "observe"
        try:
            proxy = self.start_proxy("kill_switch_env", "--rules-dir", rules)
        finally:
            del os.environ["CLAIMGUARD_MODE_OVERRIDE"]
        self.assertEqual(rules_info(proxy.admin_port)["mode_override"], "observe")
        self.assertIsNone(self.take_one(self.connect(proxy)))
        self.assertEqual(self.remain(), -1)

    def test_watcher_ignores_other_files_and_an_overlay_sets_modes(self):
        rules = self.rules_dir()
        proxy = self.start_proxy("overlay", "--rules-dir", rules)
        loads = reloads(proxy.admin_port)
        for name in ("notes.txt", ".coupon.yaml.swp", "coupon.yaml~", "4913"):
            write_file(os.path.join(rules, name), "not rules\n")
        # The watcher debounces 300 ms: a reload would be counted well within this.
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            self.assertEqual(reloads(proxy.admin_port), loads, "an unrelated file reloaded the rules")
            time.sleep(0.1)

        before = rules_info(proxy.admin_port)
        write_file(os.path.join(rules, "zz-modes.yaml"), "rule_modes:\n  coupon_stock: observe\n")
        after = wait_for(lambda: (lambda i: i if i["version"] != before["version"] else None)(
            rules_info(proxy.admin_port)), RELOAD_TIMEOUT_S, "overlay loaded")
        self.assertEqual([s["mode"] for s in after["stock_rules"]], ["observe"])
        self.assertEqual([c["mode"] for c in after["claim_rules"]], ["enforce"])

        # An overlay naming no rule is refused at its line; the overlay before it stays.
        write_file(os.path.join(rules, "zz-modes.yaml"), "rule_modes:\n  coupon_stok: observe\n")
        status, body = http(proxy.control_port, "/-/reload", method="POST")
        self.assertEqual(status, 400, body)
        self.assertIn("zz-modes.yaml:2:3: rule_modes names 'coupon_stok'", body)
        self.assertEqual(rules_info(proxy.admin_port)["version"], after["version"])

    def test_empty_rules_dir_relays_and_rules_added_later_load(self):
        rules = os.path.join(self.work, "empty_rules")
        os.makedirs(rules)
        proxy = self.start_proxy("empty_rules", "--rules-dir", rules)
        self.assert_queries_work(proxy)
        info = rules_info(proxy.admin_port)
        self.assertEqual((info["stock_rules"], info["claim_rules"]), ([], []))
        self.assertEqual(metric(proxy.admin_port, "claimguard_rules_last_reload_successful"), 1)
        write_file(os.path.join(rules, "coupon.yaml"), coupon_rules())
        wait_for(lambda: rules_info(proxy.admin_port)["stock_rules"], RELOAD_TIMEOUT_S, "rules added later loaded")

    def test_lint_of_a_copy_shows_the_version_the_sidecar_reports(self):
        rules = self.rules_dir()
        proxy = self.start_proxy("version", "--rules-dir", rules)
        copy = os.path.join(self.work, "dba_copy")
        os.makedirs(copy)
        shutil.copy(os.path.join(rules, "coupon.yaml"), os.path.join(copy, "my-coupon-rules.yaml"))
        r = run_cli("lint", os.path.join(copy, "my-coupon-rules.yaml"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"(version {rules_info(proxy.admin_port)['version']})", r.stdout)

    def test_audit_lines_carry_their_context_and_the_file_reopens_on_sigusr1(self):
        self.stock_table()
        rules = self.rules_dir()
        audit = os.path.join(self.work, "audit-context.jsonl")
        proxy = self.start_proxy("audit_context", "--rules-dir", rules, "--audit-log", audit)
        conn = self.connect(proxy)
        thread = self.query(conn, "SELECT CONNECTION_ID()")[0][0]
        self.assertEqual(self.take_one(conn), 1644)

        def lines(path):
            if not os.path.exists(path):
                return []
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        line = wait_for(lambda: next((l for l in lines(audit) if l["action"] == "exhausted"), None),
                        ANSWER_TIMEOUT_S, "the exhausted audit line")
        self.assertEqual(line["statement"], "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?")
        self.assertEqual(line["rules_version"], rules_info(proxy.admin_port)["version"])
        self.assertEqual(line["host"], socket.gethostname())
        self.assertEqual(line["database"], servers.DATABASE)
        self.assertEqual(line["backend_thread"], thread)
        self.assertEqual(line["keys"], {"campaign_id": "1"})
        self.assertEqual(line["answer"], 1644, "the ERR the app was sent")

        # logrotate: move the file away, SIGUSR1, the next line goes to a new file by the same name.
        os.rename(audit, audit + ".1")
        proxy.proc.send_signal(signal.SIGUSR1)
        wait_for(lambda: os.path.exists(audit), ANSWER_TIMEOUT_S, "the audit log reopened")
        self.assertEqual(self.take_one(conn), 1644)
        wait_for(lambda: any(l["action"] == "exhausted" for l in lines(audit)), ANSWER_TIMEOUT_S,
                 "a line in the new file")
        self.assertEqual(len([l for l in lines(audit + ".1") if l["action"] == "exhausted"]), 1)
        # Observe mode: the line says what the app got from the database it was forwarded to.
        self.assertEqual(http(proxy.control_port, "/-/mode-override/observe", method="POST")[0], 200)
        self.assertIsNone(self.take_one(conn))
        observed = wait_for(lambda: next((l for l in lines(audit) if l["action"] != "exhausted"), None),
                            ANSWER_TIMEOUT_S, "the observe-mode audit line")
        self.assertEqual(observed["answer"], "ok", observed)
        self.assertIsNone(proxy.proc.poll())

    def test_digests_show_each_shape_and_what_enforce_does_in_both_modes(self):
        self.stock_table()
        rules = self.rules_dir()
        proxy = self.start_proxy("digests", "--rules-dir", rules, "--audit-log", "off")
        conn = self.connect(proxy)
        self.assertEqual(self.take_one(conn), 1644)
        with self.assertRaises(pymysql.err.MySQLError):  # sold out
            self.query(conn, "UPDATE coupon_stock SET remain = remain - 2 WHERE campaign_id = 1")
        self.assertEqual(http(proxy.control_port, "/-/mode-override/observe", method="POST")[0], 200)
        self.assertIsNone(self.take_one(conn))
        status, body = http(proxy.admin_port, "/digests")
        self.assertEqual(status, 200, body)
        shapes = json.loads(body)["shapes"]
        update = [s for s in shapes if s["statement"] ==
                  "UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?"]
        self.assertEqual(len(update), 1, shapes)
        self.assertEqual(update[0]["rule"], "coupon_stock")
        self.assertEqual(update[0]["count"], 3)
        self.assertEqual(update[0]["actions"]["exhausted"]["enforced"], 2, update[0])
        self.assertEqual(sum(a["observed"] for a in update[0]["actions"].values()), 1, update[0])
        status, text = http(proxy.admin_port, "/digests.txt")
        self.assertEqual(status, 200)
        self.assertIn("UPDATE coupon_stock SET remain = remain - ? WHERE campaign_id = ?", text)

    def test_suggest_drafts_rules_from_a_real_general_log_that_lint_and_check_accept(self):
        db = self.database()
        db.sql("CREATE TABLE IF NOT EXISTS sg_stock (campaign_id INT PRIMARY KEY, remain INT NOT NULL, "
               "version INT NOT NULL DEFAULT 0); "
               "CREATE TABLE IF NOT EXISTS sg_order (id INT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT NULL, "
               "campaign_id INT NOT NULL, created_at DATETIME NOT NULL); "
               "REPLACE INTO sg_stock VALUES (1, 100, 0), (2, 100, 0)", database=servers.DATABASE)
        log = os.path.join(self.work, "general.log")
        db.sql(f"SET GLOBAL general_log_file = '{log}'; SET GLOBAL general_log = ON")
        try:
            # The incident's naive flow, as the legacy service sends it, on three pooled connections.
            conns = [pymysql.connect(host=servers.HOST, port=db.port, user=servers.NATIVE_USER,
                                     password=servers.NATIVE_PASSWORD, database=servers.DATABASE,
                                     autocommit=True) for _ in range(3)]
            for user in range(12):
                conn, campaign = conns[user % 3], 1 + user % 2
                with conn.cursor() as cur:
                    cur.execute("SELECT remain FROM sg_stock WHERE campaign_id = %s", (campaign,))
                    remain = cur.fetchone()[0]
                    cur.execute("UPDATE sg_stock SET remain = %s, version = version + 1 WHERE campaign_id = %s",
                                (remain - 1, campaign))
                    cur.execute("INSERT INTO sg_order (user_id, campaign_id, created_at) VALUES (%s, %s, NOW())",
                                (100 + user, campaign))
            for c in conns:
                c.close()
        finally:
            db.sql("SET GLOBAL general_log = OFF")
        r = run_cli("suggest", log)
        self.assertEqual(r.returncode, 0, r.stderr)
        draft = os.path.join(self.work, "draft.yaml")
        write_file(draft, r.stdout)
        self.assertIn("key_columns: [campaign_id]", r.stdout)
        self.assertIn("counter_column: remain", r.stdout)
        self.assertIn("version_column: version", r.stdout)
        self.assertIn("idempotency_columns: [user_id, campaign_id]", r.stdout)
        self.assertIn("campaign_id: campaign_id", r.stdout)
        lint = run_cli("lint", draft)
        self.assertEqual(lint.returncode, 0, lint.stderr + r.stdout)
        # check: the claim rule's UNIQUE index is missing until `claimguard ddl`'s is applied.
        check_args = ("check", "--rules", draft, "--backend", f"{servers.HOST}:{db.port}",
                      "--user", servers.NATIVE_USER, "--database", servers.DATABASE)
        os.environ["CLAIMGUARD_CHECK_PASSWORD"] = servers.NATIVE_PASSWORD
        try:
            before = run_cli(*check_args)
            self.assertEqual(before.returncode, 1, before.stdout + before.stderr)
            ddl = run_cli("ddl", draft)
            self.assertEqual(ddl.returncode, 0, ddl.stderr)
            db.sql(ddl.stdout, database=servers.DATABASE)
            after = run_cli(*check_args)
            self.assertEqual(after.returncode, 0, after.stdout + after.stderr)
        finally:
            del os.environ["CLAIMGUARD_CHECK_PASSWORD"]

    # --- watching tables no rule names (watch_unlisted_tables), suggest --digests -----------------

    def unlisted_tables(self):
        """wu_stock / wu_order: the incident's tables under names no rule knows; wu_x1, wu_x2: two more."""
        db = self.database()
        db.sql("DROP TABLE IF EXISTS wu_stock, wu_order, wu_x1, wu_x2; "
               "CREATE TABLE wu_stock (campaign_id INT PRIMARY KEY, remain INT NOT NULL); "
               "CREATE TABLE wu_order (id INT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT NULL, "
               "campaign_id INT NOT NULL, created_at DATETIME NOT NULL); "
               "CREATE TABLE wu_x1 (id INT PRIMARY KEY, n INT NOT NULL); "
               "CREATE TABLE wu_x2 (id INT PRIMARY KEY, n INT NOT NULL); "
               "INSERT INTO wu_stock VALUES (1, 100), (2, 100); INSERT INTO wu_x1 VALUES (1, 5); "
               "INSERT INTO wu_x2 VALUES (1, 5)", database=servers.DATABASE)

    def unlisted_flow(self, conn, user, campaign):
        """The incident's naive claim: read the counter, write it back lowered, insert the order.
        The stock's remain after it, or None when it read 0 (sold out, as the app sees it)."""
        with conn.cursor() as cur:
            cur.execute("SELECT remain FROM wu_stock WHERE campaign_id = %s", (campaign,))
            remain = cur.fetchone()[0]
            if remain <= 0:
                return None
            cur.execute("UPDATE wu_stock SET remain = %s WHERE campaign_id = %s", (remain - 1, campaign))
            cur.execute("INSERT INTO wu_order (user_id, campaign_id, created_at) VALUES (%s, %s, NOW())",
                        (user, campaign))
            return remain - 1

    def run_unlisted_flow(self, proxy, users):
        conns = [self.connect(proxy) for _ in range(3)]
        for user in range(users):
            self.unlisted_flow(conns[user % 3], 100 + user, 1 + user % 2)

    def test_watch_unlisted_tables_files_the_flows_shapes_and_changes_nothing(self):
        self.unlisted_tables()
        rules = os.path.join(self.work, "rules_unlisted")
        os.makedirs(rules)
        audit = os.path.join(self.work, "audit-unlisted.jsonl")
        proxy = self.start_proxy("unlisted", "--rules-dir", rules, "--watch-unlisted-tables", "2",
                                 "--audit-log", audit)
        self.run_unlisted_flow(proxy, 12)
        # Pure relay: the app's own writes, as it sent them.
        db = self.database()
        self.assertEqual(db.sql("SELECT SUM(remain) FROM wu_stock", database=servers.DATABASE).strip(), "188")
        self.assertEqual(db.sql("SELECT COUNT(*) FROM wu_order", database=servers.DATABASE).strip(), "12")
        # Two more tables' read-then-write on one connection: wu_x1 is a third table, beyond the bound of 2.
        conn = self.connect(proxy)
        self.query(conn, "SELECT n FROM wu_x1 WHERE id = 1")
        self.query(conn, "UPDATE wu_x1 SET n = 4 WHERE id = 1")
        status, body = http(proxy.admin_port, "/digests")
        self.assertEqual(status, 200, body)
        digests = json.loads(body)
        shapes = {s["rule"]: s for s in digests["shapes"]}
        self.assertEqual(set(shapes),
                         {f"unlisted:{servers.DATABASE}.wu_stock", f"unlisted:{servers.DATABASE}.wu_order"}, digests)
        take = shapes[f"unlisted:{servers.DATABASE}.wu_stock"]
        self.assertEqual(take["statement"], "UPDATE wu_stock SET remain = ? WHERE campaign_id = ?")
        self.assertEqual(take["actions"], {"rewritten": {"enforced": 0, "observed": 12}})
        self.assertEqual(take["notes"], {"counter: remain": 12, "key_columns: campaign_id": 12, "after_read: yes": 12})
        claim = shapes[f"unlisted:{servers.DATABASE}.wu_order"]
        self.assertEqual(claim["actions"], {"claimed": {"enforced": 0, "observed": 12}})
        self.assertEqual(claim["notes"]["consumes: campaign_id=campaign_id"], 12, claim)
        self.assertEqual(claim["notes"]["columns: user_id, campaign_id"], 12, claim)
        self.assertEqual(digests["unlisted_dropped"], 1)
        self.assertEqual(metric(proxy.admin_port, "claimguard_unlisted_tables_dropped_total"), 1)
        # Never audited as actions on rules, never counted as such.
        self.assertFalse(os.path.exists(audit) and open(audit, encoding="utf-8").read().strip())
        self.assertEqual(metric(proxy.admin_port, "claimguard_would_rewrite_total"), 0)
        # Off by default: the same flow through a sidecar without the setting files nothing.
        plain = self.start_proxy("unlisted_off", "--rules-dir", rules)
        self.run_unlisted_flow(plain, 3)
        self.assertEqual(json.loads(http(plain.admin_port, "/digests")[1])["shapes"], [])

    def test_suggest_from_digests_drafts_rules_that_check_accepts_and_enforce_keeps_the_race_safe(self):
        self.unlisted_tables()
        db = self.database()
        rules = os.path.join(self.work, "rules_learn_digests")
        os.makedirs(rules)
        watcher = self.start_proxy("learn_digests", "--rules-dir", rules, "--watch-unlisted-tables", "16")
        self.run_unlisted_flow(watcher, 12)
        status, body = http(watcher.admin_port, "/digests")
        self.assertEqual(status, 200, body)
        saved = os.path.join(self.work, "digests.json")
        write_file(saved, body)
        r = run_cli("suggest", "--digests", saved)
        self.assertEqual(r.returncode, 0, r.stderr)
        draft = r.stdout
        print(draft)
        for want in ("table: wu_stock", "key_columns: [campaign_id]", "counter_column: remain", "table: wu_order",
                     "idempotency_columns: [user_id, campaign_id]", "campaign_id: campaign_id",
                     "default_mode: observe"):
            self.assertIn(want, draft)
        path = os.path.join(self.work, "draft-digests.yaml")
        write_file(path, draft)
        lint = run_cli("lint", path)
        self.assertEqual(lint.returncode, 0, lint.stderr + draft)
        check_args = ("check", "--rules", path, "--backend", f"{servers.HOST}:{db.port}",
                      "--user", servers.NATIVE_USER, "--database", servers.DATABASE)
        os.environ["CLAIMGUARD_CHECK_PASSWORD"] = servers.NATIVE_PASSWORD
        try:
            # The claim rule's UNIQUE index is missing until `claimguard ddl`'s is applied (no duplicates:
            # every user claimed once).
            self.assertEqual(run_cli(*check_args).returncode, 1)
            ddl = run_cli("ddl", path)
            self.assertEqual(ddl.returncode, 0, ddl.stderr)
            db.sql(ddl.stdout, database=servers.DATABASE)
            after = run_cli(*check_args)
            self.assertEqual(after.returncode, 0, after.stdout + after.stderr)
            # With the index in place, suggest reads it (--backend) and names the claim after it.
            indexed = run_cli("suggest", "--digests", saved, "--backend", f"{servers.HOST}:{db.port}",
                              "--user", servers.NATIVE_USER, "--database", servers.DATABASE)
            self.assertEqual(indexed.returncode, 0, indexed.stderr)
            self.assertIn("#   idempotency_columns: the existing UNIQUE index ", indexed.stdout)
            found = re.search(r"idempotency_columns: \[(.*)\]", indexed.stdout)
            self.assertEqual(sorted(found.group(1).split(", ")) if found else None, ["campaign_id", "user_id"])
            unreachable = run_cli("suggest", "--digests", saved, "--backend", f"{servers.HOST}:1",
                                  "--user", servers.NATIVE_USER, "--database", servers.DATABASE)
            self.assertEqual((unreachable.returncode, unreachable.stdout), (2, ""), unreachable.stderr)
        finally:
            del os.environ["CLAIMGUARD_CHECK_PASSWORD"]

        # Enforce, through two sidecars: 40 users race for 10 coupons with the same naive flow.
        enforce = os.path.join(self.work, "rules_enforce_digests")
        os.makedirs(enforce)
        write_file(os.path.join(enforce, "draft.yaml"), draft.replace("default_mode: observe", "default_mode: enforce"))
        db.sql("UPDATE wu_stock SET remain = 10 WHERE campaign_id = 1; DELETE FROM wu_order",
               database=servers.DATABASE)
        sidecars = [self.start_proxy(f"learn_enforce_{i}", "--rules-dir", enforce) for i in range(2)]
        answers = {"claimed": 0, "refused": 0, "read_zero": 0}
        lock = threading.Lock()

        def user(n):
            proxy = sidecars[n % 2]
            conn = pymysql.connect(host=servers.HOST, port=proxy.port, user=servers.NATIVE_USER,
                                   password=servers.NATIVE_PASSWORD, database=servers.DATABASE, autocommit=True,
                                   connect_timeout=ANSWER_TIMEOUT_S, read_timeout=ANSWER_TIMEOUT_S)
            try:
                outcome = "claimed" if self.unlisted_flow(conn, 1000 + n, 1) is not None else "read_zero"
            except pymysql.err.MySQLError:
                outcome = "refused"  # sold out, as the sidecar answers it
            finally:
                conn.close()
            with lock:
                answers[outcome] += 1

        threads = [threading.Thread(target=lambda b=b: [user(b * 5 + k) for k in range(5)]) for b in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=EXIT_TIMEOUT_S * 2)
        remain = int(db.sql("SELECT remain FROM wu_stock WHERE campaign_id = 1", database=servers.DATABASE).strip())
        orders = int(db.sql("SELECT COUNT(*) FROM wu_order WHERE campaign_id = 1", database=servers.DATABASE).strip())
        distinct = int(db.sql("SELECT COUNT(DISTINCT user_id) FROM wu_order WHERE campaign_id = 1",
                              database=servers.DATABASE).strip())
        print(f"enforce race: {answers}; remain {remain}, orders {orders}")
        self.assertEqual(sum(answers.values()), 40, answers)
        self.assertGreaterEqual(remain, 0)
        self.assertEqual(orders + remain, 10, "no over-issue and no leak: every unit taken is a claim row")
        self.assertEqual(orders, distinct, "no duplicates")
        self.assertEqual(answers["claimed"], orders, "every user told OK has the claim row")
        self.assertEqual(orders, 10, "the stock sold out (40 users for 10 coupons)")
        self.assertGreater(metric(sidecars[0].admin_port, "claimguard_rewrites_total") +
                           metric(sidecars[1].admin_port, "claimguard_rewrites_total"), 0)

    # --- graceful shutdown -----------------------------------------------------------------------

    def check_graceful_shutdown(self, name, trigger):
        self.database().sql("DELETE FROM ops_t", database=servers.DATABASE)
        proxy = self.start_proxy(name, "--max-shutdown-delay", MAX_SHUTDOWN_DELAY)
        self.assertEqual(http(proxy.admin_port, "/readiness")[0], 200)
        in_tx = self.connect(proxy)
        idle = self.connect(proxy)
        self.query(in_tx, "BEGIN")
        self.query(in_tx, "INSERT INTO ops_t VALUES (1, 1)")

        trigger(proxy)
        # /readiness turns 503 at once (before anything is drained).
        wait_for(lambda: http(proxy.admin_port, "/readiness")[0] == 503, 2.0, "/readiness 503")

        # The idle session is closed: its socket becomes readable (EOF or an ERR), then it is unusable.
        wait_for(lambda: select.select([idle._sock], [], [], 0)[0], ANSWER_TIMEOUT_S, "idle client disconnected")
        with self.assertRaises(pymysql.err.MySQLError):
            idle.ping(reconnect=False)

        # The session in a transaction keeps working until COMMIT.
        self.assertIsNone(proxy.proc.poll(), "claimguard exited with a transaction open")
        self.query(in_tx, "UPDATE ops_t SET v = v + 1")
        self.assertEqual(self.query(in_tx, "SELECT COUNT(*) FROM ops_t"), ((1,),))
        self.query(in_tx, "COMMIT")
        self.assertEqual(self.database().sql("SELECT v FROM ops_t", database=servers.DATABASE).strip(), "2")

        self.assertEqual(proxy.proc.wait(timeout=EXIT_TIMEOUT_S), 0, f"exit status; see {proxy.log}")

    def test_sigterm_drains_sessions_and_exits_0(self):
        self.check_graceful_shutdown("sigterm", lambda proxy: proxy.proc.send_signal(signal.SIGTERM))

    def test_shutdown_command_drains_sessions_and_exits_0(self):
        def trigger(proxy):
            r = run_cli("shutdown", "--control", f"{servers.HOST}:{proxy.control_port}")
            self.assertEqual(r.returncode, 0, f"stdout {r.stdout!r} stderr {r.stderr!r}")
        self.check_graceful_shutdown("shutdown_cmd", trigger)

    # --- logs ------------------------------------------------------------------------------------

    def test_json_log_lines_parse_and_never_contain_the_password(self):
        db = self.database()
        user = "cg_logpw"
        db.sql(f"CREATE USER '{user}'@'%' IDENTIFIED WITH mysql_native_password USING PASSWORD('{LOG_PASSWORD}');"
               f"GRANT ALL PRIVILEGES ON {servers.DATABASE}.* TO '{user}'@'%';")
        proxy = self.start_proxy("json_log", "--log-format", "json", "--rules-dir", self.rules_dir(),
                                 log_level="trace")
        conn = self.connect(proxy, user=user, password=LOG_PASSWORD)
        self.assertEqual(self.query(conn, "SELECT 1"), ((1,),))
        with self.assertRaises(pymysql.err.OperationalError):
            self.connect(proxy, user=user, password=WRONG_PASSWORD)
        conn.close()
        http(proxy.control_port, "/-/reload", method="POST")
        proxy.proc.send_signal(signal.SIGTERM)
        self.assertEqual(proxy.proc.wait(timeout=EXIT_TIMEOUT_S), 0)

        with open(proxy.log, encoding="utf-8", errors="replace") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        self.assertGreater(len(lines), 3, "too few log lines to mean anything")
        for line in lines:
            try:
                self.assertIsInstance(json.loads(line), dict, line)
            except json.JSONDecodeError as e:
                self.fail(f"not JSON ({e}): {line!r}")
            self.assertNotIn(LOG_PASSWORD, line)
            self.assertNotIn(WRONG_PASSWORD, line)
        print(f"{len(lines)} JSON log lines checked")


def main():
    def keep(args):
        global ARGS
        ARGS = args
    itlib.run_fixture_cases(Ops, "it_ops.py ops", __doc__, keep)


if __name__ == "__main__":
    main()
