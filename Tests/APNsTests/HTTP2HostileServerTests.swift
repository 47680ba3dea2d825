import APNsTransport
import NIOCore
import NIOEmbedded
import NIOHTTP2
import NIOTLS
import Testing

@testable import APNs
@testable import HTTP2Client

/// The daemon's HTTP/2 client against a server that breaks the rules on purpose (the push services and webhook
/// receivers it will call are chosen by others): each case ends the connection with the GOAWAY it deserves, or is
/// obeyed, and every request comes back once, to be sent elsewhere. The server is NIOHTTP2's own handler, with bytes
/// it would never send injected beside it.
@Suite struct HTTP2HostileServerTests {
    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> ByteBuffer {
        ByteBuffer(bytes: HTTP2FrameReaderTests.frame(type: type, flags: flags, stream: stream, payload))
    }

    /// The error code of the GOAWAY the server received from the client, if any.
    static func goAway(_ pair: HTTP2Pair) -> HTTP2ErrorCode? {
        for frame in pair.received {
            if case .goAway(_, let code, _) = frame.payload { return code }
        }
        return nil
    }

    /// Every event until the connection reports its end.
    static func eventsUntilClosed(_ events: inout AsyncStream<HTTP2Event>.AsyncIterator) async -> [HTTP2Event] {
        var seen: [HTTP2Event] = []
        while let event = await events.next() {
            seen.append(event)
            if case .closed = event { break }
        }
        return seen
    }

    static func unanswered(_ events: [HTTP2Event]) -> [Int64] {
        events.flatMap { event -> [Int64] in
            if case .unanswered(let requests, _) = event { return requests.map(\.notification.messageID) }
            return []
        }
    }

    /// A connection with the first request in flight.
    static func inFlight() async throws -> (HTTP2Pair, HTTP2ClientHandler, AsyncStream<HTTP2Event>.AsyncIterator) {
        var (pair, handler, events) = try HTTP2ClientHandlerTests.connection()
        try pair.pump()
        guard case .maxStreams = await events.next() else { throw CancellationError() }
        #expect(handler.send([try HTTP2ClientHandlerTests.request(1)]))
        try pair.pump()
        return (pair, handler, events)
    }

    @Test func aContinuationFloodEndsTheConnectionWithBoundedMemory() async throws {
        var (pair, _, events) = try await Self.inFlight()
        var flood = Self.frame(type: 0x1, stream: 1, Array(repeating: 0x40, count: 1024))
        for _ in 0..<2_000 { flood.writeImmutableBuffer(Self.frame(type: 0x9, stream: 1, Array(repeating: 0x40, count: 1024))) }
        pair.client.pipeline.fireChannelRead(flood)
        try pair.pump()
        let seen = await Self.eventsUntilClosed(&events)
        #expect(Self.goAway(pair) == .enhanceYourCalm)
        #expect(Self.unanswered(seen) == [1], "the request comes back to be sent elsewhere")
        #expect(!pair.client.isActive)
    }

    @Test func aLoweredStreamLimitIsObeyed() async throws {
        var (pair, handler, events) = try HTTP2ClientHandlerTests.connection(
            serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 2)]
        )
        try pair.pump()
        guard case .maxStreams(2) = await events.next() else { throw CancellationError() }
        #expect(handler.send(try (1...5).map { try HTTP2ClientHandlerTests.request($0) }))
        try pair.pump()
        let opened = Set(pair.received.filter { $0.streamID != .rootStream }.map(\.streamID))
        #expect(opened == [1, 3], "two streams open, as the server allows")
        guard case .unanswered(let back, let reason) = await events.next() else { throw CancellationError() }
        #expect(back.map(\.notification.messageID) == [3, 4, 5] && reason.contains("MAX_CONCURRENT_STREAMS"))
        #expect(Self.goAway(pair) == nil, "NIOHTTP2's server saw nothing to object to")
    }

    @Test func aWindowPastTheLimitEndsTheConnection() async throws {
        for stream: UInt32 in [0, 1] {
            var (pair, _, events) = try await Self.inFlight()
            pair.client.pipeline.fireChannelRead(Self.frame(type: 0x8, stream: stream, [0x7f, 0xff, 0xff, 0xff]))
            try pair.pump()
            let seen = await Self.eventsUntilClosed(&events)
            #expect(Self.goAway(pair) == .flowControlError, "stream \(stream)")
            #expect(Self.unanswered(seen) == [1])
        }
    }

    @Test func aPingFloodEndsTheConnectionAndOrdinaryPingsAreAnswered() async throws {
        var (pair, _, events) = try await Self.inFlight()
        var pings = ByteBuffer()
        for n in 0..<50 { pings.writeImmutableBuffer(Self.frame(type: 0x6, stream: 0, Array(repeating: UInt8(n), count: 8))) }
        pair.client.pipeline.fireChannelRead(pings)
        var answered = 0
        while let bytes = try pair.client.readOutbound(as: ByteBuffer.self) {
            var bytes = bytes
            var reader = HTTP2FrameReader()
            while let frame = try reader.next(from: &bytes) { if case .ping(_, ack: true) = frame { answered += 1 } }
        }
        #expect(answered == 50 && pair.client.isActive)
        var flood = ByteBuffer()
        for _ in 0..<1_000 { flood.writeImmutableBuffer(Self.frame(type: 0x6, stream: 0, Array(repeating: 0, count: 8))) }
        pair.client.pipeline.fireChannelRead(flood)
        try pair.pump()
        let seen = await Self.eventsUntilClosed(&events)
        #expect(Self.goAway(pair) == .enhanceYourCalm)
        #expect(Self.unanswered(seen) == [1])
    }

    /// Behind TLS nothing is written until ALPN has chosen h2: a server that does not speak HTTP/2 gets no request.
    @Test(arguments: [nil, "http/1.1"])
    func withoutALPNh2NoRequestIsSent(negotiated: String?) async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        var events = stream.makeAsyncIterator()
        let handler = HTTP2ClientHandler(events: continuation, requestTimeout: .seconds(10), requiresALPN: true)
        let pair = try HTTP2Pair(client: handler, serverSettings: [])
        #expect(handler.send([try HTTP2ClientHandlerTests.request(1)]), "taken during the handshake")
        #expect(try pair.client.readOutbound(as: ByteBuffer.self) == nil, "nothing written before ALPN")
        pair.client.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: negotiated))
        let seen = await Self.eventsUntilClosed(&events)
        #expect(try pair.client.readOutbound(as: ByteBuffer.self) == nil, "no preface, no request")
        #expect(Self.unanswered(seen) == [1])
        guard case .closed(let reason, let ending) = seen.last else { throw CancellationError() }
        #expect(reason.contains("ALPN"))
        // Nothing was accepted, and the server speaks another protocol (a browser's push service may go on over HTTP/1.1).
        #expect(ending == .notHTTP2)
    }

    @Test func withALPNh2TheRequestsHeldDuringTheHandshakeFollowThePreface() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        var events = stream.makeAsyncIterator()
        let handler = HTTP2ClientHandler(events: continuation, requestTimeout: .seconds(10), requiresALPN: true)
        let pair = try HTTP2Pair(client: handler, serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)])
        #expect(handler.send([try HTTP2ClientHandlerTests.request(1)]))
        pair.client.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        try pair.pump()
        guard case .maxStreams(10) = await events.next() else { throw CancellationError() }
        #expect(pair.received.contains { $0.streamID == 1 }, "the held request went after the preface")
        #expect(Self.goAway(pair) == nil)
    }

    @Test func anOrderlyCloseSaysGoAwayNoError() async throws {
        var (pair, handler, events) = try await Self.inFlight()
        handler.close()
        try pair.pump()
        _ = await Self.eventsUntilClosed(&events)
        #expect(Self.goAway(pair) == .noError)
    }
}
