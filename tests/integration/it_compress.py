#!/usr/bin/env python3
"""Client protocol compression (CLIENT_COMPRESS, zlib): compressed clients through claimguard.

Usage: it_compress.py --claimguard PATH --work-dir DIR [unittest args]

One MariaDB with the coupon schema (tests/incident/cluster.py) and one claimguard with the example rules.
The mariadb command line with --compress runs a take and a claim, a large result and a 20 MiB blob both
ways (a command and a row split at 16 MiB, compressed) through claimguard: the same answers and rows as
uncompressed through claimguard, and as compressed directly; claimguard's bytes to the client show the
reply was compressed, the server's Compression status that the database link is too. A raw client checks the frames themselves: compressed sequence ids, a packet
spanning two frames, two commands in one frame, and a broken frame or a wrong id answered with an ERR.
"""

import hashlib
import os
import struct
import subprocess
import sys
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "incident"))
import cluster  # noqa: E402  (tests/incident/cluster.py: MariaDB + the coupon schema)
import itlib  # noqa: E402
import rawmysql  # noqa: E402
import servers  # noqa: E402

CLIENT_COMPRESS = 1 << 5
CAMPAIGN = 9
STOCK = 2
BLOB_BYTES = 20 * 1024 * 1024  # past one 16 MiB frame both ways
CLIENT_TIMEOUT_S = 60
ER_PACKETS_OUT_OF_ORDER = 1156
ER_UNCOMPRESS = 1157

ARGS = None


def u24(b, pos=0):
    return b[pos] | (b[pos + 1] << 8) | (b[pos + 2] << 16)


def compressed_frame(seq, data, compress=True):
    """One compressed frame: 3-byte length, id, 3-byte length before compression (0: sent as is)."""
    if compress:
        body = zlib.compress(data)
        return struct.pack("<I", len(body))[:3] + bytes([seq]) + struct.pack("<I", len(data))[:3] + body
    return struct.pack("<I", len(data))[:3] + bytes([seq]) + b"\0\0\0" + data


class CompressedClient:
    """A raw client that logs in asking for CLIENT_COMPRESS, then speaks compressed frames."""

    def __init__(self, port):
        self.raw = rawmysql.RawClient(servers.HOST, port, timeout_s=CLIENT_TIMEOUT_S)
        _, payload = self.raw.read_packet()
        greeting = rawmysql.Greeting(payload)
        assert greeting.capabilities & CLIENT_COMPRESS, "CLIENT_COMPRESS not offered"
        caps = rawmysql.DEFAULT_CAPABILITIES | CLIENT_COMPRESS
        self.raw.send_packet(1, self.raw.handshake_response(greeting, cluster.APP_USER, cluster.APP_PASSWORD,
                                                            cluster.DATABASE, capabilities=caps))
        _, reply = self.raw.read_packet()
        if reply[:1] != b"\x00":
            raise rawmysql.ProtocolError(rawmysql.describe(reply))
        self.plain = b""  # inflated bytes not yet parsed into packets
        self.frame_ids = []

    def send(self, data):
        self.raw.send_raw(data)

    def read_frame(self):
        head = self.raw._read_exact(7, time.monotonic() + CLIENT_TIMEOUT_S)
        body = self.raw._read_exact(u24(head), time.monotonic() + CLIENT_TIMEOUT_S)
        self.frame_ids.append(head[3])
        self.plain += zlib.decompress(body) if u24(head, 4) else body

    def read_packet(self):
        while len(self.plain) < 4 or len(self.plain) < 4 + u24(self.plain):
            self.read_frame()
        n = u24(self.plain)
        payload, self.plain = self.plain[4:4 + n], self.plain[4 + n:]
        return payload

    def read_response(self):
        """The payloads of one reply (OK, ERR, or a result set up to its final EOF)."""
        first = self.read_packet()
        out = [first]
        if first[:1] in (b"\x00", b"\xff"):
            return out
        eofs = 0
        while eofs < 2:
            p = self.read_packet()
            out.append(p)
            if p[:1] == b"\xff":
                return out
            if p[:1] == b"\xfe" and len(p) < 9:
                eofs += 1
        return out

    def closed(self):
        try:
            self.read_frame()
            return False
        except (EOFError, ConnectionResetError):
            return True


def query_packet(sql):
    return rawmysql.frame(0, bytes([rawmysql.COM_QUERY]) + sql.encode())


class Compress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = itlib.fresh_work_dir(ARGS.work_dir)
        cls.cluster = cluster.Cluster(cls.work).start_db()
        cls.cluster.sql("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)")
        cls.proxy = servers.Claimguard(ARGS.claimguard, cls.cluster.dir, "claimguard", cls.cluster.db.port,
                                       extra_args=["--rules", cluster.EXAMPLE_RULES])
        cls.cluster.proxies.append(cls.proxy)
        cls.proxy.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.started = time.monotonic()

    def tearDown(self):
        print(f"\n    {self.id().rsplit('.', 1)[-1]}: {time.monotonic() - self.started:.2f}s", end="")

    def mariadb(self, port, script, compress, extra=()):
        """The mariadb command line on `port`; the script on stdin. (exit code, stdout, stderr)."""
        r = subprocess.run(["mariadb", "--no-defaults", "--protocol=tcp", "--host", servers.HOST, "--port", str(port),
                            "-u", cluster.APP_USER, f"-p{cluster.APP_PASSWORD}", "-N", "-B",
                            "--max-allowed-packet=64M", *(["--compress"] if compress else []), *extra,
                            cluster.DATABASE], input=script, capture_output=True, text=True,
                           timeout=CLIENT_TIMEOUT_S, check=False)
        return r.returncode, r.stdout, r.stderr

    def bytes_to_clients(self):
        return itlib.metric(self.proxy.admin_port, "claimguard_bytes_total", {"direction": "backend_to_client"})

    # --- real clients ---------------------------------------------------------------------------------
    def test_take_and_claim_compressed_same_as_uncompressed(self):
        # Two takes (the stale second write is a decrement), then sold out; --force goes on past the ERR.
        script = (f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};\n"
                  f"UPDATE coupon_stock SET remain = {STOCK - 1} WHERE campaign_id = {CAMPAIGN}; SELECT ROW_COUNT();\n"
                  f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (301, {CAMPAIGN});\n"
                  f"UPDATE coupon_stock SET remain = {STOCK - 2} WHERE campaign_id = {CAMPAIGN}; SELECT ROW_COUNT();\n"
                  f"INSERT INTO coupon_order (user_id, campaign_id) VALUES (302, {CAMPAIGN});\n"
                  f"UPDATE coupon_stock SET remain = {STOCK - 3} WHERE campaign_id = {CAMPAIGN};\n"
                  f"SELECT remain FROM coupon_stock WHERE campaign_id = {CAMPAIGN};\n")
        results = {}
        for compress in (False, True):
            self.cluster.reset({CAMPAIGN: STOCK})
            results[compress] = (self.mariadb(self.proxy.port, script, compress, extra=["--force"]),
                                 self.cluster.facts(CAMPAIGN))
        (code, out, err), facts = results[True]
        print(f"\n    compressed: {out.split()} {err.strip()}", end="")
        self.assertEqual(results[True], results[False])
        self.assertEqual(code, 0, err)  # --force: the sold-out ERR is printed, the script goes on
        self.assertIn("ERROR 1644 (45000) at line 6: claimguard: coupon_stock is sold out", err)
        self.assertEqual(out.split(), [str(STOCK), "1", "1", "0"], out)
        self.assertEqual(facts["users"], [301, 302])
        self.assertEqual(facts["remain"], 0)

    def test_compression_status_as_directly(self):
        # The database link is compressed too: the server's own status says so, as it does directly.
        script = "SHOW SESSION STATUS LIKE 'Compression';\n"
        for compress, value in ((True, "ON"), (False, "OFF")):
            proxied = self.mariadb(self.proxy.port, script, compress)
            self.assertEqual(proxied, self.mariadb(self.cluster.db.port, script, compress))
            self.assertEqual(proxied[1], f"Compression\t{value}\n", proxied[2])

    def test_large_result_same_as_direct_and_compressed(self):
        script = "SELECT seq, REPEAT(CHAR(97 + seq % 26), seq % 700), SHA1(seq) FROM seq_1_to_20000;\n"
        direct = self.mariadb(self.cluster.db.port, script, True)
        before = self.bytes_to_clients()
        proxied = self.mariadb(self.proxy.port, script, True)
        sent = self.bytes_to_clients() - before
        self.assertEqual(proxied[0], 0, proxied[2])
        self.assertEqual(proxied, direct)
        # The reply went compressed: far fewer bytes than the text the client printed.
        print(f"\n    {len(proxied[1])} bytes of rows, {sent:.0f} bytes sent compressed", end="")
        self.assertLess(sent, len(proxied[1]) / 3)

    def test_blob_of_20_mib_both_ways(self):
        blob = (hashlib.sha256(b"seed").hexdigest() * (BLOB_BYTES // 64 + 1))[:BLOB_BYTES]
        script = (f"REPLACE INTO blobs VALUES (1, '{blob}');\n"
                  "SELECT LENGTH(b), MD5(b) FROM blobs WHERE id = 1;\n"
                  "SELECT b FROM blobs WHERE id = 1;\n")
        code, out, err = self.mariadb(self.proxy.port, script, True)
        self.assertEqual(code, 0, err[:500])
        lines = out.split("\n")
        self.assertEqual(lines[0], f"{BLOB_BYTES}\t{hashlib.md5(blob.encode()).hexdigest()}")
        self.assertEqual(lines[1], blob)
        direct = self.mariadb(self.cluster.db.port, script, True)
        self.assertTrue(direct[1] == out, direct[2][:500])  # not assertEqual: 40 MiB in a failure message

    # --- the frames ---------------------------------------------------------------------------------
    def test_frames_ids_spanning_and_pipelined(self):
        c = CompressedClient(self.proxy.port)
        try:
            c.send(compressed_frame(0, query_packet("SELECT 1 + 1")))
            self.assertEqual(c.read_response()[-2], b"\x012")
            self.assertEqual(c.frame_ids[0], 1)  # the reply continues the command's compressed ids
            # The next command starts at 0 again; its packet spans two frames (0, then 1 sent as is).
            c.frame_ids.clear()
            packet = query_packet("SELECT '" + "x" * 300 + "'")
            c.send(compressed_frame(0, packet[:100]) + compressed_frame(1, packet[100:], compress=False))
            self.assertEqual(c.read_response()[-2], b"\xfc\x2c\x01" + b"x" * 300)
            self.assertEqual(c.frame_ids[0], 2)
            # Two commands in one frame: two replies.
            c.send(compressed_frame(0, query_packet("SELECT 3") + query_packet("SELECT 4")))
            self.assertEqual(c.read_response()[-2], b"\x013")
            self.assertEqual(c.read_response()[-2], b"\x014")
        finally:
            c.raw.close()

    def test_wrong_frame_id_is_answered_and_closed(self):
        c = CompressedClient(self.proxy.port)
        try:
            c.send(compressed_frame(5, query_packet("SELECT 1")))
            err = c.read_packet()
            self.assertEqual(struct.unpack_from("<H", err, 1)[0], ER_PACKETS_OUT_OF_ORDER, rawmysql.describe(err))
            self.assertTrue(c.closed())
        finally:
            c.raw.close()

    def test_broken_frame_is_answered_and_closed(self):
        c = CompressedClient(self.proxy.port)
        try:
            good = compressed_frame(0, query_packet("SELECT '" + "y" * 200 + "'"))
            broken = good[:7] + bytes(b ^ 0x55 for b in good[7:])
            c.send(broken)
            err = c.read_packet()
            self.assertEqual(struct.unpack_from("<H", err, 1)[0], ER_UNCOMPRESS, rawmysql.describe(err))
            self.assertTrue(c.closed())
        finally:
            c.raw.close()
        # The proxy is still fine.
        code, out, err = self.mariadb(self.proxy.port, "SELECT 5;\n", True)
        self.assertEqual((code, out), (0, "5\n"), err)


def main():
    itlib.run_fixture_cases(Compress, "compress", __doc__, lambda args: globals().__setitem__("ARGS", args))


if __name__ == "__main__":
    main()
