/// The Content-Type map local gives a file, from its extension: the formats an app or a web page loads. Text types
/// say `charset=utf-8`, the encoding a mock file written in an editor has.
public enum MediaTypes {
    static let byExtension: [String: String] = [
        "json": "application/json", "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8", "txt": "text/plain; charset=utf-8", "xml": "application/xml",
        "plist": "application/x-plist", "csv": "text/csv; charset=utf-8", "md": "text/markdown; charset=utf-8",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
        "svg": "image/svg+xml", "webp": "image/webp", "ico": "image/x-icon", "avif": "image/avif",
        "heic": "image/heic", "pdf": "application/pdf", "mp4": "video/mp4", "m4v": "video/x-m4v",
        "mov": "video/quicktime", "webm": "video/webm", "mp3": "audio/mpeg", "m4a": "audio/mp4", "wav": "audio/wav",
        "m3u8": "application/vnd.apple.mpegurl", "ts": "video/mp2t", "woff": "font/woff", "woff2": "font/woff2",
        "ttf": "font/ttf", "otf": "font/otf", "wasm": "application/wasm", "zip": "application/zip",
        "map": "application/json", "webmanifest": "application/manifest+json",
    ]

    /// The fallback for an unknown or missing extension (RFC 9110 §8.3: the recipient may then sniff).
    public static let fallback = "application/octet-stream"

    /// The Content-Type for a file name or path (case-insensitive extension).
    public static func contentType(forPath path: String) -> String {
        let name = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return fallback }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? fallback
    }
}
