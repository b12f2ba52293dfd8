import ArgumentParser
import Foundation
import ProxyTrace

/// Where `run` takes the proxy credentials from: `--auth USER:PASSWORD` (simple, but every user of the machine
/// sees it in `ps`), `--auth-file FILE` (its first line) or the `ATSPROXY_AUTH` environment variable. At most one.
struct ProxyCredentialSource {
    static let environmentVariable = "ATSPROXY_AUTH"

    var option: String?
    var file: String?
    var environment: [String: String]

    /// The credentials, or nil when none of the three is given. Errors name the source, never the password.
    func credentials() throws -> ProxyCredentials? {
        let given = [option.map { _ in "--auth" }, file.map { _ in "--auth-file" },
                     environment[Self.environmentVariable].map { _ in Self.environmentVariable }].compactMap { $0 }
        guard given.count <= 1 else {
            throw ValidationError("give the proxy credentials once: \(given.joined(separator: " and ")) are both set")
        }
        if let option { return try parse(option, source: "--auth") }
        if let file { return try parse(try Self.firstLine(of: file), source: "--auth-file \(file)") }
        if let value = environment[Self.environmentVariable] {
            return try parse(value, source: Self.environmentVariable)
        }
        return nil
    }

    private func parse(_ text: String, source: String) throws -> ProxyCredentials {
        do { return try ProxyCredentials(parsing: text) } catch {
            // ProxyCredentials' messages say "--auth"; say where the value really came from.
            throw ValidationError(error.description.replacingOccurrences(of: "--auth", with: source))
        }
    }

    /// The file's first line, without its line ending: a password file written by `echo user:pw > f` works.
    static func firstLine(of path: String) throws -> String {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ValidationError("--auth-file \(path): cannot read it (\(error.localizedDescription))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ValidationError("--auth-file \(path): not UTF-8 text")
        }
        return String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
    }
}
