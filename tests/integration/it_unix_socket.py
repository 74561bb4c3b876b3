#!/usr/bin/env python3
"""listen_unix: apps in the pod connect through a unix socket; the same sessions as over TCP.

Usage: it_unix_socket.py --claimguard PATH --stmt-client PATH --work-dir DIR [unittest args]

One MariaDB with the coupon schema (tests/incident/cluster.py) and one claimguard with the example
rules listening on TCP and on a unix socket (a stale socket file left at its path first). Real clients
through both: PyMySQL (unix_socket=), the mariadb command line (--socket), libmariadb prepared
statements (unix/stmt_client.cpp). Each flow, claims included, runs once over TCP and once over the
socket from the same stock and must give the same answers and leave the same rows. Also: the socket
file's mode, ERR 1040 over max_connections (one limit for both listeners), the audit's
"unix:<path>" peer, and the socket file removed at a clean shutdown.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py: MariaDB + the coupon schema)
import itlib  # noqa: E402
import servers  # noqa: E402

SOCKET_MODE = 0o666          # what claimguard creates (server.cpp unix_socket_mode)
MAX_CONNECTIONS = 4
ER_CON_COUNT = 1040
CAMPAIGN = 7
STOCK = 2                    # two claims succeed, the third user finds it sold out
SESSIONS_CLOSED_WITHIN_S = 5.0
SHUTDOWN_WITHIN_S = 10.0
CLIENT_TIMEOUT_S = 20

ARGS = None


def naive_claim(conn, user):
    """The legacy service's claim (DESIGN.md): read remain, write back remain - 1, insert the order."""
    out = []
    with conn.cursor() as cur:
        for step in ("read", "update", "insert"):
            try:
                if step == "read":
                    cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                    remain = cur.fetchone()[0]
                    out.append(("read", remain))
                    if remain <= 0:
                        return out
                elif step == "update":
                    n = cur.execute(f"UPDATE coupon_stock SET remain = {remain - 1} WHERE campaign_id = {CAMPAIGN}")
                    out.append(("update", n))
                else:
                    n = cur.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES ({user}, {CAMPAIGN})")
                    out.append(("insert", n))
            except pymysql.MySQLError as e:
                out.append((step, "ERR", e.args[0]))
                return out
    return out


class UnixSocket(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        # A short directory of its own: sun_path holds 107 bytes, build directories can be deep.
        cls.sock_dir = tempfile.mkdtemp(prefix="cg-unix-")
        cls.sock = os.path.join(cls.sock_dir, "claimguard.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(cls.sock)  # a killed run's leftover: bound, never unlinked
        stale.close()
        cls.cluster = cluster.Cluster(cls.work).start_db()  # MariaDB in work/mariadb (fresh_work_dir stops it)
        cls.proxy = servers.Claimguard(
            ARGS.claimguard, cls.cluster.dir, "claimguard", cls.cluster.db.port,
            extra_args=["--rules", cluster.EXAMPLE_RULES, "--listen-unix", cls.sock,
                        "--max-connections", str(MAX_CONNECTIONS),
                        "--audit-log", os.path.join(cls.cluster.dir, "audit.jsonl")])
        cls.proxy.audit = os.path.join(cls.cluster.dir, "audit.jsonl")
        cls.cluster.proxies.append(cls.proxy)
        cls.proxy.start()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.cluster.stop()
        finally:
            shutil.rmtree(cls.sock_dir, ignore_errors=True)

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"\n    {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.2f}s", end="")

    # --- clients ------------------------------------------------------------------------------------
    def tcp(self, **kw):
        return pymysql.connect(host=servers.HOST, port=self.proxy.port, user=cluster.APP_USER,
                               password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True,
                               connect_timeout=CLIENT_TIMEOUT_S, **kw)

    def unix(self, **kw):
        return pymysql.connect(unix_socket=self.sock, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                               database=cluster.DATABASE, autocommit=True, connect_timeout=CLIENT_TIMEOUT_S, **kw)

    def wait_sessions_closed(self):
        itlib.wait_for(lambda: itlib.metric(self.proxy.admin_port, "claimguard_client_connections") == 0,
                       SESSIONS_CLOSED_WITHIN_S, "every session closed")

    def same_over_both(self, flow):
        """flow(connect) from the same stock over TCP, then over the socket: answers and rows equal."""
        results = {}
        for name, connect in (("tcp", self.tcp), ("unix", self.unix)):
            self.cluster.reset({CAMPAIGN: STOCK})
            answers = flow(connect)
            results[name] = (answers, self.cluster.facts(CAMPAIGN))
        self.assertEqual(results["unix"], results["tcp"])
        return results["unix"]

    # --- cases --------------------------------------------------------------------------------------
    def test_socket_file_mode_and_stale_file_replaced(self):
        st = os.lstat(self.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), SOCKET_MODE, oct(st.st_mode))

    def test_pymysql_queries_and_claims_same_as_tcp(self):
        def flow(connect):
            out = []
            a, b = connect(), connect()
            with a.cursor() as cur:
                cur.execute("SELECT 1 + 1, 'héllo', NULL")
                out.append(cur.fetchall())
                cur.execute("PREPARE s FROM 'SELECT remain + ? FROM coupon_stock WHERE campaign_id = ?'")
                cur.execute(f"SET @x = 40, @k = {CAMPAIGN}")
                cur.execute("EXECUTE s USING @x, @k")
                out.append(cur.fetchall())
            # Two apps read the same remain, then both write back remain - 1: the rules turn the
            # writes into a conditional decrement, so the stock ends at 0, not 1.
            with a.cursor() as ca, b.cursor() as cb:
                ca.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                cb.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                ra, rb = ca.fetchone()[0], cb.fetchone()[0]
                out.append(("stale", ra, rb))
                out.append(("a", ca.execute(f"UPDATE coupon_stock SET remain = {ra - 1} WHERE campaign_id = {CAMPAIGN}")))
                out.append(("a", ca.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (101, {CAMPAIGN})")))
                out.append(("b", cb.execute(f"UPDATE coupon_stock SET remain = {rb - 1} WHERE campaign_id = {CAMPAIGN}")))
                out.append(("b", cb.execute(f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (102, {CAMPAIGN})")))
            out.append(naive_claim(a, 103))  # sold out
            out.append(naive_claim(b, 101))  # sold out too (and already claimed)
            a.close()
            b.close()
            return out

        answers, facts = self.same_over_both(flow)
        print(f"\n    pymysql over both: {answers}", end="")
        self.assertEqual(facts["remain"], 0, facts)
        self.assertEqual(facts["users"], [101, 102], facts)
        self.assertEqual(answers[1], ((STOCK + 40,),))

    def test_audit_names_the_unix_peer(self):
        self.cluster.reset({CAMPAIGN: STOCK})
        conn = self.unix()
        naive_claim(conn, 201)
        conn.close()

        def audited():
            try:
                with open(self.proxy.audit, encoding="utf-8") as f:
                    lines = [json.loads(line) for line in f if line.strip()]
            except OSError:
                return False
            return any(line.get("client") == f"unix:{self.sock}" for line in lines)
        itlib.wait_for(audited, SESSIONS_CLOSED_WITHIN_S, f"an audit line with client unix:{self.sock}")

    def test_mariadb_cli_socket_same_as_tcp(self):
        script = (f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}; "
                  f"UPDATE coupon_stock SET remain = {STOCK - 1} WHERE campaign_id = {CAMPAIGN}; SELECT ROW_COUNT(); "
                  f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (301, {CAMPAIGN}); "
                  f"UPDATE coupon_stock SET remain = {STOCK - 2} WHERE campaign_id = {CAMPAIGN}; SELECT ROW_COUNT(); "
                  f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (302, {CAMPAIGN}); "
                  f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};")

        def flow(connect):
            where = (["--protocol=tcp", "--host", servers.HOST, "--port", str(self.proxy.port)]
                     if connect == self.tcp else ["--protocol=socket", "--socket", self.sock])
            r = subprocess.run(["mariadb", "--no-defaults", *where, "-u", cluster.APP_USER,
                                f"-p{cluster.APP_PASSWORD}", "-N", "-B", cluster.DATABASE, "-e", script],
                               capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False)
            return r.returncode, r.stdout, r.stderr

        (code, out, err), facts = self.same_over_both(flow)
        print(f"\n    mariadb over both: {out.split()}", end="")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.split(), [str(STOCK), "1", "1", "0"], out)  # the stale second write: a decrement
        self.assertEqual(facts["users"], [301, 302])

    def test_libmariadb_prepared_statements_same_as_tcp(self):
        stmts = [f"SELECT remain, version FROM coupon_stock WHERE campaign_id = ?|{CAMPAIGN}",
                 f"UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?|{STOCK - 1}|{CAMPAIGN}",
                 f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)|401|{CAMPAIGN}",
                 f"UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?|{STOCK - 2}|{CAMPAIGN}",
                 f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (?, ?)|402|{CAMPAIGN}",
                 f"UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?|{STOCK - 3}|{CAMPAIGN}",
                 f"SELECT remain FROM coupon_stock WHERE campaign_id = ?|{CAMPAIGN}"]

        def flow(connect):
            where = ["tcp", servers.HOST, str(self.proxy.port)] if connect == self.tcp else ["unix", self.sock]
            r = subprocess.run([ARGS.stmt_client, *where, cluster.APP_USER, cluster.APP_PASSWORD, cluster.DATABASE,
                                *stmts], capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False)
            return r.returncode, r.stdout.splitlines(), r.stderr

        (code, lines, err), facts = self.same_over_both(flow)
        print(f"\n    stmt_client over both: {lines}", end="")
        self.assertEqual(code, 0, err)
        self.assertEqual(lines[0], f"ROWS [{STOCK},0]")
        self.assertEqual(lines[-1], "ROWS [0]")  # two decrements, then sold out
        self.assertTrue(lines[5].startswith("ERR "), lines)  # the third decrement: sold out
        self.assertEqual(facts["users"], [401, 402])

    def test_max_connections_one_limit_for_both_listeners(self):
        self.wait_sessions_closed()
        held = [self.unix(), self.tcp(), self.unix(), self.tcp()]
        try:
            for connect in (self.unix, self.tcp):
                with self.assertRaises(pymysql.MySQLError) as caught:
                    connect().close()
                self.assertEqual(caught.exception.args[0], ER_CON_COUNT, caught.exception.args)
            with held[0].cursor() as cur:  # the sessions that got in still work
                cur.execute("SELECT 1")
                self.assertEqual(cur.fetchone(), (1,))
            # Issue 22: the limit, what is open on each side, and the refusals as metrics.
            port = self.proxy.admin_port
            self.assertEqual(itlib.metric(port, "claimguard_max_connections"), MAX_CONNECTIONS)
            self.assertEqual(itlib.metric(port, "claimguard_client_connections"), MAX_CONNECTIONS)
            self.assertEqual(itlib.metric(port, "claimguard_backend_connections"), MAX_CONNECTIONS)
            self.assertGreaterEqual(itlib.metric(port, "claimguard_connections_refused_total"), 2)
        finally:
            for c in held:
                c.close()
        self.wait_sessions_closed()
        itlib.wait_for(lambda: itlib.metric(self.proxy.admin_port, "claimguard_backend_connections") == 0,
                       SESSIONS_CLOSED_WITHIN_S, "every backend connection closed")
        self.unix().close()  # room again

    def test_socket_in_use_is_not_taken_over(self):
        second = servers.Claimguard(ARGS.claimguard, self.cluster.dir, "claimguard-same-socket", self.cluster.db.port,
                                    extra_args=["--listen-unix", self.sock])
        r = subprocess.run(second.command(), capture_output=True, text=True, timeout=SHUTDOWN_WITHIN_S, check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("is in use", r.stdout + r.stderr)
        conn = self.unix()  # the first claimguard still has its socket
        conn.close()

    def test_clean_shutdown_removes_the_socket_file(self):
        sock = os.path.join(self.sock_dir, "second.sock")
        proxy = servers.Claimguard(ARGS.claimguard, self.cluster.dir, "claimguard-shutdown", self.cluster.db.port,
                                   extra_args=["--listen-unix", sock, "--min-shutdown-delay", "0ms"])
        proxy.start()
        try:
            self.assertTrue(stat.S_ISSOCK(os.lstat(sock).st_mode))
            conn = pymysql.connect(unix_socket=sock, user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                                   database=cluster.DATABASE, connect_timeout=CLIENT_TIMEOUT_S)
            conn.close()
            proxy.proc.send_signal(signal.SIGTERM)
            self.assertEqual(proxy.proc.wait(timeout=SHUTDOWN_WITHIN_S), 0)
            self.assertFalse(os.path.lexists(sock), "the socket file outlived a clean shutdown")
        finally:
            proxy.stop()


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--stmt-client", required=True)
    known, rest = ap.parse_known_args()
    sys.argv = [sys.argv[0]] + rest

    def keep(args):
        global ARGS
        args.stmt_client = known.stmt_client
        ARGS = args
    itlib.run_fixture_cases(UnixSocket, "unix_socket", __doc__, keep)


if __name__ == "__main__":
    main()
