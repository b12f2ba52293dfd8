/// Valid HTTP/1 responses that robustness tests mutate: every way a response body is framed (length, chunked with
/// an extension and trailers, until close), an interim head before the final one, a protocol switch, and the
/// statuses that have no body.
public let http1ResponseSeeds: [[UInt8]] = [
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;a=b\r\nwiki\r\n0\r\nX-T: 1\r\n\r\n",
    "HTTP/1.0 200 OK\r\n\r\nuntil close",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nraw",
    "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n",
].map { Array($0.utf8) }
