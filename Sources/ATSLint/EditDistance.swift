/// Levenshtein distance between `a` and `b` over Unicode scalars, giving up (returning `limit + 1`) once every
/// path exceeds `limit`, so comparing a long junk key against the catalogue stays cheap.
func editDistance(_ a: String, _ b: String, limit: Int) -> Int {
    let x = Array(a.unicodeScalars)
    let y = Array(b.unicodeScalars)
    if abs(x.count - y.count) > limit { return limit + 1 }
    if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
    var previous = Array(0...y.count)
    var current = [Int](repeating: 0, count: y.count + 1)
    for i in 1...x.count {
        current[0] = i
        var rowMinimum = current[0]
        for j in 1...y.count {
            let substitution = previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1)
            current[j] = min(substitution, previous[j] + 1, current[j - 1] + 1)
            rowMinimum = min(rowMinimum, current[j])
        }
        if rowMinimum > limit { return limit + 1 }
        swap(&previous, &current)
    }
    return previous[y.count]
}
