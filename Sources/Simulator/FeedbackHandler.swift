import APNs
import Logging
import NIOCore
import NIOSSL
import NIOTLS

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
        case .none, .hang, .unclean, .endless:
            break
        case .truncated, .uncleanTruncated:
            buffer.writeInteger(UInt32(1_700_000_000))
            buffer.writeInteger(UInt16(32))
            buffer.writeBytes([0xAB, 0xCD, 0xEF])
        case .garbage:
            buffer.writeBytes(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8))
        }
        logger.debug("Serving \(tuples.count) feedback tuples (fault: \(fault.rawValue))")
        let channel = context.channel
        if fault == .endless {
            Self.repeatForever(buffer, on: channel)
            return
        }
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
            switch fault {
            case .hang, .endless: break
            case .unclean, .uncleanTruncated: UncleanCloser.close(channel)
            case .none, .truncated, .garbage: channel.close(promise: nil)
            }
        }
    }
}

extension FeedbackHandler {
    /// Writes `buffer` again a millisecond after the last write is done, until the connection closes (the pause lets
    /// the event loop serve everything else).
    static func repeatForever(_ buffer: ByteBuffer, on channel: any Channel) {
        guard channel.isActive, buffer.readableBytes > 0 else { return }
        channel.writeAndFlush(buffer).whenSuccess {
            channel.eventLoop.scheduleTask(in: .milliseconds(1)) { repeatForever(buffer, on: channel) }
        }
    }
}

/// Sits before the TLS handler (nearest the socket), so a close it starts never passes the TLS handler: the TCP
/// connection ends without close_notify, an unclean shutdown.
final class UncleanCloser: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Closes `channel` below its TLS handler.
    static func close(_ channel: any Channel) {
        channel.eventLoop.execute {
            guard let closer = try? channel.pipeline.syncOperations.handler(type: UncleanCloser.self), let context = closer.context else {
                channel.close(promise: nil)
                return
            }
            context.close(promise: nil)
        }
    }
}
