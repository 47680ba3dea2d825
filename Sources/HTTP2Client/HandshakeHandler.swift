import NIOConcurrencyHelpers
package import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Completes a promise when the TLS handshake is done, or fails it if the connection goes first.
package final class HandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer

    private var promise: EventLoopPromise<Void>?

    package init(promise: EventLoopPromise<Void>) { self.promise = promise }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            promise?.succeed()
            promise = nil
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise?.fail(error)
        promise = nil
        context.fireErrorCaught(error)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.eof)
        promise = nil
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        // The connection never came up (refused, timed out): the pipeline goes without channelInactive.
        promise?.fail(ChannelError.ioOnClosedChannel)
        promise = nil
    }
}
