import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Shared

/// One feedback connection: once TLS is up, writes every configured tuple and closes (as Apple's service did).
final class FeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let state: SimulatorState
    private let logger: Logger

    init(state: SimulatorState, logger: Logger) {
        self.state = state
        self.logger = logger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            serve(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Providers send nothing on this service; anything received is ignored.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Feedback connection error: \(error)")
        context.close(promise: nil)
    }

    private func serve(context: ChannelHandlerContext) {
        let (tuples, fault) = state.takeFeedback()
        var buffer = context.channel.allocator.buffer(capacity: tuples.count * 38 + 16)
        for tuple in tuples { tuple.write(into: &buffer) }
        switch fault {
        case .none, .hang:
            break
        case .truncated:
            buffer.writeInteger(UInt32(1_700_000_000))
            buffer.writeInteger(UInt16(32))
            buffer.writeBytes([0xAB, 0xCD, 0xEF])
        case .garbage:
            buffer.writeBytes(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8))
        }
        logger.debug("Serving \(tuples.count) feedback tuples (fault: \(fault.rawValue))")
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
            if fault != .hang { channel.close(promise: nil) }
        }
    }
}
