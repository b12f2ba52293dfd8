/// Every key of a value `JSONSerialization` decoded, at any depth: lets a test check that no key of Swift's own
/// encoding (`_0`) reached a JSON document.
public func allKeys(_ value: Any) -> [String] {
    if let object = value as? [String: Any] { return object.keys + object.values.flatMap(allKeys) }
    if let array = value as? [Any] { return array.flatMap(allKeys) }
    return []
}
