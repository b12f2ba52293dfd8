#!/bin/bash
# Instructions the proxy's session executes per keep-alive request, counted by callgrind: a figure that does not move
# with the host's load, for telling small changes to the protocol core apart (benchmarks/proxybench.py measures time
# and CPU on the real sockets, and on a shared 2-core machine those drift by a third within minutes).
#
# It runs proxycore-bench (in memory: client, origin and a ProxySession exchanging 1 KiB keep-alive requests over
# intercepted TLS) twice under callgrind, counting only inside the session's entry points (`handleReceived`, which the
# server calls with the bytes of each socket read, and `handle`), with 5,000 and 10,000 requests;
# the difference over 5,000 leaves out the connection's setup. The count covers the session, the HTTP/1 relay and
# parser, and OpenSSL's record work, but not the event loop or the kernel.
#
# Usage: benchmarks/core-instructions.sh [BUILD_DIR]   (default .build/release; needs valgrind: apt-get install valgrind)
set -euo pipefail
build=${1:-.build/release}
bench="$build/proxycore-bench"
[ -x "$bench" ] || { echo "no $bench: run swift build -c release first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install -y valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" \
        '--toggle-collect=$s9ProxyCore0A7SessionC6handleySayAA0A7CommandOGAA0A5EventOF' \
        '--toggle-collect=$s9ProxyCore0A7SessionC14handleReceived_4fromSayAA0A7CommandOGSW_AA0A4PeerOtF' \
        "$bench" --requests "$1" --rounds 1 --connections 1 >/dev/null 2>"$work/log.$1"
    sed -n 's/.*I *refs: *//p' "$work/log.$1" | tr -d ','
}
small=$(count 5000)
large=$(count 10000)
[ -n "$small" ] && [ -n "$large" ] || { echo "callgrind printed no totals; see valgrind's output:" >&2; cat "$work/log.10000" >&2; exit 1; }
# Nothing counted means the toggles' symbols no longer exist (an entry point's signature changed).
[ "$large" -gt "$small" ] || { echo "nothing was counted inside ProxySession: update the mangled names" >&2; exit 1; }
echo "ProxySession: $(( (large - small) / 5000 )) instructions per keep-alive request" \
    "(callgrind, $large - $small over 5000)"
