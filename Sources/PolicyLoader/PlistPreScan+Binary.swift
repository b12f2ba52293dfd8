extension PlistPreScan {
    /// Walks a binary plist's object graph (format `bplist00`) without recursion and refuses it when the trailer,
    /// offset table or any reachable object lies outside the file, an object reference is out of range, a
    /// container contains itself, nesting exceeds `maximumDepth`, or the unfolded tree would exceed
    /// `maximumValues`.
    ///
    /// Layout (Apple's CFBinaryPList.c, the public format description): 8-byte header, objects, an offset table
    /// of `numObjects` big-endian integers of `offsetIntSize` bytes, and a 32-byte trailer whose bytes 6…7 are
    /// `offsetIntSize` and `objectRefSize`, followed by big-endian UInt64 `numObjects`, `topObject`,
    /// `offsetTableOffset`.
    static func checkBinary(_ bytes: [UInt8]) throws(Failure) {
        let graph = try BinaryObjectTable(bytes)
        try graph.checkGraph()
    }
}

/// Bounds-checked reader for the object table of a binary plist.
struct BinaryObjectTable {
    let bytes: [UInt8]
    let offsetIntSize: Int
    let objectRefSize: Int
    let numObjects: Int
    let topObject: Int
    let offsetTableOffset: Int

    init(_ bytes: [UInt8]) throws(PlistPreScan.Failure) {
        self.bytes = bytes
        let n = bytes.count
        guard n >= 8 + 1 + 32 else { throw .corrupt("file too short for a header, one object and a trailer") }
        let t = n - 32
        offsetIntSize = Int(bytes[t + 6])
        objectRefSize = Int(bytes[t + 7])
        guard (1...8).contains(offsetIntSize), (1...8).contains(objectRefSize) else {
            throw .corrupt("trailer has invalid integer sizes (offsets \(offsetIntSize), refs \(objectRefSize))")
        }
        let objects = Self.readUInt(bytes, at: t + 8, size: 8)
        let top = Self.readUInt(bytes, at: t + 16, size: 8)
        let tableOffset = Self.readUInt(bytes, at: t + 24, size: 8)
        // Every object takes at least one byte, so more objects than bytes is a lie.
        guard objects >= 1, objects <= UInt64(n) else { throw .corrupt("trailer claims \(objects) objects") }
        guard top < objects else { throw .corrupt("top object \(top) is not among the \(objects) objects") }
        guard tableOffset >= 9, tableOffset <= UInt64(t) else {
            throw .corrupt("offset table at \(tableOffset) lies outside the file")
        }
        numObjects = Int(objects)
        topObject = Int(top)
        offsetTableOffset = Int(tableOffset)
        let (tableBytes, overflow) = numObjects.multipliedReportingOverflow(by: offsetIntSize)
        guard !overflow, offsetTableOffset + tableBytes <= t else {
            throw .corrupt("offset table runs into the trailer")
        }
    }

    static func readUInt(_ bytes: [UInt8], at index: Int, size: Int) -> UInt64 {
        var v: UInt64 = 0
        for k in 0..<size { v = v << 8 | UInt64(bytes[index + k]) }
        return v
    }

    /// Start of object `ref`, checked to lie inside the object area.
    func offset(of ref: Int) throws(PlistPreScan.Failure) -> Int {
        let o = Self.readUInt(bytes, at: offsetTableOffset + ref * offsetIntSize, size: offsetIntSize)
        guard o >= 8, o < UInt64(offsetTableOffset) else {
            throw .corrupt("object \(ref) has offset \(o) outside the object area")
        }
        return Int(o)
    }

    /// `count` bytes starting at `start` must lie inside the object area.
    func requireInside(_ start: Int, _ count: Int, _ what: String) throws(PlistPreScan.Failure) {
        let (end, overflow) = start.addingReportingOverflow(count)
        guard !overflow, count >= 0, end <= offsetTableOffset else {
            throw .corrupt("\(what) runs past the object area")
        }
    }

    /// The length field of a marker whose low nibble is `info`; 0xF means an integer object follows.
    /// Returns the length and the index of the first payload byte.
    func length(info: Int, after index: Int) throws(PlistPreScan.Failure) -> (Int, Int) {
        if info != 0xF { return (info, index) }
        try requireInside(index, 1, "length")
        let marker = bytes[index]
        guard marker >> 4 == 0x1 else { throw .corrupt("length at byte \(index) is not an integer") }
        let size = 1 << Int(marker & 0x0F)
        guard size <= 8 else { throw .corrupt("length integer at byte \(index) is \(size) bytes") }
        try requireInside(index + 1, size, "length")
        let v = Self.readUInt(bytes, at: index + 1, size: size)
        guard v <= UInt64(bytes.count) else { throw .corrupt("length \(v) at byte \(index) exceeds the file") }
        return (Int(v), index + 1 + size)
    }

    /// For a container, its child references (first index in `bytes`, count); for a scalar, checks the payload
    /// is inside the object area and returns nil.
    func children(of ref: Int) throws(PlistPreScan.Failure) -> (start: Int, count: Int)? {
        let o = try offset(of: ref)
        let marker = bytes[o]
        let type = Int(marker >> 4)
        let info = Int(marker & 0x0F)
        switch type {
        case 0x0:  // null, bool, fill
            return nil
        case 0x1:  // integer of 2^info bytes
            try requireInside(o + 1, 1 << min(info, 4), "integer object \(ref)")
            return nil
        case 0x2:  // real of 2^info bytes
            try requireInside(o + 1, 1 << min(info, 4), "real object \(ref)")
            return nil
        case 0x3:  // date: 8-byte float
            try requireInside(o + 1, 8, "date object \(ref)")
            return nil
        case 0x4, 0x5, 0x7:  // data, ASCII string, UTF-8 string: count bytes
            let (count, start) = try length(info: info, after: o + 1)
            try requireInside(start, count, "object \(ref)")
            return nil
        case 0x6:  // UTF-16 string: count code units
            let (count, start) = try length(info: info, after: o + 1)
            try requireInside(start, count * 2, "string object \(ref)")
            return nil
        case 0x8:  // UID of info+1 bytes
            try requireInside(o + 1, info + 1, "uid object \(ref)")
            return nil
        case 0xB, 0xC:
            // Sets are no property-list type (no Info.plist holds one), and swift-corelibs-foundation crashes
            // bridging one to Swift (a null metadata dereference in NSSet → Set<AnyHashable>): refused here, before
            // Foundation parses the file.
            throw .corrupt("object \(ref) is a set, which a property list cannot hold")
        case 0xA, 0xD:  // array, dictionary (keys then values)
            let (count, start) = try length(info: info, after: o + 1)
            let refs = type == 0xD ? count * 2 : count
            let (byteCount, overflow) = refs.multipliedReportingOverflow(by: objectRefSize)
            guard !overflow else { throw .corrupt("container object \(ref) is too large") }
            try requireInside(start, byteCount, "container object \(ref)")
            return (start, refs)
        default:
            throw .corrupt("object \(ref) has unknown type marker 0x\(String(marker, radix: 16))")
        }
    }

    func childRef(start: Int, index: Int) throws(PlistPreScan.Failure) -> Int {
        let r = Self.readUInt(bytes, at: start + index * objectRefSize, size: objectRefSize)
        guard r < UInt64(numObjects) else {
            throw .corrupt("object reference \(r) is out of range (\(numObjects) objects)")
        }
        return Int(r)
    }

    /// Iterative depth-first walk from the top object with memoised depth and unfolded size per object:
    /// linear in the number of references, whatever the sharing.
    func checkGraph() throws(PlistPreScan.Failure) {
        enum State: UInt8 { case unvisited, onStack, done }
        var state = [State](repeating: .unvisited, count: numObjects)
        var depth = [Int](repeating: 0, count: numObjects)  // containers nested in and including this object
        var size = [Int](repeating: 1, count: numObjects)  // values in the unfolded subtree
        struct Frame {
            let ref: Int
            let start: Int
            let count: Int
            var next: Int
        }
        var stack: [Frame] = []

        func enter(_ ref: Int) throws(PlistPreScan.Failure) {
            state[ref] = .onStack
            if let c = try children(of: ref) {
                guard stack.count < PlistPreScan.maximumDepth else { throw .tooDeep(line: nil) }
                stack.append(Frame(ref: ref, start: c.start, count: c.count, next: 0))
            } else {
                state[ref] = .done
            }
        }

        try enter(topObject)
        while var frame = stack.popLast() {
            if frame.next < frame.count {
                let child = try childRef(start: frame.start, index: frame.next)
                frame.next += 1
                stack.append(frame)
                switch state[child] {
                case .onStack: throw .cyclic
                case .unvisited: try enter(child)
                case .done: break
                }
                continue
            }
            // All children done: fold them in.
            var d = 1
            var s = 1
            for k in 0..<frame.count {
                let child = try childRef(start: frame.start, index: k)
                d = max(d, depth[child] + 1)
                s = s &+ size[child]
                if s > PlistPreScan.maximumValues { throw .tooManyValues }
            }
            guard d <= PlistPreScan.maximumDepth else { throw .tooDeep(line: nil) }
            depth[frame.ref] = d
            size[frame.ref] = s
            state[frame.ref] = .done
        }
    }
}
