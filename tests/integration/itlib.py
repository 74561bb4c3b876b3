"""Shared helpers for the python-driven integration tests: fixture env, targets, result comparison."""

import argparse
import difflib
import os
import re
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402  (same directory)

# The proxies every transparency test runs through, after the direct run.
PROXY_TARGETS = ("proxy1", "proxy2")
# Lines of a unified diff shown when two runs differ.
DIFF_LINES_SHOWN = 60


def state_dir():
    d = os.environ.get("CLAIMGUARD_STATE_DIR", "")
    if not d:
        raise RuntimeError("CLAIMGUARD_STATE_DIR is not set (run through ctest)")
    return d


def env():
    return servers.read_env(state_dir())


def port(target):
    e = env()
    return int(e["MARIADB_PORT" if target == "direct" else target.upper() + "_PORT"])


def credentials(user="native"):
    e = env()
    key = "NATIVE" if user == "native" else "ED25519"
    return e[f"{key}_USER"], e[f"{key}_PASSWORD"]


def diff(direct, proxied, target):
    a = direct if isinstance(direct, list) else str(direct).splitlines()
    b = proxied if isinstance(proxied, list) else str(proxied).splitlines()
    lines = list(difflib.unified_diff([str(x) for x in a], [str(x) for x in b], "direct", target, lineterm=""))
    return "\n".join(lines[:DIFF_LINES_SHOWN])


class TransparencyCase(unittest.TestCase):
    """A scenario run directly and through each proxy; every observation must be identical."""

    maxDiff = None

    def assert_transparent(self, scenario, check_direct=None):
        """scenario(target) -> list of observations; check_direct(observations) sanity-checks the direct run."""
        e = env()
        direct = scenario("direct")
        self.assertTrue(direct, "the scenario observed nothing")
        if check_direct is not None:
            check_direct(direct)
        for target in PROXY_TARGETS:
            if e.get("PROXY_MODE") == "claimguard":
                self.assertNotEqual(port(target), port("direct"), f"claimguard must be on {target}")
            with self.subTest(target=target):
                proxied = scenario(target)
                if proxied != direct:
                    self.fail(f"{target} differs from direct:\n{diff(direct, proxied, target)}")


def main():
    """unittest main that exits 0 only when every test passed (skips are reported, not failures)."""
    result = unittest.main(exit=False, verbosity=2).result
    ok = result.wasSuccessful() and result.testsRun > 0
    print(f"tests run {result.testsRun}, failures {len(result.failures) + len(result.errors)}, "
          f"skipped {len(result.skipped)}")
    sys.exit(0 if ok else 1)


def run_fixture_cases(case_class, kind, description, keep_args):
    """main() of a test file whose cases start their own servers (it_faults, it_ops, ...).

    Arguments: --claimguard BINARY --work-dir DIR, and --expect-cases "test_a test_b" with which CMake checks
    that it registered exactly the file's cases (exit 1 when they differ). keep_args(args) hands the parsed
    arguments to the file before its cases run. Exits 0 only when every case passed."""
    ap = argparse.ArgumentParser(description=description.splitlines()[0])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--expect-cases", help="space-separated test names CMake registers; exit 1 if they differ")
    args, rest = ap.parse_known_args()
    keep_args(args)
    if args.expect_cases is not None:
        here = sorted(name for name in dir(case_class) if name.startswith("test_"))
        registered = sorted(args.expect_cases.split())
        if here != registered:
            print(f"{kind} cases {here} != registered in CMakeLists.txt {registered}")
            sys.exit(1)
        print(f"{len(here)} {kind} cases registered")
        sys.exit(0)
    result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
    print(f"tests run {result.testsRun}, failures {len(result.failures) + len(result.errors)}, "
          f"skipped {len(result.skipped)}")
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)


def wait_for(predicate, timeout_s, what, interval_s=0.05):
    """predicate()'s first true value within timeout_s; exceptions count as not yet. AssertionError otherwise."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except Exception as e:  # noqa: BLE001  (retry whatever went wrong until the deadline)
            last = e
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s}s (last: {last!r})")


def metric(admin_port, name, labels=None):
    """One sample of claimguard's /metrics (the sum over all samples when labels is None); 0 when absent.
    labels: a dict of label values, matched exactly and in order."""
    status, body = servers.http_get(admin_port, "/metrics")
    if status != 200:
        raise AssertionError(f"/metrics answered {status}")
    total = 0.0
    for line in body.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        if labels is not None and m.group(2) != "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}":
            continue
        total += float(m.group(3))
    return total


def fresh_work_dir(path):
    """An empty work directory at path; a MariaDB an earlier, killed run left in path/mariadb is stopped."""
    work = os.path.abspath(path)
    if os.path.isdir(work):
        servers.MariaDB(os.path.join(work, "mariadb")).stop()
        shutil.rmtree(work)
    os.makedirs(work)
    return work
