import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Out of file descriptors")
struct DescriptorReserveTests {
    /// A TCP connection to 127.0.0.1:port, blocking, with a 5 s receive timeout; -1 when it cannot be made.
    static func connect(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if rc != 0 {
            close(fd)
            return -1
        }
        return fd
    }

    @Test("A client that comes when the proxy has no descriptors left is answered 503 and told why, and the proxy lives on")
    func answered503() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        // 40 descriptors: a few dozen idle clients use them up.
        let proxy = try TestProcess(
            "/bin/sh",
            ["-c", "ulimit -n 40 && exec \"$0\" run --listen 127.0.0.1:0 --ca-dir \"$1\" --threads 1",
             e2e.binary, e2e.caDir.path],
            in: folder, name: "atsproxy-ulimit")
        let line = try await proxy.waitForLine(startingWith: "ATSProxy listening on 127.0.0.1:")
        let port = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Int($0) })
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        var answer = ""
        for _ in 0..<80 where answer.isEmpty {
            let fd = Self.connect(port: port)
            guard fd >= 0 else { continue }
            held.append(fd)
            // An accepted client gets nothing until it sends; an over-limit one gets the 503 at once. A short
            // non-blocking look tells them apart without a fixed sleep per connection.
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 200) == 1 {
                var buffer = [UInt8](repeating: 0, count: 512)
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { answer = String(decoding: buffer[0..<n], as: UTF8.self) }
            }
        }
        #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable"), "\(answer)")
        #expect(answer.contains("out of file descriptors"))
        #expect(proxy.isRunning)
        let notice = try await proxy.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("out of file descriptors") ? text : nil
        }
        #expect(notice.contains("answered 503"))
        // Once clients leave, the proxy serves again.
        for fd in held { close(fd) }
        held = []
        let again = try await curl(["-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(port)/"], in: folder)
        // The proxy's own address through it is its set-up page, answered without connecting anywhere.
        #expect(again.headerText.hasPrefix("HTTP/1.1 200"), "the set-up page answers: \(again.headerText) \(again.stderr)")
        #expect(again.bodyText.contains("Certificate Trust Settings"))
    }
}
