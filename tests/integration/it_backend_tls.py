#!/usr/bin/env python3
"""Backend TLS: claimguard speaking TLS to a real MariaDB that has a certificate (and to one that has none).

Starts its own MariaDB (ssl cert/key/ca from a throwaway CA, see tests/proxy/schema/schema_db.py) and
its own claimguard processes, configured by flags, environment variables and a YAML file.
Usage: it_backend_tls.py --claimguard PATH --work-dir DIR [unittest args]
"""

import contextlib
import hashlib
import os
import random
import socket
import ssl
import struct
import subprocess
import sys
import time
import unittest

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "proxy", "schema"))
import rawmysql  # noqa: E402
import schema_db  # noqa: E402  (TlsMariaDB, make_certificates: read-only reuse)
import itlib  # noqa: E402
import servers  # noqa: E402
from itlib import metric, wait_for  # noqa: E402

ANSWER_TIMEOUT_S = 10.0      # every request must be answered (or the session ended) within this
BIG_READ_TIMEOUT_S = 60.0    # a 20 MiB value through TLS twice (client -> proxy -> MariaDB and back)
RECOVERY_TIMEOUT_S = 30.0    # the database restarted / a session works again within this
BIG = 20 * 1024 * 1024       # the large value: more than one 16 MiB frame, many TLS records
MAX_FRAME = 0xFFFFFF         # a payload this long continues in the next frame
TLS_RECORD = 16384           # TLS plaintext record size
LONG_DATA_CHUNK = 1024 * 1024
CLIENT_SSL = 2048
CLIENT_LOST_CONNECTION = (2006, 2013)  # CR_SERVER_GONE_ERROR, CR_SERVER_LOST: pymysql saw the socket close

USER = "cg_tls_native"
PASSWORD = "tls-Native-1"
ED_USER = "cg_tls_ed25519"
ED_PASSWORD = "tls-Ed25519-2"
DATABASE = "cgtls"

ER_ACCESS_DENIED = 1045
# The proxy's answer when it cannot reach or secure the backend, or the backend goes away: a server-range
# code with SQLSTATE 08S01 (libmariadb turns an ERR carrying a client code such as 2003 into 2027).
BACKEND_GONE = 1927

COM_STMT_SEND_LONG_DATA = 0x18
COM_STMT_CLOSE = 0x19
MYSQL_TYPE_LONGLONG = 0x08
MYSQL_TYPE_LONG_BLOB = 0xFB

ARGS = None


# --- helpers ------------------------------------------------------------------------------------

def connect(port, user=USER, password=PASSWORD, **kwargs):
    options = dict(host=servers.HOST, port=port, user=user, password=password, database=DATABASE,
                   connect_timeout=ANSWER_TIMEOUT_S, read_timeout=BIG_READ_TIMEOUT_S,
                   write_timeout=BIG_READ_TIMEOUT_S, autocommit=True, max_allowed_packet=64 * 1024 * 1024)
    options.update(kwargs)
    return pymysql.connect(**options)


def scalar(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        row = cur.fetchone()
        return None if row is None else row[0]


def session_status(conn, name):
    with conn.cursor() as cur:
        cur.execute(f"SHOW SESSION STATUS LIKE '{name}'")
        row = cur.fetchone()
        return "" if row is None else row[1]


def refused(test, port, **kwargs):
    """The (code, message) a pymysql login gets; fails the test if it is accepted."""
    with test.assertRaises(pymysql.MySQLError) as caught:
        connect(port, **kwargs).close()
    return caught.exception.args[0], caught.exception.args[1]


def cli(port, user, password, sql, *extra):
    """The mariadb CLI (plain link unless extra says otherwise): (returncode, stdout, stderr)."""
    cmd = ["mariadb", "--no-defaults", f"--host={servers.HOST}", f"--port={port}", f"--user={user}",
           f"--password={password}", f"--database={DATABASE}", "--connect-timeout=10", "-N", "-B",
           *extra, "-e", sql]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=ANSWER_TIMEOUT_S * 3,
                       check=False)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def backend_errors(admin_port, kind):
    return metric(admin_port, "claimguard_backend_errors_total", {"kind": kind})


def port_refuses(port):
    try:
        with socket.create_connection((servers.HOST, port), timeout=1.0):
            return False
    except ConnectionRefusedError:
        return True


@contextlib.contextmanager
def environment(values):
    """os.environ with `values` set while a claimguard process is started (it inherits them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def err_code(payload):
    return struct.unpack_from("<H", payload, 1)[0]


def lenenc(n):
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def read_lenenc(data, pos):
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        return struct.unpack_from("<H", data, pos + 1)[0], pos + 3
    if first == 0xFD:
        return int.from_bytes(data[pos + 1:pos + 4], "little"), pos + 4
    if first == 0xFE:
        return struct.unpack_from("<Q", data, pos + 1)[0], pos + 9
    raise ValueError(f"NULL or bad length-encoded integer 0x{first:02x} at {pos}")


def read_lenenc_bytes(data, pos):
    n, pos = read_lenenc(data, pos)
    return bytes(data[pos:pos + n]), pos + n


class BinaryClient(rawmysql.RawClient):
    """rawmysql.RawClient with whole (multi-frame) packets and the prepared-statement commands.

    pymysql interpolates parameters on the client; this speaks COM_STMT_* (the binary protocol).
    """

    def __init__(self, host, port, timeout_s):
        super().__init__(host, port, timeout_s)
        self.buf = bytearray()  # megabytes arrive here; bytes += would copy quadratically

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError(f"connection closed after {len(self.buf)} of {n} bytes")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def send_command(self, payload):
        """One command (sequence 0), split into 16 MiB frames; an exact multiple ends with an empty frame."""
        seq, pos = 0, 0
        while True:
            chunk = payload[pos:pos + MAX_FRAME]
            self.send_packet(seq, chunk)
            seq, pos = seq + 1, pos + len(chunk)
            if len(chunk) < MAX_FRAME:
                return

    def read_whole(self, timeout_s=BIG_READ_TIMEOUT_S):
        parts = []
        while True:
            _, part = self.read_packet(timeout_s)
            parts.append(part)
            if len(part) < MAX_FRAME:
                return b"".join(parts)

    def read_until_eof(self):
        """Packets up to and including an EOF packet (no CLIENT_DEPRECATE_EOF here) or an ERR."""
        out = []
        while True:
            p = self.read_whole()
            out.append(p)
            if p[:1] == b"\xff" or (p[:1] == b"\xfe" and len(p) < 9):
                return out

    def prepare(self, sql):
        """(statement id, columns, params)."""
        self.send_command(bytes([rawmysql.COM_STMT_PREPARE]) + sql.encode())
        ok = self.read_whole()
        if ok[:1] != b"\x00":
            raise rawmysql.ProtocolError(f"prepare {sql!r}: {rawmysql.describe(ok)}")
        stmt_id, columns, params = struct.unpack_from("<IHH", ok, 1)
        if params:
            self.read_until_eof()
        if columns:
            self.read_until_eof()
        return stmt_id, columns, params

    def send_long_data(self, stmt_id, param, data):
        """COM_STMT_SEND_LONG_DATA in chunks; the server does not answer them."""
        for pos in range(0, len(data), LONG_DATA_CHUNK):
            self.send_command(bytes([COM_STMT_SEND_LONG_DATA]) + struct.pack("<IH", stmt_id, param) +
                              data[pos:pos + LONG_DATA_CHUNK])

    def execute(self, stmt_id, params):
        """params: (type, encoded value or None when sent as long data). Returns the answer's packets."""
        body = struct.pack("<IBI", stmt_id, 0, 1)
        if params:
            body += b"\0" * ((len(params) + 7) // 8) + b"\x01"
            body += b"".join(struct.pack("<BB", t, 0) for t, _ in params)
            body += b"".join(v for _, v in params if v is not None)
        self.send_command(bytes([rawmysql.COM_STMT_EXECUTE]) + body)
        first = self.read_whole()
        if first[:1] in (b"\x00", b"\xff"):
            return [first]
        columns = self.read_until_eof()   # column definitions + EOF
        rows = self.read_until_eof()      # binary rows + EOF (or ERR)
        return [first] + columns + rows

    def close_statement(self, stmt_id):
        self.send_command(bytes([COM_STMT_CLOSE]) + struct.pack("<I", stmt_id))


def longlong(n):
    return (MYSQL_TYPE_LONGLONG, struct.pack("<q", n))


def blob(data):
    return (MYSQL_TYPE_LONG_BLOB, lenenc(len(data)) + data)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class NoTlsMariaDB(servers.MariaDB):
    """The same data directory and port, started without any certificate."""


# --- the cases ----------------------------------------------------------------------------------

class BackendTls(unittest.TestCase):
    db = None

    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.tls_dir = os.path.join(cls.work, "tls")
        schema_db.make_certificates(cls.tls_dir)  # ca.pem signed server.pem (127.0.0.1, localhost); other-ca.pem
        cls.ca = os.path.join(cls.tls_dir, "ca.pem")
        cls.other_ca = os.path.join(cls.tls_dir, "other-ca.pem")
        cls.db = schema_db.TlsMariaDB(os.path.join(cls.work, "mariadb"), cls.tls_dir)
        os.makedirs(cls.db.dir)
        cls.db.install()
        cls.db.start()
        cls.db.sql(f"""
            CREATE DATABASE {DATABASE};
            CREATE USER '{USER}'@'%' IDENTIFIED WITH mysql_native_password USING PASSWORD('{PASSWORD}');
            GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{USER}'@'%';
            CREATE TABLE {DATABASE}.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL);
        """)
        cls.ed25519_skip = None
        try:
            cls.db.sql(f"""
                INSTALL SONAME 'auth_ed25519';
                CREATE USER '{ED_USER}'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('{ED_PASSWORD}');
                GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{ED_USER}'@'%';
            """)
        except RuntimeError as e:
            cls.ed25519_skip = f"the ed25519 plugin does not load here: {e}"

    @classmethod
    def tearDownClass(cls):
        if cls.db is not None:
            cls.db.stop()

    # --- fixtures ---

    def start_proxy(self, name, *extra, env=None):
        proxy = servers.Claimguard(ARGS.claimguard, self.work, name, self.db.port, extra_args=extra)
        with environment(env or {}):
            proxy.start()
        self.addCleanup(proxy.stop)
        return proxy

    def start_verified_proxy(self, name, *extra):
        return self.start_proxy(name, "--backend-tls", "--backend-tls-verify", "--backend-tls-ca", self.ca, *extra)

    def assert_proxy_alive(self, proxy):
        self.assertIsNone(proxy.proc.poll(), f"claimguard exited; see {proxy.log}")
        self.assertEqual(servers.http_get(proxy.admin_port, "/liveness")[0], 200, "/liveness")

    def require_secure_transport(self, on):
        self.db.sql(f"SET GLOBAL require_secure_transport = {'ON' if on else 'OFF'}")
        if on:
            self.addCleanup(self.db.sql, "SET GLOBAL require_secure_transport = OFF")

    def assert_tls_backend_works(self, port, what):
        conn = connect(port)
        try:
            self.assertEqual(scalar(conn, "SELECT 40 + 2"), 42, what)
            cipher = session_status(conn, "Ssl_cipher")
            self.assertNotEqual(cipher, "", f"{what}: the backend connection is not TLS")
            return cipher
        finally:
            conn.close()

    def assert_refused_with_err(self, port, what, message_part):
        """A login through `port` ends with an ERR (code 1927, SQLSTATE 08S01) and the close, never a hang.

        Returns the ERR's message."""
        client = rawmysql.RawClient(servers.HOST, port, ANSWER_TIMEOUT_S)
        try:
            _, greeting = client.read_packet()
            client.send_packet(1, client.handshake_response(rawmysql.Greeting(greeting), USER, PASSWORD, DATABASE))
            try:
                seq, answer = client.read_packet(ANSWER_TIMEOUT_S)
            except EOFError:
                self.fail(f"{what}: the proxy closed the connection without an ERR packet")
            self.assertTrue(rawmysql.is_err_with_sqlstate(answer), f"{what}: {rawmysql.describe(answer)}")
            self.assertEqual(seq, 2, f"{what}: ERR sequence id")
            self.assertEqual(err_code(answer), BACKEND_GONE, f"{what}: {rawmysql.describe(answer)}")
            self.assertIn(message_part, rawmysql.describe(answer), what)
            rawmysql.read_until_closed(client, ANSWER_TIMEOUT_S)  # and then the end, not a half-open session
            return rawmysql.describe(answer)
        finally:
            client.close()

    # --- 1 ---

    def test_verified_tls_queries_and_require_secure_transport(self):
        # What Ssl_cipher says on a plain and on a TLS link, directly.
        plain = connect(self.db.port)
        self.assertEqual(session_status(plain, "Ssl_cipher"), "", "a plain direct link reports no cipher")
        plain.close()
        direct_tls = connect(self.db.port, ssl={"ca": self.ca})
        self.assertNotEqual(session_status(direct_tls, "Ssl_cipher"), "")
        direct_tls.close()

        self.require_secure_transport(True)
        code, message = refused(self, self.db.port)
        print(f"plain direct client with require_secure_transport=ON: {code} {message}")
        self.assertEqual(code, ER_ACCESS_DENIED, "MariaDB 10.11's answer to an insecure transport")
        connect(self.db.port, ssl={"ca": self.ca}).close()  # the same credentials over TLS get in

        proxy = self.start_verified_proxy("verified")
        conn = connect(proxy.port)
        self.assertFalse(isinstance(conn._sock, ssl.SSLSocket), "the client's link to the proxy must be plain")
        cipher = session_status(conn, "Ssl_cipher")
        version = session_status(conn, "Ssl_version")
        print(f"through the proxy: Ssl_cipher={cipher!r} Ssl_version={version!r}")
        self.assertNotEqual(cipher, "", "the proxy's backend connection is not TLS")
        self.assertRegex(version, r"^TLSv1\.[23]$")
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t1 (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.executemany("INSERT INTO t1 VALUES (%s, %s)", [(i, f"v{i}") for i in range(100)])
            cur.execute("SELECT COUNT(*), SUM(id), MAX(v) FROM t1")
            self.assertEqual(cur.fetchone(), (100, 4950, "v99"))
            cur.execute("DROP TABLE t1")
        conn.close()

        # The greeting the client sees does not offer TLS (the server's does).
        for port, offers in ((self.db.port, True), (proxy.port, False)):
            raw = rawmysql.RawClient(servers.HOST, port, ANSWER_TIMEOUT_S)
            greeting = rawmysql.Greeting(raw.read_packet()[1])
            raw.close()
            self.assertEqual(bool(greeting.capabilities & CLIENT_SSL), offers, f"CLIENT_SSL in the greeting of {port}")

        # The mariadb CLI on a plain link to the proxy, too.
        rc, out, err = cli(proxy.port, USER, PASSWORD, "SHOW SESSION STATUS LIKE 'Ssl_cipher'", "--skip-ssl")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"^Ssl_cipher\t\S+", out)
        self.assert_proxy_alive(proxy)

    # --- 2 ---

    def test_prepared_statements_and_large_values_round_trip(self):
        proxy = self.start_verified_proxy("large")
        rng = random.Random(20261129)
        # Around the TLS record size, a text row of exactly one full frame (+ the empty frame after it),
        # and 20 MiB (two frames, ~1300 TLS records).
        text_sizes = [0, 1, TLS_RECORD - 1, TLS_RECORD, TLS_RECORD + 1, MAX_FRAME - 4, BIG]
        values = {i + 1: rng.randbytes(n) for i, n in enumerate(text_sizes)}

        conn = connect(proxy.port)
        self.assertNotEqual(session_status(conn, "Ssl_cipher"), "")
        with conn.cursor() as cur:
            for key, data in values.items():
                cur.execute("INSERT INTO blobs VALUES (%s, %s)", (key, data))
            for key, data in values.items():
                cur.execute("SELECT b FROM blobs WHERE id = %s", (key,))
                got = cur.fetchone()[0]
                self.assertEqual(len(got), len(data), f"text protocol, id {key}")
                self.assertTrue(got == data, f"text protocol, id {key}: {len(data)} bytes differ")

        client = BinaryClient(servers.HOST, proxy.port, ANSWER_TIMEOUT_S)
        self.addCleanup(client.close)
        client.login(USER, PASSWORD, DATABASE)
        insert, _, params = client.prepare("INSERT INTO blobs (id, b) VALUES (?, ?)")
        self.assertEqual(params, 2)
        # 20 MiB inline in COM_STMT_EXECUTE (a two-frame client packet); a value whose binary row below
        # is exactly one full frame (header, null bitmap, 4-byte length, value, SHA2's 1 + 64 bytes);
        # 20 MiB in COM_STMT_SEND_LONG_DATA chunks (commands without an answer).
        exact_row_size = MAX_FRAME - (1 + 1 + 4 + 1 + 64)
        inline_big, exact_row, long_data = rng.randbytes(BIG), rng.randbytes(exact_row_size), rng.randbytes(BIG)
        for key, data in ((100, inline_big), (101, exact_row)):
            answer = client.execute(insert, [longlong(key), blob(data)])
            self.assertEqual(answer[0][:1], b"\x00", rawmysql.describe(answer[0]))
            values[key] = data
        client.send_long_data(insert, 1, long_data)
        answer = client.execute(insert, [longlong(102), (MYSQL_TYPE_LONG_BLOB, None)])
        self.assertEqual(answer[0][:1], b"\x00", rawmysql.describe(answer[0]))
        values[102] = long_data

        select, columns, _ = client.prepare("SELECT b, SHA2(b, 256) FROM blobs WHERE id = ?")
        self.assertEqual(columns, 2)
        for key, data in values.items():
            packets = client.execute(select, [longlong(key)])
            rows = [p for p in packets[1:] if p[:1] == b"\x00"]
            self.assertEqual(len(rows), 1, [rawmysql.describe(p) for p in packets])
            got, pos = read_lenenc_bytes(rows[0], 2)  # header byte, one null-bitmap byte
            digest, _ = read_lenenc_bytes(rows[0], pos)
            self.assertEqual(len(got), len(data), f"binary protocol, id {key}")
            self.assertTrue(got == data, f"binary protocol, id {key}: {len(data)} bytes differ")
            self.assertEqual(digest.decode(), sha256(data), f"the server's SHA2 of id {key}")
        client.close_statement(insert)
        client.close_statement(select)
        self.assertEqual(client.query("SELECT 'still in step'")[-2], b"\x0dstill in step")

        # What the binary protocol wrote, read back with the text protocol.
        with conn.cursor() as cur:
            for key in (100, 101, 102):
                cur.execute("SELECT b FROM blobs WHERE id = %s", (key,))
                self.assertTrue(cur.fetchone()[0] == values[key], f"text protocol, id {key}")
            cur.execute("DELETE FROM blobs")
        conn.close()
        self.assert_proxy_alive(proxy)

    # --- 3 ---

    def test_native_and_ed25519_logins_and_wrong_password(self):
        proxy = self.start_verified_proxy("logins")
        conn = connect(proxy.port)
        self.assertEqual(scalar(conn, "SELECT CURRENT_USER()"), f"{USER}@%")
        self.assertNotEqual(session_status(conn, "Ssl_cipher"), "")
        conn.close()
        direct = refused(self, self.db.port, password="wrong-" + PASSWORD)
        through = refused(self, proxy.port, password="wrong-" + PASSWORD)
        print(f"native, wrong password: direct {direct}, through the proxy {through}")
        self.assertEqual(through[0], ER_ACCESS_DENIED)
        self.assertEqual(through, direct, "the server's own ERR, relayed")

        if self.ed25519_skip:
            self.skipTest(self.ed25519_skip)
        # The CLI starts with mysql_native_password; the server switches it to ed25519: the
        # authentication rounds go through the proxy with their sequence ids shifted by the SSLRequest.
        rc, out, err = cli(proxy.port, ED_USER, ED_PASSWORD,
                           "SELECT CURRENT_USER(); SHOW SESSION STATUS LIKE 'Ssl_cipher'", "--skip-ssl")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], f"{ED_USER}@%")
        self.assertRegex(lines[1], r"^Ssl_cipher\t\S+")
        rc, _, direct_err = cli(self.db.port, ED_USER, "wrong-" + ED_PASSWORD, "SELECT 1", "--skip-ssl")
        self.assertNotEqual(rc, 0)
        rc, _, proxy_err = cli(proxy.port, ED_USER, "wrong-" + ED_PASSWORD, "SELECT 1", "--skip-ssl")
        print(f"ed25519, wrong password: direct {direct_err.strip()!r}, through the proxy {proxy_err.strip()!r}")
        self.assertNotEqual(rc, 0)
        self.assertIn(f"ERROR {ER_ACCESS_DENIED} (28000)", proxy_err)
        self.assertEqual(proxy_err, direct_err)
        self.assert_proxy_alive(proxy)

    # --- 4 ---

    def test_untrusted_server_certificate_is_refused_and_the_proxy_stays_up(self):
        untrusted = self.start_proxy("untrusted", "--backend-tls", "--backend-tls-verify",
                                     "--backend-tls-ca", self.other_ca)
        before = backend_errors(untrusted.admin_port, "tls")
        code, message = refused(self, untrusted.port)
        print(f"untrusted certificate: {code} {message}")
        self.assertEqual(code, BACKEND_GONE)
        self.assertIn("TLS handshake with the database failed", message)
        self.assertIn("certificate verify failed", message)
        attempts = 1
        for _ in range(3):  # again and again: each an ERR, then the close
            self.assert_refused_with_err(untrusted.port, "untrusted certificate", "certificate verify failed")
            attempts += 1
        self.assertEqual(backend_errors(untrusted.admin_port, "tls") - before, attempts,
                         'claimguard_backend_errors_total{kind="tls"} counts each refused handshake')
        self.assert_proxy_alive(untrusted)

        # Trusted through a YAML file: works beside the refusing instance, which still refuses.
        config = os.path.join(self.work, "trusted.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f'backend_tls: true\nbackend_tls_verify: true\nbackend_tls_ca: "{self.ca}"\n')
        trusted = self.start_proxy("trusted", "--config", config)
        self.assert_tls_backend_works(trusted.port, "the right CA, from the config file")
        self.assert_refused_with_err(untrusted.port, "untrusted certificate, later", "certificate verify failed")
        self.assert_tls_backend_works(trusted.port, "the right CA, again")
        self.assert_proxy_alive(untrusted)

        # The same wrong CA with verification off (environment variables): TLS without the check.
        unverified = self.start_proxy("unverified", env={"CLAIMGUARD_BACKEND_TLS": "true",
                                                         "CLAIMGUARD_BACKEND_TLS_VERIFY": "false",
                                                         "CLAIMGUARD_BACKEND_TLS_CA": self.other_ca})
        self.assert_tls_backend_works(unverified.port, "verification off")

        # Verification is the default (issue 22): --backend-tls alone checks the chain, so the wrong CA fails.
        by_default = self.start_proxy("verified-by-default", "--backend-tls", "--backend-tls-ca", self.other_ca)
        self.assert_refused_with_err(by_default.port, "verified by default", "certificate verify failed")
        self.assert_proxy_alive(by_default)

        # Verification with the system CAs (no backend_tls_ca) does not trust the throwaway CA either.
        system = self.start_proxy("system-cas", "--backend-tls", "--backend-tls-verify")
        self.assert_refused_with_err(system.port, "system CAs", "certificate verify failed")
        self.assert_proxy_alive(system)

    # --- 5 ---

    def test_server_name_must_match_the_certificate(self):
        wrong = self.start_verified_proxy("wrong-name", "--backend-tls-server-name", "db.wrong.example")
        code, message = refused(self, wrong.port)
        print(f"server name db.wrong.example: {code} {message}")
        self.assertEqual(code, BACKEND_GONE)
        self.assertIn("TLS handshake with the database failed", message)
        self.assert_refused_with_err(wrong.port, "wrong server name", "certificate verify failed")
        self.assert_proxy_alive(wrong)

        # The certificate's DNS name (given by environment variable), and its IP address (the default:
        # the backend host 127.0.0.1).
        right = self.start_proxy("right-name", "--backend-tls", "--backend-tls-verify", "--backend-tls-ca", self.ca,
                                 env={"CLAIMGUARD_BACKEND_TLS_SERVER_NAME": "localhost"})
        self.assert_tls_backend_works(right.port, "server name localhost")
        default = self.start_verified_proxy("default-name")
        self.assert_tls_backend_works(default.port, "server name 127.0.0.1 (the backend host)")
        self.assert_refused_with_err(wrong.port, "wrong server name, later", "certificate verify failed")

    # --- 6 ---

    def test_tls_off_against_require_secure_transport_gets_the_servers_err(self):
        plain_proxy = self.start_proxy("plain")
        conn = connect(plain_proxy.port)
        self.assertEqual(session_status(conn, "Ssl_cipher"), "", "backend_tls off: a plain backend link")
        conn.close()
        self.require_secure_transport(True)
        direct = refused(self, self.db.port)
        through = refused(self, plain_proxy.port)
        print(f"backend_tls off, require_secure_transport=ON: direct {direct}, through the proxy {through}")
        # MariaDB 10.11 answers an insecure transport with its access-denied error; the same
        # credentials over TLS get in, so it is the transport that is refused.
        self.assertEqual(through, direct, "the server's own refusal, relayed")
        connect(self.db.port, ssl={"ca": self.ca}).close()
        self.assert_proxy_alive(plain_proxy)
        # The same server accepts the proxy's sessions once the proxy speaks TLS.
        tls_proxy = self.start_verified_proxy("tls")
        self.assert_tls_backend_works(tls_proxy.port, "require_secure_transport with backend TLS")

    # --- 7 ---

    def test_backend_killed_mid_session_then_restarted(self):
        proxy = self.start_verified_proxy("kill")
        idle = connect(proxy.port)
        self.assertNotEqual(session_status(idle, "Ssl_cipher"), "")
        sleeper = rawmysql.RawClient(servers.HOST, proxy.port, ANSWER_TIMEOUT_S)
        self.addCleanup(sleeper.close)
        sleeper.login(USER, PASSWORD, DATABASE)
        sleeper.send_packet(0, bytes([rawmysql.COM_QUERY]) + b"SELECT SLEEP(60)")
        wait_for(lambda: self.db.sql(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                     f"WHERE USER = '{USER}' AND INFO LIKE 'SELECT SLEEP(60)%'").strip() == "1",
                 ANSWER_TIMEOUT_S, "the query reached the server")
        io_before = sum(backend_errors(proxy.admin_port, k) for k in ("io", "closed"))
        connect_before = backend_errors(proxy.admin_port, "connect")
        self.db.kill()
        try:
            try:
                _, answer = sleeper.read_packet(ANSWER_TIMEOUT_S)
            except EOFError:
                self.fail("client mid-query: connection closed without an ERR packet")
            print(f"mid-query: {rawmysql.describe(answer)}")
            self.assertTrue(rawmysql.is_err_with_sqlstate(answer), rawmysql.describe(answer))
            self.assertEqual(err_code(answer), BACKEND_GONE, rawmysql.describe(answer))
            rawmysql.read_until_closed(sleeper, ANSWER_TIMEOUT_S)

            # The idle session's database connection closed: claimguard closed the client's socket as a
            # TCP relay would (issue 10), so the driver sees a lost connection, not an ERR packet. Asked
            # before claimguard saw that close, the query would race it (and get ERR 1927): wait for both
            # losses (the sleeper's and the idle session's) to be counted first.
            wait_for(lambda: sum(backend_errors(proxy.admin_port, k) for k in ("io", "closed")) - io_before >= 2,
                     ANSWER_TIMEOUT_S, "claimguard saw both database connections go")
            with self.assertRaises(pymysql.MySQLError) as lost:
                scalar(idle, "SELECT 1")
            print(f"idle session, next query: {lost.exception.args}")
            self.assertIn(lost.exception.args[0], CLIENT_LOST_CONNECTION, lost.exception.args)

            # Until the killed mariadbd has fully exited its port may still complete a TCP handshake
            # (then reset it): "down" means connections are refused.
            wait_for(lambda: port_refuses(self.db.port), RECOVERY_TIMEOUT_S, "the killed database's port closed")
            code, message = refused(self, proxy.port)
            print(f"login while the database is down: {code} {message}")
            self.assertEqual(code, BACKEND_GONE)
            self.assertGreaterEqual(sum(backend_errors(proxy.admin_port, k) for k in ("io", "closed")) - io_before, 2)
            self.assertEqual(backend_errors(proxy.admin_port, "connect") - connect_before, 1)
            self.assert_proxy_alive(proxy)
        finally:
            with contextlib.suppress(Exception):  # the proxy has closed it; only pymysql's side is left
                idle.close()
            self.db.start()
        conn = wait_for(lambda: connect(proxy.port), RECOVERY_TIMEOUT_S, "a session after the database came back")
        self.assertEqual(scalar(conn, "SELECT 40 + 2"), 42)
        self.assertNotEqual(session_status(conn, "Ssl_cipher"), "")
        conn.close()
        self.assert_proxy_alive(proxy)

    # --- 8 ---

    def test_database_without_tls_is_refused(self):
        self.db.stop()
        self.addCleanup(self.db.start)
        plain_db = NoTlsMariaDB(self.db.dir, port=self.db.port)
        plain_db.start()
        self.addCleanup(plain_db.stop)
        if plain_db.sql("SELECT @@have_ssl").strip() == "YES":
            self.skipTest("this mariadbd offers TLS without a certificate configured")
        proxy = self.start_verified_proxy("no-tls-db")
        message = self.assert_refused_with_err(proxy.port, "database without TLS", "does not offer TLS")
        print(f"database without TLS: {message}")
        self.assertEqual(backend_errors(proxy.admin_port, "tls"), 1)
        self.assert_proxy_alive(proxy)


def main():
    def keep(args):
        global ARGS
        ARGS = args
    itlib.run_fixture_cases(BackendTls, "it_backend_tls.py", __doc__, keep)


if __name__ == "__main__":
    main()
