import APNsTransport
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNs
@testable import HTTP2Client

/// The same server bytes to NIOHTTP2's own client and to the daemon's (``HTTP2ClientHandler``): one request on stream
/// 1, then what a server sends, well-formed or not. Both must come to the same answer for the request (its status and
/// body, or none) and the same connection error (the code of the GOAWAY each writes, or none): an independent,
/// widely used implementation is the reference for what the RFC asks.
@Suite struct HTTP2DifferentialTests {
    struct Outcome: Equatable, CustomStringConvertible {
        /// The request's answer: `:status` and the body, or nil when it got none (reset, refused, connection ended).
        var answer: String?
        /// The code of the GOAWAY the client wrote because of the server's bytes (nil: none, the connection goes on).
        var goAway: HTTP2ErrorCode?
        var description: String { "answer \(answer ?? "none"), GOAWAY \(goAway.map { "\($0)" } ?? "none")" }
    }

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        HTTP2FrameReaderTests.frame(type: type, flags: flags, stream: stream, payload)
    }

    /// A literal header field without indexing, a new name (RFC 7541 §6.2.2), no Huffman.
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
    }

    static let endStream: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    /// `:status 200` and `:status 400`: entries 8 and 12 of HPACK's static table.
    static let status200: [UInt8] = [0x88]
    static let status400: [UInt8] = [0x8c]

    /// What the server sends after its preface (an empty SETTINGS and the ACK of the client's).
    static let scenarios: [(name: String, bytes: [UInt8])] = {
        let reason = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        let apnsID = literal("apns-id", "ee9aa12c-0000-4000-8000-000000000001")
        let continuation = frame(type: 0x9, stream: 1, Array(repeating: 0x40, count: 1024))
        var flood = frame(type: 0x1, stream: 1, Array(repeating: 0x40, count: 1024))
        flood.reserveCapacity(flood.count + 2_000 * continuation.count)
        for _ in 0..<2_000 { flood.append(contentsOf: continuation) }
        return [
            ("a 200", frame(type: 0x1, flags: endHeaders | endStream, stream: 1, status200 + apnsID)),
            (
                "a 400 with a reason",
                frame(type: 0x1, flags: endHeaders, stream: 1, status400) + frame(type: 0x0, flags: endStream, stream: 1, reason)
            ),
            (
                "a header block in two frames",
                frame(type: 0x1, flags: endStream, stream: 1, status200) + frame(type: 0x9, flags: endHeaders, stream: 1, apnsID)
            ),
            (
                "an unknown frame type, then a 200",
                frame(type: 0xfa, stream: 0, [1, 2, 3]) + frame(type: 0x1, flags: endHeaders | endStream, stream: 1, status200)
            ),
            ("the stream reset (REFUSED_STREAM)", frame(type: 0x3, stream: 1, [0, 0, 0, 7])),
            ("GOAWAY(NO_ERROR) before the stream", frame(type: 0x7, stream: 0, [0, 0, 0, 0, 0, 0, 0, 0])),
            ("the connection window past 2^31-1", frame(type: 0x8, stream: 0, [0x7f, 0xff, 0xff, 0xff])),
            ("a WINDOW_UPDATE of 0 on the connection", frame(type: 0x8, stream: 0, [0, 0, 0, 0])),
            ("DATA on stream 0", frame(type: 0x0, stream: 0, [1, 2, 3])),
            ("CONTINUATION without HEADERS", frame(type: 0x9, flags: endHeaders, stream: 1, status200)),
            ("HEADERS on a stream the server may not open", frame(type: 0x1, flags: endHeaders, stream: 2, status200)),
            ("HEADERS on a stream not opened yet", frame(type: 0x1, flags: endHeaders | endStream, stream: 3, status200)),
            ("DATA on a stream not opened yet", frame(type: 0x0, flags: endStream, stream: 5, [1, 2, 3])),
            ("PUSH_PROMISE (push is off)", frame(type: 0x5, flags: endHeaders, stream: 1, [0, 0, 0, 2] + status200)),
            ("SETTINGS of 5 bytes", frame(type: 0x4, stream: 0, [0, 3, 0, 0, 0])),
            ("SETTINGS_ENABLE_PUSH = 2", frame(type: 0x4, stream: 0, [0, 2, 0, 0, 0, 2])),
            ("SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1", frame(type: 0x4, stream: 0, [0, 4, 0x80, 0, 0, 0])),
            ("a PING of 7 bytes", frame(type: 0x6, stream: 0, [0, 0, 0, 0, 0, 0, 0])),
            ("a CONTINUATION flood (2,000 frames of 1 KiB)", flood),
        ]
    }()

    /// The server's SETTINGS (MAX_CONCURRENT_STREAMS 100) and the ACK of the client's.
    static let preface = frame(type: 0x4, stream: 0, [0, 3, 0, 0, 0, 100]) + frame(type: 0x4, flags: 0x1, stream: 0, [])

    /// The first GOAWAY in the bytes a client wrote.
    static func goAway(in chunks: [ByteBuffer]) -> HTTP2ErrorCode? {
        var reader = HTTP2FrameReader()
        for var chunk in chunks {
            while let frame = try? reader.next(from: &chunk) {
                if case .goAway(_, let code, _) = frame { return code }
            }
        }
        return nil
    }

    // MARK: The daemon's client

    static func ours(_ bytes: [UInt8]) async throws -> Outcome {
        let (stream, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        var events = stream.makeAsyncIterator()
        let handler = HTTP2ClientHandler(events: continuation, requestTimeout: .seconds(10))
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        channel.pipeline.fireChannelRead(ByteBuffer(bytes: preface))
        guard case .maxStreams = await events.next() else { throw CancellationError() }
        #expect(handler.send([try HTTP2ClientHandlerTests.request(1)]))
        while try channel.readOutbound(as: ByteBuffer.self) != nil {}
        if channel.isActive {
            channel.pipeline.fireChannelRead(ByteBuffer(bytes: bytes))
            channel.pipeline.fireChannelReadComplete()
        }
        var written: [ByteBuffer] = []
        while let chunk = try channel.readOutbound(as: ByteBuffer.self) { written.append(chunk) }
        let goAway = goAway(in: written)
        // Whatever is still open ends in order (a request still waiting times out); then every request has been
        // accounted for.
        if channel.isActive {
            handler.close()
            channel.embeddedEventLoop.advanceTime(by: .seconds(60))
            if channel.isActive { try? channel.close().wait() }
        }
        var answer: String?
        while let event = await events.next() {
            if case .answered(let answers) = event, let first = answers.first {
                answer = "\(first.status) \(String(decoding: first.body, as: UTF8.self))"
            }
            if case .closed = event { break }
        }
        return Outcome(answer: answer, goAway: goAway)
    }

    // MARK: NIOHTTP2's client

    /// What a stream channel of NIOHTTP2's multiplexer reads.
    final class StreamRecorder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTP2Frame.FramePayload
        var status: String?
        var body = ""
        var reset = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .headers(let headers): status = status ?? headers.headers.first(name: ":status")
            case .data(let data):
                if case .byteBuffer(let bytes) = data.data { body += String(buffer: bytes) }
            case .rstStream: reset = true
            default: break
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {}
    }

    /// Swallows the connection errors NIOHTTP2's handler fires after writing its GOAWAY.
    final class ErrorSink: ChannelInboundHandler, Sendable {
        typealias InboundIn = Never
        func errorCaught(context: ChannelHandlerContext, error: any Error) {}
    }

    static func reference(_ bytes: [UInt8]) throws -> Outcome {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        // Push off, as the daemon's client says in its SETTINGS (NIOHTTP2's default leaves it on).
        let settings = nioDefaultSettings + [HTTP2Setting(parameter: .enablePush, value: 0)]
        let configured = channel.configureHTTP2Pipeline(mode: .client, initialLocalSettings: settings, inboundStreamInitializer: nil)
        channel.embeddedEventLoop.run()
        let multiplexer = try configured.wait()
        try channel.pipeline.syncOperations.addHandler(ErrorSink())
        channel.pipeline.fireChannelRead(ByteBuffer(bytes: preface))
        channel.pipeline.fireChannelReadComplete()
        let recorder = StreamRecorder()
        let streamPromise = channel.eventLoop.makePromise(of: (any Channel).self)
        multiplexer.createStreamChannel(promise: streamPromise) { stream in
            stream.pipeline.addHandler(recorder)
        }
        channel.embeddedEventLoop.run()
        let stream = try streamPromise.futureResult.wait()
        let request = try HTTP2ClientHandlerTests.request(1)
        stream.write(HTTP2Frame.FramePayload.headers(.init(headers: request.headers, endStream: false)), promise: nil)
        stream.writeAndFlush(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(request.body), endStream: true)), promise: nil)
        channel.embeddedEventLoop.run()
        while try channel.readOutbound(as: IOData.self) != nil {}
        if channel.isActive {
            channel.pipeline.fireChannelRead(ByteBuffer(bytes: bytes))
            channel.pipeline.fireChannelReadComplete()
        }
        channel.embeddedEventLoop.run()
        var written: [ByteBuffer] = []
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let chunk) = data { written.append(chunk) }
        }
        let answer = recorder.status.map { "\($0) \(recorder.body)" }
        return Outcome(answer: answer, goAway: goAway(in: written))
    }

    @Test(arguments: scenarios.map(\.name))
    func bothClientsAgree(on scenario: String) async throws {
        let bytes = try #require(Self.scenarios.first { $0.name == scenario }?.bytes)
        let reference = try Self.reference(bytes)
        let ours = try await Self.ours(bytes)
        #expect(ours == reference, "\(scenario): NIOHTTP2's client: \(reference); ours: \(ours)")
    }
}
