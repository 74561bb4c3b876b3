#!/usr/bin/env python3
"""it_fixture.py: the test fixture itself holds up when ctest runs tests in parallel.

Six MariaDB data directories installed at the same time, twice. Before each install got its own
--tmpdir, about one install in four failed ("Unknown table 'mysql.tmp_user_sys'") because the
bootstrap servers shared /tmp, and an integration test failed now and then for no reason of its own.

Usage: it_fixture.py --work-dir DIR
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

PARALLEL = 6
ROUNDS = 2


def install(base_dir):
    db = servers.MariaDB(base_dir)
    os.makedirs(db.dir)
    try:
        db.install()
        return None
    except subprocess.CalledProcessError:
        with open(os.path.join(db.dir, "install.log"), encoding="utf-8", errors="replace") as f:
            return f"{base_dir}: mariadb-install-db failed:\n{f.read()[-1500:]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    failures = []
    for rnd in range(ROUNDS):
        dirs = [os.path.join(work, f"r{rnd}-{i}") for i in range(PARALLEL)]
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            failures += [f for f in pool.map(install, dirs) if f]
    for f in failures:
        print(f)
    print(f"{PARALLEL * ROUNDS} concurrent installs, {len(failures)} failed")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
