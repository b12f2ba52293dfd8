import ATSPolicy
import Foundation

/// Converts what `PropertyListSerialization` returns into a `PlistValue`, keeping the file's own types.
///
/// Measured on Linux (swift-corelibs-foundation, Swift 6.3), XML and binary alike: `<true/>`/`<false/>` come back
/// as Swift `Bool`; `<integer>` and `<real>` as `NSNumber` (objCType `i`/`q`/`Q` vs `d`). An `NSNumber` holding
/// 1 also answers `as? Bool`, so booleans are recognised by their dynamic type, never by a cast, and
/// `<string>YES</string>` stays a string. Foundation returns dictionaries unordered, so keys are sorted by their
/// Unicode scalars to make every tree (and every lint report) deterministic.
enum PlistConversion {
    /// Failure with the key path at which it happened.
    struct Failure: Error {
        let keyPath: [String]
        let kind: PolicyLoadError.Kind
    }

    /// Recursion is safe: the pre-scan has already bounded nesting to `PlistPreScan.maximumDepth`.
    static func value(_ any: Any, path: [String] = []) throws(Failure) -> PlistValue {
        if type(of: any) == Bool.self, let b = any as? Bool { return .bool(b) }
        if let s = any as? String { return .string(s) }
        if let n = any as? NSNumber { return number(n) }
        if let d = any as? Date { return .date(d.timeIntervalSinceReferenceDate) }
        if let d = any as? Data { return .data([UInt8](d)) }
        if let a = any as? [Any] {
            var out: [PlistValue] = []
            out.reserveCapacity(a.count)
            for (i, element) in a.enumerated() { out.append(try value(element, path: path + ["[\(i)]"])) }
            return .array(out)
        }
        if let d = any as? [AnyHashable: Any] {
            var entries: [(key: String, value: PlistValue)] = []
            entries.reserveCapacity(d.count)
            for (k, v) in d {
                guard let key = k.base as? String else { throw Failure(keyPath: path, kind: .nonStringKey) }
                entries.append((key, try value(v, path: path + [key])))
            }
            entries.sort { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) }
            return .dictionary(PlistDictionary(entries))
        }
        // Binary plists can hold UIDs (keyed archives) and nulls, which XML plists and Info.plists never do.
        throw Failure(
            keyPath: path, kind: .malformed(line: nil, detail: "unsupported value of type \(type(of: any))"))
    }

    private static func number(_ n: NSNumber) -> PlistValue {
        switch String(cString: n.objCType) {
        case "f", "d":
            return .real(n.doubleValue)
        case "Q", "L", "I", "S", "C":
            // An unsigned value above Int.max (only 2^63…2^64-1) is clamped; no ATS key is numeric.
            return .integer(Int(exactly: n.uint64Value) ?? Int.max)
        default:
            return .integer(n.intValue)
        }
    }
}
