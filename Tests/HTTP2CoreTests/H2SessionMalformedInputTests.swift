import HTTP2Core
import Testing

@Suite("H2Session rejects malformed input with a connection error and GOAWAY")
struct H2SessionMalformedInputTests {
    /// An empty SETTINGS frame, the first frame a client must send after the preface.
    static let emptySettings = frame(type: 4)

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var failure: H2ConnectionFailure
        var code: H2ErrorCode
        var testDescription: String { name }
    }

    static let serverCases: [Case] = [
        Case(
            name: "HTTP/1.1 request instead of the preface", bytes: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
            failure: .badPreface, code: .protocolError),
        Case(name: "random garbage", bytes: patternBytes(count: 200, seed: 5), failure: .badPreface, code: .protocolError),
        Case(
            name: "preface with one wrong byte", bytes: Array("PRI * HTTP/2.0\r\n\r\nSX\r\n\r\n".utf8),
            failure: .badPreface, code: .protocolError),
        Case(
            name: "SETTINGS with a length that is not a multiple of 6",
            bytes: clientPreface + frame(type: 4, payload: [0, 1, 2, 3, 4]), failure: .frameSizeError,
            code: .frameSizeError),
        Case(
            name: "PING with 7 bytes", bytes: clientPreface + emptySettings + frame(type: 6, payload: [1, 2, 3, 4, 5, 6, 7]),
            failure: .frameSizeError, code: .frameSizeError),
        Case(
            name: "DATA frame longer than SETTINGS_MAX_FRAME_SIZE",
            bytes: clientPreface + emptySettings + frame(type: 0, streamID: 1, length: 0xff_ffff),
            failure: .frameSizeError, code: .frameSizeError),
        Case(
            name: "DATA on an idle stream", bytes: clientPreface + emptySettings + frame(type: 0, streamID: 3, payload: [1]),
            failure: .protocolError, code: .protocolError),
        Case(
            name: "HEADERS with an undecodable HPACK block",
            bytes: clientPreface + emptySettings + frame(type: 1, flags: 0x4 | 0x1, streamID: 1, payload: [0xff, 0xff, 0xff, 0xff]),
            failure: .compressionError, code: .compressionError),
        Case(
            name: "WINDOW_UPDATE overflowing the connection window",
            bytes: clientPreface + emptySettings + frame(type: 8, payload: [0x7f, 0xff, 0xff, 0xff]),
            failure: .flowControlError, code: .flowControlError),
    ]

    @Test("server session", arguments: serverCases)
    func serverRejects(_ testCase: Case) throws {
        let server = try H2Session(role: .server)
        #expect(throws: H2Error.connection(testCase.failure, code: testCase.code)) {
            _ = try server.receive(testCase.bytes)
        }
        let output = server.pendingOutput()
        let goAway = RawFrame.parse(output, skipPreface: false).compactMap(\.goAwayCode)
        #expect(goAway == [testCase.code.rawValue])
        // The failure sticks; more input is refused the same way, and nothing crashes.
        #expect(throws: H2Error.connection(testCase.failure, code: testCase.code)) {
            _ = try server.receive(Self.emptySettings)
        }
        #expect(!server.wantsRead)
    }

    @Test("client session: an HTTP/1 answer instead of SETTINGS")
    func clientRejectsHTTP1() throws {
        let client = try H2Session(role: .client)
        _ = try client.submitRequest(requestHeaders(), body: .none)
        _ = client.pendingOutput()
        #expect(throws: H2Error.connection(.protocolError, code: .protocolError)) {
            _ = try client.receive(Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        }
        #expect(RawFrame.parse(client.pendingOutput(), skipPreface: false).compactMap(\.goAwayCode) == [1])
    }

    @Test("a header list above our SETTINGS_MAX_HEADER_LIST_SIZE ends the connection")
    func headerListTooLarge() throws {
        let pair = try SessionPair(server: H2Settings(maxHeaderListSize: 8_192))
        #expect(try pair.exchange())
        let big = String(repeating: "v", count: 10_000)
        _ = try pair.client.submitRequest(requestHeaders(extra: [H2Header("x-big", big)]), body: .none)
        #expect(throws: H2Error.connection(.headerListTooLarge, code: .enhanceYourCalm)) {
            _ = try pair.server.receive(pair.client.pendingOutput())
        }
        let goAway = RawFrame.parse(pair.server.pendingOutput(), skipPreface: false).compactMap(\.goAwayCode)
        #expect(goAway == [H2ErrorCode.enhanceYourCalm.rawValue])
    }

    @Test("input split at every byte gives the same events as input in one piece")
    func byteByByte() throws {
        let reference = try SessionPair()
        let wholeID = try reference.client.submitRequest(requestHeaders(method: "POST"), body: .streaming)
        try reference.client.sendData(streamID: wholeID, patternBytes(count: 3_000, seed: 3), endStream: true)
        let wire = reference.client.pendingOutput()
        let whole = try reference.server.receive(wire)

        let server = try H2Session(role: .server)
        var pieces: [H2Event] = []
        for byte in wire { pieces += try server.receive([byte]) }
        #expect(pieces.streams()[wholeID]?.body == whole.streams()[wholeID]?.body)
        #expect(pieces.streams()[wholeID]?.heads.first?.fields == whole.streams()[wholeID]?.heads.first?.fields)
        #expect(pieces.streams()[wholeID]?.ended == true)
    }
}
