package import NIOCore
package import NIOHTTP2

/// Outbound flow control of an HTTP/2 client (RFC 9113 §6.9): how much DATA the server still accepts on the
/// connection and on each stream, and the request bodies waiting for a WINDOW_UPDATE.
///
/// A request body goes out whole at once while the windows allow it (APNs' and FCM's bodies are a few KB against
/// windows of 64 KB or more); only what does not fit is kept. What waits for the connection's window waits in line,
/// sent in the order it came; what waits for its own stream's window is held apart and holds nobody back: a stream the
/// server keeps at 0 does not stop the streams after it.
package struct HTTP2SendWindow {
    /// Every connection and stream starts with this window until SETTINGS_INITIAL_WINDOW_SIZE says otherwise.
    package static let defaultSize = 65_535

    package private(set) var connection = Self.defaultSize
    package private(set) var initialStream = Self.defaultSize
    package private(set) var maxFrameSize = HTTP2FrameReader.maxFrameSize

    private struct Waiting {
        let streamID: HTTP2StreamID
        var body: ByteBuffer
    }

    /// What stopped a body: nothing (all of it went), the connection's window or its stream's.
    private enum Progress { case done, connection, stream }

    /// Bodies (or their rest) waiting for the connection's window, oldest first.
    private var inLine: [Waiting] = []
    /// Bodies (or their rest) waiting for their own stream's window.
    private var held: [HTTP2StreamID: ByteBuffer] = [:]
    /// The send window of every open stream (kept after its body went, so that a WINDOW_UPDATE that overflows it is
    /// seen); dropped when the stream ends.
    private var streams: [HTTP2StreamID: Int] = [:]

    package init() {}

    /// Bodies waiting for a WINDOW_UPDATE.
    package var waitingCount: Int { inLine.count + held.count }
    /// Open streams this window keeps.
    package var openCount: Int { streams.count }

    /// A stream's whole body, right after its HEADERS: the DATA frames to write now (the last ends the stream); the
    /// rest waits for window.
    package mutating func send(_ streamID: HTTP2StreamID, _ body: ByteBuffer, to buffer: inout ByteBuffer) {
        streams[streamID] = initialStream
        // Behind bodies waiting for the connection's window (it is spent): in line.
        guard inLine.isEmpty else {
            inLine.append(Waiting(streamID: streamID, body: body))
            return
        }
        place(Waiting(streamID: streamID, body: body), to: &buffer)
    }

    /// A WINDOW_UPDATE: writes what it lets through. Throws FLOW_CONTROL_ERROR when it takes a window past 2^31 − 1
    /// (RFC 9113 §6.9.1: a connection error for the connection's window; a stream's is treated the same, as the
    /// peer that sends it is broken or hostile). An update for a stream that has ended is ignored (§6.9).
    package mutating func windowUpdate(
        _ streamID: HTTP2StreamID,
        increment: Int,
        to buffer: inout ByteBuffer
    ) throws(HTTP2ConnectionError) {
        if streamID == .rootStream {
            connection += increment
            guard connection <= HTTP2ConnectionWindow.maximumSize else {
                throw HTTP2ConnectionError(.flowControlError, "the connection's send window past 2^31 - 1")
            }
            flushLine(to: &buffer)
        } else if let window = streams[streamID] {
            guard window + increment <= HTTP2ConnectionWindow.maximumSize else {
                throw HTTP2ConnectionError(.flowControlError, "the send window of stream \(streamID) past 2^31 - 1")
            }
            streams[streamID] = window + increment
            release(streamID, to: &buffer)
        }
    }

    /// SETTINGS: SETTINGS_INITIAL_WINDOW_SIZE changes every stream's window by the difference (§6.9.2);
    /// SETTINGS_MAX_FRAME_SIZE bounds each DATA frame.
    package mutating func settings(
        _ settings: [(parameter: UInt16, value: UInt32)],
        to buffer: inout ByteBuffer
    ) throws(HTTP2ConnectionError) {
        var raised = false
        for (parameter, value) in settings {
            switch parameter {
            case 0x4:
                guard value <= UInt32(HTTP2ConnectionWindow.maximumSize) else {
                    throw HTTP2ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE of \(value)")
                }
                let delta = Int(value) - initialStream
                initialStream = Int(value)
                if delta > 0, let widest = streams.values.max(), widest + delta > HTTP2ConnectionWindow.maximumSize {
                    throw HTTP2ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE takes a stream's window past 2^31 - 1")
                }
                if delta != 0 { for id in streams.keys { streams[id]! += delta } }
                raised = raised || delta > 0
            case 0x5:
                guard (1 << 14)...((1 << 24) - 1) ~= value else {
                    throw HTTP2ConnectionError(.protocolError, "SETTINGS_MAX_FRAME_SIZE of \(value)")
                }
                maxFrameSize = Int(value)
            default:
                break
            }
        }
        if raised { for id in held.keys.sorted() { release(id, to: &buffer) } }
        flushLine(to: &buffer)
    }

    /// A stream that ended early (reset, timed out, answered): what it still had to send is dropped.
    package mutating func drop(_ streamID: HTTP2StreamID) {
        streams[streamID] = nil
        held[streamID] = nil
        guard !inLine.isEmpty else { return }
        inLine.removeAll { $0.streamID == streamID }
    }

    /// Writes what the windows allow of a body no other waits ahead of, and keeps the rest where it belongs.
    private mutating func place(_ item: Waiting, to buffer: inout ByteBuffer) {
        var item = item
        switch write(&item, to: &buffer) {
        case .done: break
        case .connection: inLine.append(item)
        case .stream: held[item.streamID] = item.body
        }
    }

    /// A held body whose stream's window grew: written now, or in line if the connection's window is what it needs.
    private mutating func release(_ streamID: HTTP2StreamID, to buffer: inout ByteBuffer) {
        guard (streams[streamID] ?? 0) > 0, let body = held.removeValue(forKey: streamID) else { return }
        if inLine.isEmpty {
            place(Waiting(streamID: streamID, body: body), to: &buffer)
        } else {
            inLine.append(Waiting(streamID: streamID, body: body))
        }
    }

    /// The line, in order, while the connection's window lasts; a body its own stream's window stops is held apart.
    private mutating func flushLine(to buffer: inout ByteBuffer) {
        var next = 0
        defer { inLine.removeFirst(next) }
        while next < inLine.count {
            var item = inLine[next]
            switch write(&item, to: &buffer) {
            case .done:
                next += 1
            case .stream:
                held[item.streamID] = item.body
                next += 1
            case .connection:
                inLine[next] = item
                return
            }
        }
    }

    /// Writes as much of `item`'s body as the windows allow; `.done` when all of it went (its last frame ends the
    /// stream), else which window stopped it.
    private mutating func write(_ item: inout Waiting, to buffer: inout ByteBuffer) -> Progress {
        var window = streams[item.streamID] ?? 0
        defer { streams[item.streamID] = window }
        repeat {
            let size = max(0, min(item.body.readableBytes, maxFrameSize, connection, window))
            guard size > 0 || item.body.readableBytes == 0 else { return window <= 0 ? .stream : .connection }
            let chunk = item.body.readSlice(length: size)!
            let last = item.body.readableBytes == 0
            HTTP2FrameWriter.data(item.streamID, chunk, endStream: last, to: &buffer)
            connection -= size
            window -= size
            if last { return .done }
        } while true
    }
}
