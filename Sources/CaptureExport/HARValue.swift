import OrderedJSON

/// HAR's JSON: an ordered JSON value, so a HAR file reads in the spec's field order and comes out byte for byte the
/// same each time.
public typealias HARValue = JSONValue
/// One `"key": value` of a `HARValue.object`.
public typealias HARMember = JSONValue.Member

/// Builds an object's members in order, leaving out the optional ones that are nil.
struct HARObject {
    var members: [HARMember] = []

    mutating func add(_ key: String, _ value: HARValue?) {
        if let value { members.append(HARMember(key, value)) }
    }

    mutating func add(_ key: String, _ value: String?) { add(key, value.map(HARValue.string)) }
    mutating func add(_ key: String, _ value: Int?) { add(key, value.map(HARValue.int)) }
    mutating func add(_ key: String, _ value: Bool?) { add(key, value.map(HARValue.bool)) }

    var value: HARValue { .object(members) }
}
