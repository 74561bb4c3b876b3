#!/usr/bin/env python3
"""Every command in README.md's shell blocks, run as written on a fresh checkout (issue 22).

The checkout is the source tree's files as git knows them (tracked, plus untracked files that are not
ignored: what a commit of the working tree would hold), copied to a new directory with no build tree.
The README's commands then run there, in order, with `bash -c`. The only changes to their text are the
addresses a reader replaces with their own (listed in SUBSTITUTIONS: the database, Redis, and the local
ports, which another test on this machine may hold) and the `-p` password prompt of the `mariadb`
client, which gets the password. `bash scripts/test.sh` is the one command not run: it is what runs
this test. The demo (`bash scripts/demo.sh`) runs last and must show exactly 100 orders through
claimguard, no duplicate pair.

A `serve` command keeps running: it is started in the background, and the next commands run once its
admin port answers. `claimguard shutdown` must then stop it (exit 0). A `serve` still running at the end
of its block is stopped the same way, with the README's own `build/proxy/claimguard shutdown`.

Usage: it_readme.py --source DIR --work DIR
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

APP_USER, APP_PASSWORD = "app", "app-Pw1"
DBA_USER, DBA_PASSWORD = "dba", "dba-Pw1"
COMMAND_TIMEOUT_S = 900  # setup and the first build of a fresh checkout (ccache makes it minutes, not tens)

ARGS = None


def readme_commands(readme_text):
    """The README's ```sh blocks: a list of blocks, each a list of commands (continuation lines joined)."""
    blocks = []
    for body in re.findall(r"```sh\n(.*?)```", readme_text, flags=re.S):
        commands, pending = [], ""
        for line in body.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            command = (pending + line).strip()
            pending = ""
            if command:
                commands.append(command)
        blocks.append(commands)
    return blocks


def copy_checkout(source, dest):
    """The files git would check out (tracked + untracked, not ignored) into `dest`, no build tree."""
    listed = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            stdout=subprocess.PIPE, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = os.path.join(source, rel)
        if not os.path.lexists(src):
            continue  # deleted in the working tree
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)


class ReadmeCommands(unittest.TestCase):
    def setUp(self):
        self.work = os.path.abspath(ARGS.work)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.checkout = os.path.join(self.work, "checkout")
        copy_checkout(ARGS.source, self.checkout)
        self.assertFalse(os.path.exists(os.path.join(self.checkout, "build")), "a fresh checkout has no build tree")

        self.db = servers.MariaDB(os.path.join(self.work, "mariadb"))
        self.db.install()
        self.db.start()
        self.addCleanup(self.db.stop)
        with open(os.path.join(ARGS.source, "sql", "legacy_schema.sql"), encoding="utf-8") as f:
            schema = f.read()
        with open(os.path.join(ARGS.source, "sql", "migrations", "001_claimguard_unique_index.sql"),
                  encoding="utf-8") as f:
            migration = f.read()
        self.db.sql(f"""
            CREATE DATABASE shop; USE shop; {schema} {migration}
            INSERT INTO coupon_stock (campaign_id, remain) VALUES (7, 100);
            CREATE USER '{APP_USER}'@'%' IDENTIFIED BY '{APP_PASSWORD}';
            GRANT SELECT, INSERT, UPDATE, DELETE ON shop.* TO '{APP_USER}'@'%';
            CREATE USER '{DBA_USER}'@'%' IDENTIFIED BY '{DBA_PASSWORD}';
            GRANT SELECT, SHOW VIEW, TRIGGER ON *.* TO '{DBA_USER}'@'%';
            FLUSH PRIVILEGES;
        """)
        self.redis_port = servers.free_port()
        redis_dir = os.path.join(self.work, "redis")
        os.makedirs(redis_dir)
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", redis_dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(self.redis.kill)
        self.listen_port = servers.free_port()
        self.admin_port = servers.free_port()
        self.servers = []  # (command, Popen, log path) of the serve commands still running
        self.addCleanup(self.kill_servers)

    def substitutions(self):
        db = f"127.0.0.1:{self.db.port}"
        return [
            ("db.example:3306", db),
            ("db:3306", db),
            ("127.0.0.1:3306", f"127.0.0.1:{self.listen_port}"),
            ("-P 3306", f"-P {self.listen_port}"),
            ("127.0.0.1:9090", f"127.0.0.1:{self.admin_port}"),
            ("127.0.0.1:6379", f"127.0.0.1:{self.redis_port}"),
            (f"-u {APP_USER} -p ", f"-u {APP_USER} -p{APP_PASSWORD} "),
            ("CLAIMGUARD_CHECK_PASSWORD=...", f"CLAIMGUARD_CHECK_PASSWORD={DBA_PASSWORD}"),
        ]

    def localize(self, command):
        for old, new in self.substitutions():
            command = command.replace(old, new)
        return command

    def kill_servers(self):
        for _, proc, _ in self.servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def wait_serving(self, proc, log):
        """Until the serve command's admin port answers /startup (it listens by then)."""
        deadline = time.monotonic() + servers.PROXY_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.fail(f"serve exited with {proc.returncode}:\n{open(log, errors='replace').read()}")
            for port in (self.admin_port, 9090):
                try:
                    status, _ = servers.http_get(port, "/startup", timeout_s=0.5)
                    if status == 200:
                        return
                except OSError:
                    pass
            time.sleep(servers.POLL_INTERVAL_S)
        self.fail(f"serve did not start in {servers.PROXY_START_TIMEOUT_S} s:\n{open(log, errors='replace').read()}")

    def run_command(self, command, index):
        """Runs one README command in the checkout; returns its output. Fails the test on a non-zero exit."""
        log = os.path.join(self.work, f"command-{index}.log")  # index: a number, or a name for the test's own
        localized = self.localize(command)
        if re.search(r"claimguard serve\b", command):
            with open(log, "wb") as out:
                proc = subprocess.Popen(["bash", "-c", "exec " + localized], cwd=self.checkout, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            self.servers.append((command, proc, log))
            self.wait_serving(proc, log)
            return ""
        stdin = b"SELECT CURRENT_USER();\n" if command.startswith("mariadb ") else b""
        r = subprocess.run(["bash", "-c", localized], cwd=self.checkout, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S, check=False)
        output = r.stdout.decode(errors="replace")
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"$ {localized}\n{output}")
        self.assertEqual(r.returncode, 0, f"README command failed (exit {r.returncode}): {command}\n{output[-4000:]}")
        if re.search(r"claimguard shutdown\b", command):
            self.assert_servers_stopped()
        return output

    def assert_servers_stopped(self):
        for command, proc, log in self.servers:
            try:
                rc = proc.wait(timeout=servers.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.fail(f"`{command}` still running after `claimguard shutdown`")
            self.assertEqual(rc, 0, f"`{command}` exited {rc}:\n{open(log, errors='replace').read()[-3000:]}")
        self.servers = []

    def test_every_readme_command_works_as_written(self):
        with open(os.path.join(self.checkout, "README.md"), encoding="utf-8") as f:
            blocks = readme_commands(f.read())
        commands = [c for block in blocks for c in block]
        self.assertIn("bash scripts/demo.sh", " ".join(commands), "the README starts with the demo command")
        self.assertTrue(any(c.startswith("cmake --build") or "cmake --build" in c for c in commands))
        demo = None
        index = 0
        for block in blocks:
            for command in block:
                index += 1
                if command.startswith("bash scripts/test.sh"):
                    continue  # what runs this test
                if command.startswith("bash scripts/demo.sh"):
                    demo = command  # last: it needs the build the quick start makes
                    continue
                output = self.run_command(command, index)
                if command.startswith("mariadb "):
                    self.assertIn(f"{APP_USER}@", output, "the app's login went through claimguard to MariaDB")
                if " lint " in command:
                    self.assertNotIn("error", output.lower())
                if " ddl " in command:
                    self.assertIn("UNIQUE", output.upper())
                if command.startswith("curl "):
                    self.assertIn("claimguard_client_connections_accepted_total", output, "/metrics answered")
                if " explain " in command:
                    self.assertIn("coupon_stock", output)
            if self.servers:
                # The block left a server running: the README's own shutdown command stops it.
                self.run_command("build/proxy/claimguard shutdown", f"{index}-end-of-block")
        self.assertIsNotNone(demo)
        output = self.run_command(demo, index + 1)
        orders = re.search(r"^orders issued \(coupon_order rows\)\s+(\d+)\s+(\d+)\s*$", output, flags=re.M)
        duplicates = re.search(r"^duplicate \(user, campaign\) pairs\s+(\d+)\s+(\d+)\s*$", output, flags=re.M)
        self.assertTrue(orders and duplicates, f"the demo's table is missing:\n{output[-3000:]}")
        self.assertEqual(int(orders.group(2)), 100, "through claimguard: exactly the 100 coupons")
        self.assertEqual(int(duplicates.group(2)), 0, "through claimguard: no user twice")


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
