/// What `--ats mirror` showed the device on one connection and what the device did with it: the per-connection
/// record every exchange of that connection carries (console line, JSON `exchange` event, trace, capture).
///
/// A final class so an exchange record that has none pays one nil reference, not the fields (every record is
/// copied through commands on the relaying path). Immutable once made.
public final class MirrorRecord: Sendable, Codable, Equatable {
    /// The TLS version the device was served (the upstream's): `TLSv1.0`.
    public let version: String?
    /// What was mirrored beyond the version, in the console's words (`static RSA key exchange`, `leaf expired`).
    public let weaknesses: [String]
    /// What could not be reproduced, each with why.
    public let notReproduced: [String]
    /// The device completed its handshake with the mirrored server.
    public let deviceAccepted: Bool
    /// What the device negotiated, when it accepted.
    public let deviceVersion: String?
    public let deviceCipherSuite: String?
    /// How it refused: the alert it sent or was sent (`protocol_version`), or `closed`.
    public let refusal: String?
    /// At which step of the handshake it refused, in words.
    public let refusalStep: String?
    /// With `--plist`: the simulated verdict (`allowed`, or `blocked -1200/-9836 (…)`); nil without a plist.
    public let simulated: String?
    /// With `--plist`: set when the simulated verdict and the device's disagree, with what that can mean.
    public let disagreement: String?
    /// The simulated verdict's first violation kind (`tlsVersionTooLow`), nil when it allowed the connection: the
    /// key `MirrorCounts` counts by.
    public let simulatedKind: String?

    public init(
        version: String?, weaknesses: [String], notReproduced: [String], deviceAccepted: Bool,
        deviceVersion: String? = nil, deviceCipherSuite: String? = nil, refusal: String? = nil,
        refusalStep: String? = nil, simulated: String? = nil, disagreement: String? = nil,
        simulatedKind: String? = nil
    ) {
        self.version = version
        self.weaknesses = weaknesses
        self.notReproduced = notReproduced
        self.deviceAccepted = deviceAccepted
        self.deviceVersion = deviceVersion
        self.deviceCipherSuite = deviceCipherSuite
        self.refusal = refusal
        self.refusalStep = refusalStep
        self.simulated = simulated
        self.disagreement = disagreement
        self.simulatedKind = simulatedKind
    }

    /// `MIRROR TLSv1.0 → device refused (protocol_version)`,
    /// `MIRROR TLSv1.2, leaf expired → device accepted TLSv1.2`.
    public var consoleText: String {
        let served = ([version ?? "TLS"] + weaknesses).joined(separator: ", ")
        let device = deviceAccepted
            ? "device accepted" + (deviceVersion.map { " " + $0 } ?? "")
            : "device refused (" + (refusal ?? "closed") + ")"
        return "MIRROR " + served + " → " + device
    }

    /// What follows the console line's note: what was not reproduced and any disagreement.
    public var consoleTail: String {
        var tail = ""
        if !notReproduced.isEmpty { tail += " [not reproduced: " + notReproduced.joined(separator: "; ") + "]" }
        if let disagreement { tail += " [DISAGREEMENT " + disagreement + "]" }
        return tail
    }

    public static func == (a: MirrorRecord, b: MirrorRecord) -> Bool {
        a.version == b.version && a.weaknesses == b.weaknesses && a.notReproduced == b.notReproduced
            && a.deviceAccepted == b.deviceAccepted && a.deviceVersion == b.deviceVersion
            && a.deviceCipherSuite == b.deviceCipherSuite && a.refusal == b.refusal && a.refusalStep == b.refusalStep
            && a.simulated == b.simulated && a.disagreement == b.disagreement && a.simulatedKind == b.simulatedKind
    }
}
