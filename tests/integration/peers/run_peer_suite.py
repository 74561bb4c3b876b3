#!/usr/bin/env python3
"""Peer suites: public client and server test suites, run directly and through claimguard; same verdicts.

Usage:
    run_peer_suite.py {go,capi,mtr,mtr_compress} --claimguard PATH --rules FILE --work DIR [--known FILE]

Starts two identical private MariaDBs (servers.py, with the options mtr's main tests expect) and one
claimguard (rules loaded) in front of the second, runs the suite against the first directly and
through claimguard at the same time, and fails when any test's verdict through claimguard differs
from its verdict directly. Tests that fail directly too are listed in
known_direct_failures.txt (printed, not asserted: the assertion is "same verdict as direct").

- go:   go-sql-driver/mysql's own tests (Debian golang-github-go-sql-driver-mysql-dev, GO111MODULE=off),
        without connector_test.go (it dials a public address).
- capi: every test of mariadb-client-test (Debian mariadb-test), one process per test, a fresh
        database each.
- mtr:  the mysql-test-run main tests in mtr_tests.txt, each run by mysqltest as mtr --extern does
        (a fresh `test` database each), in text and with --ps-protocol.
- mtr_compress: a subset of those tests once more in text with --compress (the zlib protocol on both
        links; main.compress checks the server says Compression ON): COMPRESSED_TESTS below. The Go
        driver (Debian's 1.7) and mariadb-client-test have no compression option.
Standard library only.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_RETRIED_TESTS = 10  # more differences than this are not flakiness: no second run
sys.path.insert(0, os.path.dirname(HERE))
import servers  # noqa: E402

PEER_USER = "peer"
PEER_PASSWORD = "peer-Pw1"
GO_PACKAGE = "/usr/share/gocode/src/github.com/go-sql-driver/mysql"
GO_EXCLUDED = ("connector_test.go",)
GO_TIMEOUT_S = 600
CAPI_BINARY = "mariadb-client-test"
CAPI_DATABASE = "client_test_db"
CAPI_TEST_TIMEOUT_S = 120
MTR_DIR = "/usr/share/mysql/mysql-test"


# What mtr's include/default_mysqld.cnf sets and the main tests' expected results depend on.
MTR_SERVER_OPTIONS = (
    "--character-set-server=latin1", "--collation-server=latin1_swedish_ci",
    "--log-bin-trust-function-creators=1", "--key-buffer-size=1M", "--sort-buffer-size=256K",
    "--max-heap-table-size=1M", "--open-files-limit=1024", "--connect-timeout=60",
    "--plugin-maturity=unknown", "--default-storage-engine=MyISAM", "--use-stat-tables=preferably",
    "--histogram-type=JSON_HB",
)


class PeerMariaDB(servers.MariaDB):
    """servers.MariaDB with the options the mtr main tests expect."""

    def command(self):
        # Files only under the work dir, as mtr's secure-file-priv=MYSQLTEST_VARDIR; the tests' data
        # files are copied there (std_data), where '../../std_data' from the datadir finds them too.
        vardir = os.path.dirname(self.dir)
        return super().command() + list(MTR_SERVER_OPTIONS) + [f"--secure-file-priv={vardir}"]


def start_mariadb(path):
    db = PeerMariaDB(path)
    db.stop()
    os.makedirs(db.dir, exist_ok=True)
    db.install()
    db.start()
    # mariadb-install-db also creates root@127.0.0.1 without a password: mtr connects as that user.
    db.sql(f"""
        CREATE USER '{PEER_USER}'@'%' IDENTIFIED BY '{PEER_PASSWORD}';
        GRANT ALL PRIVILEGES ON *.* TO '{PEER_USER}'@'%' WITH GRANT OPTION;
        CREATE DATABASE IF NOT EXISTS test;
        CREATE DATABASE IF NOT EXISTS mtr;
        CREATE TABLE mtr.test_suppressions (pattern VARCHAR(255));
        CREATE PROCEDURE mtr.add_suppression(pattern VARCHAR(255))
            INSERT INTO mtr.test_suppressions VALUES (pattern);
        FLUSH PRIVILEGES;
    """)
    return db


class Target:
    """Where one half of a suite runs: a MariaDB, and the port its clients connect to."""

    def __init__(self, name, db, port):
        self.name, self.db, self.port = name, db, port


def start_fixture(work, claimguard, rules):
    """Two identical MariaDBs: one the suite uses directly, one behind claimguard; both halves run at once."""
    os.makedirs(work, exist_ok=True)
    std_data = os.path.join(work, "std_data")
    if not os.path.isdir(std_data):
        shutil.copytree(os.path.join(MTR_DIR, "std_data"), std_data, symlinks=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        dbs = list(pool.map(start_mariadb, [os.path.join(work, "direct"), os.path.join(work, "proxied")]))
    proxy = servers.Claimguard(claimguard, work, "claimguard", dbs[1].port, extra_args=["--rules", rules])
    try:
        proxy.start()
    except Exception:
        for db in dbs:
            db.stop()
        raise
    return Target("direct", dbs[0], dbs[0].port), Target("proxy", dbs[1], proxy.port), proxy


def stop_fixture(direct, through, proxy):
    try:
        proxy.stop()
    finally:
        direct.db.stop()
        through.db.stop()


def both(run, direct, through):
    """Runs run(target) for both halves at once; returns (direct verdicts, proxied verdicts)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.submit(run, direct), pool.submit(run, through)
        return a.result(), b.result()


# --- go-sql-driver/mysql ---------------------------------------------------------------------------

GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def go_package(work):
    """Where go_build copies the package."""
    return os.path.join(work, "gopath", "src", "github.com", "go-sql-driver", "mysql")


def go_build(work):
    gopath = os.path.join(work, "gopath")
    pkg = go_package(work)
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(GO_PACKAGE, pkg, ignore=shutil.ignore_patterns(*GO_EXCLUDED))
    binary = os.path.join(work, "go-sql-driver-mysql.test")
    env = dict(os.environ, GO111MODULE="off", GOPATH=gopath, GOCACHE=os.path.join(work, "gocache"),
               GOFLAGS="")
    subprocess.run(["go", "test", "-c", "-o", binary, "."], cwd=pkg, env=env, check=True,
                   stdin=subprocess.DEVNULL)
    return binary, pkg


def go_run(binary, pkg, port, database, log, only=None):
    env = dict(os.environ, MYSQL_TEST_USER=PEER_USER, MYSQL_TEST_PASS=PEER_PASSWORD,
               MYSQL_TEST_PROT="tcp", MYSQL_TEST_ADDR=f"{servers.HOST}:{port}", MYSQL_TEST_DBNAME=database)
    env.pop("MYSQL_TEST_CONCURRENT", None)
    with open(log, "wb") as out:
        args = [binary, "-test.v", "-test.timeout", f"{GO_TIMEOUT_S}s"]
        if only:
            args += ["-test.run", "^(" + "|".join(sorted({t.split("/")[0] for t in only})) + ")$"]
        subprocess.run(args, cwd=pkg, env=env,
                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=GO_TIMEOUT_S + 60, check=False)
    verdicts = {}
    with open(log, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            m = GO_RESULT.match(line)
            if m:
                verdicts[m.group(2)] = m.group(1).lower()
    return verdicts


def suite_go(work, direct, through, only=None):
    suffix = "-retry" if only else ""
    if not only:
        direct.db.sql("CREATE DATABASE gotest;")
        through.db.sql("CREATE DATABASE gotest;")
    binary, pkg = go_build(work) if not only else (os.path.join(work, "go-sql-driver-mysql.test"), go_package(work))
    return both(lambda t: go_run(binary, pkg, t.port, "gotest", os.path.join(work, f"go-{t.name}{suffix}.log"), only),
                direct, through)


# --- mariadb-client-test ---------------------------------------------------------------------------

def capi_tests():
    out = subprocess.run([CAPI_BINARY, "--no-defaults", "-T"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         check=True).stdout.decode()
    return [line.strip() for line in out.splitlines() if re.fullmatch(r"\s*test_\w+\s*", line)]


def capi_run(db, port, tests, logdir):
    os.makedirs(logdir, exist_ok=True)
    vardir = os.path.join(logdir, "vardir")
    os.makedirs(vardir, exist_ok=True)
    verdicts = {}
    for name in tests:
        db.sql(f"DROP DATABASE IF EXISTS {CAPI_DATABASE}; CREATE DATABASE {CAPI_DATABASE};")
        with open(os.path.join(logdir, f"{name}.log"), "wb") as out:
            try:
                r = subprocess.run([CAPI_BINARY, "--no-defaults", f"--host={servers.HOST}", f"--port={port}",
                                    f"--user={PEER_USER}", f"--password={PEER_PASSWORD}",
                                    f"--database={CAPI_DATABASE}", f"--vardir={vardir}", name],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   timeout=CAPI_TEST_TIMEOUT_S, check=False)
                verdicts[name] = "pass" if r.returncode == 0 else "fail"
            except subprocess.TimeoutExpired:
                verdicts[name] = "timeout"
    return verdicts


def suite_capi(work, direct, through, only=None):
    tests = sorted(only) if only else capi_tests()
    suffix = "-retry" if only else ""
    return both(lambda t: capi_run(t.db, t.port, tests, os.path.join(work, f"capi-{t.name}{suffix}")),
                direct, through)


# --- mysql-test-run main tests ----------------------------------------------------------------------
# mysqltest (mariadb-test) per test, as mtr --extern runs it, with the `test` database dropped and
# created before each test: mtr --extern never cleans up, so one failure would cascade.

MTR_TEST_TIMEOUT_S = int(os.environ.get("PEER_MTR_TEST_TIMEOUT_S", "300"))
MTR_SKIPPED = 62  # mysqltest's exit code for a test that skipped itself


# Files the server drops with a database; anything else in its directory (a test's SELECT ... INTO
# OUTFILE) makes DROP DATABASE fail with errno 39.
SERVER_TABLE_FILES = (".frm", ".ibd", ".MYD", ".MYI", ".MAD", ".MAI", ".opt", ".TRG", ".TRN", ".par",
                      ".CSV", ".CSM", ".isl")


def reset_test_database(db):
    path = os.path.join(db.datadir, "test")
    if os.path.isdir(path):
        for name in os.listdir(path):
            if not name.endswith(SERVER_TABLE_FILES):
                full = os.path.join(path, name)
                shutil.rmtree(full) if os.path.isdir(full) else os.unlink(full)
    db.sql("DROP DATABASE IF EXISTS test; CREATE DATABASE test;")


# The tests peers.mtr_compress runs: compression only changes the framing (packets split into compressed
# frames, values above the 50-byte threshold compressed), so what matters is the traffic's shapes, not
# the SQL coverage peers.mtr already gives: large values (type_blob, func_compress), multi-results and
# cursors (sp-*), prepared statements and their long data (ps_*), RETURNING and found rows, every
# character set conversion (ctype_many, ctype_recoding). About an eighth of mtr_tests.txt's time (all 77
# took 62 s alone; CI's budget), each test also in mtr_tests.txt (checked).
COMPRESSED_TESTS = (
    "compress", "func_compress", "type_blob", "type_binary", "varbinary", "type_json", "func_json",
    "ps_2myisam", "ps_3innodb", "ps_11bugs", "ps_missed_cmds", "ps_ddl1", "prepare",
    "sp-dynamic", "sp-condition-handler", "sp-group", "ctype_many", "ctype_recoding",
    "insert_returning", "delete_returning", "select_found", "limit_rows_examined")


def mtr_list():
    tests = []
    with open(os.path.join(HERE, "mtr_tests.txt"), "r", encoding="ascii") as f:
        for line in f:
            tests.extend(line.split("#", 1)[0].split())
    return tests


def mtr_run(db, port, tests, mode, logdir):
    tmpdir = os.path.join(logdir, "tmp")
    os.makedirs(tmpdir, exist_ok=True)
    # The vardir holds the server's datadir, as under mtr: mysqltest only touches files inside it.
    vardir = os.path.dirname(db.dir)
    env = dict(os.environ, MYSQLTEST_VARDIR=vardir, MYSQL_TMP_DIR=tmpdir, MYSQL_TEST_DIR=MTR_DIR,
               STAGING_RUN="0", MASTER_MYPORT=str(port), MYSQL_CHARSETSDIR="/usr/share/mysql/charsets")
    verdicts = {}
    for name in tests:
        reset_test_database(db)
        args = ["mariadb-test", "--no-defaults", f"--host={servers.HOST}", f"--port={port}", "--user=root",
                "--database=test", "--protocol=tcp", f"--basedir={MTR_DIR}/", f"--tmpdir={tmpdir}", f"--logdir={logdir}",
                f"--test-file={MTR_DIR}/main/{name}.test", f"--result-file={MTR_DIR}/main/{name}.result",
                "--silent"]
        if mode == "ps":
            args.append("--ps-protocol")
        elif mode == "compress":
            args.append("--compress")
        started = time.monotonic()
        with open(os.path.join(logdir, f"{name}.log"), "wb") as out:
            try:
                r = subprocess.run(args, cwd=MTR_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, timeout=MTR_TEST_TIMEOUT_S, check=False)
                verdict = {0: "pass", MTR_SKIPPED: "skip"}.get(r.returncode, "fail")
            except subprocess.TimeoutExpired:
                verdict = "timeout"
        verdicts[f"{name},{mode}"] = verdict
        if os.environ.get("PEER_VERBOSE"):
            print(f"  {name},{mode} port {port}: {verdict} {time.monotonic() - started:.2f}s", flush=True)
    return verdicts


def suite_mtr(work, direct, through, only=None, modes=("text", "ps"), subset=None):
    tests = mtr_list()
    if subset:
        missing = [t for t in subset if t not in tests]
        if missing:
            sys.exit(f"not in mtr_tests.txt: {' '.join(missing)}")
        tests = [t for t in tests if t in subset]
    suffix = "-retry" if only else ""
    out_direct, out_through = {}, {}
    for mode in modes:
        mode_tests = [t for t in tests if not only or f"{t},{mode}" in only]
        if not mode_tests:
            continue
        d, t = both(lambda t: mtr_run(t.db, t.port, mode_tests, mode,
                                      os.path.join(work, f"mtr-{t.name}-{mode}{suffix}")), direct, through)
        out_direct.update(d)
        out_through.update(t)
    return out_direct, out_through


# --- comparison ------------------------------------------------------------------------------------

def read_known(path, suite):
    known = {}
    if not path or not os.path.exists(path):
        return known
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            s, _, test = name.partition(":")
            if s == suite:
                known[test] = reason.strip()
    return known


def counts(verdicts):
    out = {}
    for v in verdicts.values():
        out[v] = out.get(v, 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(out.items()))


def compare(suite, direct, through, known):
    print(f"{suite}: directly        {counts(direct)}")
    print(f"{suite}: through claimguard {counts(through)}")
    differ = sorted(t for t in set(direct) | set(through) if direct.get(t) != through.get(t))
    for t in differ:
        print(f"  DIFFERS {t}: directly {direct.get(t, 'not run')}, through claimguard {through.get(t, 'not run')}")
    for t, v in sorted(direct.items()):
        if v not in ("pass", "skip", "skipped"):
            note = known.get(t.split(",")[0])
            print(f"  fails directly too: {t} ({note or 'NOT in known_direct_failures.txt'})")
    if not direct:
        print(f"{suite}: no test ran")
        return False
    return not differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=["go", "capi", "mtr", "mtr_compress"])
    ap.add_argument("--claimguard", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--known", default=os.path.join(HERE, "known_direct_failures.txt"))
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    started = time.monotonic()
    # Stopped from outside (ctest's timeout, Ctrl-C): still stop the servers (finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{args.suite}: stopped by SIGTERM"))
    direct_target, proxy_target, proxy = start_fixture(work, os.path.abspath(args.claimguard),
                                                       os.path.abspath(args.rules))
    try:
        run = {"go": suite_go, "capi": suite_capi, "mtr": suite_mtr,
               "mtr_compress": lambda *a, **k: suite_mtr(*a, **k, modes=("compress",),
                                                             subset=COMPRESSED_TESTS)}[args.suite]
        direct, through = run(work, direct_target, proxy_target)
        differ = {t for t in set(direct) | set(through) if direct.get(t) != through.get(t)}
        if differ and len(differ) <= MAX_RETRIED_TESTS:
            # A test that is flaky directly too (timing under load) gets one more run on both sides.
            print(f"{args.suite}: {len(differ)} verdict(s) differ; running them once more on both sides")
            again_direct, again_through = run(work, direct_target, proxy_target, only=differ)
            for t in differ:
                if t in again_direct and t in again_through:
                    direct[t], through[t] = again_direct[t], again_through[t]
    finally:
        stop_fixture(direct_target, proxy_target, proxy)
    same = compare(args.suite, direct, through, read_known(args.known, args.suite))
    print(f"{args.suite}: {'same verdicts' if same else 'VERDICTS DIFFER'} ({time.monotonic() - started:.0f}s; logs in {work})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
