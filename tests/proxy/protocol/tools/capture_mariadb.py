#!/usr/bin/env python3
# Records real MariaDB server replies (and the raw client packets that caused them) for the
# protocol tests; writes tests/proxy/protocol/captures_mariadb.hpp. Dev aid, not run by ctest.
#
# Setup: a scratch server, e.g.
#   mariadb-install-db --no-defaults --datadir=D --auth-root-authentication-method=normal
#   mariadbd --no-defaults --datadir=D --port=P --bind-address=127.0.0.1 --socket=D/sock \
#            --local-infile=1
# then run SETUP_SQL as root over the socket (with the mariadb CLI, wrap the CREATE
# PROCEDURE in DELIMITER //). The counts the tests expect follow from SETUP_SQL.
# Usage: capture_mariadb.py PORT OUT.hpp
import hashlib
import socket
import struct
import sys

SETUP_SQL = """
DROP USER IF EXISTS ''@'localhost';
CREATE USER 'cg'@'%' IDENTIFIED BY 'pw'; GRANT ALL ON *.* TO 'cg'@'%';
CREATE DATABASE cg; USE cg;
CREATE TABLE t3 (a INT PRIMARY KEY, b VARCHAR(20), c DOUBLE);
INSERT INTO t3 VALUES (1,'one',1.5),(2,NULL,2.5),(3,'three',NULL);
CREATE TABLE li (a INT, b VARCHAR(10));
CREATE TABLE types (id INT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT,
  bu BIGINT UNSIGNED, bs BIGINT, f FLOAT, d DOUBLE, de DECIMAL(10,3), dt DATE, dtm DATETIME(6),
  ts TIMESTAMP NULL, tm TIME(6), y YEAR, vc VARCHAR(30), bl BLOB, bt BIT(10), en ENUM('x','y'));
INSERT INTO types VALUES (1,-5,-300,-70000,-2000000000,18446744073709551615,-9000000000000000000,
  1.5,-2.25,'-123.456','2024-02-29','2024-02-29 13:14:15.123456','2001-02-03 04:05:06',
  '-838:59:58.999999',2024,'héllo','\\0\\1\\2',b'1010101010','y');
INSERT INTO types (id) VALUES (2);
INSERT INTO types (id, dt, dtm, tm) VALUES (3,'0000-00-00','2020-01-01 00:00:00','00:00:00');
CREATE TABLE ext (j JSON, ip INET6, u UUID);
INSERT INTO ext VALUES ('{"a":1}', '::1', '123e4567-e89b-12d3-a456-426655440000');
CREATE PROCEDURE p() BEGIN SELECT a FROM t3 WHERE a < 3; END
"""

CAP = dict(long_password=1, long_flag=4, connect_with_db=8, local_files=0x80, protocol_41=0x200,
           transactions=0x2000, secure=0x8000, multi_stmt=1 << 16, multi_res=1 << 17,
           ps_multi=1 << 18, plugin_auth=1 << 19, attrs=1 << 20, lenenc_auth=1 << 21,
           session_track=1 << 23, deprecate_eof=1 << 24)
BASE = ['long_flag', 'protocol_41', 'transactions', 'secure', 'multi_stmt', 'multi_res',
        'ps_multi', 'plugin_auth', 'lenenc_auth', 'session_track', 'local_files']
EXT_METADATA = 1 << 3


def caps(*extra):
    return sum(CAP[k] for k in BASE + list(extra))


def lenenc(n):
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b'\xfc' + struct.pack('<H', n)
    if n < 1 << 24:
        return b'\xfd' + struct.pack('<I', n)[:3]
    return b'\xfe' + struct.pack('<Q', n)


def native_scramble(password, salt):
    h1 = hashlib.sha1(password).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(salt + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


class conn:
    def __init__(self, port, log):
        self.s = socket.create_connection(('127.0.0.1', port))
        self.buf = b''
        self.log = log

    def frames(self, idle=0.5):
        self.s.settimeout(idle)
        data = self.buf
        while True:
            try:
                d = self.s.recv(1 << 16)
                if not d:
                    break
                data += d
            except socket.timeout:
                break
        out, pos = [], 0
        while len(data) - pos >= 4:
            n = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            if len(data) - pos - 4 < n:
                break
            out.append(data[pos:pos + 4 + n])
            pos += 4 + n
        self.buf = data[pos:]
        for f in out:
            self.log.append(('s', f))
        return out

    def send(self, seq, payload):
        f = struct.pack('<I', len(payload))[:3] + bytes([seq]) + payload
        self.log.append(('c', f))
        self.s.sendall(f)


def handshake_response(c, ext, user, auth, plugin, db=None, attrs=None):
    p = struct.pack('<IIB', c, 1 << 24, 45) + b'\0' * 19 + struct.pack('<I', ext)
    p += user + b'\0'
    p += lenenc(len(auth)) + auth if c & CAP['lenenc_auth'] else bytes([len(auth)]) + auth
    if c & CAP['connect_with_db']:
        p += db + b'\0'
    p += plugin + b'\0'
    if c & CAP['attrs']:
        kv = b''.join(lenenc(len(k)) + k + lenenc(len(v)) + v for k, v in attrs)
        p += lenenc(len(kv)) + kv
    return p


def login(port, c, ext=0, db=None, attrs=None, plugin=b'mysql_native_password'):
    log = []
    k = conn(port, log)
    g = k.frames()[0][4:]
    pos = 1 + g[1:].index(0) + 1 + 4
    salt = g[pos:pos + 8]
    pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
    salt += g[pos:pos + 12]
    auth = native_scramble(b'pw', salt) if plugin == b'mysql_native_password' else b'\x01' * 32
    k.send(1, handshake_response(c, ext, b'cg', auth, plugin, db, attrs))
    reply = k.frames()
    if reply[-1][4] == 0xFE:  # AuthSwitchRequest
        body = reply[-1][5:]
        salt2 = body[body.index(0) + 1:].rstrip(b'\0')
        k.send(reply[-1][3] + 1, native_scramble(b'pw', salt2))
        k.frames()
    return k, log


def command(k, payload, seq=0):
    k.send(seq, payload)
    return k.frames()


def run(port):
    caps_eof, caps_deof = caps(), caps('deprecate_eof')
    out = {}
    k, log = login(port, caps_eof | CAP['connect_with_db'] | CAP['attrs'], db=b'cg',
                   attrs=[(b'_client_name', b'capture')])
    out['greeting_and_login_with_db_and_attrs'] = log
    for name, c in (('eof', caps_eof), ('deof', caps_deof)):
        k, _ = login(port, c | CAP['connect_with_db'], db=b'cg')
        for cname, sql in (
                ('query_select_1', b'SELECT 1'),
                ('query_do', b'DO 1'),
                ('query_update_info', b'UPDATE t3 SET c = c'),
                ('query_two_result_sets', b"SELECT 1; SELECT 'a' AS x, NULL AS y"),
                ('query_ok_then_rows', b'DO 1; SELECT a FROM t3 WHERE a = 1'),
                ('query_err', b'SELECT * FROM nosuch'),
                ('query_err_mid_rows',
                 b'SELECT IF(seq < 3, seq, (SELECT seq FROM seq_1_to_2)) FROM seq_1_to_5'),
                ('query_types_text', b'SELECT * FROM types ORDER BY id'),
                ('query_call', b'CALL p()')):
            k.log.clear()
            command(k, b'\x03' + sql)
            out[f'{cname}_{name}'] = list(k.log)
        k.log.clear()
        k.send(0, b'\x03LOAD DATA LOCAL INFILE \'rows.tsv\' INTO TABLE li')
        k.frames()
        k.send(2, b'1\tx\n2\ty\n')
        k.send(3, b'')
        k.frames()
        out[f'local_infile_{name}'] = list(k.log)
        for cname, payload in (('init_db', b'\x02cg'), ('ping', b'\x0e'),
                               ('statistics', b'\x09'), ('set_option', b'\x1b\x00\x00'),
                               ('field_list', b'\x04t3\x00'), ('reset_connection', b'\x1f'),
                               ('use_db', b'\x03USE mysql')):
            k.log.clear()
            command(k, payload)
            out[f'{cname}_{name}'] = list(k.log)
        command(k, b'\x02cg')
        # prepared statements
        k.log.clear()
        r = command(k, b'\x16SELECT a, b, c FROM t3 WHERE a > ? AND b <> ?')
        out[f'prepare_2_params_3_columns_{name}'] = list(k.log)
        sid = struct.unpack('<I', r[0][5:9])[0]
        params = struct.pack('<B', 0) + b'\x01' + bytes([3, 0, 253, 0]) + struct.pack('<i', 0) + \
            lenenc(1) + b'x'
        for cname, flags in (('execute', 0), ('execute_cursor', 1)):
            k.log.clear()
            command(k, b'\x17' + struct.pack('<IBI', sid, flags, 1) + params)
            out[f'{cname}_{name}'] = list(k.log)
        for cname in ('fetch', 'fetch_last'):
            k.log.clear()
            command(k, b'\x1c' + struct.pack('<II', sid, 2))
            out[f'{cname}_{name}'] = list(k.log)
        k.log.clear()
        command(k, b'\x1a' + struct.pack('<I', sid))
        out[f'stmt_reset_{name}'] = list(k.log)
        k.log.clear()
        command(k, b'\x1c' + struct.pack('<II', sid, 1))
        out[f'fetch_no_cursor_{name}'] = list(k.log)
        k.log.clear()
        k.send(0, b'\x19' + struct.pack('<I', sid))
        out[f'stmt_close_{name}'] = list(k.log)
        k.log.clear()
        r = command(k, b'\x16SELECT * FROM types ORDER BY id')
        sid = struct.unpack('<I', r[0][5:9])[0]
        k.log.clear()
        command(k, b'\x17' + struct.pack('<IBI', sid, 0, 1))
        out[f'execute_types_{name}'] = list(k.log)
        k.log.clear()
        r = command(k, b'\x16CALL p()')
        out[f'prepare_call_{name}'] = list(k.log)
        sid = struct.unpack('<I', r[0][5:9])[0]
        k.log.clear()
        command(k, b'\x17' + struct.pack('<IBI', sid, 0, 1))
        out[f'execute_call_{name}'] = list(k.log)
        k.log.clear()
        command(k, b'\x16DO 1')
        out[f'prepare_no_params_no_columns_{name}'] = list(k.log)
        k.log.clear()
        command(k, b'\x16SELECT nosuch')
        out[f'prepare_err_{name}'] = list(k.log)
        k.log.clear()
        command(k, b'\x17' + struct.pack('<IBI', 99999, 0, 1))
        out[f'execute_unknown_stmt_{name}'] = list(k.log)
        # change user with an auth switch (the client proposes a plugin the account lacks)
        k.log.clear()
        r = command(k, b'\x11cg\x00' + bytes([20]) + b'\x01' * 20 + b'cg\x00' + struct.pack('<H', 45)
                    + b'caching_sha2_password\x00')
        body = r[-1][5:]
        salt2 = body[body.index(0) + 1:].rstrip(b'\0')
        k.send(r[-1][3] + 1, native_scramble(b'pw', salt2))
        k.frames()
        out[f'change_user_auth_switch_{name}'] = list(k.log)
    k, _ = login(port, caps_deof | CAP['connect_with_db'], ext=EXT_METADATA, db=b'cg')
    k.log.clear()
    command(k, b'\x03SELECT j, ip, u FROM ext')
    out['query_extended_metadata_deof'] = list(k.log)
    k, log = login(port, caps_eof, plugin=b'caching_sha2_password')
    out['login_auth_switch'] = log
    return out


def write_header(out, path, version):
    lines = ['// Real MariaDB ' + version + ' exchanges, recorded by tools/capture_mariadb.py;',
             '// c = client to server frame, s = server to client frame, as hex. Do not edit by hand.',
             '#pragma once', '', '#include <string_view>', '',
             'namespace claimguard::protocol::test::mariadb {', '',
             'struct captured_frame {', '    char from;  // \'c\' or \'s\'',
             '    std::string_view hex;', '};', '']
    for name, frames in out.items():
        lines.append(f'inline constexpr captured_frame {name}[] = {{')
        for d, f in frames:
            lines.append(f'    {{\'{d}\', "{f.hex()}"}},')
        lines.append('};')
    lines += ['', '}  // namespace claimguard::protocol::test::mariadb', '']
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines))


if __name__ == '__main__':
    port = int(sys.argv[1])
    result = run(port)
    write_header(result, sys.argv[2], '10.11')
