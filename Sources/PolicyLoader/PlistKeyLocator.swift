import Foundation

/// Where each `<key>` of an XML plist is, by key path from the root: for reports that point at the offending key
/// (SARIF regions), not only at the file. Binary plists, and text that is not an XML plist, give no positions.
///
/// A light scan, not a parser: it follows `<dict>`/`<array>` nesting and the `<key>` elements, skipping comments,
/// CDATA, processing instructions and the DOCTYPE as the depth pre-scan does. Array elements are named by their
/// index (`"0"`, `"1"`, …). Lines and columns count from 1; the column is in UTF-16 code units, SARIF's default.
public enum PlistKeyLocator {
    public struct Position: Sendable, Equatable {
        public var line: Int
        public var column: Int
        public init(line: Int, column: Int) {
            self.line = line
            self.column = column
        }
    }

    public static func keyPositions(in bytes: [UInt8]) -> [[String]: Position] {
        let n = bytes.count
        var positions: [[String]: Position] = [:]
        var line = 1
        var lineStart = 0
        var i = 0
        // Each open container: its path, and for a dict the key waiting for its value, for an array the next index.
        var stack: [(path: [String], isDict: Bool, pendingKey: String?, nextIndex: Int)] = []

        func hasPrefix(_ s: String, at index: Int) -> Bool {
            var j = index
            for c in s.utf8 {
                guard j < n, bytes[j] == c else { return false }
                j += 1
            }
            return true
        }
        func advance(to end: Int) {
            while i < min(end, n) {
                if bytes[i] == UInt8(ascii: "\n") {
                    line += 1
                    lineStart = i + 1
                }
                i += 1
            }
        }
        func find(_ s: String, from: Int) -> Int {
            var j = from
            while j < n, !hasPrefix(s, at: j) { j += 1 }
            return j
        }
        func column(at index: Int) -> Int {
            String(decoding: bytes[lineStart..<index], as: UTF8.self).utf16.count + 1
        }
        /// The path a value starting now gets, consuming its dict key or array index.
        func nextValuePath() -> [String]? {
            guard var top = stack.popLast() else { return [] }
            defer { stack.append(top) }
            if top.isDict {
                guard let key = top.pendingKey else { return nil }
                top.pendingKey = nil
                return top.path + [key]
            }
            top.nextIndex += 1
            return top.path + [String(top.nextIndex - 1)]
        }

        while i < n {
            guard bytes[i] == UInt8(ascii: "<") else {
                advance(to: i + 1)
                continue
            }
            if hasPrefix("<!--", at: i) {
                advance(to: find("-->", from: i + 4) + 3)
            } else if hasPrefix("<![CDATA[", at: i) {
                advance(to: find("]]>", from: i + 9) + 3)
            } else if hasPrefix("<?", at: i) || hasPrefix("<!", at: i) {
                advance(to: find(">", from: i + 2) + 1)
            } else if hasPrefix("<key>", at: i) {
                let start = Position(line: line, column: column(at: i))
                let textEnd = find("</key>", from: i + 5)
                let key = unescape(String(decoding: bytes[(i + 5)..<min(textEnd, n)], as: UTF8.self))
                if var top = stack.popLast() {
                    if top.isDict {
                        top.pendingKey = key
                        positions[top.path + [key]] = positions[top.path + [key]] ?? start
                    }
                    stack.append(top)
                }
                advance(to: textEnd + 6)
            } else if hasPrefix("</dict", at: i) || hasPrefix("</array", at: i) {
                _ = stack.popLast()
                advance(to: find(">", from: i) + 1)
            } else if hasPrefix("</", at: i) {
                advance(to: find(">", from: i) + 1)
            } else {
                let end = find(">", from: i)
                let selfClosing = end > i && end < n && bytes[end - 1] == UInt8(ascii: "/")
                let isDict = hasPrefix("<dict", at: i) && !hasPrefix("<dicta", at: i)
                let isArray = hasPrefix("<array", at: i)
                let isPlist = hasPrefix("<plist", at: i)
                if !isPlist {
                    let path = nextValuePath()
                    if (isDict || isArray) && !selfClosing {
                        stack.append((path ?? [], isDict, nil, 0))
                    }
                }
                advance(to: end + 1)
            }
        }
        return positions
    }

    /// The five predefined XML entities; numeric references are rare in keys and left as written.
    private static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
