#!/usr/bin/env python3
"""claimguard CPU per claim of the naive flow: two claimguard binaries (say, before and after a change) side by side.

Usage: claim_cpu.py --claimguard PATH [--baseline PATH] [--load PATH] [--rounds R] [--seconds S] [--threads N]
                    [--strace] [--callgrind] [--work-dir DIR]

Starts its own MariaDB (coupon schema with the UNIQUE index) and Redis (tests/incident/cluster.py), and one
claimguard per binary with the example rules, an audit log file and Redis, as scripts/bench_claims.sh runs
naive_claimguard. Each round runs `claimguard-load --flow naive` for S seconds through each claimguard in turn
(the order alternates per round; stock never runs out) and prints claimguard's utime+stime (/proc, 10 ms ticks)
per claim row inserted, then the medians. --strace: the first round runs under `strace -c -f` and prints the
system calls per claim (slower: use it for counts, not for CPU). --callgrind: each claimguard runs under
valgrind's callgrind, zeroed before and dumped after each round (callgrind_control), and the figure is
instructions per claim: repeatable on a noisy machine where CPU time is not (claimguard runs ~50x slower
under it, so fewer claims per round). Run by hand; never a timed test.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
import cluster  # noqa: E402
import servers  # noqa: E402

CAMPAIGN = 1
STOCK = 100_000_000     # never sold out: every attempt is a whole claim (SELECT, UPDATE, INSERT)
USERS_PER_RUN = 1_000_000  # each run claims for new users, so no attempt is a duplicate
LOAD_GRACE_S = 60


def strace_counts(path, claims):
    rows = []
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1] != "total":
                rows.append((parts[-1], int(parts[3])))
    return ", ".join(f"{name} {calls / max(claims, 1):.2f}" for name, calls in rows if calls >= claims / 20)


def callgrind_wrapper(work_dir, name, binary):
    """A script that runs `binary` under callgrind (dumps in work_dir as callgrind-<name>.<pid>.out.<n>)."""
    wrapper = os.path.join(work_dir, f"callgrind-{name}.sh")
    with open(wrapper, "w", encoding="ascii") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=" +
                os.path.join(work_dir, f"callgrind-{name}.%p.out") + f" {binary} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper


def callgrind_zero(pid):
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def callgrind_instructions(pid, dump_glob):
    """Dumps the running callgrind of `pid` and returns the instructions (Ir) of that dump."""
    before = set(glob.glob(dump_glob))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for _ in range(100):
        new = set(glob.glob(dump_glob)) - before
        if new:
            path = new.pop()
            time.sleep(0.5)  # written
            with open(path, encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("totals:") or line.startswith("summary:"):
                        return int(line.split()[1])
        time.sleep(0.1)
    raise RuntimeError(f"no callgrind dump for {pid}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--baseline", default="")
    ap.add_argument("--load", default=os.path.join(REPO, "build", "tests", "load", "claimguard-load"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "claimguard-claim-cpu"))
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
        c.start_redis()
        for name, binary in binaries.items():
            if args.callgrind:
                binary = callgrind_wrapper(args.work_dir, name, binary)
            extra = ["--threads", "1", "--rules", cluster.EXAMPLE_RULES, "--audit-log",
                     os.path.join(args.work_dir, f"audit-{name}.jsonl"), "--redis", f"{servers.HOST}:{c.redis.port}"]
            proxies[name] = servers.Claimguard(binary, args.work_dir, name, c.db.port, extra_args=extra,
                                               log_level="warn").start()
        results = {name: [] for name in proxies}
        first_user = 1
        for rnd in range(args.rounds):
            order = list(proxies) if rnd % 2 == 0 else list(reversed(proxies))
            for name in order:
                p = proxies[name]
                c.reset({CAMPAIGN: STOCK})
                cmd = [args.load, "--target", f"{servers.HOST}:{p.port}", "--user", cluster.APP_USER,
                       "--password", cluster.APP_PASSWORD, "--database", cluster.DATABASE,
                       "--threads", str(args.threads), "--first-user", str(first_user), "--users", str(USERS_PER_RUN),
                       "--attempts-per-user", "1", "--campaign", str(CAMPAIGN), "--protocol", "text",
                       "--flow", "naive", "--seconds", str(args.seconds), "--seed", "1", "--json", "--found-rows"]
                first_user += USERS_PER_RUN
                tracer = None
                trace_file = os.path.join(args.work_dir, f"strace-{name}.txt")
                if args.strace and rnd == 0:
                    tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(p.proc.pid), "-o", trace_file],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)  # attached
                if args.callgrind:
                    callgrind_zero(p.proc.pid)
                cpu0 = p.cpu_seconds()
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   timeout=args.seconds + LOAD_GRACE_S, check=False)
                cpu1 = p.cpu_seconds()
                if tracer is not None:
                    tracer.send_signal(2)
                    tracer.wait()
                if r.returncode != 0:
                    raise RuntimeError(f"claimguard-load failed: {r.stderr.decode(errors='replace')}")
                claims = int(c.sql(f"SELECT COUNT(*) FROM coupon_order WHERE campaign_id = {CAMPAIGN};").strip())
                us = (cpu1 - cpu0) * 1e6 / max(claims, 1)
                line = f"round {rnd} {name}: {claims} claims, claimguard CPU {us:.1f} us/claim"
                if args.callgrind:
                    ir = callgrind_instructions(p.proc.pid, os.path.join(args.work_dir, f"callgrind-{name}.*.out.*"))
                    us = ir / max(claims, 1)  # the figure the medians are of: instructions per claim
                    line = f"round {rnd} {name}: {claims} claims, claimguard {us:.0f} instructions/claim"
                if tracer is not None:
                    line += f" (under strace) syscalls/claim: {strace_counts(trace_file, claims)}"
                else:
                    results[name].append(us)
                print(line, flush=True)
        for name, values in results.items():
            values.sort()
            if values:
                unit = "instructions/claim" if args.callgrind else "us/claim"
                print(f"{name}: median {values[len(values) // 2]:.1f} {unit} over {len(values)} rounds "
                      f"(min {values[0]:.1f}, max {values[-1]:.1f})")
    finally:
        for p in proxies.values():
            p.stop()
        c.stop()


if __name__ == "__main__":
    main()
