import APNs
import Foundation
import Logging
import NIOCore
import Settings
import Support

/// One binary gateway connection: decodes notifications, validates them as Apple does, records what it accepts,
/// and on the first bad notification writes `8 | status | identifier` and closes, discarding everything after it.
final class GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let state: SimulatorState
    private let connection: Int
    private let faults: SimulatorConfiguration.Faults
    private let checkUnregistered: Bool
    private let logger: Logger
    private var buffer = ByteBuffer()
    private var batch: [AcceptedNotification] = []
    private var acceptedOnConnection = 0
    private var lastAccepted: UInt32 = 0
    private var closing = false

    init(state: SimulatorState, connection: Int, logger: Logger) {
        self.state = state
        self.connection = connection
        let faults = state.faults
        self.faults = faults
        self.checkUnregistered = !state.unregisteredSnapshot.isEmpty || !faults.processingErrorTokens.isEmpty
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        let arrival = Date()
        while !closing {
            let decoded: BinaryNotification?
            do {
                decoded = try BinaryFrameDecoder.decode(&buffer)
            } catch {
                logger.debug("Refusing a notification: \(error)", metadata: ["sim.connection": "\(connection)"])
                reject(context: context, status: error.status, identifier: error.identifier)
                return
            }
            guard let notification = decoded else { break }
            let accepted = AcceptedNotification(notification, arrival: arrival, connection: connection)
            if checkUnregistered && faults.processingErrorTokens.contains(accepted.token) {
                reject(context: context, status: .processingError, identifier: notification.identifier)
                return
            }
            if checkUnregistered && state.isUnregistered(accepted.token) {
                reject(context: context, status: .invalidToken, identifier: notification.identifier)
                return
            }
            batch.append(accepted)
            acceptedOnConnection += 1
            lastAccepted = notification.identifier
            if let limit = faults.closeAfterFrames, acceptedOnConnection >= limit {
                closeAbruptly(context: context)
                return
            }
            if let limit = faults.shutdownAfterFrames, acceptedOnConnection >= limit {
                reject(context: context, status: .shutdown, identifier: lastAccepted)
                return
            }
        }
        if buffer.readerIndex > 64 * 1024 { buffer.discardReadBytes() }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushBatch()
        // Read from the state each time: a test that lifts the fault sees the connection read everything again.
        if let delay = state.faults.readDelay, !closing {
            let channel = context.channel
            channel.setOption(ChannelOptions.autoRead, value: false).whenSuccess {
                channel.eventLoop.scheduleTask(in: TimeAmount(delay)) {
                    channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                }
            }
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        flushBatch()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Gateway connection error: \(error)", metadata: ["sim.connection": "\(connection)"])
        flushBatch()
        context.close(promise: nil)
    }

    private func flushBatch(rejected: BinaryErrorResponse.Status? = nil, abruptClose: Bool = false) {
        guard !batch.isEmpty || rejected != nil || abruptClose else { return }
        state.record(batch, rejected: rejected, abruptClose: abruptClose)
        batch.removeAll(keepingCapacity: true)
    }

    private func reject(context: ChannelHandlerContext, status: BinaryErrorResponse.Status, identifier: UInt32) {
        closing = true
        flushBatch(rejected: status)
        var response = context.channel.allocator.buffer(capacity: BinaryErrorResponse.size)
        BinaryErrorResponse(status: status, identifier: identifier).write(into: &response)
        logger.debug("Error response \(status) for \(identifier)", metadata: ["sim.connection": "\(connection)"])
        let channel = context.channel
        guard let delay = faults.errorResponseDelay else {
            context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        channel.eventLoop.scheduleTask(in: TimeAmount.nanoseconds(delay.nanoseconds)) {
            channel.writeAndFlush(response).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func closeAbruptly(context: ChannelHandlerContext) {
        closing = true
        flushBatch(abruptClose: true)
        logger.debug("Closing abruptly after \(acceptedOnConnection) notifications", metadata: ["sim.connection": "\(connection)"])
        context.close(promise: nil)
    }
}
