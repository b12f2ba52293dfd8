"""Usage: python3 slow_client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

A client that stalls on purpose: argv PROXY_PORT MODE HOST. Prints one JSON object: what it read until the proxy
closed (`text`), whether the proxy closed (`closed`) and after how many seconds of stalling (`seconds`).
- `head`: one complete request, then half of a second head on the same connection.
- `body`: a POST head announcing 100 bytes, then one byte of them.
- `hello`: CONNECT, then three bytes of a TLS record.
- `handshake`: CONNECT, then a real ClientHello, and nothing of the rest of the handshake.
"""
import json, socket, ssl, sys, time

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

PORT = int(sys.argv[1]); MODE = sys.argv[2]; HOST = sys.argv[3]
if MODE == "handshake":
    # The ClientHello is made before connecting: loading the trust store can take longer than the proxy's 1 s
    # --client-timeout on a busy machine, which would make the test see "no TLS ClientHello" instead.
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=HOST)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    client_hello = outgoing.read()
s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
got = b""

def read_head():
    data = b""
    while b"\r\n\r\n" not in data:
        piece = s.recv(65536)
        if not piece:
            break
        data += piece
    return data

if MODE == "head":
    s.sendall(b"GET http://%s/bytes/10 HTTP/1.1\r\nHost: %s\r\n\r\n" % (HOST.encode(), HOST.encode()))
    first = read_head()
    length = int([l.split(b":")[1] for l in first.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    body = first.split(b"\r\n\r\n", 1)[1]
    while len(body) < length:
        body += s.recv(65536)
    s.sendall(b"GET http://%s/second HTTP/1.1\r\nHo" % HOST.encode())
elif MODE == "body":
    s.sendall(b"POST http://%s/up HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\nx" % (HOST.encode(), HOST.encode()))
elif MODE in ("hello", "handshake"):
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
    read_head()
    if MODE == "hello":
        s.sendall(b"\x16\x03\x01")
    else:
        s.sendall(client_hello)
start = time.time()
closed = False
while time.time() - start < 25:
    try:
        piece = s.recv(65536)
    except ConnectionResetError:
        closed = True
        break
    if not piece:
        closed = True
        break
    got += piece
print(json.dumps({"text": got.decode("latin-1"), "closed": closed, "seconds": time.time() - start}))
