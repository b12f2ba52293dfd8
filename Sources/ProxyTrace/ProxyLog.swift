/// Something worth telling the user: sessions emit it (`ProxyCommand.log`), and the sinks (`LogSink`) format it for
/// the console, the diagnostics trace and the JSON log, or keep it in a capture.
public enum ProxyLog: Sendable, Equatable {
    /// One finished exchange: the console line.
    case exchange(ExchangeSummary)
    /// A CFNetwork-style diagnostics record (only produced when diagnostics are on).
    case diagnostics(DiagnosticsRecord)
    /// A machine-readable event (only produced when the JSON log is on).
    case event(TraceEvent)
    /// A plain notice: why a host is tunnelled, why a client handshake failed. Repeats are folded by `kind` when
    /// given (notices whose text varies by host or detail, such as malformed ClientHellos), else by the text.
    case notice(String, kind: String? = nil)
}
