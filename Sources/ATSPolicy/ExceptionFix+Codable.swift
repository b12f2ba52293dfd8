extension ExceptionFix: Codable {
    private enum Kind: String, Codable { case setKeys, noExceptionCanHelp }
    private enum CodingKeys: String, CodingKey { case kind, domain, keys, reason }

    /// `{"kind":"setKeys","domain":"example.com","keys":[{"key":…,"value":…}]}` or
    /// `{"kind":"noExceptionCanHelp","reason":…}`: a `kind` and named fields, as the other JSON shapes of cases with
    /// payloads (see HandshakeFacts+Codable.swift).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .setKeys(let domain, let keys):
            try c.encode(Kind.setKeys, forKey: .kind)
            try c.encode(domain, forKey: .domain)
            try c.encode(keys, forKey: .keys)
        case .noExceptionCanHelp(let reason):
            try c.encode(Kind.noExceptionCanHelp, forKey: .kind)
            try c.encode(reason, forKey: .reason)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch try c.decode(Kind.self, forKey: .kind) {
        case .setKeys:
            self = .setKeys(
                domain: try c.decode(String.self, forKey: .domain), keys: try c.decode([FixKey].self, forKey: .keys))
        case .noExceptionCanHelp:
            self = .noExceptionCanHelp(reason: try c.decode(String.self, forKey: .reason))
        }
    }
}
