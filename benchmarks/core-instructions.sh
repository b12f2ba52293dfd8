#!/bin/bash
# Instructions the proxy's session executes per keep-alive request, counted by callgrind: a figure that does not move
# with the host's load, for telling small changes to the protocol core apart (benchmarks/proxybench.py measures time
# and CPU on the real sockets, and on a shared 2-core machine those drift by a third within minutes).
#
# It runs proxycore-bench (in memory: client, origin and a ProxySession exchanging 1 KiB keep-alive requests over
# intercepted TLS) twice under callgrind, counting only inside the session's entry points (`handleReceived`, which the
# server calls with the bytes of each socket read, and `handle`), with 5,000 and 10,000 requests;
# the difference over 5,000 leaves out the connection's setup. With BODY_BYTES the responses have bodies of that size
# (the download path; 200 and 400 requests). Each response then reaches the session as one read, head included.
# The count covers the session, the HTTP/1 relay and parser, and OpenSSL's record work, but not the event loop or the
# kernel.
#
# Usage: benchmarks/core-instructions.sh [BUILD_DIR [BODY_BYTES [CAPTURE]]]
#   (default .build/release, 1024 and 0; needs valgrind: apt-get install valgrind). CAPTURE 1 or 2 sets the session
#   up as `run --capture` (bodies kept): 1 with each exchange's own trace records made (--diagnostics 1), 2 without.)
set -euo pipefail
build=${1:-.build/release}
body=${2:-1024}
capture=${3:-0}
# Fewer requests for large bodies: each is a megabyte-scale run under valgrind.
few=$(( body > 65536 ? 200 : 5000 ))
bench="$build/proxycore-bench"
[ -x "$bench" ] || { echo "no $bench: run swift build -c release first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install -y valgrind)" >&2; exit 1; }
# The capture encoder, which the loop thread runs per entry under `--capture` (outside ProxySession's entry points).
encode='$s15proxycore_bench15CaptureEncodingC6encodeyy10ProxyTrace0F3LogOF'
# Its mangled name follows ProxyLog's module: when it no longer matches, the count silently leaves the encoder out.
if [ "$capture" != 0 ] && command -v nm >/dev/null && ! nm "$bench" | grep -F "$encode" >/dev/null; then
    echo "$bench has no $encode: update the encoder's mangled name" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" \
        '--toggle-collect=$s9ProxyCore0A7SessionC6handleySayAA0A7CommandOGAA0A5EventOF' \
        '--toggle-collect=$s9ProxyCore0A7SessionC14handleReceived_4fromSayAA0A7CommandOGSW_AA0A4PeerOtF' \
        "--toggle-collect=$encode" \
        "$bench" --requests "$1" --rounds 1 --connections 1 --body "$body" --capture "$capture" >/dev/null 2>"$work/log.$1"
    sed -n 's/.*I *refs: *//p' "$work/log.$1" | tr -d ','
}
small=$(count "$few")
large=$(count $(( 2 * few )))
if [ -z "$small" ] || [ -z "$large" ]; then
    echo "callgrind printed no totals; see valgrind's output:" >&2
    cat "$work/log.$(( 2 * few ))" >&2
    exit 1
fi
# Nothing counted means the toggles' symbols no longer exist (an entry point's signature changed).
[ "$large" -gt "$small" ] || { echo "nothing was counted inside ProxySession: update the mangled names" >&2; exit 1; }
echo "ProxySession: $(( (large - small) / few )) instructions per keep-alive request with a $body-byte body" \
    "(callgrind, $large - $small over $few)"
