import Foundation
import GRDB
import ProxyTrace

/// Copies a capture file's runs into the team store (`atsproxy capture copy FILE URL`): each run becomes a new run
/// of the store (new ids: the store's other proxies own the old numbers), written by the same writer a proxy uses,
/// so the store holds exactly what a proxy would have written: the exchanges as they were recorded (heads, timings,
/// TLS, verdicts, bodies, the rebuilt-trace marks) and the trace records stored with them.
public enum PostgresUpload {
    /// Exchanges per batch (transaction).
    static let batchSize = 500

    /// Copies every run of `reader`'s file to `target`; `progress` is told exchanges copied and the total.
    /// Returns the store's ids of the new runs, in the file's order.
    @discardableResult
    public static func copy(
        from reader: CaptureReader, to target: PostgresLocation, version: String, progress: ((Int, Int) -> Void)? = nil
    ) throws(CaptureFileError) -> [Int64] {
        let total = try reader.count()
        var copied = 0
        var newRuns: [Int64] = []
        for run in try reader.runs() {
            let writer = try PostgresCaptureWriter.open(
                target,
                run: CaptureRunInfo(
                    started: run.started, atsproxyVersion: run.atsproxyVersion, bodyLimit: run.bodyLimit,
                    settings: run.settings))
            newRuns.append(writer.runID)
            // The run's stored trace records first (a connection's records, in order): the exchanges' own records
            // that the file left to be rebuilt stay so, marked on their rows.
            var items: [CaptureItem] = try reader.storedTraceRecords(runID: run.id).map { .trace($0.record, time: $0.time) }
            var after: Int64?
            while true {
                let page = try reader.exchanges(matching: CaptureFilter(runID: run.id), limit: batchSize, after: after)
                guard let last = page.last else { break }
                for exchange in page { items.append(.exchange(try reader.withBodies(exchange).record)) }
                try writer.write(items)
                items.removeAll()
                after = last.id
                copied += page.count
                progress?(copied, total)
            }
            if !items.isEmpty { try writer.write(items) }
            try writer.finish(ended: run.ended)
        }
        return newRuns
    }
}

extension CaptureReader {
    /// Every trace record stored for run `runID`, connection by connection in the order they were made, without
    /// the records rebuilt from exchange rows (`traceRecords(runID:connectionID:)` adds those).
    func storedTraceRecords(runID: Int64) throws(CaptureFileError) -> [CapturedTraceRecord] {
        try read { db in
            var records: [CapturedTraceRecord] = []
            for row in try Row.fetchAll(
                db,
                sql: "SELECT id, records, connection_id FROM trace_chunks WHERE run_id = ? AND connection_id IS NOT NULL ORDER BY id",
                arguments: [runID])
            {
                records += try Self.chunkRecords(row, connectionID: UInt64(bitPattern: row["connection_id"] as Int64))
            }
            return records
        }
    }
}
