"""Usage: python3 device_dns.py SERVER NAME TYPE. Run by WireGuardModeTests (Tests/ProxyEndToEndTests).

Python on the device: one DNS query (RFC 1035, over UDP) for NAME of TYPE (A, AAAA, HTTPS) to SERVER:53; prints
the answer's RCODE and its A records (dotted quads) and the count of other records, as `RCODE a1,a2 OTHER`, or
`error KIND` when no answer came. Written with the standard library only, so it checks the bytes on the wire, not
a resolver's reading of them.
"""
import os, socket, struct, sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

server, name, kind = sys.argv[1], sys.argv[2], sys.argv[3]
qtype = {"A": 1, "AAAA": 28, "HTTPS": 65}[kind]
ident = int.from_bytes(os.urandom(2), "big")
question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack("!HH", qtype, 1)

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
try:
    s.sendto(query, (server, 53))
    answer, _ = s.recvfrom(4096)
except Exception as e:
    print("error", type(e).__name__)
    sys.exit(0)

got_id, flags, qd, an, _, _ = struct.unpack("!HHHHHH", answer[:12])
assert got_id == ident, "answer to another query"
assert flags & 0x8000, "not a response"


def skip_name(data, at):
    while True:
        length = data[at]
        if length == 0:
            return at + 1
        if length & 0xC0 == 0xC0:
            return at + 2
        at += 1 + length


at = 12
for _ in range(qd):
    at = skip_name(answer, at) + 4
addresses, other = [], 0
for _ in range(an):
    at = skip_name(answer, at)
    rtype, _, _, length = struct.unpack("!HHIH", answer[at:at + 10])
    at += 10
    if rtype == 1 and length == 4:
        addresses.append(socket.inet_ntoa(answer[at:at + 4]))
    else:
        other += 1
    at += length
print(flags & 0xF, ",".join(addresses) or "-", other)
