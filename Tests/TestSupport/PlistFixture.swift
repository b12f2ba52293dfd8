import Foundation

/// Plist fixtures written as XML, with the binary (`bplist00`) form derived from the same text by Foundation, so
/// every fixture exercises both encodings.
public enum PlistFixture {
    /// A complete XML plist document around `body` (one root element).
    public static func xml(_ body: String) -> [UInt8] {
        Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            \(body)
            </plist>

            """.utf8)
    }

    /// The same plist re-encoded as a binary plist.
    public static func binary(fromXML xml: [UInt8]) throws -> [UInt8] {
        let any = try PropertyListSerialization.propertyList(from: Data(xml), options: [], format: nil)
        return [UInt8](try PropertyListSerialization.data(fromPropertyList: any, format: .binary, options: 0))
    }
}
