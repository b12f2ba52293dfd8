import GRDB
import ProxyTrace

// An exchange's own trace records (LoaderWhatToDo, Protocol Enqueue, Protocol Received, Did Finish) rebuilt from
// its row, for the exchanges whose proxy left them out (`RebuiltTrace`): the same constructors the
// session uses, fed the same values, so a reader gets the records the session would have made at level 1. Merged
// with the connection's stored records by time.

extension CaptureReader {
    /// The records the proxy left out of `exchange`'s trace, rebuilt from its record, with the times they would
    /// have had: the start records at the exchange's start, the finish records at its end. Empty for an exchange
    /// whose records were stored (one written with `--diagnostics`).
    public static func rebuiltTraceRecords(of exchange: CapturedExchange) -> [CapturedTraceRecord] {
        let e = exchange.record
        guard let detail = e.detail, !detail.rebuiltTrace.isEmpty else { return [] }
        var records: [DiagnosticsRecord] = []
        var times: [Double] = []
        if detail.rebuiltTrace.contains(.requestStart) {
            // The session traces the protocol the app would speak to the server: the upstream's.
            let version = e.connection?.upstreamTLS?.alpn == "h2" ? "HTTP/2.0" : "HTTP/1.1"
            records.append(.loaderWhatToDo(method: e.method, url: e.url))
            records.append(.protocolEnqueue(method: e.method, url: e.url, httpVersion: version, headers: nil))
            times += [detail.timings.started, detail.timings.started]
        }
        if detail.rebuiltTrace.contains(.finish) {
            if let status = e.status {
                records.append(.protocolReceived(
                    method: e.method, url: e.url, httpVersion: e.httpVersion, status: status, headers: nil))
                times.append(detail.timings.firstResponseByte ?? detail.timings.ended)
            }
            records.append(.didFinish(totalMilliseconds: e.durationMilliseconds, totalBytes: e.responseBytes))
            times.append(detail.timings.ended)
        }
        return records.enumerated().map { i, record in
            var record = record
            record.connectionID = e.connection?.connectionID
            // Negative: no stored record has such an id, and within an exchange they still count up.
            return CapturedTraceRecord(id: -(exchange.id << 3) + Int64(i) - 8, time: times[i], record: record)
        }
    }

    /// The rebuilt records of the exchanges of one connection of one run (those made between `from` and `to` when
    /// given), for a reader of the connection's trace. `ids` bounds the exchange rows read: nothing indexes
    /// exchanges by connection (every index costs each captured exchange), so a reader of one exchange's trace
    /// reads the rows near it.
    func rebuiltTraceRecords(
        _ db: Database, runID: Int64, connectionID: UInt64, from: Double = -.infinity, to: Double = .infinity,
        ids: ClosedRange<Int64>? = nil
    ) throws -> [CapturedTraceRecord] {
        var sql = Self.select + """
             WHERE e.run_id = ? AND e.connection_id = ? AND e.rebuilt_trace IS NOT NULL AND e.ended >= ?
                AND e.started <= ?
            """
        var arguments: StatementArguments = [runID, Int64(bitPattern: connectionID), from, to]
        if let ids {
            sql += " AND e.id BETWEEN ? AND ?"
            _ = arguments.append(contentsOf: [ids.lowerBound, ids.upperBound])
        }
        return try Row.fetchAll(db, sql: sql + " ORDER BY e.id", arguments: arguments)
            .flatMap { Self.rebuiltTraceRecords(of: try exchange(from: $0)) }
    }

    /// Stored and rebuilt records in one trace, by time (a stable sort: records of one time stay in the order made).
    static func merged(_ stored: [CapturedTraceRecord], _ rebuilt: [CapturedTraceRecord]) -> [CapturedTraceRecord] {
        guard !rebuilt.isEmpty else { return stored }
        return (stored + rebuilt).enumerated()
            .sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }
            .map(\.element)
    }
}
