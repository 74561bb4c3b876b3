"""zoo.py: what every Python app of the zoo shares: flags, the attempt plan, worker threads, the JSON report.

An app module defines an App subclass (pods, per-thread state, one attempt of the legacy flow) and calls
zoo.main(AppClass). The report's keys are the contract run_app.py reads from every language:
attempts_planned, attempts, claimed, claimed_users, already_claimed_users, sold_out_app, conflicts, errors[{statement, code,
message, count}], elapsed_s.
"""

import argparse
import json
import random
import re
import sys
import threading
import time

MAX_DISTINCT_ERRORS = 50
OTHER_MESSAGES = "(other messages)"
# Our own code for an exception that carried no MySQL error number.
NO_SQL_CODE = 0
# claimguard's duplicate answer (rules/examples/coupon.yaml): whoever is told it must hold an order at the end.
ALREADY_CLAIMED = "claimguard: already claimed"


class Trace:
    """Per-thread: which statement of the flow runs now (names an error in the report), and who the attempt is
    counted as (None: the user; an app with several tenants counts user + tenant offset)."""

    def __init__(self):
        self.statement = ""
        self.who = None


class Outcome:
    CLAIMED = "claimed"
    SOLD_OUT = "sold_out_app"   # the app's own check said no stock (its read, or 0 rows it handles)
    CONFLICT = "conflicts"      # the app's own handled conflict (optimistic retries exhausted, 0-row insert)


class App:
    """One app of the zoo. pod(port): what one app instance holds (an engine, a pool); state(pod): what one
    worker thread holds; attempt(state, user, trace): one claim, returns an Outcome or raises."""

    name = "app"

    def __init__(self, args):
        self.args = args

    @staticmethod
    def add_flags(ap):
        """Extra flags of this app (called on the class, before an instance exists)."""

    def pod(self, port):
        return port

    def state(self, pod):
        return pod

    def attempt(self, state, user, trace):
        raise NotImplementedError

    def close_state(self, state):
        pass

    def close_pod(self, pod):
        pass


def sql_error(e):
    """(code, message) of whatever a driver or ORM raised: the first args (int, str) down the cause chain."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        args = getattr(e, "args", ())
        if len(args) >= 2 and isinstance(args[0], int):
            return args[0], str(args[1])
        e = getattr(e, "orig", None) or e.__cause__ or e.__context__
    return None


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.attempts = 0
        self.counts = {Outcome.CLAIMED: 0, Outcome.SOLD_OUT: 0, Outcome.CONFLICT: 0}
        self.claimed_users = []
        self.already_claimed_users = []   # told "already claimed" (claimguard's duplicate answer)
        self.errors = {}

    def outcome(self, kind, user):
        with self.lock:
            self.attempts += 1
            self.counts[kind] += 1
            if kind == Outcome.CLAIMED:
                self.claimed_users.append(user)

    def error(self, statement, e, user):
        found = sql_error(e)
        code, message = found if found else (NO_SQL_CODE, f"{type(e).__name__}: {e}")
        key = (statement, code, re.sub(r"[0-9]+", "N", message))
        with self.lock:
            self.attempts += 1
            if ALREADY_CLAIMED in message:
                self.already_claimed_users.append(user)
            if len(self.errors) >= MAX_DISTINCT_ERRORS and key not in self.errors:
                key = (statement, code, OTHER_MESSAGES)
            self.errors[key] = self.errors.get(key, 0) + 1


def parse_args(app_class):
    ap = argparse.ArgumentParser(description=f"the coupon legacy flow: {app_class.name}")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ports", required=True, help="comma-separated: one app instance (pod) per port")
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--database", required=True)
    ap.add_argument("--campaign", type=int, default=1)
    ap.add_argument("--threads", type=int, default=24)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--first-user", type=int, default=1)
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variant", default="")
    app_class.add_flags(ap)
    args = ap.parse_args()
    args.ports = [int(p) for p in args.ports.split(",")]
    return args


def main(app_class):
    args = parse_args(app_class)
    app = app_class(args)
    plan = [u for u in range(args.first_user, args.first_user + args.users) for _ in range(args.attempts)]
    random.Random(args.seed).shuffle(plan)
    cursor = iter(range(len(plan)))
    cursor_lock = threading.Lock()
    tally = Tally()
    pods = [app.pod(port) for port in args.ports]
    ready = threading.Barrier(args.threads + 1)
    go = threading.Event()
    setup_errors = []

    def worker(pod):
        trace = Trace()
        try:
            state = app.state(pod)
        except Exception as e:  # noqa: BLE001 - reported, the run goes on without this thread
            setup_errors.append(f"{type(e).__name__}: {e}")
            ready.wait()
            return
        ready.wait()
        go.wait()
        while True:
            with cursor_lock:
                i = next(cursor, None)
            if i is None:
                break
            trace.statement = ""
            trace.who = None
            try:
                kind = app.attempt(state, plan[i], trace)
                tally.outcome(kind, plan[i] if trace.who is None else trace.who)
            except Exception as e:  # noqa: BLE001 - every failure is an answer the runner judges
                tally.error(trace.statement, e, plan[i] if trace.who is None else trace.who)
        app.close_state(state)

    threads = [threading.Thread(target=worker, args=(pods[i % len(pods)],), daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    ready.wait()
    began = time.monotonic()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    for pod in pods:
        app.close_pod(pod)
    out = {"app": app.name, "variant": args.variant, "attempts_planned": len(plan), "attempts": tally.attempts,
           "claimed": tally.counts[Outcome.CLAIMED], "sold_out_app": tally.counts[Outcome.SOLD_OUT],
           "conflicts": tally.counts[Outcome.CONFLICT], "claimed_users": sorted(tally.claimed_users),
           "already_claimed_users": sorted(set(tally.already_claimed_users)),
           "errors": [{"statement": s, "code": c, "message": m, "count": n}
                      for (s, c, m), n in sorted(tally.errors.items())],
           "setup_errors": setup_errors, "elapsed_s": elapsed}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit("zoo.py is a library; run one of the apps")
