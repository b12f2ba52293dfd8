"""Usage: python3 h2_library_client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

An HTTP/2 client on the python3-h2 library (Debian's python3-h2) behind a CONNECT tunnel, offering exactly the ALPN
list it is given, so the tests can be the h2-only client (gRPC-like) that curl cannot be.
argv: PROXY_PORT PROXY_CA HOST ALPN(comma list) MODE ARGS…; prints one JSON object.
MODE get PATH…: every GET on its own stream at once; reports status, body SHA-256, length and headers per path.
MODE post PATH SIZE: one POST of SIZE random bytes without content-length (DATA frames only); reports the answer.
`$H2_EXTRA_HEADERS`, a JSON list of [name, value] pairs, adds fields to every request.
"""
import hashlib, json, os, socket, ssl, sys
import h2.config, h2.connection, h2.events

if __name__ == "__main__" and (len(sys.argv) < 6 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

PORT, CA, HOST, ALPN, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(","), sys.argv[5]
ARGS = sys.argv[6:]
EXTRA = [tuple(pair) for pair in json.loads(os.environ.get("H2_EXTRA_HEADERS", "[]"))]

s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
head = b""
while b"\r\n\r\n" not in head:
    piece = s.recv(1)
    if not piece: sys.exit("proxy closed during CONNECT")
    head += piece
ctx = ssl.create_default_context(cafile=CA)
ctx.set_alpn_protocols(ALPN)
t = ctx.wrap_socket(s, server_hostname=HOST)
alpn = t.selected_alpn_protocol()
if alpn != "h2":
    print(json.dumps({"alpn": alpn})); sys.exit(0)

conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
# Room for every stream's body at once: the test measures the relay, not this client's window policy.
conn.increment_flow_control_window(64 << 20)
t.sendall(conn.data_to_send())

streams = {}
def request(method, path, body=None):
    sid = conn.get_next_available_stream_id()
    headers = [(":method", method), (":scheme", "https"), (":authority", HOST), (":path", path),
               ("cookie", "a=1"), ("cookie", "b=2")] + EXTRA
    conn.send_headers(sid, headers, end_stream=body is None)
    streams[sid] = {"path": path, "status": None, "headers": {}, "body": bytearray(), "done": False, "reset": None}
    return sid

pending_upload = []
if MODE == "get":
    for path in ARGS: request("GET", path)
elif MODE == "post":
    upload = os.urandom(int(ARGS[1]))
    sid = request("POST", ARGS[0], body=upload)
    pending_upload = [sid, upload, 0]
t.sendall(conn.data_to_send())

def push_upload():
    if not pending_upload: return
    sid, data, offset = pending_upload
    while offset < len(data):
        window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        if window <= 0: break
        conn.send_data(sid, data[offset:offset + window])
        offset += window
    pending_upload[2] = offset
    if offset >= len(data) and not streams[sid].get("sent"):
        conn.end_stream(sid); streams[sid]["sent"] = True

push_upload(); t.sendall(conn.data_to_send())
while not all(v["done"] for v in streams.values()):
    received = t.recv(65536)
    if not received: break
    for event in conn.receive_data(received):
        if isinstance(event, h2.events.ResponseReceived):
            h = dict(event.headers)
            if not h.get(":status", "").startswith("1"):
                streams[event.stream_id]["status"] = int(h[":status"])
                streams[event.stream_id]["headers"] = {k: v for k, v in h.items() if not k.startswith(":")}
        elif isinstance(event, h2.events.DataReceived):
            streams[event.stream_id]["body"] += event.data
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            streams[event.stream_id]["done"] = True
        elif isinstance(event, h2.events.StreamReset):
            streams[event.stream_id]["done"] = True; streams[event.stream_id]["reset"] = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            for v in streams.values(): v["done"] = True
    push_upload()
    t.sendall(conn.data_to_send())

out = []
for sid, v in sorted(streams.items()):
    out.append({"path": v["path"], "status": v["status"], "reset": v["reset"], "length": len(v["body"]),
                "sha256": hashlib.sha256(v["body"]).hexdigest(), "headers": v["headers"],
                "text": bytes(v["body"][:400]).decode("utf-8", "replace")})
result = {"alpn": alpn, "streams": out}
if MODE == "post":
    result["sent_sha256"] = hashlib.sha256(upload).hexdigest()
print(json.dumps(result))
