package import APNs
import Foundation
import Logging
package import NIOCore
import NIOHPACK
package import NIOHTTP2
import NIOPosix
import NIOSSL
import Settings
import Support

/// Drives one HTTP/2 connection to APNs on its event loop: performs what its ``HTTP2StreamStateMachine`` decides
/// (one stream per notification, a deadline on every stream, PING when idle, every request accounted for when the
/// connection ends) and reports to the worker.
package final class HTTP2ClientHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTP2Frame
    package typealias OutboundOut = HTTP2Frame

    let events: AsyncStream<HTTP2Event>.Continuation
    private var state: HTTP2StreamStateMachine
    private var context: ChannelHandlerContext?
    private var timer: RepeatedTask?
    private var answers: [HTTP2Answer] = []

    let batcher: FlushBatcher

    package init(
        events: AsyncStream<HTTP2Event>.Continuation,
        batcher: FlushBatcher,
        requestTimeout: TimeAmount,
        pingInterval: TimeAmount = .seconds(30),
        lastStreamID: Int = HTTP2StreamStateMachine.defaultLastStreamID
    ) {
        self.events = events
        self.batcher = batcher
        self.state = HTTP2StreamStateMachine(requestTimeout: requestTimeout, pingInterval: pingInterval, lastStreamID: lastStreamID)
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { _ in
            loopBound.value.tick()
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        finish("the connection handler was removed")
        self.context = nil
    }

    /// Writes the requests as new streams (on the event loop); false when the connection has ended (nothing was
    /// taken). After GOAWAY they come back unanswered.
    package func send(_ requests: [HTTP2Request]) -> Bool {
        guard let context else { return false }
        switch state.send(requests, now: .now()) {
        case .refused:
            return false
        case .write(let streams, let unanswered, let reason, let retired):
            // A flush per request keeps the DATA frames in stream order (see FlushBatcher); one TLS write per batch.
            batcher.hold()
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            for (streamID, request) in streams {
                let promise = context.eventLoop.makePromise(of: Void.self)
                promise.futureResult.whenFailure { error in
                    loopBound.value.writeFailed(streamID, error)
                }
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: request.headers)))),
                    promise: nil
                )
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(request.body), endStream: true)))
                    ),
                    promise: promise
                )
                context.flush()
            }
            batcher.release()
            if !unanswered.isEmpty { report(.unanswered(unanswered, reason)) }
            if retired { report(.goingAway) }
            return true
        }
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        state.read(now: .now())
        switch frame.payload {
        case .headers(let headers):
            let status = headers.headers.first(name: ":status").flatMap(Int.init)
            let retryAfter = status == 200 ? nil : headers.headers.first(name: "retry-after")
            if let answer = state.headers(frame.streamID, status: status, retryAfter: retryAfter, endStream: headers.endStream) {
                answered(answer)
            }
        case .data(let data):
            let bytes: ByteBufferView
            if case .byteBuffer(let buffer) = data.data { bytes = buffer.readableBytesView } else { bytes = ByteBuffer().readableBytesView }
            if let answer = state.data(frame.streamID, bytes, endStream: data.endStream) { answered(answer) }
        case .rstStream(let code):
            if let request = state.reset(frame.streamID) { report(.unanswered([request], "stream reset (\(code))")) }
        case .goAway(let lastStreamID, let code, _):
            let requests = state.goAway(lastStreamID: lastStreamID)
            if !requests.isEmpty { report(.unanswered(requests, "GOAWAY (\(code)) before these streams were processed")) }
            report(.goingAway)
        case .settings(.settings(let settings)):
            if let value = settings.last(where: { $0.parameter == .maxConcurrentStreams })?.value {
                report(.maxStreams(value))
            }
        case .ping(_, ack: true):
            state.pingAnswered()
        default:
            break
        }
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        report()
        context.fireChannelReadComplete()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        finish("the connection closed")
        context.fireChannelInactive()
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamID = HTTP2StreamErrors.stream(of: error) {
            // One stream's trouble (NIOHTTP2 reset it): that request is sent again, the other streams carry on.
            if let request = state.reset(streamID) { report(.unanswered([request], "stream error: \(error)")) }
            return
        }
        finish(GatewayError.describe(error))
        context.close(promise: nil)
    }

    private func writeFailed(_ streamID: HTTP2StreamID, _ error: any Error) {
        if let request = state.writeFailed(streamID) { report(.unanswered([request], "not written: \(error)")) }
    }

    private func answered(_ answer: HTTP2Answer) {
        answers.append(answer)
        // A read can carry a whole window of answers: handed over in pieces, the first streams are reused while
        // the rest are still being decoded.
        if answers.count >= Self.answersPerReport { report() }
    }

    /// The most answers gathered before the worker hears of them (else: at the end of each read).
    static let answersPerReport = 64

    /// Hands the worker the answers gathered so far, then `event`: one wake-up per read (or 64 answers), not per stream.
    private func report(_ event: HTTP2Event? = nil) {
        if !answers.isEmpty {
            events.yield(.answered(answers))
            answers.removeAll(keepingCapacity: true)
        }
        if let event { events.yield(event) }
    }

    /// Every 250 ms: cancel streams past their deadline; PING an idle connection; close one that does not answer.
    private func tick() {
        guard let context else { return }
        let action = state.tick(now: .now())
        if !action.expired.isEmpty {
            for (streamID, _) in action.expired {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
            }
            context.flush()
            report(.timedOut(action.expired.map(\.1), .nanoseconds(state.requestTimeout.nanoseconds)))
        }
        if let reason = action.close {
            finish(reason)
            context.close(promise: nil)
        } else if action.ping {
            context.writeAndFlush(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false))),
                promise: nil
            )
        }
    }

    private func finish(_ reason: String) {
        guard let requests = state.finish() else { return }
        timer?.cancel()
        if !requests.isEmpty { report(.unanswered(requests, reason)) }
        report(.closed(reason))
        events.finish()
    }
}
