import APNsTransport
import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNs

/// The HTTP/2 client's connection handler on an `EmbeddedChannel`: the frames it writes for a request, and what it
/// reports for the server's answers, SETTINGS, GOAWAY and the end of the connection.
@Suite struct HTTP2ClientHandlerTests {
    static let token = String(repeating: "ab", count: 32)

    static func request(_ id: Int64, authority: String = "api.push.apple.com") throws -> HTTP2Request {
        let notification = QueuedNotification(messageID: id, deviceToken: token, payload: #"{"aps":{"alert":"hi"}}"#)
        let http2 = try HTTP2Notification(notification, topic: "com.example.PushChat", defaultPriority: 10, defaultExpiry: 0, now: Date())
        return HTTP2Request(
            notification: notification,
            headers: HTTP2Request.headerBlock(http2, authority: authority, authorization: nil),
            body: ByteBuffer(string: notification.payload),
            tokenGeneration: 0
        )
    }

    /// A handler on a channel, and the events it reports.
    static func connection() throws -> (EmbeddedChannel, HTTP2ClientHandler, AsyncStream<HTTP2Event>.AsyncIterator) {
        let (events, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        let handler = HTTP2ClientHandler(events: continuation, batcher: FlushBatcher(), requestTimeout: .seconds(10))
        let channel = EmbeddedChannel(handler: handler)
        return (channel, handler, events.makeAsyncIterator())
    }

    static func read(_ channel: EmbeddedChannel) throws -> HTTP2Frame? { try channel.readOutbound(as: HTTP2Frame.self) }

    @Test func theHeaderBlockStartsWithThePseudoHeadersAndKeepsPerRequestValuesOutOfTheTable() throws {
        let headers = try Self.request(1).headers
        #expect(Array(headers.map(\.name).prefix(4)) == [":method", ":scheme", ":path", ":authority"])
        let indexing = Dictionary(headers.map { ($0.name, $0.indexable) }, uniquingKeysWith: { $1 })
        #expect(indexing[":path"] == .nonIndexable)
        #expect(indexing["apns-id"] == .nonIndexable)
        #expect(indexing["apns-expiration"] == .nonIndexable)
        #expect(indexing["apns-topic"] == .indexable)
    }

    /// What repeats on every request (the provider token above all) stays in HPACK's dynamic table over a long run
    /// of requests to different devices: after the first, each block carries it as an index, not 200 bytes again.
    @Test func theProviderTokenStaysIndexedAcrossManyDevices() throws {
        let bearer = String(repeating: "eyJhbGciOiJFUzI1NiJ9.", count: 10)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var sizes: [Int] = []
        for id in 0..<200 {
            let token = String(format: "%064x", id)
            let notification = QueuedNotification(messageID: Int64(id), deviceToken: token, payload: #"{"aps":{}}"#)
            let http2 = try HTTP2Notification(
                notification,
                topic: "com.example.PushChat",
                defaultPriority: 10,
                defaultExpiry: 0,
                now: Date()
            )
            var buffer = ByteBuffer()
            try encoder.encode(
                headers: HTTP2Request.headerBlock(http2, authority: "api.push.apple.com", authorization: "bearer " + bearer),
                to: &buffer
            )
            sizes.append(buffer.readableBytes)
        }
        #expect(sizes[0] > bearer.count / 2, "the first block carries the token")
        #expect(
            sizes.dropFirst().allSatisfy { $0 < sizes[0] - bearer.count / 2 },
            "later blocks index it: \(sizes.max() ?? 0) bytes at most"
        )
    }

    @Test func aRequestIsOneStreamAndItsAnswerIsReportedPerRead() async throws {
        var (channel, handler, events) = try Self.connection()
        #expect(handler.send([try Self.request(1), try Self.request(2)]))
        for streamID in [1, 3] {
            let headers = try #require(try Self.read(channel))
            #expect(headers.streamID == HTTP2StreamID(streamID))
            guard case .headers(let fields) = headers.payload else { throw CancellationError() }
            #expect(fields.headers.first(name: ":method") == "POST")
            #expect(fields.headers.first(name: ":path") == "/3/device/\(Self.token)")
            #expect(fields.headers.first(name: ":authority") == "api.push.apple.com")
            #expect(fields.headers.first(name: "apns-topic") == "com.example.PushChat")
            let data = try #require(try Self.read(channel))
            guard case .data(let body) = data.payload else { throw CancellationError() }
            #expect(body.endStream)
        }
        // One socket read carrying both answers: one report for the worker.
        let reason = ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1800000000000}"#)
        for frame in [
            HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "200"], endStream: true))),
            HTTP2Frame(streamID: 3, payload: .headers(.init(headers: [":status": "410"]))),
            HTTP2Frame(streamID: 3, payload: .data(.init(data: .byteBuffer(reason), endStream: true))),
        ] {
            channel.pipeline.fireChannelRead(NIOAny(frame))
        }
        channel.pipeline.fireChannelReadComplete()
        guard case .answered(let answers) = await events.next() else { throw CancellationError() }
        #expect(answers.map(\.request.notification.messageID) == [1, 2])
        #expect(answers.map(\.result.status) == [200, 410])
        #expect(answers.last?.result.reason == "Unregistered")
        _ = try channel.finish()
    }

    /// A peer answering with megabytes of body: only the first 4 KiB of it is kept, and the answer is still reported.
    @Test func anAnswersBodyIsKeptUpToItsCap() async throws {
        var (channel, handler, events) = try Self.connection()
        #expect(handler.send([try Self.request(1)]))
        _ = try Self.read(channel)
        _ = try Self.read(channel)
        channel.pipeline.fireChannelRead(NIOAny(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "400"])))))
        let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1 << 20)
        for n in 1...10 {
            channel.pipeline.fireChannelRead(
                NIOAny(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(chunk), endStream: n == 10))))
            )
        }
        channel.pipeline.fireChannelReadComplete()
        guard case .answered(let answers) = await events.next() else { throw CancellationError() }
        #expect(answers.map(\.result.status) == [400], "reported, with no reason to read in the padding")
        _ = try channel.finish()
    }

    /// A read carrying a whole window of answers is handed on in pieces, so the worker reuses the first streams
    /// while the rest are decoded (one report per read made the window travel as one cohort at a distance).
    @Test func aReadOfManyAnswersIsReportedInPiecesOf64() async throws {
        var (channel, handler, events) = try Self.connection()
        #expect(handler.send(try (1...200).map { try Self.request(Int64($0)) }))
        for id in 0..<200 {
            channel.pipeline.fireChannelRead(
                NIOAny(
                    HTTP2Frame(streamID: HTTP2StreamID(2 * id + 1), payload: .headers(.init(headers: [":status": "200"], endStream: true)))
                )
            )
        }
        channel.pipeline.fireChannelReadComplete()
        var pieces: [[Int64]] = []
        while pieces.joined().count < 200 {
            guard case .answered(let answers) = await events.next() else { throw CancellationError() }
            pieces.append(answers.map(\.request.notification.messageID))
        }
        #expect(pieces.map(\.count) == [64, 64, 64, 8], "64 at a time, the rest at the end of the read")
        #expect(pieces.joined().elementsEqual(1...200))
        _ = try channel.finish()
    }

    @Test func settingsGoAwayAndTheEndOfTheConnectionAreReported() async throws {
        var (channel, handler, events) = try Self.connection()
        try channel.writeInbound(
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 500)])))
        )
        guard case .maxStreams(500) = await events.next() else { throw CancellationError() }

        #expect(handler.send([try Self.request(1), try Self.request(2)]))
        // The server processed stream 1 only: stream 3 comes back unanswered, then the connection is going away.
        try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 1, errorCode: .noError, opaqueData: nil)))
        guard case .unanswered(let refused, _) = await events.next() else { throw CancellationError() }
        #expect(refused.map(\.notification.messageID) == [2])
        guard case .goingAway = await events.next() else { throw CancellationError() }
        // After GOAWAY nothing new is written: it comes straight back.
        #expect(handler.send([try Self.request(3)]))
        guard case .unanswered(let late, _) = await events.next() else { throw CancellationError() }
        #expect(late.map(\.notification.messageID) == [3])

        // The connection ends with stream 1 unanswered: every request is accounted for, then the events end.
        channel.pipeline.fireChannelInactive()
        guard case .unanswered(let lost, _) = await events.next() else { throw CancellationError() }
        #expect(lost.map(\.notification.messageID) == [1])
        guard case .closed = await events.next() else { throw CancellationError() }
        #expect(await events.next() == nil)
        #expect(!handler.send([try Self.request(4)]), "a finished connection takes nothing")
    }
}
