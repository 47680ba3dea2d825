import APNsTransport
import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNs
@testable import HTTP2Client

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

    /// The client handler on one channel and NIOHTTP2's server handler on another, joined byte for byte in memory: an
    /// independent HTTP/2 implementation checks every frame the client writes.
    static func connection(
        serverSettings: HTTP2Settings = [HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000)]
    ) throws -> (HTTP2Pair, HTTP2ClientHandler, AsyncStream<HTTP2Event>.AsyncIterator) {
        let (events, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        let handler = HTTP2ClientHandler(events: continuation, requestTimeout: .seconds(10))
        let pair = try HTTP2Pair(client: handler, serverSettings: serverSettings)
        return (pair, handler, events.makeAsyncIterator())
    }

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
    /// NIOHPACK's decoder reads every block back as it was.
    @Test func theProviderTokenStaysIndexedAcrossManyDevices() throws {
        let bearer = String(repeating: "eyJhbGciOiJFUzI1NiJ9.", count: 10)
        var encoder = HTTP2HeaderEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
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
            let headers = HTTP2Request.headerBlock(http2, authority: "api.push.apple.com", authorization: "bearer " + bearer)
            var buffer = ByteBuffer()
            encoder.encode(headers, to: &buffer)
            sizes.append(buffer.readableBytes)
            let decoded = try decoder.decodeHeaders(from: &buffer)
            #expect(decoded.map { "\($0.name): \($0.value)" } == headers.map { "\($0.name): \($0.value)" })
        }
        #expect(sizes[0] > bearer.count / 2, "the first block carries the token")
        #expect(
            sizes.dropFirst().allSatisfy { $0 < sizes[0] - bearer.count / 2 },
            "later blocks index it: \(sizes.max() ?? 0) bytes at most"
        )
    }

    @Test func aRequestIsOneStreamAndItsAnswerIsReportedPerRead() async throws {
        var (pair, handler, events) = try Self.connection()
        try pair.pump()
        guard case .maxStreams(1000) = await events.next() else { throw CancellationError() }
        #expect(handler.send([try Self.request(1), try Self.request(2)]))
        try pair.pump()
        let frames = pair.received.filter { $0.streamID != .rootStream }
        #expect(frames.map(\.streamID) == [1, 1, 3, 3], "each request's HEADERS then DATA, in stream order")
        for frame in frames {
            switch frame.payload {
            case .headers(let fields):
                #expect(fields.headers.first(name: ":method") == "POST")
                #expect(fields.headers.first(name: ":path") == "/3/device/\(Self.token)")
                #expect(fields.headers.first(name: ":authority") == "api.push.apple.com")
                #expect(fields.headers.first(name: "apns-topic") == "com.example.PushChat")
                #expect(!fields.endStream)
            case .data(let body):
                guard case .byteBuffer(let bytes) = body.data else { throw CancellationError() }
                #expect(String(buffer: bytes) == #"{"aps":{"alert":"hi"}}"#)
                #expect(body.endStream)
            default:
                Issue.record("unexpected frame \(frame)")
            }
        }
        // Both answers in one pump (one channelReadComplete): one report for the worker.
        let reason = ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1800000000000}"#)
        try pair.answer([
            HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "200"], endStream: true))),
            HTTP2Frame(streamID: 3, payload: .headers(.init(headers: [":status": "410"]))),
            HTTP2Frame(streamID: 3, payload: .data(.init(data: .byteBuffer(reason), endStream: true))),
        ])
        guard case .answered(let answers) = await events.next() else { throw CancellationError() }
        #expect(answers.map(\.request.notification.messageID) == [1, 2])
        #expect(answers.map(\.status) == [200, 410])
        #expect(answers.last.map { HTTP2Result($0).reason } == "Unregistered")
    }

    /// A peer answering with a large body: only the first 4 KiB of it is kept, and the answer is still reported.
    @Test func anAnswersBodyIsKeptUpToItsCap() async throws {
        var (pair, handler, events) = try Self.connection()
        try pair.pump()
        _ = await events.next()
        #expect(handler.send([try Self.request(1)]))
        try pair.pump()
        let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 16_384)
        try pair.answer(
            [HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "400"])))]
                + (1...40).map { HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(chunk), endStream: $0 == 40))) }
        )
        guard case .answered(let answers) = await events.next() else { throw CancellationError() }
        #expect(answers.map(\.status) == [400], "reported, with no reason to read in the padding")
        #expect(answers.first?.body.count == HTTP2StreamStateMachine.maxAnswerBody)
    }

    /// A read carrying a whole window of answers is handed on in pieces, so the worker reuses the first streams
    /// while the rest are decoded (one report per read made the window travel as one cohort at a distance).
    @Test func aReadOfManyAnswersIsReportedInPiecesOf64() async throws {
        var (pair, handler, events) = try Self.connection()
        try pair.pump()
        _ = await events.next()
        #expect(handler.send(try (1...200).map { try Self.request(Int64($0)) }))
        try pair.pump()
        try pair.answer(
            (0..<200).map {
                HTTP2Frame(streamID: HTTP2StreamID(2 * $0 + 1), payload: .headers(.init(headers: [":status": "200"], endStream: true)))
            }
        )
        var pieces: [[Int64]] = []
        while pieces.joined().count < 200 {
            guard case .answered(let answers) = await events.next() else { throw CancellationError() }
            pieces.append(answers.map(\.request.notification.messageID))
        }
        #expect(pieces.map(\.count) == [64, 64, 64, 8], "64 at a time, the rest at the end of the read")
        #expect(pieces.joined().elementsEqual(1...200))
    }

    @Test func settingsGoAwayAndTheEndOfTheConnectionAreReported() async throws {
        var (pair, handler, events) = try Self.connection(serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 500)])
        try pair.pump()
        guard case .maxStreams(500) = await events.next() else { throw CancellationError() }
        #expect(pair.received.contains { if case .settings(.ack) = $0.payload { true } else { false } }, "SETTINGS acknowledged")

        #expect(handler.send([try Self.request(1), try Self.request(2)]))
        try pair.pump()
        // The server processed stream 1 only: stream 3 comes back unanswered, then the connection is going away.
        let debug = ByteBuffer(string: #"{"reason":"Shutdown"}"#)
        try pair.answer([HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: 1, errorCode: .noError, opaqueData: debug))])
        guard case .unanswered(let refused, let reason) = await events.next() else { throw CancellationError() }
        #expect(refused.map(\.notification.messageID) == [2])
        guard case .goingAway(let said) = await events.next() else { throw CancellationError() }
        #expect(said.contains(#"{"reason":"Shutdown"}"#) && reason.contains(said), "what Apple says is in the log: \(said)")
        // After GOAWAY nothing new is written: it comes straight back.
        #expect(handler.send([try Self.request(3)]))
        guard case .unanswered(let late, _) = await events.next() else { throw CancellationError() }
        #expect(late.map(\.notification.messageID) == [3])

        // The connection ends with stream 1 unanswered: every request is accounted for, then the events end.
        pair.client.pipeline.fireChannelInactive()
        guard case .unanswered(let lost, _) = await events.next() else { throw CancellationError() }
        #expect(lost.map(\.notification.messageID) == [1])
        guard case .closed(_, let ending) = await events.next() else { throw CancellationError() }
        #expect(ending == .orderly, "after the server's GOAWAY: in order")
        #expect(await events.next() == nil)
        #expect(!handler.send([try Self.request(4)]), "a finished connection takes nothing")
    }

    /// The server's windows hold a body back: it goes out as WINDOW_UPDATEs allow, never past them (NIOHTTP2's server
    /// ends the connection if it is sent more than its window), and the stream ends with its last byte.
    @Test func aBodyWaitsForTheServersWindow() async throws {
        var (pair, handler, events) = try Self.connection(serverSettings: [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 10), HTTP2Setting(parameter: .initialWindowSize, value: 8),
        ])
        try pair.pump()
        _ = await events.next()
        #expect(handler.send([try Self.request(1), try Self.request(2)]))
        try pair.pump()
        #expect(pair.bodyBytes(on: 1) == 8 && pair.bodyBytes(on: 3) == 8, "8 bytes of each: a stream's window holds only its own")
        try pair.answer([HTTP2Frame(streamID: 1, payload: .windowUpdate(windowSizeIncrement: 100))])
        #expect(pair.bodyBytes(on: 1) == 22 && pair.bodyBytes(on: 3) == 8)
        try pair.answer([HTTP2Frame(streamID: 3, payload: .windowUpdate(windowSizeIncrement: 14))])
        #expect(pair.bodyBytes(on: 3) == 22)
        #expect(pair.received.filter { if case .data(let data) = $0.payload { data.endStream } else { false } }.map(\.streamID) == [1, 3])
        try pair.answer([
            HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "200"], endStream: true))),
            HTTP2Frame(streamID: 3, payload: .headers(.init(headers: [":status": "200"], endStream: true))),
        ])
        guard case .answered(let answers) = await events.next() else { throw CancellationError() }
        #expect(answers.map(\.request.notification.messageID) == [1, 2])
    }

    /// A server that makes the encoder drop its table (SETTINGS_HEADER_TABLE_SIZE 0) still reads every request:
    /// the next block starts with the size update, and nothing is indexed after it.
    @Test func aServerWithoutAHeaderTableReadsEveryRequest() async throws {
        var (pair, handler, events) = try Self.connection(serverSettings: [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 10), HTTP2Setting(parameter: .headerTableSize, value: 0),
        ])
        #expect(handler.send([try Self.request(1)]), "sent before the server's SETTINGS: indexed at 4,096")
        try pair.pump()
        _ = await events.next()
        #expect(handler.send([try Self.request(2), try Self.request(3)]))
        try pair.pump()
        let paths = pair.received.compactMap { if case .headers(let h) = $0.payload { h.headers.first(name: "apns-topic") } else { nil } }
        #expect(paths == Array(repeating: "com.example.PushChat", count: 3))
        // The bytes: the first block indexes; the next starts with a size update to 0; none after it indexes anything.
        let blocks = pair.headerBlocks()
        let first = try HPACKRepresentations(try #require(blocks[1]))
        #expect(first.indexing > 0 && first.sizeUpdates.isEmpty)
        let second = try HPACKRepresentations(try #require(blocks[3]))
        #expect(second.startsWithSizeUpdate == 0, "the block after the server's SETTINGS begins with the size update")
        let third = try HPACKRepresentations(try #require(blocks[5]))
        for later in [second, third] {
            #expect(later.indexing == 0, "nothing is added to a table of size 0")
            #expect(later.dynamicReferences == 0, "nothing refers to the dropped table")
        }
        #expect(third.sizeUpdates.isEmpty)
    }

    /// A server that breaks the protocol (a frame larger than SETTINGS_MAX_FRAME_SIZE) gets GOAWAY, and every request
    /// comes back unanswered.
    @Test func aProtocolErrorEndsTheConnection() async throws {
        var (pair, handler, events) = try Self.connection()
        try pair.pump()
        _ = await events.next()
        #expect(handler.send([try Self.request(1)]))
        try pair.pump()
        var oversized = ByteBuffer(bytes: [0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01])
        oversized.writeRepeatingByte(0, count: 1 << 16)
        pair.client.pipeline.fireChannelRead(oversized)
        guard case .unanswered(let lost, let reason) = await events.next() else { throw CancellationError() }
        #expect(lost.map(\.notification.messageID) == [1])
        #expect(reason.contains("a frame of 65536 bytes"), "\(reason)")
        guard case .closed(_, let ending) = await events.next() else { throw CancellationError() }
        #expect(ending == .dropped, "a server that broke the protocol: dropped, not orderly")
        try pair.pump()
        #expect(pair.received.contains { if case .goAway(_, .frameSizeError, _) = $0.payload { true } else { false } })
    }

    /// How a connection ends is reported as such (the driver logs and reconnects by it): closed by this client,
    /// orderly; a PING unanswered past the request timeout, stalled.
    @Test func anOrderlyCloseAndADeadPingAreToldApart() async throws {
        var (pair, handler, events) = try Self.connection()
        try pair.pump()
        _ = await events.next()
        handler.close()
        pair.client.pipeline.fireChannelInactive()
        guard case .closed(_, let closed) = await events.next() else { throw CancellationError() }
        #expect(closed == .orderly)

        let (stream, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        var silent = stream.makeAsyncIterator()
        let quiet = HTTP2ClientHandler(events: continuation, requestTimeout: .milliseconds(20), pingInterval: .milliseconds(10))
        let server = try HTTP2Pair(client: quiet, serverSettings: [HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)])
        try server.pump()
        _ = await silent.next()
        // Idle past the PING interval: a PING, which the server never gets (nothing is carried to it any more).
        try await Task.sleep(for: .milliseconds(30))
        (server.client.eventLoop as! EmbeddedEventLoop).advanceTime(by: .milliseconds(250))
        #expect(try server.client.readOutbound(as: ByteBuffer.self) != nil, "the PING")
        try await Task.sleep(for: .milliseconds(30))
        (server.client.eventLoop as! EmbeddedEventLoop).advanceTime(by: .milliseconds(250))
        guard case .closed(let reason, let ending) = await silent.next() else { throw CancellationError() }
        #expect(ending == .stalled && reason.contains("PING"), "\(reason)")
    }

    /// A PING from the server is answered with its data.
    @Test func aPingIsAnswered() async throws {
        let (pair, _, _) = try Self.connection()
        try pair.pump()
        try pair.answer([HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 42), ack: false))])
        #expect(pair.received.contains { if case .ping(let data, ack: true) = $0.payload { data.integer == 42 } else { false } })
    }
}

/// An HPACK header block walked representation by representation (RFC 7541 §6; strings without Huffman, as the
/// client writes them): what the test needs to see on the wire, not a decoder.
struct HPACKRepresentations {
    /// Literals with incremental indexing (added to the dynamic table).
    var indexing = 0
    /// Indexed fields and literal names that refer to the dynamic table (an index past the static table's 61).
    var dynamicReferences = 0
    /// Dynamic table size updates, in order.
    var sizeUpdates: [Int] = []
    /// The size the block's first representation sets, if it is a size update.
    var startsWithSizeUpdate: Int?

    struct Malformed: Error {}

    init(_ bytes: [UInt8]) throws {
        var index = 0
        func integer(prefix bits: Int) throws -> Int {
            guard index < bytes.count else { throw Malformed() }
            let mask = (1 << bits) - 1
            var value = Int(bytes[index]) & mask
            index += 1
            guard value == mask else { return value }
            var shift = 0
            while true {
                guard index < bytes.count, shift < 28 else { throw Malformed() }
                let byte = Int(bytes[index])
                index += 1
                value += (byte & 0x7f) << shift
                shift += 7
                if byte & 0x80 == 0 { return value }
            }
        }
        func string() throws {
            guard index < bytes.count, bytes[index] & 0x80 == 0 else { throw Malformed() }  // no Huffman here
            let length = try integer(prefix: 7)
            guard index + length <= bytes.count else { throw Malformed() }
            index += length
        }
        var first = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte & 0x80 != 0 {
                if try integer(prefix: 7) > 61 { dynamicReferences += 1 }
            } else if byte & 0x40 != 0 {
                indexing += 1
                let name = try integer(prefix: 6)
                if name == 0 { try string() } else if name > 61 { dynamicReferences += 1 }
                try string()
            } else if byte & 0x20 != 0 {
                let size = try integer(prefix: 5)
                sizeUpdates.append(size)
                if first { startsWithSizeUpdate = size }
            } else {
                let name = try integer(prefix: 4)
                if name == 0 { try string() } else if name > 61 { dynamicReferences += 1 }
                try string()
            }
            first = false
        }
    }
}
