"""Usage: python3 trust_check_client.py PROXY_PORT TRUSTED_CA OTHER_CA. Run by DeviceTests (Tests/ProxyEndToEndTests).

Loads https://atsproxy.invalid/trust-check through the proxy with http.client, once trusting TRUSTED_CA and once
OTHER_CA; prints "STATUS trusted" or "refused" for each, separated by " / ".
"""
import http.client, ssl, sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

def load(context):
    c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=context, timeout=10)
    c.set_tunnel("atsproxy.invalid", 443)
    try:
        c.request("GET", "/trust-check")
        r = c.getresponse()
        return "%d %s" % (r.status, "trusted" if "Trusted" in r.read().decode() else "?")
    except ssl.SSLCertVerificationError:
        return "refused"
print(load(ssl.create_default_context(cafile=sys.argv[2])), "/", load(ssl.create_default_context(cafile=sys.argv[3])))
