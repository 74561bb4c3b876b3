#!/usr/bin/env python3
# Records real MariaDB 10.11 replies to counter reads for counter_reply_test.cpp (stock rule
# read_cache): text and binary result sets, with and without CLIENT_DEPRECATE_EOF, in autocommit
# and in a transaction, at two counter values; a table with several integer column types.
# Writes tests/proxy/protocol/captures_read_cache.hpp. Dev aid, not run by ctest: it starts its own
# MariaDB with tests/incident/cluster.py.
# Usage: capture_read_cache.py WORK_DIR OUT.hpp
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(REPO, "tests", "incident"))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import cluster  # noqa: E402
import itlib  # noqa: E402
import rawmysql  # noqa: E402

DEPRECATE_EOF = 1 << 24
READ = "SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = 7"
PREPARED = "SELECT campaign_id, remain, version FROM coupon_stock WHERE campaign_id = ?"
WIDE = "SELECT tu, s, m, i, b, bu, name FROM wide WHERE id = 1"
# The counter found by name after a star (reply_view's column_index): a quoted alias in other case.
STAR_ALIAS = "SELECT *, remain AS `Left` FROM coupon_stock WHERE campaign_id = 7"


class Client(rawmysql.RawClient):
    def __init__(self, port, deprecate_eof):
        super().__init__(cluster.HOST, port)
        self.caps = rawmysql.DEFAULT_CAPABILITIES | (DEPRECATE_EOF if deprecate_eof else 0)
        self.deprecate_eof = deprecate_eof
        _, payload = self.read_packet()
        greeting = rawmysql.Greeting(payload)
        self.send_packet(1, self.handshake_response(greeting, cluster.ADMIN_USER, cluster.ADMIN_PASSWORD,
                                                    cluster.DATABASE, self.caps))
        seq, reply = self.read_packet()
        if reply[:1] == b"\xfe":
            name, _, salt = reply[1:].partition(b"\0")
            self.send_packet(seq + 1, rawmysql.native_scramble(cluster.ADMIN_PASSWORD, salt.rstrip(b"\0")))
            seq, reply = self.read_packet()
        assert reply[:1] == b"\x00", rawmysql.describe(reply)

    def raw_reply(self):
        """The whole reply, frames and all."""
        out = b""
        seq, first = self.read_packet()
        out += rawmysql.frame(seq, first)
        if first[:1] in (b"\x00", b"\xff"):
            return out
        eofs, want = 0, 1 if self.deprecate_eof else 2
        while eofs < want:
            seq, p = self.read_packet()
            out += rawmysql.frame(seq, p)
            if p[:1] == b"\xfe" and len(p) < 0xFFFFFF and len(p) < 12:
                eofs += 1
        return out

    def text(self, sql):
        self.send_packet(0, bytes([rawmysql.COM_QUERY]) + sql.encode())
        return self.raw_reply()

    def prepare(self, sql):
        self.send_packet(0, bytes([rawmysql.COM_STMT_PREPARE]) + sql.encode())
        _, ok = self.read_packet()
        statement, columns, params = struct.unpack_from("<IHH", ok, 1)
        skip = (params + columns) + (0 if self.deprecate_eof else (1 if params else 0) + (1 if columns else 0))
        for _ in range(skip):
            self.read_packet()
        return statement

    def execute(self, statement, value):
        body = struct.pack("<BIBI", rawmysql.COM_STMT_EXECUTE, statement, 0, 1)
        body += b"\0" + b"\x01" + b"\x08\x00" + struct.pack("<q", value)
        self.send_packet(0, body)
        return self.raw_reply()


def main():
    work, out_path = sys.argv[1], sys.argv[2]
    c = cluster.Cluster(itlib.fresh_work_dir(work)).start_db()
    captures = []
    try:
        c.sql("""CREATE TABLE wide (id INT PRIMARY KEY, tu TINYINT UNSIGNED, s SMALLINT, m MEDIUMINT, i INT,
                 b BIGINT, bu BIGINT UNSIGNED, name VARCHAR(20));
                 INSERT INTO wide VALUES (1, 200, -7, 70000, 5, -9000000000, 18000000000000000000, 'héllo');""")
        for eof_name, deprecate in (("eof", False), ("ok", True)):
            for remain in (5, 4):
                c.reset({7: remain})
                cl = Client(c.db.port, deprecate)
                captures.append((f"text_{eof_name}_{remain}", cl.text(READ)))
                st = cl.prepare(PREPARED)
                captures.append((f"binary_{eof_name}_{remain}", cl.execute(st, 7)))
                cl.text("BEGIN")
                captures.append((f"text_{eof_name}_{remain}_in_transaction", cl.text(READ)))
                captures.append((f"binary_{eof_name}_{remain}_in_transaction", cl.execute(st, 7)))
                cl.text("ROLLBACK")
                cl.close()
            cl = Client(c.db.port, deprecate)
            captures.append((f"star_alias_text_{eof_name}", cl.text(STAR_ALIAS)))
            captures.append((f"wide_text_{eof_name}", cl.text(WIDE)))
            st = cl.prepare(WIDE)
            body = struct.pack("<BIBI", rawmysql.COM_STMT_EXECUTE, st, 0, 1)
            cl.send_packet(0, body)
            captures.append((f"wide_binary_{eof_name}", cl.raw_reply()))
            cl.close()
    finally:
        c.stop()
    with open(out_path, "w", encoding="ascii") as f:
        f.write("// Real MariaDB 10.11 replies to counter reads, recorded by tools/capture_read_cache.py (whole\n"
                "// replies, frames included, as hex). Do not edit by hand.\n#pragma once\n\n#include <string_view>\n\n"
                "namespace claimguard::protocol::test::read_cache {\n\n")
        for name, data in captures:
            f.write(f"inline constexpr std::string_view {name} =\n    \"{data.hex()}\";\n")
        f.write("\n}  // namespace claimguard::protocol::test::read_cache\n")


if __name__ == "__main__":
    main()
