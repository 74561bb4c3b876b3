#!/usr/bin/env /usr/bin/python3
"""idle_connections.py: what N idle client connections cost a process in resident memory.

Opens N real, authenticated PyMySQL connections to PORT (a claimguard, or MariaDB directly), sends one
`SELECT 1` on each, leaves them idle, and reads the resident memory of process PID (/proc/PID/status
VmRSS and /proc/PID/smaps_rollup Rss) before and after: the difference divided by N is the KiB each
idle connection holds. One connection is opened and closed before the "before" reading, so that state
made once per process (the first session's lazily built singletons) does not count per connection.

Usage:
    idle_connections.py --port P --pid PID --user U --password PW [--connections N] [--workers W]
    idle_connections.py --start --claimguard PATH [--connections N] [--direct]

With --start it starts its own MariaDB (max_connections and open files sized for N) and one claimguard
(tests/integration/servers.py) in --work-dir, measures through claimguard and, with --direct, also
MariaDB itself, and stops them. Prints one JSON line per measured target. Needs python3-pymysql (Debian's
/usr/bin/python3). The connections need file descriptors: this process raises its own soft limit to the
hard one, and a claimguard holding N clients needs about 2N + 64 (each client has its backend link).
"""

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import servers  # noqa: E402

DEFAULT_CONNECTIONS = 500
DEFAULT_WORKERS = 16        # connections are opened this many at a time
CONNECT_TIMEOUT_S = 30
SETTLE_S = 0.5              # after the last connect: the proxy finishes its side of the handshakes
FD_MARGIN = 64              # descriptors a process needs besides its connections (logs, listeners, epoll)


def raise_nofile():
    """Soft RLIMIT_NOFILE up to the hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def memory_kib(pid):
    """{"vmrss": KiB, "rss": KiB (smaps_rollup), "threads": n} of a process."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["vmrss"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Rss:"):
                    out["rss"] = int(line.split()[1])
    except OSError:
        out["rss"] = out["vmrss"]
    return out


def connect(port, user, password, database):
    return pymysql.connect(host=servers.HOST, port=port, user=user, password=password, database=database,
                           connect_timeout=CONNECT_TIMEOUT_S, read_timeout=CONNECT_TIMEOUT_S,
                           write_timeout=CONNECT_TIMEOUT_S, autocommit=True)


def open_idle(port, user, password, database, n, workers=DEFAULT_WORKERS):
    """N connections, each authenticated and having answered one SELECT 1; raises on the first failure."""
    conns = [None] * n
    errors = []
    next_index = [0]
    lock = threading.Lock()

    def work():
        while True:
            with lock:
                if errors or next_index[0] >= n:
                    return
                i = next_index[0]
                next_index[0] += 1
            try:
                c = connect(port, user, password, database)
                with c.cursor() as cur:
                    cur.execute("SELECT 1")
                    cur.fetchall()
                conns[i] = c
            except Exception as e:  # noqa: BLE001 -- reported with the connection's number
                with lock:
                    errors.append(f"connection {i}: {e!r}")
                return

    threads = [threading.Thread(target=work) for _ in range(max(1, min(workers, n)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        close_all(conns)
        raise RuntimeError(f"{len(errors)} connection(s) failed, first: {errors[0]}")
    return conns


def close_all(conns):
    for c in conns:
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001 -- best effort
                pass


def measure(port, pid, user, password, database, n, workers=DEFAULT_WORKERS, keep_open=False):
    """Opens N idle connections and returns the process's memory before and after, per connection.

    With keep_open the connections are returned under "conns" (the caller closes them)."""
    close_all([connect(port, user, password, database)])  # once-per-process state
    time.sleep(SETTLE_S)
    before = memory_kib(pid)
    started = time.monotonic()
    conns = open_idle(port, user, password, database, n, workers)
    opened_s = time.monotonic() - started
    time.sleep(SETTLE_S)
    after = memory_kib(pid)
    # Every connection still answers: the figure is for live sessions, not for ones the proxy dropped.
    for c in (conns[0], conns[-1]):
        with c.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()
    result = {
        "connections": n,
        "open_seconds": round(opened_s, 1),
        "rss_before_kib": before["rss"],
        "rss_after_kib": after["rss"],
        "vmrss_before_kib": before["vmrss"],
        "vmrss_after_kib": after["vmrss"],
        "threads": after["threads"],
        "kib_per_connection": round((after["rss"] - before["rss"]) / n, 2),
    }
    if keep_open:
        result["conns"] = conns
    else:
        close_all(conns)
    return result


def start_mariadb(work_dir, n):
    """A private MariaDB that accepts N connections (and the proxy's own few) with the test users."""
    db = servers.MariaDB(os.path.join(work_dir, "mariadb"))
    db.extra_args = [f"--max-connections={n + 100}", f"--open-files-limit={n + 1000}",
                     # One OS thread per connection would cost MariaDB far more than the proxy; the pool
                     # keeps the direct comparison about the connections, and the run quick.
                     "--thread-handling=pool-of-threads", f"--back-log={min(n, 4096)}"]
    db.install()
    db.start()
    db.create_test_users()
    return db


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=DEFAULT_CONNECTIONS)
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    ap.add_argument("--port", type=int)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--user", default=servers.NATIVE_USER)
    ap.add_argument("--password", default=servers.NATIVE_PASSWORD)
    ap.add_argument("--database", default=servers.DATABASE)
    ap.add_argument("--start", action="store_true", help="start a private MariaDB and claimguard")
    ap.add_argument("--claimguard", help="with --start: the claimguard binary")
    ap.add_argument("--claimguard-arg", action="append", default=[], help="with --start: one more serve flag")
    ap.add_argument("--direct", action="store_true", help="with --start: also measure MariaDB itself")
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "claimguard-idle-connections"))
    args = ap.parse_args()
    limit = raise_nofile()
    if limit < args.connections + FD_MARGIN:
        sys.exit(f"idle_connections.py: {args.connections} connections need {args.connections + FD_MARGIN} "
                 f"file descriptors; the limit is {limit}")
    if not args.start:
        if not args.port or not args.pid:
            sys.exit("idle_connections.py: --port and --pid, or --start")
        print(json.dumps(measure(args.port, args.pid, args.user, args.password, args.database, args.connections,
                                 args.workers)), flush=True)
        return
    if not args.claimguard:
        sys.exit("idle_connections.py: --start needs --claimguard")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    db = start_mariadb(args.work_dir, args.connections)
    proxy = None
    try:
        proxy = servers.Claimguard(os.path.abspath(args.claimguard), args.work_dir, "claimguard", db.port,
                                   extra_args=args.claimguard_arg, log_level="warn").start()
        result = measure(proxy.port, proxy.proc.pid, args.user, args.password, args.database, args.connections,
                         args.workers)
        print(json.dumps({"target": "claimguard", **result}), flush=True)
        if args.direct:
            result = measure(db.port, db.proc.pid, args.user, args.password, args.database, args.connections,
                             args.workers)
            print(json.dumps({"target": "mariadb", **result}), flush=True)
    finally:
        if proxy is not None:
            proxy.stop()
        db.stop()


if __name__ == "__main__":
    main()
