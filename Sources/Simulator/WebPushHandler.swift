import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import Support

/// The browsers' push service on one HTTP/2 connection: `POST /push/ID` answered by ``WebPushService`` (201 with a
/// `Location`, or the push service's refusal with a text reason), what it delivered recorded for the lock screens.
final class WebPushHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let service: WebPushService
    let state: SimulatorState
    let connection: Int
    let logger: Logger
    /// A push message is at most 4,096 bytes: a little more is kept, so that a larger one is answered 413.
    private var requests = HTTP2Requests(maximumBody: 8_192)
    private var accepted: [AcceptedNotification] = []

    init(service: WebPushService, state: SimulatorState, connection: Int, logger: Logger) {
        self.service = service
        self.state = state
        self.connection = connection
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let (streamID, request) = requests.read(unwrapInboundIn(data)) { complete(streamID, request, context: context) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !accepted.isEmpty {
            state.record(accepted)
            accepted.removeAll(keepingCapacity: true)
        }
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Web Push connection \(connection): \(error)")
        if let streamID = HTTP2StreamErrors.stream(of: error) {
            requests.drop(streamID)
            return
        }
        context.close(promise: nil)
    }

    private func complete(_ streamID: HTTP2StreamID, _ request: HTTP2Requests.Request, context: ChannelHandlerContext) {
        var headers: [String: String] = [:]
        for (name, value, _) in request.headers where !name.hasPrefix(":") { headers[name.lowercased()] = value }
        let answer: WebPushService.Answer
        if request.headers.first(name: ":method") != "POST" {
            answer = .init(status: 405, reason: "POST only", retryAfter: nil, delivered: nil)
        } else {
            answer = service.receive(
                path: request.headers.first(name: ":path") ?? "",
                headers: headers,
                body: Array(request.body.readableBytesView),
                now: Date(),
                authority: request.headers.first(name: ":authority")
            )
        }
        if let delivered = answer.delivered {
            accepted.append(delivered)
        } else {
            state.recordRejection("web push \(answer.status)")
        }
        if let delay = service.options.answerDelay {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                let (handler, context) = loopBound.value
                handler.respond(answer, on: streamID, context: context)
                context.flush()
            }
        } else {
            respond(answer, on: streamID, context: context)
        }
    }

    private func respond(_ answer: WebPushService.Answer, on streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers: HPACKHeaders = [":status": "\(answer.status)"]
        if let delivered = answer.delivered { headers.add(name: "location", value: "/message/\(delivered.identifier)") }
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: "\(retryAfter)") }
        if answer.reason.isEmpty {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))),
                promise: nil
            )
            return
        }
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: streamID,
                    payload: .data(.init(data: .byteBuffer(ByteBuffer(string: answer.reason + "\n")), endStream: true))
                )
            ),
            promise: nil
        )
    }
}
