import Dispatch
import Foundation
import ProxyCore
import ProxyTrace
import Testing

@testable import ProxyServer

@Suite("The log sink shared by every loop thread")
struct ProxyLogSinkTests {
    /// Every loop thread writes to one sink: each JSON event must land whole, on its own line, none lost, through
    /// the fan-out and the JSON sink's queue. Under ThreadSanitizer (scripts/sanitize thread) this is also the race
    /// check of the state they share.
    @Test func eventsFromManyThreadsAreWrittenWholeAndOnce() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("atsproxy-sink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: folder) } catch {
                Issue.record("cannot remove \(folder.path): \(error)")
            }
        }
        let path = folder.appendingPathComponent("events.json").path
        let threads = 4, perThread = 250
        do {
            let sink = try ProxyLogSink(diagnosticsLevel: 0, jsonPath: path, quiet: true)
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for i in 0..<perThread {
                    let id = UInt64(thread * perThread + i)
                    let event = TraceEvent(kind: .exchange, time: 0, connectionID: id, url: "https://h\(id).test")
                    sink.write(.event(event))
                    // The same notice from every thread: folded into one line and a count, through the shared filter.
                    sink.write(.notice("a notice every loop repeats", kind: "sink-test"))
                }
            }
            // The JSON file is written behind a queue: wait for it.
            sink.flushAll()
        }
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == threads * perThread)
        var ids: [UInt64] = []
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            let id = (object?["connectionID"] as? NSNumber)?.uint64Value
            #expect(id != nil && object?["url"] as? String == id.map { "https://h\($0).test" }, "\(line)")
            if let id { ids.append(id) }
        }
        #expect(ids.sorted() == (0..<UInt64(threads * perThread)).map { $0 })
    }
}
