/// A request's `Range` against a representation of `size` bytes (RFC 9110 §14): only a single byte range is served;
/// anything else is ignored, which the RFC allows (the whole representation is sent).
enum ByteRange: Equatable {
    /// Serve bytes `lower...upper` (inclusive), both inside the file.
    case satisfiable(lower: Int, upper: Int)
    /// A valid single range that selects nothing of the file: 416 with `Content-Range: bytes */size`.
    case unsatisfiable
    /// No range, another unit, several ranges, or syntax we do not take: send the whole file.
    case ignored

    init(header: String?, size: Int) {
        guard let header else {
            self = .ignored
            return
        }
        let trimmed = header.trimmingSpaces
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes=" else {
            self = .ignored
            return
        }
        let spec = trimmed.dropFirst(6).trimmingSpaces
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .ignored
            return
        }
        let first = spec[..<dash].trimmingSpaces
        let last = spec[spec.index(after: dash)...].trimmingSpaces
        if first.isEmpty {
            // A suffix range: the last N bytes.
            guard let n = Self.number(last) else {
                self = .ignored
                return
            }
            self = n == 0 || size == 0 ? .unsatisfiable : .satisfiable(lower: max(0, size - n), upper: size - 1)
            return
        }
        guard let lower = Self.number(first) else {
            self = .ignored
            return
        }
        var upper = size - 1
        if !last.isEmpty {
            guard let n = Self.number(last), n >= lower else {
                self = .ignored
                return
            }
            upper = min(n, size - 1)
        }
        self = lower < size ? .satisfiable(lower: lower, upper: upper) : .unsatisfiable
    }

    /// Digits only; a number too large for Int saturates (it lies past any file's end).
    static func number(_ s: Substring) -> Int? {
        guard !s.isEmpty, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(s) ?? Int.max
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        let s = self[...]
        let start = s.firstIndex { $0 != " " && $0 != "\t" } ?? s.endIndex
        let end = s.lastIndex { $0 != " " && $0 != "\t" }.map { s.index(after: $0) } ?? start
        return Substring(s[start..<Swift.max(start, end)])
    }
}
