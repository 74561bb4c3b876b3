#!/usr/bin/env python3
"""Starts and stops the integration fixture: a private MariaDB and claimguard proxies in front of it.

Usage:
    servers.py start STATE_DIR [--claimguard PATH]   MariaDB + proxy1 (-> MariaDB) + proxy2 (-> proxy1)
    servers.py stop STATE_DIR                         idempotent; keeps logs for debugging

`start` writes STATE_DIR/env (shell KEY=VALUE lines) that every integration test reads.
Without --claimguard (or with a path that does not exist) PROXY1/PROXY2 point at MariaDB itself
and PROXY_MODE=direct, so the harness can be developed before the proxy exists.

Also imported as a module by it_faults.py and scripts/bench_proxy.sh (via python) to start
private servers. Standard library only.
"""

import argparse
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"
MARIADB_START_TIMEOUT_S = 60.0
PROXY_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.05
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes with the NUL; keep a margin
# What ASan and UBSan print (to the proxy's stderr, which is its log) when they find a bug.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer")
SANITIZER_REPORT_LINES = 40

NATIVE_USER = "cg_native"
NATIVE_PASSWORD = "native-Pw1"
ED25519_USER = "cg_ed25519"
ED25519_PASSWORD = "ed25519-Pw2"
DATABASE = "cgtest"


PORT_COLLISION_RETRIES = 3


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def free_ports(count, taken=()):
    """`count` ports as free_port() gives them, different from each other and from `taken`: the kernel may
    hand out the same free port twice in a row (claimguard then refuses an admin and a control endpoint on
    one address, exit 2)."""
    ports = []
    while len(ports) < count:
        p = free_port()
        if p not in ports and p not in taken:
            ports.append(p)
    return ports


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still "exists"; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat", "r", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def _pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def read_pid(path):
    try:
        with open(path, "r", encoding="ascii") as f:
            return int(f.read().strip() or "0") or None
    except (OSError, ValueError):
        return None


def kill_pidfile(path, expect_in_cmdline, sig=signal.SIGTERM, timeout_s=STOP_TIMEOUT_S):
    """Stops the process named in a pid file, if it is still the process we started."""
    pid = read_pid(path)
    if pid is None:
        return
    if _pid_alive(pid) and expect_in_cmdline in _pid_cmdline(pid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout_s
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
        if _pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout_s
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL_S)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def sanitizer_report(log):
    """The start of the first ASan/UBSan report in a log file, or None. A report need not kill a test: the
    proxy may abort while it stops, or in a session no assertion looks at."""
    try:
        with open(log, "r", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return None
    for i, line in enumerate(lines):
        if any(marker in line for marker in SANITIZER_MARKERS):
            return "".join(lines[max(0, i - 2):i + SANITIZER_REPORT_LINES])
    return None


def wait_mysql_greeting(port, timeout_s, proc=None, log=None):
    """Waits until something on port sends a MySQL initial handshake packet (protocol 10)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before accepting; see {log}")
        try:
            with socket.create_connection((HOST, port), timeout=2) as s:
                head = s.recv(5)
                if len(head) == 5 and head[4] == 10:
                    return
                last = f"unexpected greeting {head!r}"
        except OSError as e:
            last = e
        time.sleep(POLL_INTERVAL_S)
    raise RuntimeError(f"nothing answered on {HOST}:{port} within {timeout_s}s ({last}); see {log}")


def http_get(port, path, timeout_s=2.0):
    """(status, body) of GET http://127.0.0.1:port/path; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=timeout_s) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return 0, ""


def http_post(port, path, timeout_s=2.0):
    """(status, body) of POST http://127.0.0.1:port/path with an empty body; status 0 when nothing answers."""
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return 0, ""


class MariaDB:
    """A private mariadbd in DIR (data, socket, logs), as root, on a free 127.0.0.1 port."""

    def __init__(self, base_dir, port=None):
        self.dir = os.path.abspath(base_dir)
        self.datadir = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "mysql.sock")
        if len(self.socket) > MAX_SOCKET_PATH:
            # A unix socket path must fit in 107 bytes; deep build dirs do not. A short path
            # derived from the directory keeps every process that opens this fixture agreeing.
            digest = hashlib.sha1(self.dir.encode()).hexdigest()[:16]
            self.socket = os.path.join(tempfile.gettempdir(), f"cg-{digest}.sock")
        self.pid_file = os.path.join(self.dir, "mariadbd.pid")
        self.log = os.path.join(self.dir, "error.log")
        self.port = port
        self.extra_args = []  # more mariadbd options, appended to command()

    def install(self):
        if os.path.isdir(self.datadir):
            shutil.rmtree(self.datadir)
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        with open(os.path.join(self.dir, "install.log"), "wb") as out:
            # A private --tmpdir: bootstrap servers sharing /tmp collide on their temporary table
            # files ("Unknown table 'mysql.tmp_user_sys'", about 1 install in 4 with 6 at once).
            subprocess.run(
                ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
                 f"--tmpdir={os.path.join(self.dir, 'tmp')}",
                 "--auth-root-authentication-method=normal", "--skip-test-db", "--user=root"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=True)

    def command(self):
        return [
            "mariadbd", "--no-defaults", "--user=root",
            f"--datadir={self.datadir}", f"--port={self.port}", f"--bind-address={HOST}",
            f"--socket={self.socket}", f"--pid-file={self.pid_file}", f"--log-error={self.log}",
            f"--tmpdir={os.path.join(self.dir, 'tmp')}",
            "--innodb-buffer-pool-size=64M", "--max-allowed-packet=64M", "--local-infile=1",
            "--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=2",
            "--innodb-doublewrite=0", "--innodb-use-native-aio=0", "--innodb-log-file-size=32M",
            "--performance-schema=ON", "--max-connections=500", "--thread-cache-size=32",
            "--skip-host-cache",
        ] + list(self.extra_args)

    def start(self, timeout_s=MARIADB_START_TIMEOUT_S):
        # A port free_port() chose may be taken by another test's server before mariadbd binds it: then the
        # greeting on it is the other server's and ours exits. A port we chose is chosen again (a few times).
        chosen = self.port is None
        for _ in range(PORT_COLLISION_RETRIES if chosen else 1):
            if chosen:
                self.port = free_port()
            log_size = os.path.getsize(self.log) if os.path.exists(self.log) else 0
            if os.path.exists(self.socket):  # a killed instance's: the new one's tells that it is up
                os.unlink(self.socket)
            with open(self.log, "ab") as err:
                proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=err,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            # mariadbd writes its pid file itself, but only once it is up; write ours at once so
            # that stop works even if start-up hangs.
            with open(self.pid_file + ".launcher", "w", encoding="ascii") as f:
                f.write(f"{proc.pid}\n")
            try:
                wait_mysql_greeting(self.port, timeout_s, proc, self.log)
            except RuntimeError:
                if proc.poll() is None:
                    raise  # nothing answered in time
            if proc.poll() is None and self._wait_own_socket(proc, timeout_s):
                self.proc = proc
                return self
            with open(self.log, "rb") as f:
                f.seek(log_size)
                said = f.read().decode(errors="replace")
            if "Address already in use" not in said and "Bind on TCP/IP port" not in said:
                raise RuntimeError(f"mariadbd exited with {proc.returncode} (port {self.port}); see {self.log}")
        raise RuntimeError(f"mariadbd found its port taken {PORT_COLLISION_RETRIES} times; see {self.log}")

    def _wait_own_socket(self, proc, timeout_s):
        """True once this mariadbd's own unix socket exists (it binds the TCP port first, so the greeting
        came from it); False when it exited instead (its TCP port was another server's)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            if os.path.exists(self.socket):
                return True
            time.sleep(POLL_INTERVAL_S)
        raise RuntimeError(f"mariadbd answered on port {self.port} but made no socket {self.socket} "
                           f"within {timeout_s}s; see {self.log}")

    def stop(self):
        kill_pidfile(self.pid_file, "mariadbd")
        kill_pidfile(self.pid_file + ".launcher", "mariadbd")

    def kill(self):
        """SIGKILL, as a crash would (data stays; start() brings it back on the same port)."""
        kill_pidfile(self.pid_file + ".launcher", "mariadbd", sig=signal.SIGKILL)
        kill_pidfile(self.pid_file, "mariadbd", sig=signal.SIGKILL)

    def sql(self, statements, database=None):
        """Runs SQL as root over the socket with the mariadb CLI; returns stdout (batch, no headers)."""
        cmd = ["mariadb", "--no-defaults", "-uroot", f"--socket={self.socket}", "-N", "-B"]
        if database:
            cmd.append(f"--database={database}")
        r = subprocess.run(cmd, input=statements.encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"SQL failed ({r.returncode}): {r.stderr.decode(errors='replace')}\n{statements}")
        return r.stdout.decode(errors="replace")

    def create_test_users(self):
        self.sql(f"""
            INSTALL SONAME 'auth_ed25519';
            CREATE DATABASE IF NOT EXISTS {DATABASE};
            CREATE USER '{NATIVE_USER}'@'%' IDENTIFIED WITH mysql_native_password
                USING PASSWORD('{NATIVE_PASSWORD}');
            CREATE USER '{ED25519_USER}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{ED25519_PASSWORD}');
            GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{NATIVE_USER}'@'%';
            GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{ED25519_USER}'@'%';
            GRANT PROCESS, RELOAD ON *.* TO '{NATIVE_USER}'@'%';
            GRANT SELECT ON performance_schema.* TO '{NATIVE_USER}'@'%';
            GRANT SELECT ON performance_schema.* TO '{ED25519_USER}'@'%';
            FLUSH PRIVILEGES;
        """)


class Claimguard:
    """One `claimguard serve` process, logging to DIR/NAME.log, pid in DIR/NAME.pid."""

    def __init__(self, binary, state_dir, name, backend_port, listen_port=None, admin_port=None,
                 extra_args=(), log_level="info"):
        self.binary = binary
        self.name = name
        self.backend_port = backend_port
        given = [p for p in (listen_port, admin_port) if p]
        chosen = iter(free_ports(3, taken=given))
        self.port = listen_port or next(chosen)
        self.admin_port = admin_port or next(chosen)
        self.control_port = next(chosen)  # POST /quitquitquit and /-/reload (issue 22): loopback only
        self.ports_chosen = listen_port is None and admin_port is None  # ours to change on a collision
        self.extra_args = list(extra_args)
        self.log_level = log_level
        self.log = os.path.join(state_dir, f"{name}.log")
        self.pid_file = os.path.join(state_dir, f"{name}.pid")
        self.proc = None

    def command(self):
        return [self.binary, "serve", "--listen", f"{HOST}:{self.port}",
                "--backend", f"{HOST}:{self.backend_port}",
                "--admin", f"{HOST}:{self.admin_port}", "--control", f"{HOST}:{self.control_port}",
                "--log-level", self.log_level] + self.extra_args

    def start(self, timeout_s=PROXY_START_TIMEOUT_S):
        # free_port() only says a port was free a moment ago: a test running beside this one may take it
        # before claimguard binds it ("Address already in use"). Ports we chose are chosen again.
        for attempt in range(PORT_COLLISION_RETRIES):
            logged = os.path.getsize(self.log) if os.path.exists(self.log) else 0
            try:
                return self._start_once(timeout_s)
            except RuntimeError:
                with open(self.log, "rb") as f:
                    f.seek(logged)
                    collided = b"Address already in use" in f.read()
                if not (collided and self.ports_chosen and attempt + 1 < PORT_COLLISION_RETRIES):
                    raise
                self.port, self.admin_port, self.control_port = free_ports(3)
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s):
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=err,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        with open(self.pid_file, "w", encoding="ascii") as f:
            f.write(f"{self.proc.pid}\n")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log}")
            if http_get(self.admin_port, "/startup")[0] == 200:
                wait_mysql_greeting(self.port, max(1.0, deadline - time.monotonic()), self.proc, self.log)
                return self
            time.sleep(POLL_INTERVAL_S)
        raise RuntimeError(f"{self.name}: /startup not 200 within {timeout_s}s; see {self.log}")

    def stop(self, sig=signal.SIGTERM):
        """Stops the process; AssertionError (after it stopped) when its log holds a sanitizer report."""
        kill_pidfile(self.pid_file, os.path.basename(self.binary), sig=sig)
        if self.proc is not None and self.proc.poll() is None:
            # Still running: a second sidecar started under the same name rewrote the pid file (a test
            # that starts proxies twice, each time counting from claimguard-1). Ours to stop all the same.
            self.proc.send_signal(sig)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        report = sanitizer_report(self.log)
        if report:
            raise AssertionError(f"{self.name}: sanitizer report in {self.log}:\n{report}")

    def cpu_seconds(self):
        """utime + stime of the process so far, from /proc/PID/stat."""
        with open(f"/proc/{self.proc.pid}/stat", "r", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks


def write_env(path, values):
    with open(path, "w", encoding="ascii") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")


def read_env(state_dir):
    env = {}
    with open(os.path.join(state_dir, "env"), "r", encoding="ascii") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    return env


def start(state_dir, claimguard):
    state_dir = os.path.abspath(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    stop(state_dir)
    for name in ("env", "proxy1.log", "proxy2.log"):
        try:
            os.unlink(os.path.join(state_dir, name))
        except FileNotFoundError:
            pass
    db = MariaDB(os.path.join(state_dir, "mariadb"))
    os.makedirs(db.dir, exist_ok=True)
    try:
        os.unlink(db.log)
    except FileNotFoundError:
        pass
    db.install()
    db.start()
    db.create_test_users()
    env = {
        "STATE_DIR": state_dir,
        "HOST": HOST,
        "MARIADB_PORT": db.port,
        "SOCKET": db.socket,
        "NATIVE_USER": NATIVE_USER, "NATIVE_PASSWORD": NATIVE_PASSWORD,
        "ED25519_USER": ED25519_USER, "ED25519_PASSWORD": ED25519_PASSWORD,
        "DATABASE": DATABASE,
    }
    if claimguard and os.path.exists(claimguard):
        p1 = Claimguard(claimguard, state_dir, "proxy1", db.port).start()
        p2 = Claimguard(claimguard, state_dir, "proxy2", p1.port).start()
        env.update({"PROXY_MODE": "claimguard", "CLAIMGUARD": os.path.abspath(claimguard),
                    "PROXY1_PORT": p1.port, "PROXY2_PORT": p2.port,
                    "ADMIN1_PORT": p1.admin_port, "ADMIN2_PORT": p2.admin_port})
    else:
        env.update({"PROXY_MODE": "direct", "CLAIMGUARD": "",
                    "PROXY1_PORT": db.port, "PROXY2_PORT": db.port,
                    "ADMIN1_PORT": 0, "ADMIN2_PORT": 0})
    write_env(os.path.join(state_dir, "env"), env)
    print(f"integration fixture up in {state_dir}: mariadb {db.port}, proxy1 {env['PROXY1_PORT']}, "
          f"proxy2 {env['PROXY2_PORT']} ({env['PROXY_MODE']})")


def stop(state_dir):
    """Stops the fixture; returns the sanitizer reports found in the proxies' logs (empty when none)."""
    state_dir = os.path.abspath(state_dir)
    claimguard = ""
    try:
        claimguard = read_env(state_dir).get("CLAIMGUARD", "")
    except OSError:
        pass
    name = os.path.basename(claimguard) if claimguard else "claimguard"
    reports = []
    for proxy in ("proxy2", "proxy1"):
        kill_pidfile(os.path.join(state_dir, f"{proxy}.pid"), name)
        log = os.path.join(state_dir, f"{proxy}.log")
        report = sanitizer_report(log)
        if report:
            reports.append(f"{proxy}: sanitizer report in {log}:\n{report}")
    MariaDB(os.path.join(state_dir, "mariadb")).stop()
    return reports


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("state_dir")
    ap.add_argument("--claimguard", default=os.environ.get("CLAIMGUARD", ""))
    ap.add_argument("--require-claimguard", action="store_true",
                    help="fail instead of aliasing the proxies to MariaDB when the binary is missing")
    args = ap.parse_args()
    if args.require_claimguard and not os.path.exists(args.claimguard or ""):
        print(f"claimguard binary {args.claimguard!r} not found: build it first "
              f"(cmake --build BUILD --target claimguard)", file=sys.stderr)
        return 1
    if args.action == "start":
        try:
            start(args.state_dir, args.claimguard)
        except Exception:
            stop(args.state_dir)
            raise
    else:
        # integration_cleanup fails when a proxy of the shared fixture printed a sanitizer report.
        reports = stop(args.state_dir)
        for report in reports:
            print(report, file=sys.stderr)
        if reports:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
