/// A rule that acted on an exchange (issue 33): the console line, the JSON event, the capture, HAR and the web view
/// show it, so a changed or injected response is never taken for the server's own.
public struct AppliedRule: Sendable, Equatable, Codable {
    /// The rule's id: its name, else where it was written (`rules.txt:3`, `--fault #2`).
    public var id: String
    /// The action's keyword (`map-local`, `modify-headers`, `fault`).
    public var action: String
    /// Where in the exchange it acted (`connection`, `request-head`, `response-head`).
    public var point: String
    /// What it did, in a few words (`served mocks/login.json`, `expired certificate (injected)`), with any notice.
    public var note: String?

    public init(id: String, action: String, point: String, note: String? = nil) {
        self.id = id
        self.action = action
        self.point = point
        self.note = note
    }

    /// `[login] map-local: served mocks/login.json`: the console's and the web view's one-line form.
    public var summary: String {
        "[\(id)] \(action)" + (note.map { ": " + $0 } ?? "")
    }
}
