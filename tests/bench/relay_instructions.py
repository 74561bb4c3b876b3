#!/usr/bin/env python3
"""claimguard instructions per relayed statement, two binaries side by side, under valgrind's callgrind.

Usage: relay_instructions.py --claimguard PATH [--baseline PATH] [--statements N] [--rounds R] [--work-dir DIR]

Starts its own MariaDB with the coupon schema (tests/incident/cluster.py) and one claimguard per binary
with the example rules, each under callgrind. Per round and binary, one PyMySQL connection sends N
statements of each kind: one no rule names (`SELECT 1`: the pre-filter passes it) and a read of a
protected counter (`SELECT remain FROM coupon_stock WHERE campaign_id = 7`: parsed, matched, forwarded);
callgrind is zeroed before and dumped after each kind (callgrind_control), and the figure is claimguard's
instructions per statement: repeatable where CPU time on a shared machine is not. Run by hand; never a
timed test.
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
sys.path.insert(0, HERE)
import pymysql  # noqa: E402
import cluster  # noqa: E402
import servers  # noqa: E402
from claim_cpu import callgrind_instructions, callgrind_zero, callgrind_wrapper  # noqa: E402

STATEMENTS = {
    "unmatched": "SELECT 1",
    "protected_read": "SELECT remain FROM coupon_stock WHERE campaign_id = 7",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--baseline", default="")
    ap.add_argument("--statements", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "claimguard-relay-instructions"))
    args = ap.parse_args()
    cluster.stop_dir(args.work_dir)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    binaries = {"claimguard": args.claimguard}
    if args.baseline:
        binaries["baseline"] = args.baseline
    c = cluster.Cluster(args.work_dir)
    proxies = {}
    try:
        c.start_db(unique_index=True)
        c.reset({7: 100})
        for name, binary in binaries.items():
            proxies[name] = servers.Claimguard(callgrind_wrapper(args.work_dir, name, binary), args.work_dir, name,
                                               c.db.port, extra_args=["--threads", "1", "--rules",
                                                                      cluster.EXAMPLE_RULES],
                                               log_level="warn").start(timeout_s=120)
        results = {(name, kind): [] for name in proxies for kind in STATEMENTS}
        for rnd in range(args.rounds):
            order = list(proxies) if rnd % 2 == 0 else list(reversed(proxies))
            for name in order:
                p = proxies[name]
                conn = pymysql.connect(host=servers.HOST, port=p.port, user=cluster.APP_USER,
                                       password=cluster.APP_PASSWORD, database=cluster.DATABASE, autocommit=True)
                try:
                    with conn.cursor() as cur:
                        for kind, sql in STATEMENTS.items():
                            callgrind_zero(p.proc.pid)
                            for _ in range(args.statements):
                                cur.execute(sql)
                                cur.fetchall()
                            ir = callgrind_instructions(p.proc.pid,
                                                        os.path.join(args.work_dir, f"callgrind-{name}.*.out.*"))
                            per = ir / args.statements
                            results[(name, kind)].append(per)
                            print(f"round {rnd} {name} {kind}: {per:.0f} instructions/statement", flush=True)
                finally:
                    conn.close()
        for (name, kind), values in results.items():
            values.sort()
            print(f"{name} {kind}: median {values[len(values) // 2]:.0f} instructions/statement over "
                  f"{len(values)} rounds (min {values[0]:.0f}, max {values[-1]:.0f})")
    finally:
        for p in proxies.values():
            p.stop()
        c.stop()


if __name__ == "__main__":
    main()
