/// A binary min-heap of timer deadlines. Cancelled timers are removed lazily (their callback is dropped from the
/// loop's table and the heap entry is skipped when it surfaces), which keeps cancel O(1).
struct TimerHeap {
    struct Entry {
        let deadline: UInt64
        let id: UInt64
        /// Earlier deadline first; equal deadlines fire in the order they were scheduled (ids increase).
        func precedes(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : id < other.id
        }
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }
    var first: Entry? { entries.first }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].precedes(entries[parent]) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let top = entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < entries.count && entries[left].precedes(entries[smallest]) { smallest = left }
            if right < entries.count && entries[right].precedes(entries[smallest]) { smallest = right }
            if smallest == parent { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
