"""Usage: python3 device_https.py HOST ADDRESS CA. Run by TransparentModeTests (Tests/ProxyEndToEndTests).

Python on the device: HTTPS to `host` at `address` over a plain socket, trusting the proxy's CA; prints the status
line or the error.
"""
import socket, ssl, sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

host, address, ca = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
try:
    with socket.create_connection((address, 443), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
            print(tls.recv(100).split(b"\r\n")[0].decode())
except Exception as e:
    print("error", type(e).__name__, e)
