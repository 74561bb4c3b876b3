# Dev aid for the protocol tests: a TCP relay that records MySQL frames per direction.
# TCP relay that records frames per direction: recorder.py LISTEN_PORT SERVER_PORT OUT.json
import socket, threading, sys, json
lp, sp, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', lp)); ls.listen(8)
log = []; lock = threading.Lock(); conn_no = [0]
def pump(src, dst, d, cid):
    buf = b''
    while True:
        try: data = src.recv(1 << 16)
        except OSError: data = b''
        if not data:
            try: dst.shutdown(socket.SHUT_WR)
            except OSError: pass
            return
        dst.sendall(data); buf += data
        while len(buf) >= 4:
            n = buf[0] | buf[1] << 8 | buf[2] << 16
            if len(buf) < 4 + n: break
            with lock:
                log.append([cid, d, buf[:4 + n].hex()])
                json.dump(log, open(out, 'w'))
            buf = buf[4 + n:]
while True:
    c, _ = ls.accept(); conn_no[0] += 1
    s = socket.create_connection(('127.0.0.1', sp))
    threading.Thread(target=pump, args=(c, s, 'c', conn_no[0]), daemon=True).start()
    threading.Thread(target=pump, args=(s, c, 's', conn_no[0]), daemon=True).start()
