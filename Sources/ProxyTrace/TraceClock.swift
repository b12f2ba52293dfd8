/// A wall-clock time of day, `HH:MM:SS.mmm`, as the diagnostics envelope prints it.
public struct TraceTime: Sendable, Equatable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int
    public var second: Int
    public var millisecond: Int

    public init(hour: Int, minute: Int, second: Int, millisecond: Int) {
        self.hour = hour
        self.minute = minute
        self.second = second
        self.millisecond = millisecond
    }

    /// The UTC time of day of a Unix timestamp.
    public init(unixTime: Double) {
        let ms = Int((unixTime * 1000).rounded(.down))
        let msOfDay = ((ms % 86_400_000) + 86_400_000) % 86_400_000
        self.init(
            hour: msOfDay / 3_600_000, minute: msOfDay / 60_000 % 60, second: msOfDay / 1000 % 60,
            millisecond: msOfDay % 1000)
    }

    public var description: String {
        func pad(_ v: Int, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(millisecond, 3))"
    }
}
