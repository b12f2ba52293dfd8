"""Usage: python3 foreign_greetings.py PROXY_PORT. Run by DeviceTests (Tests/ProxyEndToEndTests).

Greets the proxy's port as other kinds of proxy would: a SOCKS5 and a SOCKS4 greeting (prints what came back, in
hex, or "timed-out") and a TLS ClientHello sent straight to it (prints "closed", "timed-out" or
"handshake-completed"), on one line.
"""
import socket, ssl, sys

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

port = int(sys.argv[1])
def exchange(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(data)
    got = b""
    try:
        while True:
            chunk = s.recv(64)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        return "timed-out"
    return got.hex()
socks5 = exchange(b"\x05\x01\x00")
socks4 = exchange(b"\x04\x01\x00\x50\x7f\x00\x00\x01qa\x00")
try:
    ctx = ssl.create_default_context()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        ctx.wrap_socket(raw, server_hostname="proxy.test")
    tls = "handshake-completed"
except socket.timeout:
    tls = "timed-out"
except (ssl.SSLError, ConnectionError, OSError) as e:
    tls = "closed"
print(socks5, socks4, tls)
