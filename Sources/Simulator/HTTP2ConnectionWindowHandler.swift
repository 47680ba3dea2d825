import APNs
import HTTP2Client
import NIOCore
import NIOHTTP2

/// Grants the peer connection-level window on an HTTP/2 connection whose frames are handled inline.
///
/// NIOHTTP2 sends WINDOW_UPDATE for the connection only through its stream multiplexer. Without one, a peer stops
/// sending DATA after 65,535 bytes on the connection (about a thousand small notifications) and every later stream
/// waits for its deadline. Put this handler right after `NIOHTTP2Handler`.
final class HTTP2ConnectionWindowHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let window: HTTP2ConnectionWindow

    init(window: HTTP2ConnectionWindow = HTTP2ConnectionWindow()) {
        self.window = window
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream,
            let remaining = update.inboundWindowSize, let increment = window.increment(remaining: remaining)
        {
            let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
            context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}
