import OrderedJSON
import Testing

@Suite("Ordered JSON rendering")
struct JSONValueTests {
    let document = JSONValue.fields([
        ("name", .string("a \"quoted\"\tname\u{1}")),
        ("empty", .array([])),
        ("none", .object([])),
        ("items", .array([.int(1), .double(12.5), .double(0.1239), .bool(true), .null])),
        ("nested", .fields([("z", .int(-3)), ("a", .fields([("deep", .array([.string("x")]))]))])),
    ])

    @Test("Pretty-printed: members in the order given, two spaces a level, empty containers on one line")
    func rendered() {
        #expect(document.rendered() == """
            {
              "name": "a \\"quoted\\"\\tname\\u0001",
              "empty": [],
              "none": {},
              "items": [
                1,
                12.5,
                0.124,
                true,
                null
              ],
              "nested": {
                "z": -3,
                "a": {
                  "deep": [
                    "x"
                  ]
                }
              }
            }
            """)
    }

    @Test("Compact: the same document on one line, without spaces")
    func compact() {
        #expect(document.compact()
            == #"{"name":"a \"quoted\"\tname\u0001","empty":[],"none":{},"items":[1,12.5,0.124,true,null],"nested":{"z":-3,"a":{"deep":["x"]}}}"#)
    }

    @Test("An entry written inside a document starts at its level")
    func renderedAtLevel() {
        #expect(JSONValue.array([.int(1)]).rendered(level: 1) == "[\n    1\n  ]")
    }
}
