import NIOCore
import Testing

@testable import APNs
@testable import Support

@Suite struct BinaryFrameTests {
    static let token = (0..<32).map { UInt8($0) }
    static let payload = Array(#"{"aps":{"alert":"Ann: hi","sound":"default"}}"#.utf8)

    func frame(token: [UInt8] = token, payload: [UInt8] = payload, identifier: UInt32 = 42, priority: UInt8 = 10) -> ByteBuffer {
        var buffer = ByteBuffer()
        BinaryFrame.writeFrame(
            into: &buffer,
            token: token,
            payload: payload,
            identifier: identifier,
            expiry: 1_900_000_000,
            priority: priority
        )
        return buffer
    }

    func decodeAll(_ buffer: ByteBuffer) throws -> [BinaryNotification] {
        var buffer = buffer
        var result: [BinaryNotification] = []
        while let notification = try BinaryFrameDecoder.decode(&buffer) { result.append(notification) }
        #expect(buffer.readableBytes == 0)
        return result
    }

    func refusal(_ buffer: ByteBuffer) -> BinaryDecodingError? {
        var buffer = buffer
        do {
            while try BinaryFrameDecoder.decode(&buffer) != nil {}
            return nil
        } catch {
            return error
        }
    }

    @Test func commandTwoRoundTrips() throws {
        let buffer = frame()
        #expect(buffer.readableBytes == BinaryFrame.frameSize(payloadLength: Self.payload.count))
        let decoded = try #require(try decodeAll(buffer).first)
        #expect(decoded.format == .frame)
        #expect(decoded.identifier == 42)
        #expect(decoded.expiry == 1_900_000_000)
        #expect(decoded.priority == 10)
        #expect(Array(buffer: decoded.token) == Self.token)
        #expect(Array(buffer: decoded.payload) == Self.payload)
    }

    @Test func simpleAndEnhancedFormats() throws {
        var buffer = ByteBuffer()
        BinaryFrame.writeSimple(into: &buffer, token: Self.token, payload: Self.payload)
        BinaryFrame.writeEnhanced(into: &buffer, token: Self.token, payload: Self.payload, identifier: 7, expiry: 99)
        let decoded = try decodeAll(buffer)
        #expect(decoded.map(\.format) == [.simple, .enhanced])
        #expect(decoded.map(\.identifier) == [0, 7])
        #expect(decoded[1].expiry == 99)
        #expect(decoded.allSatisfy { Array(buffer: $0.payload) == Self.payload })
    }

    @Test func splitReadsDecodeTheSameAsOneRead() throws {
        var stream = ByteBuffer()
        for identifier in 1...3 { stream.writeImmutableBuffer(frame(identifier: UInt32(identifier))) }
        BinaryFrame.writeEnhanced(into: &stream, token: Self.token, payload: Self.payload, identifier: 4, expiry: 0)
        BinaryFrame.writeSimple(into: &stream, token: Self.token, payload: Self.payload)
        var received = ByteBuffer()
        var identifiers: [UInt32] = []
        for byte in stream.readableBytesView {
            received.writeInteger(byte)
            while let notification = try BinaryFrameDecoder.decode(&received) { identifiers.append(notification.identifier) }
            received.discardReadBytes()
        }
        #expect(identifiers == [1, 2, 3, 4, 0])
    }

    @Test func tokenSizeIsChecked() {
        #expect(
            refusal(frame(token: Array(Self.token.prefix(31)), identifier: 5))
                == .init(status: .invalidTokenSize, identifier: 5, reason: "device token of 31 bytes")
        )
        #expect(refusal(frame(token: [], identifier: 6))?.status == .missingDeviceToken)
        var simple = ByteBuffer()
        BinaryFrame.writeSimple(into: &simple, token: Array(repeating: 1, count: 64), payload: Self.payload)
        #expect(refusal(simple)?.status == .invalidTokenSize)
    }

    @Test func payloadLimitsDependOnTheFormat() {
        let big = Array(repeating: UInt8(ascii: "x"), count: 257)
        #expect(refusal(frame(payload: big)) == nil, "257 bytes are fine in a command 2 frame")
        #expect(refusal(frame(payload: Array(repeating: 0x78, count: 2048))) == nil)
        #expect(refusal(frame(payload: Array(repeating: 0x78, count: 2049), identifier: 9))?.status == .invalidPayloadSize)
        var enhanced = ByteBuffer()
        BinaryFrame.writeEnhanced(into: &enhanced, token: Self.token, payload: big, identifier: 3, expiry: 0)
        #expect(refusal(enhanced) == .init(status: .invalidPayloadSize, identifier: 3, reason: "payload of 257 bytes exceeds 256"))
        #expect(refusal(frame(payload: [], identifier: 8))?.status == .missingPayload)
    }

    @Test func aBadLengthIsRefusedBeforeItsBytesArrive() {
        var header = ByteBuffer()
        header.writeInteger(UInt8(2))
        header.writeInteger(UInt32(1_000_000))
        #expect(refusal(header)?.status == .invalidPayloadSize)
        var enhanced = ByteBuffer()
        enhanced.writeInteger(UInt8(1))
        enhanced.writeInteger(UInt32(77))
        enhanced.writeInteger(UInt32(0))
        enhanced.writeInteger(UInt16(33))
        #expect(refusal(enhanced) == .init(status: .invalidTokenSize, identifier: 77, reason: "device token of 33 bytes"))
    }

    @Test func garbageIsAProcessingError() {
        #expect(refusal(ByteBuffer(bytes: [0x47, 0x45, 0x54, 0x20]))?.status == .processingError)
        var overrun = ByteBuffer()
        overrun.writeInteger(UInt8(2))
        overrun.writeInteger(UInt32(5))
        overrun.writeBytes([1, 0, 32, 0, 0])  // a token item claiming 32 bytes inside a 5-byte frame
        #expect(refusal(overrun)?.status == .processingError)
        let badPriority = frame(priority: 7)
        #expect(refusal(badPriority)?.status == .processingError)
    }

    @Test func errorResponsesRoundTrip() throws {
        var buffer = ByteBuffer()
        BinaryErrorResponse(status: .invalidToken, identifier: 1234).write(into: &buffer)
        #expect(buffer.readableBytes == 6)
        var partial = buffer.getSlice(at: 0, length: 5)!
        #expect(try BinaryErrorResponse.read(from: &partial) == nil)
        #expect(try BinaryErrorResponse.read(from: &buffer) == BinaryErrorResponse(status: .invalidToken, identifier: 1234))
    }

    @Test func feedbackTuples() throws {
        var buffer = ByteBuffer()
        FeedbackTuple(timestamp: 1_700_000_000, token: Self.token).write(into: &buffer)
        FeedbackTuple(timestamp: 1_700_000_001, token: Array(Self.token.reversed())).write(into: &buffer)
        buffer.writeBytes([0, 0, 0, 1, 0])  // a truncated third tuple
        let first = try FeedbackTuple.read(from: &buffer)
        #expect(first == FeedbackTuple(timestamp: 1_700_000_000, token: Self.token))
        #expect(try FeedbackTuple.read(from: &buffer)?.timestamp == 1_700_000_001)
        #expect(try FeedbackTuple.read(from: &buffer) == nil)
        #expect(buffer.readableBytes == 5)
        var garbage = ByteBuffer(bytes: [0, 0, 0, 1, 0xFF, 0xFF, 1, 2])
        #expect(throws: FeedbackDecodingError.self) { try FeedbackTuple.read(from: &garbage) }
    }

    @Test func tokenHex() {
        let hex = DeviceToken.hex(Self.token)
        #expect(hex == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(DeviceToken.bytes(hex: hex.uppercased()) == Self.token)
        #expect(DeviceToken.bytes(hex: "abc") == nil)
        #expect(DeviceToken.bytes(hex: "zz") == nil)
        #expect(DeviceToken.bytes(hex: "00ff1z") == nil)
        #expect(DeviceToken.bytes(hex: "") == [])
        #expect(DeviceToken.redacted(hex) == "000102…1e1f")
    }
}
