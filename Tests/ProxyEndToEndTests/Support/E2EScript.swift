import Foundation

/// The programs the end-to-end tests run: Python clients and origins, and the shell script that makes the test PKI.
/// Each is a file of its own in `Tests/ProxyEndToEndTests/Scripts`, documented in its docstring, so it can be run
/// (`python3 Scripts/X.py -h` prints its usage), read and checked alone (`PythonScriptTests` compiles them all).
///
/// They are found from this source file's path (`#filePath`), not declared as resources: `swift test` builds and
/// runs the tests in the package's checkout, so the files are always where the sources are; the scripts run in place
/// (a traceback names the file in the repository, and an edit needs no rebuild), and no `Bundle.module` copy is
/// made per build. The target excludes the folder (Package.swift) so SwiftPM does not ask what the files are.
enum E2EScript {
    /// `Tests/ProxyEndToEndTests/Scripts`.
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts")

    /// The path of the script `name` in `folder`.
    static func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
}

/// The test client: concurrent downloads, keep-alive, resets, connection churn, Upgrade, http.client CONNECT.
let clientScript = E2EScript.path("client.py")
/// The tiny origin (HTTP or HTTPS) most tests start; prints `PORT n` once it listens.
let originScript = E2EScript.path("origin.py")
/// Makes the test CA and leaves (good and deliberately flawed) with the openssl CLI, in the current folder.
let pkiScript = E2EScript.path("pki.sh")
/// The differential origin and client: the same requests direct and through ATSProxy (DifferentialTests).
let differentialScript = E2EScript.path("differential.py")
/// A raw HTTP/2 client behind a CONNECT tunnel, its frames written by hand (H2Stage's `h2Client`).
let h2ClientScript = E2EScript.path("h2_client.py")
/// An HTTP/2 origin written frame by frame that sends GOAWAY at a chosen moment (nghttpd cannot).
let goAwayOriginScript = E2EScript.path("goaway_origin.py")
/// An HTTP/2 origin that answers its first request, sends GOAWAY and closes, as servers do when they shut down.
let closingOriginScript = E2EScript.path("closing_origin.py")
/// An HTTP/2 client on python3-h2 offering exactly the ALPN list it is given (the h2-only client curl cannot be).
let h2LibraryClientScript = E2EScript.path("h2_library_client.py")
/// An HTTP/2 client on python3-h2 that resets streams after their responses ended, as Go's client does under load.
let h2CancellingClientScript = E2EScript.path("h2_cancelling_client.py")
/// A misbehaving origin: unrequested responses, unasked-for 101s, silence.
let hostileOriginScript = E2EScript.path("hostile_origin.py")
/// A client that stalls on purpose (a half head, a slow body).
let slowClientScript = E2EScript.path("slow_client.py")
/// A client that pins one host in code, as an app with a URLSession delegate does.
let pinningClientScript = E2EScript.path("pinning_client.py")
