#!/usr/bin/env python3
"""The mariadb command-line client through claimguard: output, errors and exit codes equal to direct (CliTest),
and claimguard's own command-line contract (ClaimguardCliTest, issue 22): typed --help with defaults, exit 2
for usage errors, --version, the last flag wins, one duration syntax, validate --print-config with secrets
redacted, lint DIR, shutdown over IPv6, and the control endpoints off the admin port and on loopback only.

ClaimguardCliTest needs no database: CLAIMGUARD_BINARY names the binary (set by CMake)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import itlib
import servers

CLI_TIMEOUT_S = 120
# Timings the CLI prints with -v: the only part of its output allowed to differ between runs.
TIMING = re.compile(r"\(\d+\.\d+ sec\)")

TYPES_SQL = """
CREATE OR REPLACE TABLE cli_types (id INT PRIMARY KEY, i BIGINT UNSIGNED, d DECIMAL(12,3), f DOUBLE,
  s VARCHAR(40) CHARACTER SET utf8mb4, b VARBINARY(8), dt DATETIME(3), n INT, j JSON, e ENUM('x','y'));
INSERT INTO cli_types VALUES
  (1, 18446744073709551615, -123456789.125, 1e-300, 'héllo ☃', X'00ff0a09', '2024-02-29 01:02:03.456', NULL, '{"a":[1,null]}', 'y'),
  (2, 0, 0, -0.5, 'tab\\there', X'', '1000-01-01 00:00:00', 7, NULL, NULL),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM cli_types ORDER BY id;
SELECT 1/0, CAST('x1' AS INT);
SHOW WARNINGS;
SELECT COUNT(*), SUM(seq) FROM seq_1_to_3000;
"""

SOURCE_SQL = """-- a script with several kinds of statements, run with `source`
CREATE OR REPLACE TABLE cli_src (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20));
INSERT INTO cli_src (v) VALUES ('a'), ('b'), (NULL);
DELIMITER //
CREATE OR REPLACE PROCEDURE cli_two_results()
BEGIN
  SELECT COUNT(*) AS n FROM cli_src;
  SELECT id, v FROM cli_src ORDER BY id;
END //
DELIMITER ;
CALL cli_two_results();
SELECT * FROM cli_no_such_table;
UPDATE cli_src SET v = 'z' WHERE v IS NULL;
START TRANSACTION;
DELETE FROM cli_src WHERE id = 1;
ROLLBACK;
SELECT * FROM cli_src ORDER BY id;
"""


def run_cli(target, args, stdin=None, user="native", password=None, database="cgtest"):
    """(exit code, stdout, stderr) of one mariadb CLI run against target, timings masked."""
    e = itlib.env()
    name, pw = itlib.credentials(user)
    cmd = ["mariadb", "--no-defaults", "--protocol=TCP", f"--host={e['HOST']}", f"--port={itlib.port(target)}",
           f"--user={name}", f"--password={pw if password is None else password}"]
    if database:
        cmd.append(f"--database={database}")
    r = subprocess.run(cmd + args, input=(stdin or "").encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=CLI_TIMEOUT_S, check=False)
    out = TIMING.sub("(T sec)", r.stdout.decode(errors="replace"))
    err = TIMING.sub("(T sec)", r.stderr.decode(errors="replace"))
    return [f"exit={r.returncode}"] + out.splitlines() + ["--- stderr"] + err.splitlines()


class CliTest(itlib.TransparencyCase):

    def check_ok(self, lines):
        self.assertEqual(lines[0], "exit=0", "\n".join(lines))

    def test_batch_mode_types_and_warnings(self):
        self.assert_transparent(lambda t: run_cli(t, ["--batch", "-e", TYPES_SQL]), self.check_ok)

    def test_table_xml_and_column_info_output(self):
        self.assert_transparent(lambda t: run_cli(t, ["--table", "--column-type-info", "-e", TYPES_SQL]) +
                                run_cli(t, ["--xml", "-e", "SELECT * FROM cli_types ORDER BY id"]) +
                                run_cli(t, ["--html", "--skip-column-names", "-e", "SELECT s, b FROM cli_types"]),
                                self.check_ok)

    def test_verbose_affected_rows(self):
        sql = ("CREATE OR REPLACE TABLE cli_v (id INT PRIMARY KEY, v INT); INSERT INTO cli_v VALUES (1,1),(2,2);"
               "UPDATE cli_v SET v = v; UPDATE cli_v SET v = 5 WHERE id = 1; DELETE FROM cli_v; SELECT * FROM cli_v")
        self.assert_transparent(lambda t: run_cli(t, ["-vvv", "--show-warnings", "-e", sql]), self.check_ok)

    def test_source_script_with_procedure_and_errors(self):
        with tempfile.TemporaryDirectory(dir=itlib.state_dir()) as d:
            path = os.path.join(d, "script.sql")
            with open(path, "w", encoding="utf-8") as f:
                f.write(SOURCE_SQL)

            def scenario(t):
                return (run_cli(t, ["--table", "--force", "-e", f"source {path}"]) +
                        run_cli(t, ["--batch"], stdin=f"source {path}\n") +
                        run_cli(t, ["--batch", "--force", "-vvv"], stdin=SOURCE_SQL))
            self.assert_transparent(scenario, lambda lines: self.assertIn("ERROR 1146 (42S02)", "\n".join(lines)))

    def test_local_infile(self):
        with tempfile.TemporaryDirectory(dir=itlib.state_dir()) as d:
            path = os.path.join(d, "data.tsv")
            with open(path, "w", encoding="utf-8") as f:
                for k in range(20000):
                    value = "\\N" if k % 9 == 0 else str(k * 3)
                    f.write(f"{k}\tname {k}\t{value}\n")
            load = (f"CREATE OR REPLACE TABLE cli_infile (id INT PRIMARY KEY, name VARCHAR(30), v INT);"
                    f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE cli_infile;"
                    f"SELECT COUNT(*), SUM(v), COUNT(v), MAX(name) FROM cli_infile")

            def scenario(t):
                return (run_cli(t, ["--local-infile=1", "-vvv", "--batch", "-e", load]) +
                        run_cli(t, ["--local-infile=0", "--batch", "-e", load]))
            self.assert_transparent(scenario, lambda lines: self.assertIn("Records: 20000  Deleted: 0  Skipped: 0  Warnings: 0", lines))

    def test_errors_and_exit_codes(self):
        def scenario(t):
            return (run_cli(t, ["-e", "SELECT * FROM cli_no_such_table"]) +
                    run_cli(t, ["-e", "SELEC 1"]) +
                    run_cli(t, ["-e", "SELECT 1"], password="wrong-password") +
                    run_cli(t, ["-e", "SELECT 1"], database="cli_no_such_db") +
                    run_cli(t, ["-e", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'from the CLI'"]))
        self.assert_transparent(scenario, lambda lines: self.assertIn("ERROR 1045 (28000)", "\n".join(lines)))

    def test_ed25519_login(self):
        sql = "SELECT CURRENT_USER(), DATABASE(); SELECT @@version_comment"
        self.assert_transparent(lambda t: run_cli(t, ["--batch", "-e", sql], user="ed25519") +
                                run_cli(t, ["--batch", "-e", sql], user="ed25519", password="nope", database=""),
                                lambda lines: self.assertIn("cg_ed25519@%\tcgtest", lines))


# --- claimguard's own command line (issue 22) -------------------------------------------------------------

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE_RULES = os.path.join(SOURCE_DIR, "rules", "examples", "coupon.yaml")
CG_TIMEOUT_S = 30
START_TIMEOUT_S = 15
DURATION_FORMS = "250ms, 1.5s, 2m or 8h"
SECRET = "hunter2-not-in-output"


def claimguard(*args, env=None):
    """(exit code, stdout, stderr) of one claimguard run."""
    binary = os.environ.get("CLAIMGUARD_BINARY", "")
    if not binary:
        raise unittest.SkipTest("CLAIMGUARD_BINARY is not set (run through ctest)")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGUARD_") or k == "CLAIMGUARD_BINARY"}
    full_env.update(env or {})
    r = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       env=full_env, timeout=CG_TIMEOUT_S, check=False, text=True)
    return r.returncode, r.stdout, r.stderr


def http(host, port, path, method="GET"):
    """(status, body); status 0 when nothing answers."""
    url_host = f"[{host}]" if ":" in host else host
    req = urllib.request.Request(f"http://{url_host}:{port}{path}", method=method,
                                 data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return 0, ""


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
            return True
    except OSError:
        return False


def free_port_v6():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


class ClaimguardCliTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="cg-cli-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def serve(self, *args):
        """A `claimguard serve` with an unreachable backend (none is needed here); waits for /startup 200 on
        the admin port when there is one. Returns the process."""
        binary = os.environ["CLAIMGUARD_BINARY"]
        log = open(os.path.join(self.work, f"serve-{len(self.procs)}.log"), "wb")  # noqa: SIM115
        p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1", *args],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs.append(p)
        return p

    def log_of(self, index=0):
        with open(os.path.join(self.work, f"serve-{index}.log"), encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_started(self, p, admin_port):
        itlib.wait_for(lambda: p.poll() is not None or http("127.0.0.1", admin_port, "/startup")[0] == 200,
                       START_TIMEOUT_S, "claimguard /startup 200")
        self.assertIsNone(p.poll(), f"claimguard exited with {p.returncode}: {self.log_of()}")

    # --- --help, --version ----------------------------------------------------------------------------

    def test_help_shows_types_defaults_units_and_groups(self):
        for command in ("serve", "validate"):
            rc, out, err = claimguard(command, "--help")
            self.assertEqual(rc, 0, err)
            for expected in ("--connect-timeout DURATION=5s", "--idle-timeout DURATION (whole s)=8h",
                             "--redis-timeout DURATION=50ms", "--max-packet-bytes BYTES=67108864",
                             "--max-connections COUNT=1024", "--admin HOST:PORT|off=127.0.0.1:9090",
                             "--control HOST:PORT|off=127.0.0.1:9091", "--backend HOST:PORT",
                             "--log-level trace|debug|info|warn|error=info",
                             "--backend-tls-verify, --no-backend-tls-verify   (switch; default true)",
                             "--redis-tls, --no-redis-tls   (switch; default false)",
                             "[env CLAIMGUARD_CONNECT_TIMEOUT]", "\nRedis:\n", "\nBackend TLS:\n",
                             "\nLimits and timeouts:\n"):
                self.assertIn(expected, out, f"{command} --help")
            self.assertNotIn("TEXT ...", out, "an option without its type")
            self.assertNotIn("{true}", out)
        rc, out, _ = claimguard("shutdown", "--help")
        self.assertIn("--control HOST:PORT=127.0.0.1:9091", out)
        self.assertIn("--timeout DURATION=5s", out)

    def test_version_is_the_cmake_project_version(self):
        with open(os.path.join(SOURCE_DIR, "CMakeLists.txt"), encoding="utf-8") as f:
            version = re.search(r"project\(claimguard VERSION (\S+)", f.read()).group(1)
        rc, out, err = claimguard("--version")
        self.assertEqual((rc, out.strip(), err), (0, f"claimguard {version}", ""))

    # --- exit codes -------------------------------------------------------------------------------------

    def test_every_usage_error_exits_2(self):
        cases = [("serve", "--bogus"), ("nosuch",), (), ("serve", "--backend"), ("validate", "--threads"),
                 ("lint",), ("ddl",), ("explain", "--rules", EXAMPLE_RULES), ("check", "--bogus"),
                 ("inject", "--bogus"), ("shutdown", "--control"), ("shutdown", "--bogus"),
                 ("serve", "--config", os.path.join(self.work, "missing.yaml")),
                 ("shutdown", "--timeout", "5", "--control", "127.0.0.1:1"),
                 ("shutdown", "--control", "no-port")]
        for args in cases:
            with self.subTest(args=args):
                rc, out, err = claimguard(*args)
                self.assertEqual(rc, 2, f"stdout {out!r} stderr {err!r}")
                self.assertTrue(err.strip(), "a usage error says why on stderr")
        # A config error stops serve with 2 too; validate reports it with 1 (it is validate's verdict).
        rc, _, err = claimguard("serve", "--backend", "127.0.0.1:1", "--max-connections", "0")
        self.assertEqual(rc, 2, err)
        rc, _, err = claimguard("validate", "--backend", "127.0.0.1:1", "--max-connections", "0")
        self.assertEqual(rc, 1, err)

    def test_explain_takes_the_statement_after_the_rules_and_a_file_of_many(self):
        # --rules takes one file per flag: the statement after it is the SQL (a regression: --rules once
        # swallowed it as a second rules file).
        rc, out, err = claimguard("explain", "--rules", EXAMPLE_RULES,
                                  "UPDATE coupon_stock SET remain = 99 WHERE campaign_id = 7")
        self.assertEqual(rc, 0, err)
        self.assertIn("decision: take", out)
        script = os.path.join(self.work, "app.sql")
        with open(script, "w", encoding="utf-8") as f:
            f.write("SELECT remain FROM coupon_stock WHERE campaign_id = 7;\nTRUNCATE coupon_stock;\n")
        rc, out, err = claimguard("explain", "--rules", EXAMPLE_RULES, "--file", script, "--format", "json")
        self.assertEqual(rc, 0, err)
        rows = json.loads(out)
        self.assertEqual([r["decision"] for r in rows], ["remember_read", "refuse"])
        rc, _, err = claimguard("explain", "--rules", EXAMPLE_RULES, "--file", script, "SELECT 1")
        self.assertEqual(rc, 2, err)

    def test_backend_is_required(self):
        rc, _, err = claimguard("serve", "--listen", "127.0.0.1:0")
        self.assertEqual(rc, 2)
        self.assertIn("backend is required", err)
        rc, out, err = claimguard("validate", env={"CLAIMGUARD_BACKEND": "db:3306"})
        self.assertEqual(rc, 0, err)

    # --- flags ------------------------------------------------------------------------------------------

    def effective(self, *args, env=None):
        rc, out, err = claimguard("validate", "--print-config", *args, env=env)
        self.assertEqual(rc, 0, f"stdout {out!r} stderr {err!r}")
        return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line and not line.startswith("#")
                    and not line.startswith("ok"))

    def test_last_flag_wins_and_booleans_are_switches(self):
        c = self.effective("--backend", "a:1", "--backend", "b:2", "--threads", "2", "--threads", "3")
        self.assertEqual((c["backend"], c["threads"]), ("b:2", "3"))
        base = ("--backend", "a:1")
        self.assertEqual(self.effective(*base, "--no-watch-rules")["watch_rules"], "false")
        self.assertEqual(self.effective(*base, "--no-watch-rules", "--watch-rules")["watch_rules"], "true")
        self.assertEqual(self.effective(*base, "--watch-rules", "--no-watch-rules")["watch_rules"], "false")
        self.assertEqual(self.effective(*base, "--watch-rules=false")["watch_rules"], "false")
        self.assertEqual(self.effective(*base, "--redis", "r:1", "--redis-tls")["redis_tls"], "true")
        self.assertEqual(self.effective(*base, "--redis", "r:1", "--redis-cluster", "true")["redis_cluster"], "true")
        self.assertEqual(self.effective(*base, "--orphan-kill", "false")["orphan_kill"], "false")
        self.assertEqual(self.effective(*base)["backend_tls_verify"], "true", "backend TLS is verified by default")
        self.assertEqual(self.effective(*base, "--no-backend-tls-verify")["backend_tls_verify"], "false")
        # The repeatable one accumulates.
        rc, out, err = claimguard("validate", "--print-config", *base, "--rules", EXAMPLE_RULES, "--rules",
                                  EXAMPLE_RULES)
        self.assertEqual(out.count(f"  - {EXAMPLE_RULES}"), 2, out + err)

    def test_durations_need_a_unit_in_flags_env_config_and_rules(self):
        self.assertEqual(self.effective("--backend", "a:1", "--connect-timeout", "1.5s")["connect_timeout"], "1500ms")
        rc, _, err = claimguard("validate", "--backend", "a:1", "--connect-timeout", "1500")
        self.assertEqual(rc, 1)
        self.assertIn("--connect-timeout: connect_timeout: '1500' has no unit", err)
        self.assertIn(DURATION_FORMS, err)
        rc, _, err = claimguard("serve", "--backend", "a:1", "--redis-timeout", "50")
        self.assertEqual(rc, 2)
        self.assertIn("redis_timeout: '50' has no unit", err)
        rc, _, err = claimguard("validate", "--backend", "a:1", env={"CLAIMGUARD_IDLE_TIMEOUT": "30"})
        self.assertEqual(rc, 1)
        self.assertIn("CLAIMGUARD_IDLE_TIMEOUT: idle_timeout: '30' has no unit", err)
        config = self.write("c.yaml", "backend: a:1\npacket_timeout: 30\n")
        rc, _, err = claimguard("validate", "--config", config)
        self.assertEqual(rc, 1)
        self.assertIn(f"{config}:2:1: packet_timeout: '30' has no unit", err)
        with open(EXAMPLE_RULES, encoding="utf-8") as f:
            text = f.read()
        head, sep, tail = text.partition("\nclaim_rules:")
        rules = self.write("r.yaml", head + "\n    admission: {max_in_flight: 4, queue_timeout: 2}\n" + sep + tail)
        rc, _, err = claimguard("lint", rules)
        self.assertEqual(rc, 1)
        self.assertIn("queue_timeout: '2' has no unit", err)
        self.assertIn(DURATION_FORMS, err)

    def test_print_config_merges_sources_and_redacts_secrets(self):
        config = self.write("c.yaml", "backend: file:1\nmax_connections: 10\nlog_level: debug\n"
                                      f"schema_check_password: {SECRET}\n")
        env = {"CLAIMGUARD_MAX_CONNECTIONS": "20", "CLAIMGUARD_REDIS_PASSWORD": SECRET + "-redis",
               "CLAIMGUARD_SCHEMA_CHECK_PASSWORD": SECRET + "-env"}
        rc, out, err = claimguard("validate", "--print-config", "--config", config, "--threads", "4", env=env)
        self.assertEqual(rc, 0, err)
        self.assertNotIn(SECRET, out + err)
        self.assertIn("# schema_check_password: (redacted)", out)
        self.assertIn("(CLAIMGUARD_REDIS_PASSWORD or redis_password_file): (redacted)", out)
        c = self.effective("--config", config, "--threads", "4", env=env)
        self.assertEqual((c["backend"], c["max_connections"], c["log_level"], c["threads"]),
                         ("file:1", "20", "debug", "4"))
        # What it prints is a config file: fed back, it gives the same configuration.
        printed = self.write("printed.yaml", out.split("\nok: ")[0])
        rc, again, err = claimguard("validate", "--print-config", "--config", printed)
        self.assertEqual(rc, 0, err)
        self.assertEqual(again.split("\nok: ")[0].replace("(redacted)", "(not set)").split("# Redis password")[0],
                         out.split("\nok: ")[0].replace("(redacted)", "(not set)").split("# Redis password")[0])

    # --- lint DIR ---------------------------------------------------------------------------------------

    def test_lint_a_configmap_directory(self):
        mount = os.path.join(self.work, "configmap")
        stamp = os.path.join(mount, "..2026_01_01_00_00_00.123")
        os.makedirs(stamp)
        shutil.copy(EXAMPLE_RULES, os.path.join(stamp, "coupon.yaml"))
        os.symlink(os.path.basename(stamp), os.path.join(mount, "..data"))
        os.symlink("..data/coupon.yaml", os.path.join(mount, "coupon.yaml"))
        rc, out, err = claimguard("lint", mount)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("ok: 1 stock rules, 1 claim rules"), out)
        with open(os.path.join(stamp, "broken.yaml"), "w", encoding="utf-8") as f:
            f.write("stock_rules: [\n")
        os.symlink("..data/broken.yaml", os.path.join(mount, "broken.yaml"))
        rc, out, err = claimguard("lint", mount)
        self.assertEqual(rc, 1, out)
        self.assertIn(os.path.join(mount, "broken.yaml") + ":", err)
        rc, _, err = claimguard("lint", self.work + "/empty-dir-that-is-missing")
        self.assertEqual(rc, 2, err)

    # --- the control surface ------------------------------------------------------------------------------

    def test_control_endpoints_are_not_on_the_admin_port(self):
        admin, control = servers.free_port(), servers.free_port()
        p = self.serve("--admin", f"127.0.0.1:{admin}", "--control", f"127.0.0.1:{control}",
                       "--rules", EXAMPLE_RULES, "--schema-check", "off")
        self.wait_started(p, admin)
        for path in ("/quitquitquit", "/-/reload"):
            self.assertEqual(http("127.0.0.1", admin, path, "POST")[0], 404, f"POST {path} on the admin port")
        for path in ("/metrics", "/readiness", "/rules"):
            self.assertEqual(http("127.0.0.1", control, path)[0], 404, f"GET {path} on the control port")
        self.assertEqual(http("127.0.0.1", admin, "/rules")[0], 200)
        self.assertEqual(http("127.0.0.1", control, "/-/reload", "POST")[0], 200)
        self.assertIsNone(p.poll())
        self.assertEqual(http("127.0.0.1", control, "/quitquitquit", "POST")[0], 200)
        self.assertEqual(p.wait(timeout=CG_TIMEOUT_S), 0)

    def test_non_loopback_control_is_refused_unless_allowed(self):
        control = servers.free_port()
        for address in (f"0.0.0.0:{control}", f"[::]:{control}"):
            rc, _, err = claimguard("serve", "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1",
                                    "--admin", "off", "--control", address)
            self.assertEqual(rc, 2, err)
            self.assertIn("is not a loopback address", err)
        rc, _, err = claimguard("serve", "--backend", "127.0.0.1:1", env={"CLAIMGUARD_CONTROL": f"0.0.0.0:{control}"})
        self.assertEqual(rc, 2, err)
        admin = servers.free_port()
        p = self.serve("--admin", f"127.0.0.1:{admin}", "--control", f"0.0.0.0:{control}",
                       "--control-allow-non-loopback")
        self.wait_started(p, admin)
        rc, out, err = claimguard("shutdown", "--control", f"127.0.0.1:{control}")
        self.assertEqual(rc, 0, err)
        self.assertEqual(p.wait(timeout=CG_TIMEOUT_S), 0)

    def test_shutdown_over_ipv6(self):
        if not ipv6_loopback():
            self.skipTest("no IPv6 loopback here")
        admin, control = servers.free_port(), free_port_v6()
        p = self.serve("--admin", f"127.0.0.1:{admin}", "--control", f"[::1]:{control}")
        self.wait_started(p, admin)
        rc, out, err = claimguard("shutdown", "--control", f"[::1]:{control}")
        self.assertEqual((rc, out.strip()), (0, "claimguard is shutting down"), err)
        self.assertEqual(p.wait(timeout=CG_TIMEOUT_S), 0)
        # Nothing listens any more: exit 1 and a one-line reason.
        rc, _, err = claimguard("shutdown", "--control", f"[::1]:{control}", "--timeout", "2s")
        self.assertEqual(rc, 1)
        self.assertIn("cannot reach the control endpoint", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_control_client_gives_up_at_its_timeout_and_names_an_answer_that_is_not_http(self):
        # A listener that accepts and never answers: exit 1 at --timeout, not a hang.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen()
            started = time.monotonic()
            rc, _, err = claimguard("mode-override", "observe", "--control",
                                    f"127.0.0.1:{silent.getsockname()[1]}", "--timeout", "1s")
            self.assertEqual(rc, 1)
            self.assertIn("timed out", err)
            self.assertLess(time.monotonic() - started, CG_TIMEOUT_S)
        # A listener that answers something else and closes: exit 1, said so.
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen()
            def answer():
                conn, _ = other.accept()
                conn.recv(4096)
                conn.sendall(b"+PONG\r\n")
                conn.close()
            t = threading.Thread(target=answer)
            t.start()
            rc, _, err = claimguard("mode-override", "observe", "--control",
                                    f"127.0.0.1:{other.getsockname()[1]}", "--timeout", "5s")
            t.join()
            self.assertEqual(rc, 1)
            self.assertIn("the answer is not HTTP", err)


if __name__ == "__main__":
    itlib.main()
