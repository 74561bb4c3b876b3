#!/usr/bin/env python3
"""claimguard CPU per statement on the app's hop: TCP vs listen_unix, with the example rules loaded.

Usage: hop_cpu.py --claimguard PATH [--statements N] [--rounds R] [--work-dir DIR]

Starts its own MariaDB with the coupon schema (tests/incident/cluster.py) and one claimguard on TCP and
a unix socket; one PyMySQL connection per round and listener runs N `SELECT remain ...` statements
(rules matched, forwarded); prints claimguard's utime+stime per statement (from /proc, 10 ms ticks)
and the wall time (client-bound: PyMySQL dominates). Rounds alternate TCP and unix. Run by hand on
a quiet machine; never a timed test.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
import pymysql  # noqa: E402
import cluster  # noqa: E402
import servers  # noqa: E402

CAMPAIGN = 7
STOCK = 100


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--statements", type=int, default=15000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "claimguard-hop-cpu"))
    args = ap.parse_args()
    cluster.stop_dir(args.work_dir)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    sock_dir = tempfile.mkdtemp(prefix="cg-hop-")  # sun_path is short
    sock = os.path.join(sock_dir, "claimguard.sock")
    c = cluster.Cluster(args.work_dir).start_db()
    try:
        p = servers.Claimguard(args.claimguard, args.work_dir, "claimguard", c.db.port,
                               extra_args=["--rules", cluster.EXAMPLE_RULES, "--listen-unix", sock])
        c.proxies.append(p)
        p.start()
        c.reset({CAMPAIGN: STOCK})
        results = {"tcp": [], "unix": []}
        for rnd in range(args.rounds):
            for name, where in (("tcp", {"host": servers.HOST, "port": p.port}), ("unix", {"unix_socket": sock})):
                conn = pymysql.connect(user=cluster.APP_USER, password=cluster.APP_PASSWORD,
                                       database=cluster.DATABASE, **where)
                cur = conn.cursor()
                cpu0, t0 = p.cpu_seconds(), time.monotonic()
                for _ in range(args.statements):
                    cur.execute(f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN}")
                    cur.fetchall()
                cpu_us = (p.cpu_seconds() - cpu0) * 1e6 / args.statements
                wall_us = (time.monotonic() - t0) * 1e6 / args.statements
                conn.close()
                results[name].append(cpu_us)
                print(f"round {rnd} {name}: claimguard CPU {cpu_us:.1f} us/statement, wall {wall_us:.1f} us/statement")
        for name, values in results.items():
            values.sort()
            print(f"{name}: median claimguard CPU {values[len(values) // 2]:.1f} us/statement over {len(values)} rounds")
    finally:
        c.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
