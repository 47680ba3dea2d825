package import NIOCore
package import NIOHPACK
package import NIOHTTP2

/// A frame from the server, as the client acts on it. Header blocks arrive decoded (HEADERS with its CONTINUATIONs);
/// PRIORITY and frame types this client does not know are skipped, as RFC 9113 §4.1 and §5.5 ask.
package enum HTTP2InboundFrame {
    case headers(HTTP2StreamID, HPACKHeaders, endStream: Bool)
    /// `flowControlled`: the frame's length with its padding, what it takes from the receive window.
    case data(HTTP2StreamID, ByteBuffer, endStream: Bool, flowControlled: Int)
    case rstStream(HTTP2StreamID, HTTP2ErrorCode)
    case settings([(parameter: UInt16, value: UInt32)])
    case settingsAck
    case ping(UInt64, ack: Bool)
    /// `debug`: the frame's debug data as printable text, at most 200 characters (APNs: `{"reason":"…"}`).
    case goAway(lastStreamID: HTTP2StreamID, HTTP2ErrorCode, debug: String)
    case windowUpdate(HTTP2StreamID, increment: Int)
}

/// What ends an HTTP/2 connection: the error code the GOAWAY carries, and why.
package struct HTTP2ConnectionError: Error, CustomStringConvertible, Equatable {
    package let code: HTTP2ErrorCode
    package let reason: String

    package init(_ code: HTTP2ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    package var description: String { "HTTP/2 \(code): \(reason)" }
}

/// Reads HTTP/2 frames (RFC 9113 §4, §6) from the bytes a server sends, a frame at a time. A value: the handler feeds
/// it socket reads, tests feed it bytes.
package struct HTTP2FrameReader {
    /// SETTINGS_MAX_FRAME_SIZE as this client leaves it: the protocol's default.
    package static let maxFrameSize = 16_384
    static let frameHeaderSize = 9

    /// The largest header block taken (HEADERS with its CONTINUATIONs, as encoded): an answer's headers are a status,
    /// an apns-id and perhaps a retry-after. Past it the connection ends (the CONTINUATION flood, CVE-2024-27316 and
    /// its relatives, would otherwise grow the block without limit).
    package static let maxHeaderBlock = 16_384
    /// The most frames one header block may take (empty CONTINUATIONs cost the peer 9 bytes each).
    package static let maxHeaderBlockFrames = 16

    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    /// A header block still waiting for CONTINUATION frames: its stream, END_STREAM, the fragments so far and how
    /// many frames they came in.
    private var partial: (streamID: HTTP2StreamID, endStream: Bool, block: ByteBuffer, frames: Int)?

    package init() {}

    /// The next whole frame in `buffer` (its bytes are consumed), or nil when `buffer` holds no whole frame the client
    /// acts on (skipped frames and CONTINUATIONs still awaiting more are consumed too). Throws when the server broke
    /// the protocol: the connection must end.
    package mutating func next(from buffer: inout ByteBuffer) throws(HTTP2ConnectionError) -> HTTP2InboundFrame? {
        while buffer.readableBytes >= Self.frameHeaderSize {
            let start = buffer.readerIndex
            let length = Int(buffer.getInteger(at: start, as: UInt32.self)! >> 8)
            guard length <= Self.maxFrameSize else {
                throw HTTP2ConnectionError(.frameSizeError, "a frame of \(length) bytes (at most \(Self.maxFrameSize))")
            }
            guard buffer.readableBytes >= Self.frameHeaderSize + length else { return nil }
            let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
            let streamID = HTTP2StreamID(Int32(bitPattern: buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff))
            buffer.moveReaderIndex(forwardBy: Self.frameHeaderSize)
            var payload = buffer.readSlice(length: length)!
            if let frame = try read(type: type, flags: flags, streamID: streamID, payload: &payload) { return frame }
        }
        return nil
    }

    private mutating func read(
        type: UInt8,
        flags: UInt8,
        streamID: HTTP2StreamID,
        payload: inout ByteBuffer
    ) throws(HTTP2ConnectionError) -> HTTP2InboundFrame? {
        if let partial, type != 0x9 || streamID != partial.streamID {
            throw HTTP2ConnectionError(.protocolError, "a frame of type \(type) inside the header block of stream \(partial.streamID)")
        }
        switch type {
        case 0x0:  // DATA
            guard streamID != .rootStream else { throw HTTP2ConnectionError(.protocolError, "DATA on stream 0") }
            let flowControlled = payload.readableBytes
            try Self.removePadding(flags: flags, from: &payload)
            return .data(streamID, payload, endStream: flags & 0x1 != 0, flowControlled: flowControlled)
        case 0x1:  // HEADERS
            guard streamID != .rootStream else { throw HTTP2ConnectionError(.protocolError, "HEADERS on stream 0") }
            // Even streams are the server's, opened only by PUSH_PROMISE, which this client refuses.
            guard Int(streamID) % 2 == 1 else {
                throw HTTP2ConnectionError(.protocolError, "HEADERS on stream \(streamID), which a server cannot open")
            }
            try Self.removePadding(flags: flags, from: &payload)
            if flags & 0x20 != 0 {  // PRIORITY: stream dependency and weight
                guard payload.readableBytes >= 5 else { throw HTTP2ConnectionError(.frameSizeError, "HEADERS too short for its priority") }
                payload.moveReaderIndex(forwardBy: 5)
            }
            if flags & 0x4 == 0 {
                partial = (streamID, flags & 0x1 != 0, payload, 1)
                return nil
            }
            return .headers(streamID, try decode(&payload), endStream: flags & 0x1 != 0)
        case 0x9:  // CONTINUATION
            guard var (_, endStream, block, frames) = partial else {
                throw HTTP2ConnectionError(.protocolError, "CONTINUATION without a header block")
            }
            frames += 1
            guard block.readableBytes + payload.readableBytes <= Self.maxHeaderBlock else {
                throw HTTP2ConnectionError(.enhanceYourCalm, "a header block over \(Self.maxHeaderBlock) bytes on stream \(streamID)")
            }
            guard frames <= Self.maxHeaderBlockFrames else {
                throw HTTP2ConnectionError(
                    .enhanceYourCalm,
                    "a header block in over \(Self.maxHeaderBlockFrames) frames on stream \(streamID)"
                )
            }
            block.writeImmutableBuffer(payload)
            guard flags & 0x4 != 0 else {
                partial = (streamID, endStream, block, frames)
                return nil
            }
            partial = nil
            return .headers(streamID, try decode(&block), endStream: endStream)
        case 0x2:  // PRIORITY
            return nil
        case 0x3:  // RST_STREAM
            guard streamID != .rootStream else { throw HTTP2ConnectionError(.protocolError, "RST_STREAM on stream 0") }
            guard payload.readableBytes == 4 else {
                throw HTTP2ConnectionError(.frameSizeError, "RST_STREAM of \(payload.readableBytes) bytes")
            }
            return .rstStream(streamID, HTTP2ErrorCode(networkCode: Int(payload.readInteger(as: UInt32.self)!)))
        case 0x4:  // SETTINGS
            return try Self.settings(flags: flags, streamID: streamID, payload: &payload)
        case 0x5:  // PUSH_PROMISE: this client sends SETTINGS_ENABLE_PUSH = 0
            throw HTTP2ConnectionError(.protocolError, "PUSH_PROMISE, with push disabled")
        case 0x6:  // PING
            guard streamID == .rootStream else { throw HTTP2ConnectionError(.protocolError, "PING on stream \(streamID)") }
            guard payload.readableBytes == 8 else { throw HTTP2ConnectionError(.frameSizeError, "PING of \(payload.readableBytes) bytes") }
            return .ping(payload.readInteger(as: UInt64.self)!, ack: flags & 0x1 != 0)
        case 0x7:  // GOAWAY
            guard streamID == .rootStream else { throw HTTP2ConnectionError(.protocolError, "GOAWAY on stream \(streamID)") }
            guard payload.readableBytes >= 8 else {
                throw HTTP2ConnectionError(.frameSizeError, "GOAWAY of \(payload.readableBytes) bytes")
            }
            let last = HTTP2StreamID(Int32(bitPattern: payload.readInteger(as: UInt32.self)! & 0x7fff_ffff))
            let code = HTTP2ErrorCode(networkCode: Int(payload.readInteger(as: UInt32.self)!))
            let debug = payload.readableBytesView.prefix(200).map { $0 >= 0x20 && $0 < 0x7f ? Character(UnicodeScalar($0)) : "?" }
            return .goAway(lastStreamID: last, code, debug: String(debug))
        case 0x8:  // WINDOW_UPDATE
            guard payload.readableBytes == 4 else {
                throw HTTP2ConnectionError(.frameSizeError, "WINDOW_UPDATE of \(payload.readableBytes) bytes")
            }
            let increment = Int(payload.readInteger(as: UInt32.self)! & 0x7fff_ffff)
            guard increment > 0 || streamID != .rootStream else {
                throw HTTP2ConnectionError(.protocolError, "a WINDOW_UPDATE of 0 for the connection")
            }
            return .windowUpdate(streamID, increment: increment)
        default:
            return nil
        }
    }

    private mutating func decode(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> HPACKHeaders {
        do {
            return try decoder.decodeHeaders(from: &block)
        } catch {
            throw HTTP2ConnectionError(.compressionError, "an undecodable header block (\(error))")
        }
    }

    private static func removePadding(flags: UInt8, from payload: inout ByteBuffer) throws(HTTP2ConnectionError) {
        guard flags & 0x8 != 0 else { return }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw HTTP2ConnectionError(.protocolError, "padding longer than its frame")
        }
        payload.moveWriterIndex(to: payload.writerIndex - Int(padding))
    }

    private static func settings(
        flags: UInt8,
        streamID: HTTP2StreamID,
        payload: inout ByteBuffer
    ) throws(HTTP2ConnectionError) -> HTTP2InboundFrame {
        guard streamID == .rootStream else { throw HTTP2ConnectionError(.protocolError, "SETTINGS on stream \(streamID)") }
        if flags & 0x1 != 0 {
            guard payload.readableBytes == 0 else { throw HTTP2ConnectionError(.frameSizeError, "a SETTINGS ACK with a payload") }
            return .settingsAck
        }
        guard payload.readableBytes % 6 == 0 else {
            throw HTTP2ConnectionError(.frameSizeError, "SETTINGS of \(payload.readableBytes) bytes")
        }
        var settings: [(parameter: UInt16, value: UInt32)] = []
        while let (parameter, value) = payload.readMultipleIntegers(as: (UInt16, UInt32).self) {
            // RFC 9113 §6.5.2: a server may only say 0 (no push), and a client treats anything else as an error.
            guard parameter != 0x2 || value == 0 else {
                throw HTTP2ConnectionError(.protocolError, "SETTINGS_ENABLE_PUSH = \(value) from a server")
            }
            settings.append((parameter, value))
        }
        return .settings(settings)
    }
}
