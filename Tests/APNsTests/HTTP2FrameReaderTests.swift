import NIOCore
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNs
@testable import HTTP2Client

/// The client's frame reader on bytes laid out by hand (RFC 9113 §4.1, §6): what NIOHTTP2's server never sends in
/// the in-memory tests (CONTINUATION, padding, PRIORITY, unknown types) and what ends a connection.
@Suite struct HTTP2FrameReaderTests {
    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)] + payload
    }

    static func block(_ headers: HPACKHeaders) throws -> [UInt8] {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var buffer = ByteBuffer()
        try encoder.encode(headers: headers, to: &buffer)
        return Array(buffer.readableBytesView)
    }

    static func readAll(_ bytes: [UInt8], reader: inout HTTP2FrameReader) throws(HTTP2ConnectionError) -> [HTTP2InboundFrame] {
        var buffer = ByteBuffer(bytes: bytes)
        var frames: [HTTP2InboundFrame] = []
        while let frame = try reader.next(from: &buffer) { frames.append(frame) }
        return frames
    }

    @Test func aHeaderBlockSplitOverContinuationsIsDecodedWhole() throws {
        let block = try Self.block([":status": "410", "apns-id": "50757368-4368-8000-8000-00000000002a"])
        let bytes =
            Self.frame(type: 0x1, flags: 0x1, stream: 3, Array(block.prefix(3)))
            + Self.frame(type: 0x9, stream: 3, Array(block.dropFirst(3).prefix(4)))
            + Self.frame(type: 0x9, flags: 0x4, stream: 3, Array(block.dropFirst(7)))
        var reader = HTTP2FrameReader()
        let frames = try Self.readAll(bytes, reader: &reader)
        guard frames.count == 1, case .headers(let stream, let headers, let endStream) = frames[0] else {
            Issue.record("\(frames)")
            return
        }
        #expect(stream == 3 && endStream, "END_STREAM comes from the HEADERS frame")
        #expect(headers.first(name: ":status") == "410")
        #expect(headers.first(name: "apns-id") == "50757368-4368-8000-8000-00000000002a")
    }

    /// The CONTINUATION flood (CVE-2024-27316 and relatives): a header block that never ends grew without limit.
    /// Now the connection ends once the block passes 16 KiB or 16 frames, whatever follows: a million frames are
    /// offered, read one at a time, and the reader stops within the first few.
    @Test(arguments: [1024, 0])
    func aHeaderBlockThatNeverEndsEndsTheConnection(fragment: Int) {
        var reader = HTTP2FrameReader()
        var buffer = ByteBuffer(bytes: Self.frame(type: 0x1, stream: 1, Array(repeating: 0x40, count: fragment)))
        let continuation = Self.frame(type: 0x9, stream: 1, Array(repeating: 0x40, count: fragment))
        var read = 0
        let error = #expect(throws: HTTP2ConnectionError.self) {
            for _ in 0..<1_000_000 {
                buffer.writeBytes(continuation)
                _ = try reader.next(from: &buffer)
                read += 1
            }
        }
        #expect(error?.code == .enhanceYourCalm)
        #expect(read <= HTTP2FrameReader.maxHeaderBlockFrames, "stopped after \(read) CONTINUATIONs")
    }

    @Test func paddingAndPriorityAreSkippedAndUnknownFramesIgnored() throws {
        let block = try Self.block([":status": "200"])
        let body = Array("{\"reason\":\"BadDeviceToken\"}".utf8)
        let bytes =
            Self.frame(type: 0xfa, stream: 0, [1, 2, 3])  // an extension frame type
            + Self.frame(type: 0x2, stream: 1, [0, 0, 0, 0, 16])  // PRIORITY
            + Self.frame(type: 0x1, flags: 0x4 | 0x8 | 0x20, stream: 1, [2] + [0, 0, 0, 0, 16] + block + [0, 0])
            + Self.frame(type: 0x0, flags: 0x1 | 0x8, stream: 1, [3] + body + [0, 0, 0])
        var reader = HTTP2FrameReader()
        let frames = try Self.readAll(bytes, reader: &reader)
        #expect(frames.count == 2)
        guard case .headers(_, let headers, endStream: false) = frames[0], case .data(_, let data, true, let counted) = frames[1] else {
            Issue.record("\(frames)")
            return
        }
        #expect(headers.first(name: ":status") == "200")
        #expect(Array(data.readableBytesView) == body)
        #expect(counted == body.count + 4, "the padding counts against the window")
    }

    /// A frame cut across two socket reads is read once the rest arrives, and nothing of it is lost before that.
    @Test func aFrameSplitAcrossReadsWaitsForItsRest() throws {
        let bytes = Self.frame(type: 0x6, stream: 0, [0, 0, 0, 0, 0, 0, 0, 7]) + Self.frame(type: 0x8, stream: 0, [0, 0, 1, 0])
        var reader = HTTP2FrameReader()
        var buffer = ByteBuffer(bytes: bytes.prefix(12))
        #expect(try reader.next(from: &buffer) == nil)
        buffer.writeBytes(bytes.dropFirst(12))
        guard case .ping(7, ack: false) = try reader.next(from: &buffer) else { throw CancellationError() }
        guard case .windowUpdate(.rootStream, increment: 256) = try reader.next(from: &buffer) else { throw CancellationError() }
    }

    @Test(arguments: [
        (frame(type: 0x5, stream: 1, [0, 0, 0, 2]), "PUSH_PROMISE"),
        (frame(type: 0x1, stream: 1, [0x88]) + frame(type: 0x0, stream: 1, []), "inside the header block"),
        (frame(type: 0x9, flags: 0x4, stream: 1, [0x88]), "CONTINUATION without"),
        (frame(type: 0x8, stream: 0, [0, 0, 0, 0]), "WINDOW_UPDATE of 0"),
        (frame(type: 0x4, stream: 0, [0, 3, 0, 0]), "SETTINGS of 4 bytes"),
        (frame(type: 0x0, flags: 0x8, stream: 1, [9, 1]), "padding longer"),
        (frame(type: 0x1, flags: 0x4, stream: 1, [0xff, 0xff]), "undecodable header block"),
        ([0x00, 0x40, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01], "a frame of 16385 bytes"),
    ])
    func aBrokenProtocolEndsTheConnection(bytes: [UInt8], reason: String) {
        var reader = HTTP2FrameReader()
        #expect {
            _ = try Self.readAll(bytes, reader: &reader)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test func settingsAreReadInOrder() throws {
        var reader = HTTP2FrameReader()
        let frames = try Self.readAll(
            Self.frame(type: 0x4, stream: 0, [0, 3, 0, 0, 3, 0xe8, 0, 4, 0, 1, 0, 0]) + Self.frame(type: 0x4, flags: 0x1, stream: 0, []),
            reader: &reader
        )
        guard case .settings(let settings) = frames.first, case .settingsAck = frames.last else { throw CancellationError() }
        #expect(settings.map(\.parameter) == [3, 4] && settings.map(\.value) == [1000, 65536])
    }
}
