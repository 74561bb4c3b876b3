#!/usr/bin/env python3
"""The schema check's own integration fixture: a private MariaDB with TLS on, and two users.

Usage:
    schema_db.py start STATE_DIR   writes STATE_DIR/env (KEY=VALUE lines) that schema_it_test reads
    schema_db.py stop STATE_DIR    idempotent; keeps the logs

MariaDB comes from tests/integration/servers.py (imported, not run). The admin user creates
the test databases; the check user has what docs/OPERATIONS.md tells a DBA to grant `claimguard
check`: SELECT, SHOW VIEW, TRIGGER and EVENT on the cgschema_% databases (to read their tables,
views, triggers and events) and SELECT on mysql.proc (MariaDB shows a routine's text only then). TLS: a throwaway CA signs the server certificate (for
127.0.0.1); a second CA that signed nothing lets a test see verification fail.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import servers  # noqa: E402  (tests/integration/servers.py)

ADMIN_USER = "cg_schema_admin"
ADMIN_PASSWORD = "schema-Admin-1"
CHECK_USER = "cg_schema_check"
CHECK_PASSWORD = "schema-Check-2"
# Test databases match this LIKE pattern; the check user's grant covers exactly them.
DATABASE_PATTERN = "cgschema\\_%"
CERT_DAYS = "2"
RSA_BITS = "2048"


class TlsMariaDB(servers.MariaDB):
    """servers.MariaDB with the server certificate configured."""

    def __init__(self, base_dir, tls_dir):
        super().__init__(base_dir)
        self.tls_dir = tls_dir

    def command(self):
        return super().command() + [
            f"--ssl-ca={os.path.join(self.tls_dir, 'ca.pem')}",
            f"--ssl-cert={os.path.join(self.tls_dir, 'server.pem')}",
            f"--ssl-key={os.path.join(self.tls_dir, 'server-key.pem')}",
        ]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certificates(tls_dir):
    os.makedirs(tls_dir, exist_ok=True)
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", f"rsa:{RSA_BITS}", "-nodes", "-days", CERT_DAYS,
                "-subj", f"/CN=claimguard schema test {ca}", "-keyout", f"{ca}-key.pem", "-out", f"{ca}.pem",
                cwd=tls_dir)
    with open(os.path.join(tls_dir, "server.ext"), "w", encoding="ascii") as f:
        f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    openssl("req", "-newkey", f"rsa:{RSA_BITS}", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server-key.pem", "-out", "server.csr", cwd=tls_dir)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-days", CERT_DAYS, "-extfile", "server.ext", "-out", "server.pem", cwd=tls_dir)


def start(state_dir):
    state_dir = os.path.abspath(state_dir)
    stop(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    try:
        os.unlink(os.path.join(state_dir, "env"))
    except FileNotFoundError:
        pass
    tls_dir = os.path.join(state_dir, "tls")
    make_certificates(tls_dir)
    db = TlsMariaDB(os.path.join(state_dir, "mariadb"), tls_dir)
    os.makedirs(db.dir, exist_ok=True)
    db.install()
    db.start()
    db.sql(f"""
        CREATE USER '{ADMIN_USER}'@'%' IDENTIFIED BY '{ADMIN_PASSWORD}';
        GRANT ALL PRIVILEGES ON *.* TO '{ADMIN_USER}'@'%' WITH GRANT OPTION;
        CREATE USER '{CHECK_USER}'@'%' IDENTIFIED BY '{CHECK_PASSWORD}';
        GRANT SELECT, SHOW VIEW, TRIGGER, EVENT ON `{DATABASE_PATTERN}`.* TO '{CHECK_USER}'@'%';
        GRANT SELECT ON mysql.proc TO '{CHECK_USER}'@'%';
        FLUSH PRIVILEGES;
    """)
    servers.write_env(os.path.join(state_dir, "env"), {
        "HOST": servers.HOST,
        "PORT": db.port,
        "ADMIN_USER": ADMIN_USER, "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "CHECK_USER": CHECK_USER, "CHECK_PASSWORD": CHECK_PASSWORD,
        "CA_FILE": os.path.join(tls_dir, "ca.pem"),
        "OTHER_CA_FILE": os.path.join(tls_dir, "other-ca.pem"),
    })
    print(f"schema check fixture up in {state_dir}: mariadb {servers.HOST}:{db.port} (TLS on)")


def stop(state_dir):
    servers.MariaDB(os.path.join(os.path.abspath(state_dir), "mariadb")).stop()


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "start":
        try:
            start(sys.argv[2])
        except Exception:
            stop(sys.argv[2])
            raise
    else:
        stop(sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
