"""Usage: python3 keepalive_origin.py. Run by the team store's tests (Tests/TeamStoreTests).

A keep-alive HTTP/1.1 origin on 127.0.0.1, a free port printed as "PORT n": every GET is answered 200 with a small
body naming the path.
"""
import sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

if __name__ == "__main__" and (sys.argv[1:2] in (["-h"], ["--help"])):
    sys.exit(__doc__)

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("hello " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print("PORT", s.server_address[1], flush=True)
s.serve_forever()
