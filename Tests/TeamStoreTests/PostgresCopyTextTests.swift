import Foundation
import ProxyTrace
import TestSupport
import Testing

@testable import CaptureStore

/// COPY's text format, and text that PostgreSQL's `text` cannot hold, through a real server and back.
@Suite struct PostgresCopyTextTests {
    @Test("escapes and repairs: backslash, tab, newline, carriage return; bytes that are not UTF-8 and NUL become U+FFFD")
    func escaping() {
        var rows = PostgresCopyText()
        Array("a\\b\tc\nd\re".utf8).withUnsafeBytes { rows.text(utf8: $0) }
        [UInt8]([0x63, 0x61, 0x66, 0xE9, 0x00, 0x21]).withUnsafeBytes { rows.text(utf8: $0) }
        rows.null()
        rows.real(.infinity)
        [UInt8]([0x00, 0xFF]).withUnsafeBytes { rows.bytea($0) }
        rows.endRow()
        #expect(String(decoding: rows.bytes, as: UTF8.self) == "a\\\\b\\tc\\nd\\re\tcaf\u{FFFD}\u{FFFD}!\t\\N\tInfinity\t\\\\x00ff\n")
    }

    @Test("a record whose text PostgreSQL would refuse is written, and the rest of it reads back as it was")
    func awkwardTextRoundTrip() throws {
        let pg = try ThrowawayPostgres()
        let store = try #require(PostgresLocation(pg.uri))
        let writer = try PostgresCaptureWriter.open(
            store, run: CaptureRunInfo(started: 1_700_000_000, atsproxyVersion: "test", bodyLimit: 0, settings: [:]))
        let url = "http://awkward.test/a\\b\tc?d=\u{e9}"
        let note = "line one\nline two\r\u{0}end"
        try writer.write([
            .exchange(ExchangeSummary(
                method: "GET", url: url, status: 200, httpVersion: "HTTP/1.1", outcome: .allowed, errors: [],
                requestBytes: 0, responseBytes: 0, durationMilliseconds: 1.5, note: note)),
        ])
        try writer.close(ended: 1_700_000_001)
        let file = try TestScratch.folder("awkward").appendingPathComponent("back.atscap").path
        #expect(try PostgresSnapshot.copy(from: store, selection: TeamStoreSelection(), into: file) == 1)
        let reader = try CaptureReader(path: file)
        let exchange = try #require(try reader.exchanges().first)
        #expect(exchange.record.url == url)
        #expect(exchange.record.note == "line one\nline two\r\u{FFFD}end")
        #expect(exchange.record.durationMilliseconds == 1.5)
        #expect(try reader.runs().map(\.ended) == [1_700_000_001])
    }
}
