# Pss growth per idle HTTP/2 connection: N TLS connections with ALPN h2 that sent the preface
# and SETTINGS (and ACKed the server's), held open; Pss summed over the server's process tree.
#
#   python3 bench/idle-h2.py BINARY PORT N CONF
#
# CONF: a firstbyte config with `daemon off;`, one `listen 127.0.0.1:PORT ssl; http2 on;`
# server, `keepalive_timeout` and `client_header_timeout` longer than the run. Loopback only;
# the server is started and stopped by the script.
import os, resource, socket, ssl, subprocess, sys, time
binary, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 100, n + 100))
conf = sys.argv[4]
srv = subprocess.Popen([binary, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.0)
def tree(pid):
    out = [pid]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                st = open(f"/proc/{p}/stat").read().split(")")[-1].split()
                if int(st[1]) == pid:
                    out += tree(int(p))
            except OSError:
                pass
    return out
def pss():
    total = 0
    for p in tree(srv.pid):
        for l in open(f"/proc/{p}/smaps_rollup"):
            if l.startswith("Pss:"):
                total += int(l.split()[1])
    return total
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
# One connection first: the first one's lazy allocations are not counted.
def open_one():
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    s.settimeout(2)
    got = s.recv(4096)
    assert got[3] == 4, got[:9]
    s.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
    return s
warm = [open_one() for _ in range(10)]
time.sleep(0.5)
before = pss()
conns = [open_one() for _ in range(n)]
time.sleep(1.0)
after = pss()
print(f"{binary}: {n} idle HTTP/2 connections: Pss {before} -> {after} KiB, {(after - before) / n:.2f} KiB each")
for s in conns + warm:
    s.close()
srv.terminate()
srv.wait()
