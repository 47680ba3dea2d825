import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import API

/// HTTP/1.0 without keep-alive gets `Connection: close` on the request (Hummingbird then ends the connection after
/// the answer) and on the answer; keep-alive requests pass unchanged.
@Suite struct HTTP10ConnectionHandlerTests {
    static func exchange(version: HTTPVersion, connection: String?) throws -> (request: HTTPRequestHead, response: HTTPResponseHead) {
        let channel = EmbeddedChannel(handler: HTTP10ConnectionHandler())
        var head = HTTPRequestHead(version: version, method: .GET, uri: "/healthz")
        if let connection { head.headers.add(name: "Connection", value: connection) }
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        guard case .head(let passed) = try #require(try channel.readInbound(as: HTTPServerRequestPart.self)) else {
            throw CancellationError()
        }
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        guard case .head(let answered) = try #require(try channel.readOutbound(as: HTTPServerResponsePart.self)) else {
            throw CancellationError()
        }
        _ = try channel.finish()
        return (passed, answered)
    }

    @Test func http10WithoutKeepAliveIsMarkedClose() throws {
        let (request, response) = try Self.exchange(version: .http1_0, connection: nil)
        #expect(request.headers["connection"] == ["close"])
        #expect(response.headers["connection"] == ["close"])
    }

    @Test func http11WithCloseIsNormalisedForHummingbird() throws {
        let (request, _) = try Self.exchange(version: .http1_1, connection: "Close")
        #expect(request.headers["connection"] == ["close"])
    }

    @Test func keepAliveRequestsPassUnchanged() throws {
        let old = try Self.exchange(version: .http1_0, connection: "keep-alive")
        #expect(old.request.headers["connection"] == ["keep-alive"])
        #expect(old.response.headers["connection"].isEmpty)
        let new = try Self.exchange(version: .http1_1, connection: nil)
        #expect(new.request.headers["connection"].isEmpty)
        #expect(new.response.headers["connection"].isEmpty)
    }
}
