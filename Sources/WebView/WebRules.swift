import CaptureStore

/// One rule in force (or switched off) as the Rules panel lists it.
public struct WebRuleInfo: Sendable, Equatable, Encodable {
    /// The rule's id: its name, else where it was written (`rules.txt:3`, `--fault #2`, `web-1`).
    public var id: String
    /// The rule in its normalized rules-file spelling.
    public var text: String
    /// Its keyword (`map-local`, `fault`, `throttle`).
    public var action: String
    /// Where it acts (`connection`, `request-head`, …).
    public var points: [String]
    public var enabled: Bool
    /// `runtime` (made here), `option` or `file`.
    public var origin: String

    public init(id: String, text: String, action: String, points: [String], enabled: Bool, origin: String) {
        self.id = id
        self.text = text
        self.action = action
        self.points = points
        self.enabled = enabled
        self.origin = origin
    }
}

/// A simple rule made from an exchange's detail pane, for the exchange's host or URL.
public enum WebRuleRequest: Sendable, Equatable {
    /// "Fail this host like…": a `fault HOST=KIND` rule.
    case fault(kind: String)
    /// "Throttle this host": a `throttle PROFILE@HOST` rule.
    case throttle(profile: String)
    /// "Map local from this response": the captured response body kept in a file the proxy owns, served for the
    /// exchange's URL.
    case mapLocal
    /// "Break on the next request to this URL": a `breakpoint` rule whose filter is the exchange's URL.
    case breakpoint
}

/// Why a rule could not be made: the message the page shows.
public struct WebRuleError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// The rules in force, as the web view reads and changes them: functions over the proxy's rule book, wired by
/// `run --web` (nil for `view`, which browses a saved capture: `/api/rules` then answers 404 and the page hides
/// its panel). The view imports neither the rules stage nor the proxy.
public struct WebRuleControl: Sendable {
    /// Every rule, in the order they apply.
    public var list: @Sendable () -> [WebRuleInfo]
    /// Switches a rule on or off; false when there is no rule of that id.
    public var setEnabled: @Sendable (_ id: String, _ enabled: Bool) -> Bool
    /// Makes a rule from an exchange (read with its bodies) and puts it in force.
    public var create: @Sendable (WebRuleRequest, CapturedExchange) -> Result<WebRuleInfo, WebRuleError>
    /// Removes a rule made here; false when `id` is not one.
    public var remove: @Sendable (_ id: String) -> Bool
    /// The fault KINDs and throttle profiles the pickers offer.
    public var faultKinds: [String]
    public var throttleProfiles: [String]

    public init(
        list: @escaping @Sendable () -> [WebRuleInfo], setEnabled: @escaping @Sendable (String, Bool) -> Bool,
        create: @escaping @Sendable (WebRuleRequest, CapturedExchange) -> Result<WebRuleInfo, WebRuleError>,
        remove: @escaping @Sendable (String) -> Bool, faultKinds: [String], throttleProfiles: [String]
    ) {
        self.list = list
        self.setEnabled = setEnabled
        self.create = create
        self.remove = remove
        self.faultKinds = faultKinds
        self.throttleProfiles = throttleProfiles
    }
}
