import ArgumentParser
import CaptureExport
import CaptureStore
import Foundation
import ProxyTrace

/// `atsproxy show FILE [--filter EXPR] [--json] [--limit N]`: a capture's exchanges, newest first, one console line
/// each (the line `run` printed, after the exchange's id and time); `atsproxy show FILE ID` (or `--id ID`): one
/// exchange in full.
///
/// Exit status: 0 shown, 1 no exchange ID in the file, 2 an unreadable capture or a filter that does not parse.
struct ShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "List a capture's exchanges, or show one in full.",
        discussion: """
            Without ID: one line per exchange matching --filter, newest first, as the console printed it, after the \
            exchange's id and time. With ID: the exchange in full (heads of both legs, body previews, TLS of each \
            leg, the ATS decision with violations and fixes, the connection's trace). --json prints JSON Lines for \
            a listing and the exchange's HAR entry for one exchange. Exit status: 0 shown, 1 no such exchange, 2 an \
            unreadable capture or a filter that does not parse.
            """)

    @Argument(help: "The capture file (atsproxy run --capture), or a postgresql:// team store.")
    var path: String

    @Argument(help: "Show this exchange in full (the number a listing starts with).")
    var exchangeID: Int64?

    @Option(name: .customLong("id"), help: "The same as the ID argument.")
    var idOption: Int64?

    @OptionGroup var filterOptions: CaptureFilterOptions

    @OptionGroup var store: TeamStoreOptions

    @Flag(help: "JSON: one object per line for a listing, the HAR entry for one exchange.")
    var json = false

    @Option(help: "Show at most N exchanges (the newest).")
    var limit: Int?

    @Option(name: .customLong("body-preview"), help: "Body bytes shown for one exchange (default 2048).")
    var bodyPreview = 2048

    func validate() throws {
        if exchangeID != nil, idOption != nil, exchangeID != idOption {
            throw ValidationError("give the exchange's id once: as ID or as --id")
        }
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more (got \(limit))") }
        if bodyPreview < 0 { throw ValidationError("--body-preview must be 0 or more") }
        if exchangeID ?? idOption != nil, filterOptions.expression != nil || limit != nil {
            throw ValidationError("--filter and --limit are for listings; with an ID, one exchange is shown")
        }
    }

    func run() throws {
        let filter = try filterOptions.filter(command: "show")
        try store.check(location: path, command: "show")
        let id = exchangeID ?? idOption
        let opened = try openCapture(
            path, command: "show",
            selection: store.selection(filter: id == nil ? filter : CaptureFilter())
                .with(exchangeIDs: id.map { [$0] }, newest: limit))
        let reader = opened.reader
        do {
            if let id = exchangeID ?? idOption {
                try showOne(reader, id: id)
            } else {
                try list(reader, filter: filter)
            }
        } catch let error as CaptureFileError {
            throw failure("atsproxy show: error: \(error.description)", status: 2)
        }
    }

    private func showOne(_ reader: CaptureReader, id: Int64) throws {
        guard let exchange = try reader.exchange(id: id) else {
            if PostgresLocation.isURI(path) {
                throw failure("atsproxy show: \(PostgresLocation(path)?.redacted ?? ""): no exchange \(id) in the store")
            }
            throw failure("atsproxy show: \(path): no exchange \(id) (\(try reader.count()) exchanges in the file)")
        }
        let output: String
        if json {
            let run = try reader.runs().first { $0.id == exchange.runID }
            output = HAREntry.make(exchange, run: run).rendered() + "\n"
        } else {
            // The connection's opening records and this exchange's: a keep-alive connection's whole trace can
            // run to thousands of exchanges.
            let trace = try reader.traceRecords(of: exchange)
            output = ExchangeText(previewBytes: bodyPreview, colour: isatty(STDOUT_FILENO) == 1)
                .render(exchange, trace: trace)
        }
        FileHandle.standardOutput.write(Data(output.utf8))
    }

    private func list(_ reader: CaptureReader, filter: CaptureFilter) throws {
        let out = BufferedOutput()
        let colour = !json && isatty(STDOUT_FILENO) == 1
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var remaining = limit ?? Int.max
        var before: Int64?
        while remaining > 0 {
            let page = try reader.exchanges(matching: filter, limit: min(remaining, 500), before: before)
            guard let last = page.last else { break }
            for exchange in page {
                if json {
                    let line = ListedExchange(exchange)
                    try out.write(String(decoding: try encoder.encode(line), as: UTF8.self) + "\n")
                } else {
                    let started = exchange.record.detail.map { TraceTime(unixTime: $0.timings.started).description }
                    try out.write(
                        String(exchange.id).leftPadded(6) + "  " + (started ?? "--:--:--.---") + "  "
                            + exchange.record.consoleLine(colour: colour) + "\n")
                }
            }
            remaining -= page.count
            before = last.id
        }
        try out.flush()
    }
}

/// One line of `show --json`: the exchange's id, run and times, and the exchange as the JSON log's `exchange`
/// event has it.
private struct ListedExchange: Encodable {
    var id: Int64
    var run: Int64
    var started: Double?
    var ended: Double?
    var connectionID: UInt64?
    var action: String?
    var exchange: ExchangeSummary

    init(_ e: CapturedExchange) {
        id = e.id
        run = e.runID
        started = e.record.detail?.timings.started
        ended = e.record.detail?.timings.ended
        connectionID = e.record.connection?.connectionID
        action = e.record.action?.rawValue
        exchange = e.record
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
