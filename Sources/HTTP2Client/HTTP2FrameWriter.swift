package import NIOCore
package import NIOHTTP2

/// Writes the frames an HTTP/2 client sends (RFC 9113 §3.4, §6) into a buffer: one buffer, one TLS write, for a
/// whole batch of requests.
package enum HTTP2FrameWriter {
    /// The connection preface and this client's SETTINGS: no server push, `initialWindowSize` for each stream's
    /// answer; then a WINDOW_UPDATE that raises the connection's receive window from 65,535 to `connectionWindow`.
    package static func preface(initialWindowSize: Int, connectionWindow: Int, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        frameHeader(length: 12, type: 0x4, flags: 0, streamID: .rootStream, to: &buffer)
        buffer.writeMultipleIntegers(UInt16(0x2), UInt32(0), UInt16(0x4), UInt32(initialWindowSize))
        if connectionWindow > HTTP2ConnectionWindow.initialSize {
            windowUpdate(.rootStream, increment: connectionWindow - HTTP2ConnectionWindow.initialSize, to: &buffer)
        }
    }

    /// HEADERS (END_STREAM only when `endStream`: a request's DATA follows), with CONTINUATION frames when `block`
    /// is larger than the peer's `maxFrameSize`.
    package static func headers(
        _ streamID: HTTP2StreamID,
        block: ByteBuffer,
        endStream: Bool = false,
        maxFrameSize: Int = HTTP2FrameReader.maxFrameSize,
        to buffer: inout ByteBuffer
    ) {
        var rest = block
        var type: UInt8 = 0x1
        repeat {
            let fragment = rest.readSlice(length: min(rest.readableBytes, maxFrameSize))!
            let flags: UInt8 = (rest.readableBytes == 0 ? 0x4 : 0) | (type == 0x1 && endStream ? 0x1 : 0)
            frameHeader(length: fragment.readableBytes, type: type, flags: flags, streamID: streamID, to: &buffer)
            buffer.writeImmutableBuffer(fragment)
            type = 0x9
        } while rest.readableBytes > 0
    }

    package static func data(_ streamID: HTTP2StreamID, _ bytes: ByteBuffer, endStream: Bool, to buffer: inout ByteBuffer) {
        frameHeader(length: bytes.readableBytes, type: 0x0, flags: endStream ? 0x1 : 0, streamID: streamID, to: &buffer)
        buffer.writeImmutableBuffer(bytes)
    }

    package static func settingsAck(to buffer: inout ByteBuffer) {
        frameHeader(length: 0, type: 0x4, flags: 0x1, streamID: .rootStream, to: &buffer)
    }

    package static func ping(_ data: UInt64, ack: Bool, to buffer: inout ByteBuffer) {
        frameHeader(length: 8, type: 0x6, flags: ack ? 0x1 : 0, streamID: .rootStream, to: &buffer)
        buffer.writeInteger(data)
    }

    package static func windowUpdate(_ streamID: HTTP2StreamID, increment: Int, to buffer: inout ByteBuffer) {
        frameHeader(length: 4, type: 0x8, flags: 0, streamID: streamID, to: &buffer)
        buffer.writeInteger(UInt32(increment))
    }

    package static func rstStream(_ streamID: HTTP2StreamID, _ code: HTTP2ErrorCode, to buffer: inout ByteBuffer) {
        frameHeader(length: 4, type: 0x3, flags: 0, streamID: streamID, to: &buffer)
        buffer.writeInteger(UInt32(truncatingIfNeeded: code.networkCode))
    }

    package static func goAway(lastStreamID: HTTP2StreamID, _ code: HTTP2ErrorCode, to buffer: inout ByteBuffer) {
        frameHeader(length: 8, type: 0x7, flags: 0, streamID: .rootStream, to: &buffer)
        buffer.writeMultipleIntegers(UInt32(Int32(lastStreamID)), UInt32(truncatingIfNeeded: code.networkCode))
    }

    private static func frameHeader(length: Int, type: UInt8, flags: UInt8, streamID: HTTP2StreamID, to buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(
            UInt8(truncatingIfNeeded: length >> 16),
            UInt16(truncatingIfNeeded: length),
            type,
            flags,
            UInt32(Int32(streamID))
        )
    }
}
