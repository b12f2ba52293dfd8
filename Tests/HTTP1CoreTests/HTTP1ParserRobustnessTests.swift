import HTTP1Core
import TestSupport
import Testing

/// Valid requests that the robustness test mutates: fixed and chunked bodies with extensions and trailers,
/// 100-continue, Upgrade, CONNECT, asterisk and absolute forms, a bare-LF head, pipelining.
private let requestSeeds: [[UInt8]] = [
    "GET http://a.test/p?q=1 HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\n\r\n",
    "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: 1\r\n\r\n",
    "PUT /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nraw",
    "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n\u{16}\u{3}\u{1}",
    "OPTIONS * HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET / HTTP/1.1\nHost: x\nX-Tab:\tv\n\n",
    "\r\nGET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
].map { Array($0.utf8) }

/// The shared response seeds and a bare-LF head.
private let responseSeeds: [[UInt8]] = http1ResponseSeeds + [Array("HTTP/1.1 200\nContent-Length: 2\n\nok".utf8)]

/// One mutated stream: who sends it, the request methods its responses answer, its bytes, and the limits.
private struct MutatedStream {
    var role: HTTP1Parser.Role
    var methods: [String]
    var bytes: [UInt8]
    var eof: Bool
    var limits = HTTP1Limits()

    init(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        role = rng.chance(50) ? .requests : .responses
        let seeds = role == .requests ? requestSeeds : responseSeeds
        var bytes: [UInt8] = []
        for _ in 0...rng.below(2) { bytes += rng.pick(seeds) }
        self.bytes = ByteMutator.mutate(bytes, count: rng.below(6), partners: seeds, using: &rng)
        methods = (0..<rng.below(4)).map { _ in rng.pick(["GET", "HEAD", "POST", "CONNECT"]) }
        eof = rng.chance(50)
        if rng.chance(15) {
            limits.maxStartLineBytes = 1 + rng.below(64)
            limits.maxHeaderSectionBytes = 1 + rng.below(256)
            limits.maxHeaderCount = rng.below(6)
            limits.maxChunkLineBytes = 1 + rng.below(16)
            limits.maxBodyBytes = rng.below(100)
        }
    }
}

/// The statuses a peer's error may suggest, by role: a request's own (400, 413, 414, 431, 501, 505), 502 for any
/// response.
private let remoteStatuses: [HTTP1Parser.Role: Set<Int>] = [
    .requests: [400, 413, 414, 431, 501, 505], .responses: [502],
]

/// Feeds `chunks` as `parse` does (continuing after each message the peer allows to persist), checking on the way
/// that the parser settles, never holds or hands out more bytes than it was given, and fails only with a remote
/// error whose status fits the role. Returns the outcome and the first broken rule, if any.
private func parseChecked(_ stream: MutatedStream, chunks: [[UInt8]]) -> (ParseOutcome, broken: String?) {
    var parser = HTTP1Parser(role: stream.role, limits: stream.limits)
    for method in stream.methods { parser.expectResponse(toRequestMethod: method) }
    var outcome = ParseOutcome()
    var fed = 0
    var handedOut = 0
    var switched = false
    /// Events until the parser waits; false when the stream is over (closed or failed), or a rule is broken.
    func drain(eof: Bool) -> (goOn: Bool, broken: String?) {
        for _ in 0..<(fed + 10) {
            guard (0...fed).contains(parser.bufferedByteCount) else {
                return (false, "\(parser.bufferedByteCount) bytes buffered of \(fed) fed")
            }
            let event: HTTP1Event
            do { event = try parser.nextEvent() } catch {
                outcome.error = error
                let fits = error.side == .remote && remoteStatuses[stream.role]!.contains(error.suggestedStatus)
                return (false, fits ? nil : "unexpected error \(error)")
            }
            switch event {
            case .needMoreData:
                return (true, nil)
            case .paused:
                guard !switched, parser.lastMessageKeepAlive, parser.bufferedByteCount > 0 || eof else {
                    return (true, nil)
                }
                do { try parser.startNextMessage() } catch { return (false, "cannot go on after keep-alive: \(error)") }
            case .connectionClosed:
                outcome.record(event)
                return (false, nil)
            case .switchedProtocols(let leftover):
                switched = true
                handedOut += leftover.count
            case .body(let piece):
                handedOut += piece.count
            default:
                break
            }
            if event != .paused { outcome.record(event) }
            if handedOut > fed { return (false, "\(handedOut) bytes handed out of \(fed) fed") }
        }
        return (false, "the parser did not settle")
    }
    for chunk in chunks {
        fed += chunk.count
        parser.receive(chunk)
        let (goOn, broken) = drain(eof: false)
        guard goOn else { return (outcome, broken) }
    }
    if stream.eof {
        parser.receiveEOF()
        return (outcome, drain(eof: true).broken)
    }
    return (outcome, nil)
}

/// Whether `early` stopped at a size limit before `late` had seen the end of the over-long line or head: with the
/// bytes in pieces the limit is met while the head is still incomplete, which is the same verdict, earlier.
private func stoppedEarlierAtALimit(_ early: ParseOutcome, _ late: ParseOutcome) -> Bool {
    guard let reason = early.error?.reason, reason == .startLineTooLong || reason == .headerSectionTooLarge else {
        return false
    }
    return late.events.starts(with: early.events)
}

@Suite("HTTP1Parser: mutated input is parsed or refused, never trapped on")
struct HTTP1ParserRobustnessTests {
    @Test("Mutated requests and responses give the same events whole or in pieces, or a remote error with its status")
    func mutatedStreams() {
        var refused = 0
        for seed: UInt64 in 0..<3_000 {
            let stream = MutatedStream(seed: seed)
            var rng = SplitMix64(seed: ~seed)
            let (whole, wholeBroken) = parseChecked(stream, chunks: stream.bytes.isEmpty ? [] : [stream.bytes])
            let (split, splitBroken) = parseChecked(stream, chunks: ByteMutator.pieces(of: stream.bytes, using: &rng))
            if let broken = wholeBroken ?? splitBroken {
                Issue.record("seed \(seed): \(broken)")
                return
            }
            let same = whole.events == split.events && (whole.error == nil) == (split.error == nil)
            guard same || stoppedEarlierAtALimit(whole, split) || stoppedEarlierAtALimit(split, whole) else {
                Issue.record("seed \(seed): whole \(whole), in pieces \(split)")
                return
            }
            if whole.error != nil { refused += 1 }
        }
        // The mutations reach both verdicts.
        #expect((500...2_500).contains(refused), "\(refused) of 3000 refused")
    }
}
