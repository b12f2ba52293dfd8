"""Usage: python3 device_quic.py ADDRESS COUNT. Run by TransparentModeTests (Tests/ProxyEndToEndTests).

Python on the device: `count` QUIC attempts (a v1 Initial's long header, padded to 1,200 bytes, each with its own
connection ID) to `address`:443; prints, per attempt, the version field of the answer (0: Version Negotiation) and
whether it echoed the attempt's connection ID.
"""
import os, socket, sys

if __name__ == "__main__" and (len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

address, count = sys.argv[1], int(sys.argv[2])
for _ in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.connect((address, 443))
    dcid = os.urandom(8)
    s.send(b"\xc3\x00\x00\x00\x01" + bytes([8]) + dcid + bytes([4]) + b"scid" + bytes(1200))
    try:
        answer = s.recv(2000)
        print(int.from_bytes(answer[1:5], "big"), answer[11:19] == dcid)
    except Exception as e:
        print("error", type(e).__name__)
