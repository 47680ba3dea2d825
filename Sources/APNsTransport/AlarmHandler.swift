import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Raises the alarm on the event loop, before the bytes reach the reading task (which may be scheduled late).
final class AlarmHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let alarm: GatewayAlarm

    init(alarm: GatewayAlarm) { self.alarm = alarm }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        alarm.raise()
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        alarm.raise()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        alarm.raise()
        context.fireErrorCaught(error)
    }
}
