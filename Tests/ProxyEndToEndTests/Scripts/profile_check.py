"""Usage: python3 profile_check.py PROFILE CA_DER. Run by DeviceTests (Tests/ProxyEndToEndTests).

Reads the set-up site's .mobileconfig with Python's plistlib: prints "ok" when it is a Configuration profile with
exactly one com.apple.security.root payload holding the CA's DER, else "mismatch".
"""
import plistlib, sys

if __name__ == "__main__" and (len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

p = plistlib.load(open(sys.argv[1], "rb"))
roots = [c for c in p["PayloadContent"] if c["PayloadType"] == "com.apple.security.root"]
der = open(sys.argv[2], "rb").read()
print("ok" if p["PayloadType"] == "Configuration" and len(roots) == 1 and roots[0]["PayloadContent"] == der
      else "mismatch")
