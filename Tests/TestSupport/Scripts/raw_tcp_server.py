"""Usage: python3 raw_tcp_server.py MODE HOST. Run by RawTCPServer (Tests/TestSupport).

A TCP server on HOST (127.0.0.1 or ::1), a free port, printed as "PORT n" once it listens; it exits at EOF on stdin.
MODE silent: keeps every connection open, reads and never answers; close: closes each at once; http: answers any
bytes with an HTTP/1.0 400; trickle: answers with the start of a TLS record whose body comes one byte at a time and
never completes.
"""
import select, socket, sys

if __name__ == "__main__" and (len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

mode, host = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
s.bind((host, 0))
s.listen(64)
print("PORT", s.getsockname()[1], flush=True)
held, trickling = [], []
while True:
    readable, _, _ = select.select([s, sys.stdin] + held, [], [], 0.25 if trickling else 1.0)
    for c in readable:
        if c is sys.stdin:
            if not sys.stdin.buffer.read1(1):
                sys.exit(0)
        elif c is s:
            conn, _ = s.accept()
            if mode == "close":
                conn.close()
            else:
                held.append(conn)
        else:
            try:
                data = c.recv(65536)
            except OSError:
                data = b""
            if data and mode == "http":
                c.sendall(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                data = b""
            elif data and mode == "trickle" and c not in trickling:
                c.sendall(b"\x16\x03\x03\x40\x00")
                trickling.append(c)
            if not data:
                held.remove(c)
                if c in trickling:
                    trickling.remove(c)
                c.close()
    for c in trickling:
        try:
            c.send(b"\x00")
        except OSError:
            pass  # the peer went away; its next read sees EOF and drops it
