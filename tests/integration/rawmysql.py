"""A minimal MySQL wire client on a raw socket, for sending exactly the bytes a fault test needs."""

import hashlib
import socket
import struct
import time

CLIENT_LONG_PASSWORD = 1
CLIENT_CONNECT_WITH_DB = 8
CLIENT_PROTOCOL_41 = 512
CLIENT_TRANSACTIONS = 8192
CLIENT_SECURE_CONNECTION = 32768
CLIENT_MULTI_RESULTS = 1 << 17
CLIENT_PLUGIN_AUTH = 1 << 19
CLIENT_CONNECT_ATTRS = 1 << 20
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
DEFAULT_CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION
                        | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_WITH_DB)
UTF8MB4_GENERAL_CI = 45
MAX_PACKET = 16 * 1024 * 1024
COM_QUIT = 0x01
COM_QUERY = 0x03
COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17


class ProtocolError(Exception):
    pass


def native_scramble(password, salt):
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(salt + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def frame(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xff]) + payload


class Greeting:
    def __init__(self, payload):
        if not payload or payload[0] != 10:
            raise ProtocolError(f"not a protocol 10 greeting: {payload[:16]!r}")
        end = payload.index(b"\0", 1)
        self.server_version = payload[1:end].decode(errors="replace")
        pos = end + 1
        self.connection_id = struct.unpack_from("<I", payload, pos)[0]
        pos += 4
        salt = payload[pos:pos + 8]
        pos += 9
        caps_low = struct.unpack_from("<H", payload, pos)[0]
        pos += 2
        self.charset = payload[pos]
        pos += 1
        self.status = struct.unpack_from("<H", payload, pos)[0]
        pos += 2
        caps_high = struct.unpack_from("<H", payload, pos)[0]
        pos += 2
        self.capabilities = caps_low | (caps_high << 16)
        salt_len = payload[pos]
        pos += 1 + 10
        rest = max(13, salt_len - 8)
        salt += payload[pos:pos + rest].rstrip(b"\0")
        pos += rest
        self.salt = salt[:20]
        self.plugin = payload[pos:].split(b"\0", 1)[0].decode(errors="replace")


class RawClient:
    """One TCP connection speaking just enough of the protocol; every read has a deadline."""

    def __init__(self, host, port, timeout_s=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.timeout_s = timeout_s
        self.buf = b""

    def close(self, reset=False):
        if reset:
            # SO_LINGER 0: close sends RST, as a crashed or killed client does.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"connection closed after {len(self.buf)} of {n} bytes")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_packet(self, timeout_s=None):
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        head = self._read_exact(4, deadline)
        length = head[0] | (head[1] << 8) | (head[2] << 16)
        return head[3], self._read_exact(length, deadline)

    def send_raw(self, data):
        self.sock.sendall(data)

    def send_packet(self, seq, payload):
        self.sock.sendall(frame(seq, payload))

    def handshake_response(self, greeting, user, password, database=None, capabilities=DEFAULT_CAPABILITIES):
        auth = native_scramble(password, greeting.salt)
        caps = capabilities if database else capabilities & ~CLIENT_CONNECT_WITH_DB
        body = struct.pack("<IIB", caps, MAX_PACKET, UTF8MB4_GENERAL_CI) + b"\0" * 23
        body += user.encode() + b"\0" + bytes([len(auth)]) + auth
        if database:
            body += database.encode() + b"\0"
        body += b"mysql_native_password\0"
        return body

    def login(self, user, password, database=None):
        """Reads the greeting, authenticates with mysql_native_password; returns the greeting."""
        _, payload = self.read_packet()
        greeting = Greeting(payload)
        self.send_packet(1, self.handshake_response(greeting, user, password, database))
        seq, reply = self.read_packet()
        if reply[:1] == b"\xfe":  # auth switch request: plugin name, then its salt
            name, _, salt = reply[1:].partition(b"\0")
            if name != b"mysql_native_password":
                raise ProtocolError(f"server asked for {name!r}")
            self.send_packet(seq + 1, native_scramble(password, salt.rstrip(b"\0")))
            seq, reply = self.read_packet()
        if reply[:1] != b"\x00":
            raise ProtocolError(f"login failed: {describe(reply)}")
        return greeting

    def query(self, sql, timeout_s=None):
        """Sends COM_QUERY, reads packets until the result's end; returns the list of payloads."""
        self.send_packet(0, bytes([COM_QUERY]) + sql.encode())
        return self.read_response(timeout_s)

    def read_response(self, timeout_s=None):
        packets = []
        _, first = self.read_packet(timeout_s)
        packets.append(first)
        if first[:1] in (b"\x00", b"\xff"):
            return packets
        eofs = 0
        while True:
            _, p = self.read_packet(timeout_s)
            packets.append(p)
            if p[:1] == b"\xff":
                return packets
            if p[:1] == b"\xfe" and len(p) < 9:
                eofs += 1
                if eofs == 2:
                    return packets


def describe(payload):
    """Human-readable OK/ERR/EOF/other for a packet payload."""
    if payload[:1] == b"\xff":
        code = struct.unpack_from("<H", payload, 1)[0]
        if payload[3:4] == b"#":
            return f"ERR {code} ({payload[4:9].decode(errors='replace')}) {payload[9:].decode(errors='replace')}"
        return f"ERR {code} {payload[3:].decode(errors='replace')}"
    if payload[:1] == b"\x00":
        return "OK"
    if payload[:1] == b"\xfe" and len(payload) < 9:
        return "EOF"
    return f"packet {payload[:24]!r}"


def is_err_with_sqlstate(payload):
    return payload[:1] == b"\xff" and payload[3:4] == b"#" and len(payload) >= 9


def collect(client, timeout_s, quiet_s=None):
    """(payloads received, whether the peer closed) within timeout_s. With quiet_s, once a packet
    came, a peer silent for quiet_s more has said all it will (it keeps the session open)."""
    deadline = time.monotonic() + timeout_s
    packets = []
    while True:
        try:
            _, p = client.read_packet(max(0.01, deadline - time.monotonic()))
            packets.append(p)
            if quiet_s is not None:
                deadline = min(deadline, time.monotonic() + quiet_s)
        except (EOFError, ConnectionResetError):
            return packets, True
        except socket.timeout:
            return packets, False


def read_until_closed(client, timeout_s):
    """Payloads received until the peer closes; raises TimeoutError if it stays open past timeout_s."""
    packets, closed = collect(client, timeout_s)
    if not closed:
        raise TimeoutError(f"still open after {timeout_s}s; got {[describe(p) for p in packets]}")
    return packets
