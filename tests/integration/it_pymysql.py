#!/usr/bin/env python3
"""PyMySQL (pure python, text protocol, no CLIENT_DEPRECATE_EOF) through claimguard, compared with direct."""

import hashlib
import importlib.util
import os
import tempfile
import unittest

import pymysql
import pymysql.cursors
from pymysql.constants import CLIENT

import itlib

BIG_BLOB_BYTES = 20 * 1024 * 1024
STREAMED_ROWS = 20000
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120


def connect(target, user="native", **kwargs):
    e = itlib.env()
    name, password = itlib.credentials(user)
    options = dict(host=e["HOST"], port=itlib.port(target), user=name, password=password, database=e["DATABASE"],
                   connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S, write_timeout=READ_TIMEOUT_S,
                   charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS)
    options.update(kwargs)
    return pymysql.connect(**options)


def observe(conn, cur, sql, args=None, many=False):
    """Everything PyMySQL shows for one statement: results, description, counts, status, or the error."""
    out = [f"sql {sql[:200]!r}"]
    try:
        if many:
            cur.executemany(sql, args)
        else:
            cur.execute(sql, args)
    except pymysql.MySQLError as err:
        out.append(f"error {type(err).__name__} {err.args!r}")
        return out
    while True:
        out.append(f"description {cur.description!r}")
        out.append(f"rowcount {cur.rowcount} lastrowid {cur.lastrowid}")
        result = getattr(cur, "_result", None)
        if result is not None:
            out.append(f"ok warnings={result.warning_count} message={result.message!r} "
                       f"status=0x{conn.server_status:04x} insert_id={result.insert_id}")
        try:
            if cur.description is not None:
                for row in cur.fetchall():
                    out.append(repr(row))
            more = cur.nextset()
        except pymysql.MySQLError as err:
            out.append(f"error mid-result {type(err).__name__} {err.args!r}")
            return out
        if not more:
            return out


class PyMySQLTest(itlib.TransparencyCase):

    def no_errors(self, lines):
        errors = [line for line in lines if line.startswith("error")]
        self.assertFalse(errors, errors)

    def test_text_protocol_types_and_metadata(self):
        def scenario(target):
            with connect(target) as conn, conn.cursor() as cur:
                out = observe(conn, cur, """CREATE OR REPLACE TABLE py_types (id INT PRIMARY KEY AUTO_INCREMENT,
                    ti TINYINT, bi BIGINT UNSIGNED, f FLOAT, d DOUBLE, dc DECIMAL(20,4), dt DATE, tm TIME(6),
                    dtm DATETIME(6), ts TIMESTAMP NULL, y YEAR, s VARCHAR(50), bin VARBINARY(10), bl BLOB,
                    e ENUM('a','b'), st SET('x','y'), j JSON, bt BIT(5))""")
                out += observe(conn, cur, "INSERT INTO py_types (ti,bi,f,d,dc,dt,tm,dtm,ts,y,s,bin,bl,e,st,j,bt) "
                               "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,b'10101')",
                               (-1, 2**64 - 1, 1.5, 1e-200, "12345.6789", "2024-02-29", "-12:34:56.789",
                                "1999-12-31 23:59:59.999999", "2038-01-19 03:14:07", 2000, "ünï 'q' \\ \"d\"",
                                b"\x00\xff'\\", bytes(range(256)), "b", "x,y", '{"k": [1, null]}'))
                out += observe(conn, cur, "INSERT INTO py_types () VALUES ()")
                out += observe(conn, cur, "SELECT * FROM py_types ORDER BY id")
                out += observe(conn, cur, "SELECT NULL, 1, 1.0, 'x', 1e3, CAST(1 AS UNSIGNED) + 2")
                out += observe(conn, cur, "SHOW WARNINGS")
                out += observe(conn, cur, "SELECT 1/0; SHOW WARNINGS; SELECT 'third'")
                return out
        self.assert_transparent(scenario, self.no_errors)

    def test_executemany_and_errors(self):
        def scenario(target):
            with connect(target) as conn, conn.cursor() as cur:
                out = observe(conn, cur, "CREATE OR REPLACE TABLE py_many (id INT PRIMARY KEY, v VARCHAR(20))")
                rows = [(k, f"value-{k}" if k % 5 else None) for k in range(1, 1001)]
                out += observe(conn, cur, "INSERT INTO py_many (id, v) VALUES (%s, %s)", rows, many=True)
                out += observe(conn, cur, "INSERT INTO py_many (id, v) VALUES (%s, %s)", [(2000, "a"), (1, "dup")],
                               many=True)
                out += observe(conn, cur, "UPDATE py_many SET v = %s WHERE id = %s", [("x", 1), ("y", 9999)], many=True)
                out += observe(conn, cur, "SELECT COUNT(*), COUNT(v), MAX(id) FROM py_many")
                out += observe(conn, cur, "SELEC 1")
                out += observe(conn, cur, "SELECT * FROM py_no_such_table")
                out += observe(conn, cur, "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'py failure'")
                out += observe(conn, cur, "SELECT 1; SELECT * FROM py_no_such_table; SELECT 3")
                out += observe(conn, cur, "SELECT 'in sync'")
                return out
        self.assert_transparent(scenario, lambda lines: self.assertIn("rowcount 1000 lastrowid 0", lines))

    def test_blob_20mib(self):
        blob = hashlib.shake_256(b"claimguard").digest(BIG_BLOB_BYTES)

        def scenario(target):
            with connect(target, max_allowed_packet=64 * 1024 * 1024) as conn, conn.cursor() as cur:
                out = observe(conn, cur, "CREATE OR REPLACE TABLE py_big (id INT PRIMARY KEY, data LONGBLOB)")
                out += observe(conn, cur, "INSERT INTO py_big VALUES (1, %s)", (blob,))
                cur.execute("SELECT data, LENGTH(data), MD5(data) FROM py_big WHERE id = 1")
                data, length, md5 = cur.fetchone()
                self.assertEqual(data, blob, f"20 MiB blob via {target}")
                out.append(f"read back {len(data)} bytes sha256={hashlib.sha256(data).hexdigest()} {length} {md5}")
                out += observe(conn, cur, "SELECT 'in sync'")
                return out
        self.assert_transparent(scenario, self.no_errors)

    def test_load_data_local_infile(self):
        with tempfile.TemporaryDirectory(dir=itlib.state_dir()) as d:
            path = os.path.join(d, "rows.csv")
            with open(path, "w", encoding="utf-8") as f:
                for k in range(30000):
                    f.write(f"{k},name-{k},{k % 13}\n")
            sql = (f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE py_infile "
                   "FIELDS TERMINATED BY ',' (id, name, v)")

            def scenario(target):
                with connect(target, local_infile=True) as conn, conn.cursor() as cur:
                    out = observe(conn, cur, "CREATE OR REPLACE TABLE py_infile (id INT PRIMARY KEY, name VARCHAR(20), "
                                  "v TINYINT)")
                    out += observe(conn, cur, sql)
                    out += observe(conn, cur, "SELECT COUNT(*), SUM(v), MIN(name) FROM py_infile")
                    out += observe(conn, cur, sql)
                    out += observe(conn, cur, "SELECT 'in sync'")
                with connect(target) as conn, conn.cursor() as cur:
                    out += observe(conn, cur, sql)
                return out
            self.assert_transparent(scenario, lambda lines: self.assertIn("rowcount 30000 lastrowid 0", lines))

    def test_autocommit_and_transactions(self):
        def scenario(target):
            out = []
            with connect(target, autocommit=False) as conn, conn.cursor() as cur:
                out += observe(conn, cur, "CREATE OR REPLACE TABLE py_tx (id INT PRIMARY KEY) ENGINE=InnoDB")
                out.append(f"autocommit {conn.get_autocommit()} status 0x{conn.server_status:04x}")
                out += observe(conn, cur, "INSERT INTO py_tx VALUES (1)")
                conn.rollback()
                out.append(f"after rollback status 0x{conn.server_status:04x}")
                out += observe(conn, cur, "INSERT INTO py_tx VALUES (2)")
                conn.commit()
                conn.autocommit(True)
                out.append(f"autocommit {conn.get_autocommit()} status 0x{conn.server_status:04x}")
                out += observe(conn, cur, "INSERT INTO py_tx VALUES (3)")
                conn.begin()
                out += observe(conn, cur, "INSERT INTO py_tx VALUES (4)")
                out.append(f"in transaction status 0x{conn.server_status:04x}")
                conn.rollback()
                out += observe(conn, cur, "SELECT id FROM py_tx ORDER BY id")
                conn.ping(reconnect=False)
                conn.select_db("information_schema")
                out += observe(conn, cur, "SELECT DATABASE()")
                conn.select_db("cgtest")
            return out
        self.assert_transparent(scenario, lambda lines: self.assertIn("(2,)", lines))

    def test_unbuffered_cursor_and_error_mid_result(self):
        def scenario(target):
            with connect(target, cursorclass=pymysql.cursors.SSCursor) as conn, conn.cursor() as cur:
                out = observe(conn, cur, "CREATE OR REPLACE TABLE py_mid (id INT PRIMARY KEY, k INT);"
                                         "INSERT INTO py_mid SELECT seq, IF(seq = 500, 499, seq) FROM seq_1_to_600")
                cur.execute(f"SELECT seq, REPEAT('r', seq % 100) FROM seq_1_to_{STREAMED_ROWS}")
                count = sum(1 for _ in cur.fetchall_unbuffered())
                out.append(f"streamed {count}")
                out += observe(conn, cur, "SELECT o.id, (SELECT i.id FROM py_mid i WHERE i.k = o.id) "
                                          "FROM py_mid o ORDER BY o.id")
                out += observe(conn, cur, "SELECT 'in sync'")
                return out
        self.assert_transparent(scenario, lambda lines: self.assertIn(f"streamed {STREAMED_ROWS}", lines))

    def test_procedures_with_two_result_sets(self):
        def scenario(target):
            with connect(target) as conn, conn.cursor() as cur:
                out = observe(conn, cur, "CREATE OR REPLACE PROCEDURE py_two(IN n INT) BEGIN "
                                         "SELECT n AS first_col; SELECT seq FROM seq_1_to_3; END")
                cur.callproc("py_two", (5,))
                while True:
                    out.append(repr(cur.fetchall()))
                    if not cur.nextset():
                        break
                out += observe(conn, cur, "CALL py_two(6)")
                out += observe(conn, cur, "SELECT 'in sync'")
                return out
        self.assert_transparent(scenario, self.no_errors)

    def test_ed25519_auth_switch_reaches_the_client(self):
        # Without PyNaCl, PyMySQL refuses the server's switch to client_ed25519 with its own message;
        # the switch request must reach it the same way through the proxy.
        def scenario(target):
            try:
                with connect(target, user="ed25519") as conn, conn.cursor() as cur:
                    return observe(conn, cur, "SELECT CURRENT_USER()")
            except (RuntimeError, pymysql.MySQLError) as err:
                return [f"{type(err).__name__} {err}"]
        self.assert_transparent(scenario)

    @unittest.skipUnless(importlib.util.find_spec("nacl"),
                         "PyMySQL logs in with ed25519 only with PyNaCl (python3-nacl), which is not installed; "
                         "the server's auth switch to client_ed25519 is still checked by "
                         "test_ed25519_auth_switch_reaches_the_client, the login itself by it_capi and it_cli")
    def test_ed25519_login(self):
        def scenario(target):
            with connect(target, user="ed25519") as conn, conn.cursor() as cur:
                return observe(conn, cur, "SELECT CURRENT_USER(), DATABASE()")
        self.assert_transparent(scenario, self.no_errors)


if __name__ == "__main__":
    itlib.main()
