import NIOCore
import NIOHTTP2

/// The connection-level receive window of an HTTP/2 connection: how much the peer may send (DATA on all streams)
/// before it must wait for a WINDOW_UPDATE on stream 0.
public struct HTTP2ConnectionWindow: Sendable, Equatable {
    /// Every connection starts with this window (RFC 9113 §6.9.2), whatever SETTINGS say.
    public static let initialSize = 65_535
    /// The largest window HTTP/2 allows.
    public static let maximumSize = Int(Int32.max)

    /// The window granted back whenever half of it is used.
    public let target: Int

    public init(target: Int = 1 << 20) {
        precondition(target > 0 && target <= Self.maximumSize, "an HTTP/2 window is 1…2^31-1 bytes")
        self.target = target
    }

    /// With `remaining` bytes left to the peer: the increment that restores the target once half of it is used,
    /// else nil. The first call (at 65,535 or less) also raises the window from the protocol's default to the target.
    public func increment(remaining: Int) -> Int? {
        remaining <= target / 2 ? target - max(remaining, 0) : nil
    }
}

/// Grants the peer connection-level window on an HTTP/2 connection whose frames are handled inline.
///
/// NIOHTTP2 sends WINDOW_UPDATE for the connection only through its stream multiplexer. Without one, a peer stops
/// sending DATA after 65,535 bytes on the connection (about a thousand small notifications) and every later stream
/// waits for its deadline. Put this handler right after `NIOHTTP2Handler`.
public final class HTTP2ConnectionWindowHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTP2Frame
    public typealias InboundOut = HTTP2Frame
    public typealias OutboundOut = HTTP2Frame

    let window: HTTP2ConnectionWindow

    public init(window: HTTP2ConnectionWindow = HTTP2ConnectionWindow()) {
        self.window = window
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream,
            let remaining = update.inboundWindowSize, let increment = window.increment(remaining: remaining)
        {
            let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Between TLS and NIOHTTP2: while held, a flush only notes that one is due; ``release()`` passes one on.
///
/// NIOHTTP2 sends the DATA frames made flushable by one flush in hash-set order, so a batch of requests flushed
/// once reaches the server out of stream order, is answered out of order, and NIOHTTP2 then removes streams from the
/// middle of its stream maps (shifting every later entry) on both ends. Flushing after every stream instead keeps
/// them in order (closing the oldest is cheap), and this handler makes the batch one TLS write.
public final class FlushBatcher: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = IOData
    public typealias OutboundOut = IOData

    public init() {}

    private var context: ChannelHandlerContext?
    private var holding = false
    private var due = false

    public func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    public func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    public func flush(context: ChannelHandlerContext) {
        if holding {
            due = true
        } else {
            context.flush()
        }
    }

    /// Holds flushes until ``release()``. Both within one synchronous call on the event loop (a hold kept across
    /// reads was seen to strand an answer when NIOHTTP2 delivered frames outside a read).
    public func hold() { holding = true }

    /// Passes on one flush if any was held.
    public func release() {
        holding = false
        if due, let context {
            due = false
            context.flush()
        }
    }
}

/// NIOHTTP2 reports errors that concern one stream (a frame for a stream already reset or closed, e.g. a late answer
/// to a request that timed out) through `errorCaught` too, after resetting that stream; the connection stays usable.
public enum HTTP2StreamErrors {
    /// The stream `error` is limited to, or nil when it ends the connection.
    public static func stream(of error: any Error) -> HTTP2StreamID? {
        switch error {
        case let error as NIOHTTP2Errors.StreamClosed: error.streamID
        case let error as NIOHTTP2Errors.NoSuchStream: error.streamID
        default: nil
        }
    }
}
