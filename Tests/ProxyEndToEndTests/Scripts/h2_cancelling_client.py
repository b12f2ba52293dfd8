"""Usage: python3 h2_cancelling_client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

An HTTP/2 client on python3-h2 behind a CONNECT tunnel that behaves as Go's client does under load: it resets
streams with RST_STREAM CANCEL after their responses ended (the frame is written by hand: h2 refuses to reset a
closed stream). argv: PROXY_PORT PROXY_CA HOST PATH COUNT BATCH; GETs PATH COUNT times, BATCH streams at a time,
resets each after its END_STREAM, and prints one JSON object: {"ok": n, "bad": [..], "goaway": code|null, "closed":
bool, "error": h2's complaint or null, "lengths": the body lengths seen}.
"""
import json, socket, ssl, struct, sys
import h2.config, h2.connection, h2.events, h2.exceptions

if __name__ == "__main__" and (len(sys.argv) < 7 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

PORT, CA, HOST, PATH, COUNT, BATCH = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])

s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
head = b""
while b"\r\n\r\n" not in head:
    piece = s.recv(1)
    if not piece: sys.exit("proxy closed during CONNECT")
    head += piece
ctx = ssl.create_default_context(cafile=CA)
ctx.set_alpn_protocols(["h2"])
t = ctx.wrap_socket(s, server_hostname=HOST)
if t.selected_alpn_protocol() != "h2": sys.exit("no h2: %r" % t.selected_alpn_protocol())

conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
t.sendall(conn.data_to_send())

def cancel(sid):
    return struct.pack(">I", 4)[1:] + bytes([3, 0]) + struct.pack(">I", sid) + struct.pack(">I", 8)

ok, bad, goaway, closed, sent, error = 0, [], None, False, 0, None
lengths, statuses = {}, {}
while sent < COUNT and goaway is None and not closed and error is None:
    open_ids = set()
    for _ in range(min(BATCH, COUNT - sent)):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", HOST), (":path", PATH)],
                          end_stream=True)
        open_ids.add(sid); lengths[sid] = 0; sent += 1
    t.sendall(conn.data_to_send())
    while open_ids and goaway is None:
        received = t.recv(65536)
        if not received:
            closed = True; break
        resets = b""
        try:
            events = conn.receive_data(received)
        except h2.exceptions.ProtocolError as e:
            # h2 raises for frames that follow a GOAWAY in the same read, dropping the GOAWAY's event.
            error = str(e); break
        for event in events:
            if isinstance(event, h2.events.ResponseReceived):
                statuses[event.stream_id] = dict(event.headers).get(":status")
            elif isinstance(event, h2.events.DataReceived):
                lengths[event.stream_id] += len(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                open_ids.discard(event.stream_id)
                if statuses.get(event.stream_id) == "200": ok += 1
                else: bad.append(event.stream_id)
                resets += cancel(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                open_ids.discard(event.stream_id); bad.append(event.stream_id)
            elif isinstance(event, h2.events.ConnectionTerminated):
                goaway = event.error_code
        t.sendall(conn.data_to_send() + resets)
print(json.dumps({"ok": ok, "bad": bad[:20], "goaway": None if goaway is None else int(goaway), "closed": closed,
                  "error": error,
                  "lengths": sorted(set(lengths.values()))}))
