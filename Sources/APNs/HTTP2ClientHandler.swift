import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Settings
import Support

/// Drives one HTTP/2 connection to APNs on its event loop: one stream per notification, frames handled inline,
/// a deadline on every stream, PING when idle, and every request accounted for when the connection ends.
public final class HTTP2ClientHandler: ChannelInboundHandler {
    public typealias InboundIn = HTTP2Frame
    public typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var request: HTTP2Request
        var deadline: NIODeadline
        var status = 0
        var body: [UInt8] = []
    }

    let events: AsyncStream<HTTP2Event>.Continuation
    let requestTimeout: TimeAmount
    let pingInterval: TimeAmount
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID = 1
    private var goingAway = false
    private var lastRead = NIODeadline.now()
    private var pingSentAt: NIODeadline?
    private var timer: RepeatedTask?
    private var finished = false
    private var answers: [HTTP2Answer] = []

    let batcher: FlushBatcher

    public init(
        events: AsyncStream<HTTP2Event>.Continuation,
        batcher: FlushBatcher,
        requestTimeout: TimeAmount,
        pingInterval: TimeAmount = .seconds(30)
    ) {
        self.events = events
        self.batcher = batcher
        self.requestTimeout = requestTimeout
        self.pingInterval = pingInterval
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { _ in
            loopBound.value.tick()
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        finish("the connection handler was removed")
        self.context = nil
    }

    /// Writes the requests as new streams (on the event loop); false when the connection has ended (nothing was
    /// taken). After GOAWAY they come back unanswered.
    public func send(_ requests: [HTTP2Request]) -> Bool {
        guard let context, !finished else { return false }
        guard !goingAway else {
            report(.unanswered(requests, "the connection is going away"))
            return true
        }
        let deadline = NIODeadline.now() + requestTimeout
        // A flush per request keeps the DATA frames in stream order (see FlushBatcher); one TLS write per batch.
        batcher.hold()
        for request in requests {
            let streamID = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            streams[streamID] = Stream(request: request, deadline: deadline)
            let promise = context.eventLoop.makePromise(of: Void.self)
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            promise.futureResult.whenFailure { error in
                loopBound.value.abandon(streamID, because: "not written: \(error)")
            }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: request.headers)))), promise: nil)
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(request.body), endStream: true)))),
                promise: promise
            )
            context.flush()
        }
        batcher.release()
        return true
    }

    /// The most bytes of one answer's body kept (Apple's are `{"reason":"…","timestamp":…}`).
    static let maxAnswerBody = 4096

    /// Appends what fits under ``maxAnswerBody``: what a peer sends past it is dropped, not kept (a 10 MB answer per
    /// stream would hold a window's worth of them in memory).
    static func append(_ bytes: ByteBufferView, to body: inout [UInt8]) {
        let room = maxAnswerBody - body.count
        if room > 0 { body += bytes.prefix(room) }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastRead = .now()
        switch frame.payload {
        case .headers(let headers):
            if let status = headers.headers.first(name: ":status").flatMap(Int.init) { streams[frame.streamID]?.status = status }
            if headers.endStream { complete(frame.streamID) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data, streams[frame.streamID] != nil {
                Self.append(buffer.readableBytesView, to: &streams[frame.streamID]!.body)
            }
            if data.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            abandon(frame.streamID, because: "stream reset (\(code))")
        case .goAway(let lastStreamID, let code, _):
            goingAway = true
            let refused = streams.keys.filter { $0 > lastStreamID }
            let requests = refused.compactMap { streams.removeValue(forKey: $0)?.request }
            if !requests.isEmpty { report(.unanswered(requests, "GOAWAY (\(code)) before these streams were processed")) }
            report(.goingAway)
        case .settings(.settings(let settings)):
            if let value = settings.last(where: { $0.parameter == .maxConcurrentStreams })?.value {
                report(.maxStreams(value))
            }
        case .ping(_, ack: true):
            pingSentAt = nil
        default:
            break
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        report()
        context.fireChannelReadComplete()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        finish("the connection closed")
        context.fireChannelInactive()
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamID = HTTP2StreamErrors.stream(of: error) {
            // One stream's trouble (NIOHTTP2 reset it): that request is sent again, the other streams carry on.
            abandon(streamID, because: "stream error: \(error)")
            return
        }
        finish(GatewayError.describe(error))
        context.close(promise: nil)
    }

    private func complete(_ streamID: HTTP2StreamID) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        answers.append(HTTP2Answer(request: stream.request, result: HTTP2Result(status: stream.status, body: stream.body)))
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

    private func abandon(_ streamID: HTTP2StreamID, because reason: String) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        report(.unanswered([stream.request], reason))
    }

    /// Every 250 ms: cancel streams past their deadline; PING an idle connection; close one that does not answer.
    private func tick() {
        guard let context, !finished else { return }
        let now = NIODeadline.now()
        let expired = streams.filter { $0.value.deadline <= now }.map(\.key)
        if !expired.isEmpty {
            let requests = expired.compactMap { streams.removeValue(forKey: $0)?.request }
            for streamID in expired {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
            }
            context.flush()
            report(.timedOut(requests, .nanoseconds(requestTimeout.nanoseconds)))
        }
        if let pingSentAt, now - pingSentAt > requestTimeout {
            finish("the server did not answer a PING")
            context.close(promise: nil)
        } else if pingSentAt == nil, now - lastRead > pingInterval {
            pingSentAt = now
            context.writeAndFlush(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false))),
                promise: nil
            )
        }
    }

    private func finish(_ reason: String) {
        guard !finished else { return }
        finished = true
        timer?.cancel()
        let requests = streams.values.map(\.request)
        streams = [:]
        if !requests.isEmpty { report(.unanswered(requests, reason)) }
        report(.closed(reason))
        events.finish()
    }
}
