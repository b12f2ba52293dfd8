import CaptureStore

/// Writes a capture (or the part a filter selects) as one HAR 1.2 document, streamed: entries are read a page at a
/// time, oldest first (the order the spec prefers), and handed to `output` as text, so memory does not grow with
/// the capture. Pages (HAR's optional grouping by web page) are left out: a proxy sees no pages.
public struct HARDocument {
    /// `creator.version`: the atsproxy writing the file.
    public var creatorVersion: String
    public var filter: CaptureFilter
    /// Entries read per query.
    public var pageSize = 200

    public init(creatorVersion: String, filter: CaptureFilter = CaptureFilter()) {
        self.creatorVersion = creatorVersion
        self.filter = filter
    }

    /// Writes the document, piece by piece, to `output`; returns the number of entries.
    @discardableResult
    public func write(
        from reader: CaptureReader, to output: (String) throws -> Void
    ) throws -> Int {
        let runs = Dictionary(try reader.runs().map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var head = "{\n  \"log\": {\n    \"version\": \"1.2\",\n    \"creator\": {\n      \"name\": \"ATSProxy\",\n"
        head += "      \"version\": "
        HARValue.quote(creatorVersion, into: &head)
        head += "\n    },\n    \"entries\": ["
        try output(head)
        var count = 0
        var after: Int64?
        while true {
            let page = try reader.exchanges(matching: filter, limit: pageSize, after: after)
            guard let last = page.last else { break }
            for listed in page {
                // The listing has no bodies: one read per exchange adds them.
                let exchange = try reader.withBodies(listed)
                let entry = HAREntry.make(exchange, run: runs[exchange.runID])
                try output((count == 0 ? "\n      " : ",\n      ") + entry.rendered(level: 3))
                count += 1
            }
            after = last.id
        }
        try output(count == 0 ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n")
        return count
    }
}
