import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Support

/// The browsers' push service on an HTTP/1.1 connection (a client that did not offer HTTP/2, or `--webpush-http1-only`):
/// `POST /push/ID` answered by ``WebPushService`` as on HTTP/2, one request after another on a kept-alive connection.
final class WebPushHTTP1Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let service: WebPushService
    let state: SimulatorState
    let logger: Logger
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    /// A push message is at most 4,096 bytes: a little more is read, so that a larger one is answered 413.
    private static let maximumBody = 8_192

    init(service: WebPushService, state: SimulatorState, logger: Logger) {
        self.service = service
        self.state = state
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            if body.readableBytes < Self.maximumBody { body.writeBuffer(&part) }
        case .end:
            guard let head else { return }
            self.head = nil
            complete(head, context: context)
        }
    }

    private func complete(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let answer: WebPushService.Answer
        if head.method != .POST {
            answer = .init(status: 405, reason: "POST only", retryAfter: nil, delivered: nil)
        } else {
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            answer = service.receive(
                path: head.uri,
                headers: headers,
                body: Array(body.readableBytesView),
                now: Date(),
                authority: head.headers.first(name: "host")
            )
        }
        if let delivered = answer.delivered {
            state.record([delivered])
        } else {
            state.recordRejection("web push \(answer.status)")
        }
        let keepAlive = head.isKeepAlive
        if let delay = service.options.answerDelay {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                let (handler, context) = loopBound.value
                handler.respond(answer, keepAlive: keepAlive, context: context)
            }
        } else {
            respond(answer, keepAlive: keepAlive, context: context)
        }
    }

    private func respond(_ answer: WebPushService.Answer, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        if let delivered = answer.delivered { headers.add(name: "location", value: "/message/\(delivered.identifier)") }
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: "\(retryAfter)") }
        let text = answer.reason.isEmpty ? "" : answer.reason + "\n"
        if !text.isEmpty { headers.add(name: "content-type", value: "text/plain; charset=utf-8") }
        headers.add(name: "content-length", value: "\(text.utf8.count)")
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !text.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil) }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive { done.futureResult.whenComplete { _ in context.close(promise: nil) } }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Web Push HTTP/1.1 connection: \(error)")
        context.close(promise: nil)
    }
}
