/// Local HTTP/2 settings sent in our SETTINGS frame of the connection preface.
///
/// SETTINGS_ENABLE_PUSH is always sent as 0: the proxy neither sends nor accepts server push.
public struct H2Settings: Sendable, Equatable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: how many streams the peer may open towards us.
    public var maxConcurrentStreams: UInt32
    /// SETTINGS_INITIAL_WINDOW_SIZE: per-stream receive window (bytes the peer may send before we consume).
    public var initialWindowSize: UInt32
    /// SETTINGS_MAX_FRAME_SIZE: largest frame payload we accept (16 384 ... 16 777 215).
    public var maxFrameSize: UInt32
    /// SETTINGS_MAX_HEADER_LIST_SIZE: largest header list we accept (RFC 9113 §6.5.2 size rule).
    /// A larger block from the peer is a connection error (`headerListTooLarge`).
    public var maxHeaderListSize: UInt32
    /// Connection-level receive window; raised with a WINDOW_UPDATE on stream 0 when above 65 535.
    public var connectionWindowSize: UInt32
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3): a server accepts extended CONNECT (`:protocol`), the way
    /// WebSockets are opened over HTTP/2. Only meaningful for the server role; not sent when false.
    public var enableConnectProtocol: Bool

    /// Creates settings; the defaults are the RFC's initial values except for a 64 KiB header list limit.
    public init(
        maxConcurrentStreams: UInt32 = 100, initialWindowSize: UInt32 = 65_535, maxFrameSize: UInt32 = 16_384,
        maxHeaderListSize: UInt32 = 65_536, connectionWindowSize: UInt32 = 65_535, enableConnectProtocol: Bool = false
    ) {
        self.enableConnectProtocol = enableConnectProtocol
        self.maxConcurrentStreams = maxConcurrentStreams
        self.initialWindowSize = initialWindowSize
        self.maxFrameSize = maxFrameSize
        self.maxHeaderListSize = maxHeaderListSize
        self.connectionWindowSize = connectionWindowSize
    }
}

/// One SETTINGS parameter as received from the peer.
public struct H2Setting: Sendable, Hashable {
    /// Setting identifier (RFC 9113 §6.5.2); see the static constants.
    public var identifier: UInt16
    /// Setting value.
    public var value: UInt32

    /// Creates a parameter.
    public init(identifier: UInt16, value: UInt32) {
        self.identifier = identifier
        self.value = value
    }

    /// SETTINGS identifier 0x1 (RFC 9113 §6.5.2).
    public static let headerTableSize: UInt16 = 0x1
    /// SETTINGS identifier 0x2 (RFC 9113 §6.5.2).
    public static let enablePush: UInt16 = 0x2
    /// SETTINGS identifier 0x3 (RFC 9113 §6.5.2).
    public static let maxConcurrentStreams: UInt16 = 0x3
    /// SETTINGS identifier 0x4 (RFC 9113 §6.5.2).
    public static let initialWindowSize: UInt16 = 0x4
    /// SETTINGS identifier 0x5 (RFC 9113 §6.5.2).
    public static let maxFrameSize: UInt16 = 0x5
    /// SETTINGS identifier 0x6 (RFC 9113 §6.5.2).
    public static let maxHeaderListSize: UInt16 = 0x6
}

/// The peer's settings currently in force (RFC defaults until its SETTINGS frame arrives).
public struct H2RemoteSettings: Sendable, Equatable {
    /// How many streams we may open towards the peer at once (`UInt32.max` when unlimited).
    public var maxConcurrentStreams: UInt32
    /// The peer's per-stream receive window for streams we send on.
    public var initialWindowSize: UInt32
    /// Largest frame payload the peer accepts.
    public var maxFrameSize: UInt32
    /// Largest header list the peer accepts (`UInt32.max` when unlimited).
    public var maxHeaderListSize: UInt32
    /// Whether the peer allows server push.
    public var enablePush: Bool
    /// Whether the peer (a server) accepts extended CONNECT (RFC 8441).
    public var enableConnectProtocol: Bool
}
