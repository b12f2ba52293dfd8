import Foundation
import Testing

/// `--throttle` in the real proxy: downloads timed by curl (its `time_total`) through a throttled and an unthrottled
/// proxy, against the stage's local origins.
@Suite("--throttle makes the network as slow as the profile says", .timeLimit(.minutes(1)))
struct ThrottleTests {
    static let size = 200 * 1024

    /// The total time of one byte-exact download of `size` bytes, in seconds.
    func timedDownload(_ stage: Stage, _ url: String) async throws -> Double {
        let r = try await stage.curl(["--max-time", "15", "-w", "%{time_total}\n", url])
        #expect(r.exit == 0, "\(url): \(r.stderr)")
        #expect(try await stage.matchesAnnouncedChecksum(r), "\(url)")
        return Double(r.writeOut.last ?? "") ?? -1
    }

    /// The proxy's console line for `path` once it is written.
    func consoleLine(_ stage: Stage, _ path: String) async throws -> String {
        try await stage.proxy.process.waitForOutput(timeout: .seconds(5)) { text in
            text.split(separator: "\n").first { $0.contains(path) }.map(String.init)
        }
    }

    /// The duration a console line states (`… 200.0 KiB 2301 ms …`), in seconds.
    func statedDuration(_ line: String) -> Double? {
        let words = line.split(separator: " ")
        guard let ms = words.firstIndex(of: "ms"), ms > words.startIndex else { return nil }
        return Double(words[words.index(before: ms)]).map { $0 / 1000 }
    }

    @Test("--throttle 3G: 200 KiB over HTTPS takes what 780 kbit/s and 100 ms each way allow (0.8x to 2x of size × 8 / rate + round trip: a loaded machine fires timers late, never early); without it, a fraction of that")
    func threeG() async throws {
        let expected = Double(Self.size * 8) / 780_000 + 0.2  // 2.30 s
        let throttled = try await Stage(["--throttle", "3G"])
        let slow = try await timedDownload(throttled, "https://\(Stage.httpsHost)/bytes/\(Self.size)")
        #expect(slow >= 0.8 * expected && slow <= 2 * expected, "3G: \(slow) s for an expected \(expected) s")
        let line = try await consoleLine(throttled, "/bytes/\(Self.size)")
        #expect(line.contains("RULE [--throttle #1] throttle: 3G (whole proxy)"), "\(line)")
        // The record ends when the last byte left through the throttle: at least the transfer time at 780 kbit/s.
        let stated = statedDuration(line) ?? 0
        #expect(stated >= 0.8 * Double(Self.size * 8) / 780_000 && stated <= slow, "\(line)")

        let free = try await Stage()
        let fast = try await timedDownload(free, "https://\(Stage.httpsHost)/bytes/\(Self.size)")
        #expect(fast < 0.25 * expected, "unthrottled: \(fast) s")
        #expect(!(try await consoleLine(free, "/bytes/\(Self.size)")).contains("RULE"))
    }

    @Test("A custom profile for one host (down=1Mbit,latency=50ms@good.test) slows that host only; the other host's download on the same proxy is not throttled")
    func customForOneHost() async throws {
        let stage = try await Stage(["--throttle", "down=1Mbit,latency=50ms@\(Stage.httpsHost)"])
        let expected = Double(Self.size * 8) / 1_000_000 + 0.1  // 1.74 s
        let slow = try await timedDownload(stage, "https://\(Stage.httpsHost)/bytes/\(Self.size)")
        #expect(slow >= 0.8 * expected && slow <= 2 * expected, "custom: \(slow) s for an expected \(expected) s")
        let line = try await consoleLine(stage, "https://\(Stage.httpsHost)/bytes/")
        #expect(line.contains("throttle: custom: down 1 Mbit/s, 50 ms; up unlimited, 50 ms"), "\(line)")
        #expect(!line.contains("whole proxy"))

        let fast = try await timedDownload(stage, "http://\(Stage.plainHost)/bytes/\(Self.size)")
        #expect(fast < 0.25 * expected, "the other host: \(fast) s")
        #expect(!(try await consoleLine(stage, "http://\(Stage.plainHost)/bytes/")).contains("RULE"))
    }

    @Test("An h2 client's streams, relayed to an HTTP/1.1 origin over a pool of connections, share the throttled link: three 64 KiB streams at 1 Mbit/s take their sum's time, byte-exact")
    func h2StreamsShareTheLink() async throws {
        let stage = try await Stage(["--quiet", "--throttle", "down=1Mbit,latency=50ms"])
        let paths = (0..<3).map { "/bytes/\(65_536 + $0)" }
        let total = (0..<3).reduce(0) { $0 + 65_536 + $1 }
        let expected = Double(total * 8) / 1_000_000 + 0.1  // 1.67 s
        let started = ContinuousClock.now
        let r = try await runH2LibraryClient(
            stage.e2e, stage.proxy, host: Stage.httpsHost, alpn: ["h2"], mode: "get", paths, in: stage.folder)
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(r["alpn"] as? String == "h2", "\(r)")
        let streams = r["streams"] as? [[String: Any]] ?? []
        #expect(streams.count == paths.count)
        for s in streams {
            let headers = s["headers"] as? [String: String] ?? [:]
            #expect(s["sha256"] as? String == headers["x-body-sha256"], "\(s["path"] ?? "")")
        }
        // The client's Python start (h2's import, seconds on a loaded machine) is in the wall time: a generous
        // ceiling, a strict floor.
        #expect(seconds >= 0.8 * expected && seconds <= 2 * expected + 4, "h2: \(seconds) s for an expected \(expected) s")
    }
}
