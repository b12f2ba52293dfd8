extension PlistPreScan {
    /// Refuses XML plists nested deeper than `maximumDepth`, counting `<dict>`/`<array>` opens against closes.
    ///
    /// Comments, CDATA sections, processing instructions and the DOCTYPE are skipped. Any `<dict …>` or
    /// `<array …>` opening tag counts (whitespace or attributes after the name included), so the count never
    /// undershoots what Foundation's parser will recurse into; self-closing `<dict/>` does not nest.
    static func checkXMLDepth(_ bytes: [UInt8]) throws(Failure) {
        let lt = UInt8(ascii: "<")
        let gt = UInt8(ascii: ">")
        let slash = UInt8(ascii: "/")
        let newline = UInt8(ascii: "\n")
        var depth = 0
        var line = 1
        var i = 0
        let n = bytes.count

        func hasPrefix(_ s: String, at index: Int) -> Bool {
            var j = index
            for c in s.utf8 {
                guard j < n, bytes[j] == c else { return false }
                j += 1
            }
            return true
        }
        /// Index just past `terminator` starting the search at `from`, counting newlines; `n` if absent.
        func skip(past terminator: String, from: Int) -> Int {
            var j = from
            while j < n {
                if hasPrefix(terminator, at: j) { return j + terminator.utf8.count }
                if bytes[j] == newline { line += 1 }
                j += 1
            }
            return n
        }
        func isNameEnd(_ index: Int) -> Bool {
            guard index < n else { return true }
            let c = bytes[index]
            return c == gt || c == slash || c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D
        }

        while i < n {
            let c = bytes[i]
            if c == newline {
                line += 1
                i += 1
                continue
            }
            guard c == lt else {
                i += 1
                continue
            }
            if hasPrefix("<!--", at: i) {
                i = skip(past: "-->", from: i + 4)
            } else if hasPrefix("<![CDATA[", at: i) {
                i = skip(past: "]]>", from: i + 9)
            } else if hasPrefix("<?", at: i) {
                i = skip(past: "?>", from: i + 2)
            } else if hasPrefix("<!", at: i) {
                i = skip(past: ">", from: i + 2)
            } else if hasPrefix("</", at: i) {
                let nameStart = i + 2
                for name in ["dict", "array"]
                where hasPrefix(name, at: nameStart) && isNameEnd(nameStart + name.utf8.count) {
                    depth = max(0, depth - 1)
                }
                i = skip(past: ">", from: nameStart)
            } else {
                let nameStart = i + 1
                var opensContainer = false
                for name in ["dict", "array"]
                where hasPrefix(name, at: nameStart) && isNameEnd(nameStart + name.utf8.count) {
                    opensContainer = true
                }
                let end = skip(past: ">", from: nameStart)
                // `end - 2` is the byte before `>`: a `/` there makes the tag self-closing.
                let selfClosing = end - 2 >= nameStart && end <= n && bytes[end - 1] == gt && bytes[end - 2] == slash
                if opensContainer && !selfClosing {
                    depth += 1
                    if depth > maximumDepth { throw .tooDeep(line: line) }
                }
                i = end
            }
        }
    }
}
