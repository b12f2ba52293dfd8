import PolicyLoader
import Testing

@Suite("Key positions in XML plists")
struct PlistKeyLocatorTests {
    @Test("Each key's line and column, by key path; arrays by index; comments skipped")
    func positions() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \t<key>CFBundleName</key><string>A</string>
            \t<!-- <key>NSAppTransportSecurity</key> -->
            \t<key>NSAppTransportSecurity</key>
            \t<dict>
            \t\t<key>NSExceptionDomains</key>
            \t\t<dict>
            \t\t\t<key>a&amp;b.example.com</key>
            \t\t\t<dict>
            \t\t\t\t<key>NSExceptionMinimumTLSVersion</key> <string>TLSv1.1</string>
            \t\t\t</dict>
            \t\t</dict>
            \t\t<key>List</key><array><dict><key>Inner</key><true/></dict></array>
            \t</dict>
            </dict>
            </plist>
            """
        let p = PlistKeyLocator.keyPositions(in: Array(xml.utf8))
        #expect(p[["CFBundleName"]] == .init(line: 5, column: 2))
        #expect(p[["NSAppTransportSecurity"]] == .init(line: 7, column: 2))
        #expect(p[["NSAppTransportSecurity", "NSExceptionDomains"]] == .init(line: 9, column: 3))
        #expect(p[["NSAppTransportSecurity", "NSExceptionDomains", "a&b.example.com"]] == .init(line: 11, column: 4))
        #expect(p[["NSAppTransportSecurity", "NSExceptionDomains", "a&b.example.com", "NSExceptionMinimumTLSVersion"]]
            == .init(line: 13, column: 5))
        #expect(p[["NSAppTransportSecurity", "List", "0", "Inner"]] == .init(line: 16, column: 31))
    }

    @Test("Not an XML plist, or cut short: no positions, no crash",
          arguments: ["bplist00\u{1}", "", "</dict></dict>", "<dict><string>x", "<!-- <key>a</key>"])
    func notXML(text: String) {
        #expect(PlistKeyLocator.keyPositions(in: Array(text.utf8)).isEmpty)
    }
}
