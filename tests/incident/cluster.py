#!/usr/bin/env python3
"""The incident's servers: a private MariaDB with the coupon schema, a private Redis, N claimguard sidecars.

Imported by incident_test.py; also a command line for scripts/demo.sh:

    cluster.py start-db DIR [--unique-index] [--no-redis]   MariaDB (+ legacy schema) and Redis
    cluster.py start-proxies DIR --claimguard PATH --count N --rules FILE
    cluster.py stop DIR                                       idempotent; logs stay in DIR

`start-db` writes DIR/env (shell KEY=VALUE lines: ports, socket, users); `start-proxies` adds
PROXY_PORTS (comma-separated). Builds on tests/integration/servers.py (free_port, MariaDB,
Claimguard, kill_pidfile). Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import servers  # noqa: E402  (tests/integration/servers.py)

HOST = servers.HOST
DATABASE = "incident"
APP_USER = "cg_app"
APP_PASSWORD = "app-Pw1"
ADMIN_USER = "root"
ADMIN_PASSWORD = "root-Pw1"
LEGACY_SCHEMA = os.path.join(REPO, "sql", "legacy_schema.sql")
UNIQUE_INDEX_MIGRATION = os.path.join(REPO, "sql", "migrations", "001_claimguard_unique_index.sql")
EXAMPLE_RULES = os.path.join(REPO, "rules", "examples", "coupon.yaml")
REDIS_START_TIMEOUT_S = 20.0
REDIS_IO_TIMEOUT_S = 2.0
REDIS_MAX_CLUSTER_PORT = 55535  # a cluster node's bus port (port + 10000) must fit too
POLL_INTERVAL_S = 0.05
# Flags of `claimguard serve` this harness passes when the binary has them.
SERVE_CLAIM_FLAGS = ("--rules", "--redis", "--audit-log")


def wait_for(path_or_predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path_or_predicate():
            return
        time.sleep(POLL_INTERVAL_S)
    raise RuntimeError(f"{what} within {timeout_s}s")


class Redis:
    """A private redis-server in DIR on a free 127.0.0.1 port, with no persistence."""

    def __init__(self, base_dir, port=None, extra_args=(), tls=None, password=None):
        self.dir = os.path.abspath(base_dir)
        self.port = port
        self.pid_file = os.path.join(self.dir, "redis.pid.launcher")
        self.log = os.path.join(self.dir, "redis.log")
        self.proc = None
        self.extra_args = list(extra_args)  # e.g. cluster or ACL options
        self.tls = tls                      # a TestPki: the port is a tls-port
        self.password = password            # the default user's (admin) password

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        while self.port is None or self.port > REDIS_MAX_CLUSTER_PORT:  # a cluster bus listens on port + 10000
            self.port = servers.free_port()
        ports = ["--port", str(self.port)]
        if self.tls is not None:
            ports = ["--port", "0", "--tls-port", str(self.port)] + self.tls.server_args()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                ["redis-server"] + ports + ["--bind", HOST, "--save", "", "--appendonly", "no",
                 "--daemonize", "no", "--dir", self.dir] + self.extra_args,
                cwd=self.dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        with open(self.pid_file, "w", encoding="ascii") as f:
            f.write(f"{self.proc.pid}\n")

        def answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.log}")
            return self.command("PING") == "+PONG"
        wait_for(answers, REDIS_START_TIMEOUT_S, f"redis-server did not answer PING on port {self.port}")
        return self

    def command(self, *args):
        """The first line of Redis's reply to one command, or None when Redis does not answer."""
        def encode(words):
            return f"*{len(words)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in words)

        def first_line(sock):
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            return reply.decode(errors="replace").split("\r\n", 1)[0]
        try:
            with socket.create_connection((HOST, self.port), timeout=REDIS_IO_TIMEOUT_S) as raw:
                s = self.tls.client_context().wrap_socket(raw, server_hostname=HOST) if self.tls else raw
                if self.password:
                    s.sendall(encode(["AUTH", self.password]))
                    first_line(s)
                s.sendall(encode(args))
                return first_line(s)
        except OSError:
            return None

    def cli_args(self):
        """redis-cli options that reach this node as the admin (TLS, password)."""
        out = ["-h", HOST, "-p", str(self.port)]
        if self.tls is not None:
            out += self.tls.cli_args()
        if self.password:
            out += ["--no-auth-warning", "-a", self.password]
        return out

    def info(self, section):
        """INFO <section> as a dict (redis-cli, so TLS and bulk replies work)."""
        r = subprocess.run(["redis-cli"] + self.cli_args() + ["INFO", section], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=REDIS_IO_TIMEOUT_S * 5,
                           check=False)
        out = {}
        for line in r.stdout.decode(errors="replace").splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v.strip()
        return out

    def alive(self):
        pid = servers.read_pid(self.pid_file)
        return pid is not None and servers._pid_alive(pid)  # noqa: SLF001 - shared helper

    def flush(self):
        if self.alive():
            self.command("FLUSHALL")

    def signal(self, sig):
        pid = servers.read_pid(self.pid_file)
        if pid is not None and "redis-server" in servers._pid_cmdline(pid):  # noqa: SLF001
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        # A stopped (SIGSTOP) process would ignore SIGTERM until continued.
        self.signal(signal.SIGCONT)
        servers.kill_pidfile(self.pid_file, "redis-server")
        if self.proc is not None:
            self.proc.poll()


def serve_flags_supported(claimguard):
    """The subset of SERVE_CLAIM_FLAGS that `claimguard serve --help` lists."""
    r = subprocess.run([claimguard, "serve", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, check=False)
    text = r.stdout.decode(errors="replace")
    return {f for f in SERVE_CLAIM_FLAGS if re.search(re.escape(f) + r"\b", text)}


def rules_with_stock_lines(dest, lines, source=EXAMPLE_RULES):
    """Writes a copy of a rules file with `lines` (YAML, relative to the rule's fields) added to its
    last stock rule, just before `claim_rules:` (read_cache, admission, defer_decrement, ...)."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    head, sep, tail = text.partition("\nclaim_rules:")
    if not sep:
        raise RuntimeError(f"{source}: no claim_rules: after the stock rules")
    added = "".join(f"    {line}\n" for line in lines)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(head.rstrip("\n") + "\n" + added + sep + tail)
    return dest


def rules_with_exhausted_ok(source, dest):
    """Writes a copy of a rules file whose stock rule answers a refused decrement with OK (0 rows)."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    new, n = re.subn(r"(?m)^([ ]+)exhausted:[^\n]*\n(?:\1[ ]+[^\n]*\n)*", r"\1exhausted: ok\n", text)
    if n != 1:
        raise RuntimeError(f"{source}: expected one 'exhausted:' block to replace, found {n}")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(new)
    return dest


class Cluster:
    """MariaDB + optional Redis + N claimguard instances under one work directory."""

    def __init__(self, work_dir):
        self.dir = os.path.abspath(work_dir)
        self.db = servers.MariaDB(os.path.join(self.dir, "mariadb"))
        self.redis = None
        self.redis_args = None  # claimguard's Redis flags when not the plain --redis HOST:PORT
        self.proxies = []
        self.missing_serve_flags = []

    # --- MariaDB ---------------------------------------------------------------------------------
    def start_db(self, unique_index=True):
        os.makedirs(self.db.dir, exist_ok=True)
        self.db.install()
        self.db.start()
        self.db.sql(f"""
            CREATE DATABASE {DATABASE};
            CREATE USER '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}';
            GRANT SELECT, INSERT, UPDATE, DELETE ON {DATABASE}.* TO '{APP_USER}'@'%';
            CREATE USER IF NOT EXISTS '{ADMIN_USER}'@'{HOST}';
            ALTER USER '{ADMIN_USER}'@'{HOST}' IDENTIFIED BY '{ADMIN_PASSWORD}';
            GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'{HOST}' WITH GRANT OPTION;
            FLUSH PRIVILEGES;
        """)
        self.apply_sql_file(LEGACY_SCHEMA)
        if unique_index:
            self.apply_sql_file(UNIQUE_INDEX_MIGRATION)
        return self

    def apply_sql_file(self, path):
        with open(path, encoding="utf-8") as f:
            self.db.sql(f.read(), database=DATABASE)

    def sql(self, statements):
        return self.db.sql(statements, database=DATABASE)

    def reset(self, stocks):
        """Empties coupon_order and sets coupon_stock to {campaign: remain} (version 0)."""
        values = ", ".join(f"({k}, {v}, 0)" for k, v in stocks.items())
        self.sql(f"TRUNCATE TABLE coupon_order; DELETE FROM coupon_stock; "
                 f"INSERT INTO coupon_stock (campaign_id, remain, version) VALUES {values};")
        if self.redis is not None:
            self.redis.flush()

    def facts(self, campaign):
        """What the database holds for one campaign."""
        out = self.sql(f"""
            SELECT COUNT(*) FROM coupon_order WHERE campaign_id = {campaign};
            SELECT COUNT(*) FROM (SELECT user_id FROM coupon_order WHERE campaign_id = {campaign}
                                  GROUP BY user_id HAVING COUNT(*) > 1) d;
            SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) n FROM coupon_order WHERE campaign_id = {campaign}
                                                 GROUP BY user_id HAVING COUNT(*) > 1) d;
            SELECT remain, version FROM coupon_stock WHERE campaign_id = {campaign};
        """).split("\n")
        rows, dup_pairs, extra_rows = int(out[0]), int(out[1]), int(out[2])
        remain, version = (int(x) for x in out[3].split("\t")) if out[3].strip() else (None, None)
        users = [int(x) for x in self.sql(
            f"SELECT user_id FROM coupon_order WHERE campaign_id = {campaign} ORDER BY user_id;").split()]
        return {"rows": rows, "duplicate_pairs": dup_pairs, "duplicate_extra_rows": extra_rows,
                "remain": remain, "version": version, "users": users}

    # --- Redis -----------------------------------------------------------------------------------
    def start_redis(self, port=None):
        self.redis = Redis(os.path.join(self.dir, "redis"), port=port).start()
        return self.redis

    # --- claimguard ------------------------------------------------------------------------------
    def start_proxies(self, claimguard, count, rules=EXAMPLE_RULES, audit=True, extra_args=()):
        supported = serve_flags_supported(claimguard)
        self.missing_serve_flags = [f for f in SERVE_CLAIM_FLAGS if f not in supported]
        for i in range(1, count + 1):
            extra = list(extra_args)
            if "--rules" in supported:
                extra += ["--rules", rules]
            if self.redis_args is not None:
                extra += self.redis_args  # a cluster, TLS, ACL user: see redis_cluster.py
            elif "--redis" in supported and self.redis is not None:
                extra += ["--redis", f"{HOST}:{self.redis.port}"]
            if "--audit-log" in supported and audit:
                extra += ["--audit-log", os.path.join(self.dir, f"audit-{i}.jsonl")]
            # CLAIMGUARD_TEST_LOG_LEVEL=debug: each claim decision and event in the sidecars' logs.
            p = servers.Claimguard(claimguard, self.dir, f"claimguard-{i}", self.db.port, extra_args=extra,
                                   log_level=os.environ.get("CLAIMGUARD_TEST_LOG_LEVEL", "info"))
            self.proxies.append(p)
            p.start()
        return self.proxies

    def stop(self):
        """Stops every server; then AssertionError when a sidecar's log holds a sanitizer report."""
        reports = []
        for p in self.proxies:
            try:
                p.stop()
            except AssertionError as e:
                reports.append(str(e))
        if self.redis is not None:
            self.redis.stop()
        self.db.stop()
        if reports:
            raise AssertionError("\n".join(reports))

    def env(self):
        env = {"DIR": self.dir, "HOST": HOST, "MARIADB_PORT": self.db.port, "SOCKET": self.db.socket,
               "DATABASE": DATABASE, "APP_USER": APP_USER, "APP_PASSWORD": APP_PASSWORD,
               "ADMIN_USER": ADMIN_USER, "ADMIN_PASSWORD": ADMIN_PASSWORD,
               "REDIS_PORT": self.redis.port if self.redis else ""}
        if self.proxies:
            env["PROXY_PORTS"] = ",".join(str(p.port) for p in self.proxies)
            env["ADMIN_PORTS"] = ",".join(str(p.admin_port) for p in self.proxies)
            env["CLAIMGUARD"] = self.proxies[0].binary
        return env


def stop_dir(work_dir):
    """Stops whatever a Cluster (or a killed test run) left running under work_dir, by pid file."""
    work_dir = os.path.abspath(work_dir)
    if not os.path.isdir(work_dir):
        return
    for name in sorted(os.listdir(work_dir)):
        if name.startswith("claimguard-") and name.endswith(".pid"):
            servers.kill_pidfile(os.path.join(work_dir, name), "claimguard")
    Redis(os.path.join(work_dir, "redis")).stop()
    cluster_dir = os.path.join(work_dir, "redis-cluster")
    if os.path.isdir(cluster_dir):
        for name in sorted(os.listdir(cluster_dir)):
            Redis(os.path.join(cluster_dir, name)).stop()
    servers.MariaDB(os.path.join(work_dir, "mariadb")).stop()



# --- shared by the harnesses (incident_test.py, modes_test.py) ----------------------------------------
class RemainWatcher(threading.Thread):
    """Polls coupon_stock.remain of `campaign` (as root, over the unix socket) while a load runs and calls
    on_remain(remain) after each read; on_remain returning True stops the polling, then after_polling()
    runs (the connection is closed by then: a fault may take MariaDB down). `ready` is set once the first
    value was read (the load may start), or when connecting failed (then `error` says why). Subclasses
    are the faults of the incident harnesses; they keep only their action."""

    def __init__(self, c, campaign, interval_s):
        super().__init__(daemon=True)
        self.cluster = c
        self.campaign = campaign
        self.interval_s = interval_s
        self.done = threading.Event()
        self.ready = threading.Event()
        self.events = []
        self.error = None
        self.began = time.monotonic()

    def elapsed(self):
        return f"+{time.monotonic() - self.began:.2f}s"

    def on_remain(self, remain):  # noqa: ARG002 - overridden
        return True

    def after_polling(self):
        pass

    def run(self):
        import pymysql  # python3-pymysql; only the fault variants need it in the harness
        try:
            conn = pymysql.connect(unix_socket=self.cluster.db.socket, user="root", database=DATABASE,
                                   autocommit=True)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            self.error = e
            self.ready.set()
            return
        self.began = time.monotonic()
        try:
            with conn.cursor() as cur:
                while not self.done.is_set():
                    cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {int(self.campaign)}")
                    remain = int(cur.fetchone()[0])
                    self.ready.set()
                    if self.on_remain(remain):
                        break
                    time.sleep(self.interval_s)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            self.error = e
        finally:
            self.ready.set()
            conn.close()
        self.after_polling()


class HarnessError(Exception):
    """The harness could not run the scenario (not an invariant violation)."""


class Checks:
    """Named checks, printed as they pass or fail; the harness fails when any failed."""

    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"    ok    {what}")
        else:
            self.failed.append(what)
            print(f"    FAIL  {what}" + (f": {detail}" if detail else ""))
        return ok

    def equal(self, got, want, what):
        return self.check(got == want, what, f"got {got!r}, want {want!r}")


def tail(path, lines=25):
    """The last lines of a log file ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def start_harness(work_dir, deadline_s):
    """Arms the harness's own deadline (SIGALRM) and SIGTERM as HarnessError, so that the caller's finally
    always stops the servers, and returns a Cluster in work_dir, emptied of an earlier (killed) run."""
    def deadline(signum, frame):  # noqa: ARG001 - signal handler signature
        raise HarnessError(f"the harness ran past its own deadline of {deadline_s}s")

    def terminate(signum, frame):  # noqa: ARG001
        raise HarnessError(f"stopped by signal {signum}")

    signal.signal(signal.SIGALRM, deadline)
    signal.signal(signal.SIGTERM, terminate)
    signal.alarm(deadline_s)
    work = os.path.abspath(work_dir)
    stop_dir(work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return Cluster(work)

def _write_env(work_dir, values):
    servers.write_env(os.path.join(work_dir, "env"), values)

def run_load(cmd, timeout_s):
    """Runs a load tool (claimguard-load or claim_load.py with --json) and returns its JSON report."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"the load did not finish within {timeout_s}s (a hang?): {' '.join(cmd)}") from e
    if r.returncode != 0:
        raise HarnessError(f"the load tool exited with {r.returncode}: {r.stderr.decode(errors='replace')}")
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        raise HarnessError(f"the load tool printed no JSON: {r.stdout[:500]!r}") from e



def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    db = sub.add_parser("start-db")
    db.add_argument("dir")
    db.add_argument("--unique-index", action="store_true", help="also apply sql/migrations/001_*.sql")
    db.add_argument("--no-redis", action="store_true")
    px = sub.add_parser("start-proxies")
    px.add_argument("dir")
    px.add_argument("--claimguard", required=True)
    px.add_argument("--count", type=int, default=1)
    px.add_argument("--rules", default=EXAMPLE_RULES)
    st = sub.add_parser("stop")
    st.add_argument("dir")
    args = ap.parse_args()

    if args.action == "stop":
        stop_dir(args.dir)
        return 0
    os.makedirs(args.dir, exist_ok=True)
    if args.action == "start-db":
        stop_dir(args.dir)
        c = Cluster(args.dir)
        try:
            c.start_db(unique_index=args.unique_index)
            if not args.no_redis:
                c.start_redis()
        except Exception:
            c.stop()
            raise
        _write_env(args.dir, c.env())
        return 0
    # start-proxies: MariaDB and Redis are already up (their ports are in DIR/env).
    env = servers.read_env(args.dir)
    c = Cluster(args.dir)
    c.db.port = int(env["MARIADB_PORT"])
    if env.get("REDIS_PORT"):
        c.redis = Redis(os.path.join(args.dir, "redis"), port=int(env["REDIS_PORT"]))
    try:
        c.start_proxies(args.claimguard, args.count, rules=args.rules)
    except Exception:
        for p in c.proxies:
            p.stop()
        raise
    for f in c.missing_serve_flags:
        print(f"cluster: WARNING: `claimguard serve` has no {f} flag yet; started without it", file=sys.stderr)
    env.update(c.env())
    _write_env(args.dir, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
