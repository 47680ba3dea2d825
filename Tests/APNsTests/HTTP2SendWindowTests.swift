import NIOCore
import NIOHTTP2
import Testing

@testable import APNs
@testable import HTTP2Client

/// Outbound flow control as a value: the DATA frames a body becomes under the server's windows and frame size.
@Suite struct HTTP2SendWindowTests {
    /// (stream, length, END_STREAM) of each DATA frame in `buffer`.
    static func frames(_ buffer: ByteBuffer) -> [(Int, Int, Bool)] {
        var buffer = buffer
        var frames: [(Int, Int, Bool)] = []
        while let (high, low, type, flags, stream) = buffer.readMultipleIntegers(as: (UInt8, UInt16, UInt8, UInt8, UInt32).self) {
            let length = Int(high) << 16 | Int(low)
            #expect(type == 0)
            buffer.moveReaderIndex(forwardBy: length)
            frames.append((Int(stream), length, flags & 1 != 0))
        }
        return frames
    }

    @Test func aBodyLargerThanAFrameIsSplitAndTheConnectionWindowHoldsTheRest() throws {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        window.send(1, ByteBuffer(repeating: 1, count: 40_000), to: &out)
        window.send(3, ByteBuffer(repeating: 3, count: 40_000), to: &out)
        #expect(Self.frames(out).map(\.1) == [16_384, 16_384, 7_232, 16_384, 9_151], "65,535 bytes on the connection")
        #expect(Self.frames(out).map(\.2) == [false, false, true, false, false])
        #expect(window.waitingCount == 1)
        out.clear()
        try window.windowUpdate(.rootStream, increment: 100_000, to: &out)
        #expect(Self.frames(out).map(\.1) == [14_465], "the stream's own window (65,535) ends it")
        #expect(Self.frames(out).map(\.0) == [3] && Self.frames(out).map(\.2) == [true])
        #expect(window.waitingCount == 0)
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE lowered below what a stream used leaves its window negative until updates cover it.
    @Test func aLoweredInitialWindowCountsAgainstStreamsStillWaiting() throws {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        try window.settings([(0x4, 10)], to: &out)
        window.send(1, ByteBuffer(repeating: 1, count: 30), to: &out)
        #expect(Self.frames(out).map(\.1) == [10])
        out.clear()
        try window.settings([(0x4, 0)], to: &out)
        try window.windowUpdate(1, increment: 5, to: &out)
        #expect(Self.frames(out).isEmpty, "the window is -10 + 5")
        try window.windowUpdate(1, increment: 25, to: &out)
        #expect(Self.frames(out).map(\.1) == [20] && Self.frames(out).map(\.2) == [true])
    }

    @Test func aDroppedStreamSendsNothingMoreAndAnEmptyBodyStillEndsItsStream() throws {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        try window.settings([(0x4, 0)], to: &out)
        window.send(1, ByteBuffer(repeating: 1, count: 30), to: &out)
        window.send(3, ByteBuffer(), to: &out)
        #expect(
            Self.frames(out).map(\.0) == [3] && Self.frames(out).map(\.1) == [0] && Self.frames(out).map(\.2) == [true],
            "the empty body needs no window: it ends its stream at once, past the first"
        )
        out.clear()
        window.drop(1)
        #expect(window.waitingCount == 0)
        try window.windowUpdate(1, increment: 100, to: &out)
        #expect(Self.frames(out).isEmpty, "nothing more of a dropped stream")
    }

    /// A stream the server keeps at 0 holds nobody back: the bodies after it go as their own windows and the
    /// connection's allow, and it goes when its window opens. What waits for the connection's window waits in line.
    @Test func aBodyHeldByItsStreamsWindowDoesNotHoldBackTheNext() throws {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        try window.settings([(0x4, 0)], to: &out)
        window.send(1, ByteBuffer(repeating: 1, count: 30), to: &out)
        window.send(3, ByteBuffer(repeating: 3, count: 20), to: &out)
        try window.windowUpdate(3, increment: 20, to: &out)
        #expect(Self.frames(out).map(\.0) == [3] && Self.frames(out).map(\.1) == [20], "stream 3's window opened: it went")
        #expect(window.waitingCount == 1)
        out.clear()
        try window.windowUpdate(1, increment: 30, to: &out)
        #expect(Self.frames(out).map(\.0) == [1] && Self.frames(out).map(\.2) == [true])
        #expect(window.waitingCount == 0)

        // The connection's window spent (65,535 - 50 left): a body larger waits in line, and the next behind it, even
        // with a window of its own, in the order they came.
        var line = HTTP2SendWindow()
        out.clear()
        line.send(1, ByteBuffer(repeating: 1, count: 65_535), to: &out)
        line.send(3, ByteBuffer(repeating: 3, count: 10), to: &out)
        line.send(5, ByteBuffer(repeating: 5, count: 10), to: &out)
        #expect(Self.frames(out).map(\.0) == [1, 1, 1, 1], "65,535 bytes of stream 1 in four frames")
        #expect(line.waitingCount == 2)
        out.clear()
        try line.windowUpdate(.rootStream, increment: 15, to: &out)
        #expect(Self.frames(out).map(\.0) == [3, 5] && Self.frames(out).map(\.1) == [10, 5], "in order, as far as the window goes")
    }

    @Test func windowsPastTheLimitOrBadFrameSizesEndTheConnection() {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        #expect(throws: HTTP2ConnectionError.self) { try window.windowUpdate(.rootStream, increment: Int(Int32.max), to: &out) }
        #expect(throws: HTTP2ConnectionError.self) { try window.settings([(0x5, 100)], to: &out) }
        #expect(throws: HTTP2ConnectionError.self) { try window.settings([(0x4, UInt32(1) << 31)], to: &out) }
    }

    /// A stream's window past 2^31 − 1 was accepted when its body had gone (only waiting bodies were looked at):
    /// every open stream's window is kept, and its overflow is FLOW_CONTROL_ERROR, by a WINDOW_UPDATE or by a raised
    /// SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.9.1, §6.9.2). An update for a stream that ended is ignored.
    @Test func aStreamWindowPastTheLimitIsAFlowControlError() throws {
        var window = HTTP2SendWindow()
        var out = ByteBuffer()
        window.send(1, ByteBuffer(repeating: 1, count: 10), to: &out)
        #expect(window.waitingCount == 0 && window.openCount == 1, "the body went; the stream stays open")
        try window.windowUpdate(1, increment: 1_000, to: &out)
        let error = #expect(throws: HTTP2ConnectionError.self) {
            try window.windowUpdate(1, increment: Int(Int32.max) - 60_000, to: &out)
        }
        #expect(error?.code == .flowControlError)

        var raised = HTTP2SendWindow()
        raised.send(1, ByteBuffer(repeating: 1, count: 10), to: &out)
        try raised.windowUpdate(1, increment: Int(Int32.max) - 65_535, to: &out)
        let settings = #expect(throws: HTTP2ConnectionError.self) { try raised.settings([(0x4, 70_000)], to: &out) }
        #expect(settings?.code == .flowControlError)

        var ended = HTTP2SendWindow()
        ended.send(1, ByteBuffer(repeating: 1, count: 10), to: &out)
        ended.drop(1)
        #expect(ended.openCount == 0)
        try ended.windowUpdate(1, increment: Int(Int32.max), to: &out)
    }
}
