import Foundation
import GRDB
import ProxyTrace

/// One `--ats mirror` device verdict: what a connection (or a cleartext request) was shown and what the device did.
public struct CapturedMirrorVerdict: Sendable {
    public var host: String
    public var url: String
    public var record: MirrorRecord
}

extension CaptureReader {
    /// The device verdicts of `--ats mirror` runs, one per connection (every exchange of a connection carries the
    /// same record) and one per cleartext request, in the order they were made; one run when `runID` is given.
    /// Empty for captures made without mirror mode.
    public func mirrorVerdicts(runID: Int64? = nil) throws(CaptureFileError) -> [CapturedMirrorVerdict] {
        try read { db in
            var seen = Set<String>()
            var verdicts: [CapturedMirrorVerdict] = []
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, run_id, connection_id, host, url, mirror FROM exchanges
                    WHERE mirror IS NOT NULL\(runID == nil ? "" : " AND run_id = ?") ORDER BY id
                    """,
                arguments: runID.map { [$0] } ?? [])
            while let row = try rows.next() {
                let record = try JSONDecoder().decode(MirrorRecord.self, from: Data((row["mirror"] as String).utf8))
                let id: Int64 = row["id"]
                let runID: Int64 = row["run_id"]
                let connection = (row["connection_id"] as Int64?).map(String.init) ?? "exchange \(id)"
                // A cleartext request is judged on its own; a TLS connection once, whatever it carried.
                let key = record.version == "cleartext HTTP" ? "exchange \(id)" : "\(runID) \(connection)"
                guard seen.insert(key).inserted else { continue }
                verdicts.append(CapturedMirrorVerdict(host: row["host"], url: row["url"], record: record))
            }
            return verdicts
        }
    }
}
