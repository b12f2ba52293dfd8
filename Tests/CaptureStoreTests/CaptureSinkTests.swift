import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

@testable import CaptureStore

/// The capture sink as the proxy drives it: several event-loop threads hand it records at once while its writer
/// thread commits batches. Run under ThreadSanitizer and AddressSanitizer by scripts/sanitize (the batches are raw
/// memory shared between threads under the sink's lock).
@Suite("Capture sink")
struct CaptureSinkTests {
    /// An intercepted exchange of connection `connection`, its decision named after the connection.
    private static func exchange(connection: UInt64, index: Int) -> ExchangeSummary {
        var e = ExchangeSummary(
            method: "GET", url: "https://h\(connection).test/\(index)", status: 200, httpVersion: "HTTP/1.1",
            outcome: .allowed, errors: [], requestBytes: 80, responseBytes: 64, durationMilliseconds: 1)
        e.setRecord(
            connection: ConnectionRecord(
                connectionID: connection, clientAddress: "127.0.0.1:\(40_000 + connection)",
                upstreamAddress: "127.0.0.1:443",
                decision: PolicyDecision(keyPath: [], reason: "connection \(connection)")),
            action: .relayed,
            detail: ExchangeDetail(
                request: HTTPRequestHead(method: "GET", target: "/\(index)", headers: [("Host", "h\(connection).test")]),
                response: HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Length", "64")]),
                timings: ExchangeTimings(started: 1_700_000_000 + Double(index), ended: 1_700_000_000.5 + Double(index)),
                responseBody: CapturedBody(bytes: Array(repeating: UInt8(truncatingIfNeeded: index), count: 64), totalBytes: 64)))
        return e
    }

    @Test("Records from four threads at once all reach the file, each with its own connection's decision, body and trace")
    func concurrentThreads() throws {
        let folder = try TestScratch.folder("sink")
        let path = folder.appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "test", bodyLimit: 1024, settings: [:]))
        let notices = NoticeLog()
        let sink = CaptureSink(writer: writer) { notices.add($0) }
        let threads = 4, connectionsPerThread = 8, exchangesPerConnection = 60
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0..<exchangesPerConnection {
                for c in 0..<connectionsPerThread {
                    let connection = UInt64(thread * connectionsPerThread + c)
                    var record = DiagnosticsRecord(title: "Round", subject: "\(round)", fields: [])
                    record.connectionID = connection
                    sink.consume(.diagnostics(record))
                    sink.consume(.exchange(Self.exchange(connection: connection, index: round)))
                }
            }
        }
        sink.close()
        #expect(notices.all.isEmpty)
        let reader = try CaptureReader(path: path)
        let total = threads * connectionsPerThread * exchangesPerConnection
        #expect(try reader.count() == total)
        for id in stride(from: 1, through: total, by: 97) {
            let got = try #require(try reader.exchange(id: Int64(id)))
            let connection = try #require(got.record.connection?.connectionID)
            #expect(got.record.connection?.decision?.reason == "connection \(connection)")
            #expect(got.record.url.hasPrefix("https://h\(connection).test/"))
            let index = Int(got.record.url.split(separator: "/").last ?? "") ?? -1
            #expect(got.record.detail?.responseBody?.bytes == Array(repeating: UInt8(truncatingIfNeeded: index), count: 64))
        }
        for connection in [UInt64(0), 31] {
            let rounds = try reader.traceRecords(runID: 1, connectionID: connection).filter { $0.record.title == "Round" }
            #expect(rounds.map(\.record.subject) == (0..<exchangesPerConnection).map(String.init), "in the order made")
        }
    }
}

/// Notices the sink says, from its writer thread.
private final class NoticeLog: @unchecked Sendable {
    // @unchecked: `notices` is guarded by `lock`.
    private let lock = NSLock()
    private var notices: [String] = []

    func add(_ text: String) {
        lock.lock()
        notices.append(text)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return notices
    }
}
