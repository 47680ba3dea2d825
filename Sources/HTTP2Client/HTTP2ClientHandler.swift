import Foundation
import Logging
package import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Settings
import Support

/// Drives one HTTP/2 connection (to APNs or FCM) on its event loop, speaking the frames itself (``HTTP2FrameReader``,
/// ``HTTP2FrameWriter``, ``HTTP2HeaderEncoder``, ``HTTP2SendWindow``): performs what its ``HTTP2StreamStateMachine``
/// decides (one stream per notification, a deadline on every stream, PING when idle, every request accounted for
/// when the connection ends) and reports to the worker.
///
/// A batch of requests is one buffer and one TLS write, in stream order. NIOHTTP2's handler did this work per
/// frame, with a stream state machine and HPACK tables of its own beside ours: with it, the daemon spent 16–19 µs of
/// CPU per notification, a third of it there.
package final class HTTP2ClientHandler: ChannelInboundHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    /// Whether the connection speaks HTTP/2 only once TLS has negotiated `h2` over ALPN (true behind TLS; the
    /// in-memory tests have no TLS). Until then nothing is written; without `h2` the connection ends and no request
    /// was sent.
    private let requiresALPN: Bool
    /// What was written before the preface could go (requests the worker sent during the TLS handshake).
    private var held: ByteBuffer?
    private var controlBudget = HTTP2ControlBudget()

    /// Each stream's receive window, as this client announces it (answers are small; this is never the limit).
    package static let streamWindow = 1 << 20

    let events: AsyncStream<HTTP2Event>.Continuation
    private var state: HTTP2StreamStateMachine
    private var reader = HTTP2FrameReader()
    private var encoder = HTTP2HeaderEncoder()
    private var sendWindow = HTTP2SendWindow()
    private let receiveWindow = HTTP2ConnectionWindow()
    /// What the server may still send on the connection before a WINDOW_UPDATE.
    private var receiveRemaining = HTTP2ConnectionWindow.initialSize
    /// The start of a frame whose rest has not arrived.
    private var unread: ByteBuffer?
    /// A header block being encoded, kept to reuse its storage.
    private var block = ByteBuffer()
    private var prefaceSent = false
    /// How the connection is ending, once something says so (the first word wins); dropped if nothing did.
    private var ending: HTTP2Ending?
    private var context: ChannelHandlerContext?
    private var timer: RepeatedTask?
    private var answers: [HTTP2Answer] = []

    package init(
        events: AsyncStream<HTTP2Event>.Continuation,
        requestTimeout: TimeAmount,
        pingInterval: TimeAmount = .seconds(30),
        lastStreamID: Int = HTTP2StreamStateMachine.defaultLastStreamID,
        requiresALPN: Bool = false
    ) {
        self.requiresALPN = requiresALPN
        self.events = events
        self.state = HTTP2StreamStateMachine(requestTimeout: requestTimeout, pingInterval: pingInterval, lastStreamID: lastStreamID)
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { _ in
            loopBound.value.tick()
        }
        if context.channel.isActive && !requiresALPN { sendPreface(context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        finish("the connection handler was removed")
        self.context = nil
    }

    package func channelActive(context: ChannelHandlerContext) {
        if !requiresALPN { sendPreface(context) }
        context.fireChannelActive()
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if requiresALPN, case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if negotiated == "h2" {
                sendPreface(context)
            } else {
                ending = ending ?? .notHTTP2
                fail("the server did not choose HTTP/2 over ALPN (it chose \(negotiated ?? "nothing")): nothing was sent")
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func sendPreface(_ context: ChannelHandlerContext) {
        guard !prefaceSent else { return }
        prefaceSent = true
        var buffer = context.channel.allocator.buffer(capacity: 64)
        HTTP2FrameWriter.preface(initialWindowSize: Self.streamWindow, connectionWindow: receiveWindow.target, to: &buffer)
        receiveRemaining = receiveWindow.target
        if var held {
            self.held = nil
            buffer.writeBuffer(&held)
        }
        write(buffer, context)
    }

    /// Ends the connection in order: GOAWAY(NO_ERROR) says no stream of the server's was processed and no new one
    /// will open (RFC 9113 §6.8), then the connection closes.
    package func close() {
        guard let context else { return }
        ending = ending ?? .orderly
        if prefaceSent && context.channel.isActive {
            var buffer = context.channel.allocator.buffer(capacity: 17)
            HTTP2FrameWriter.goAway(lastStreamID: .rootStream, .noError, to: &buffer)
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        context.close(promise: nil)
    }

    /// Writes the requests as new streams (on the event loop), in one buffer; false when the connection has ended
    /// (nothing was taken). After GOAWAY they come back unanswered.
    package func send(_ requests: [HTTP2Request]) -> Bool {
        guard let context else { return false }
        switch state.send(requests, now: .now()) {
        case .refused:
            return false
        case .write(let streams, let unanswered, let reason, let retired):
            if !streams.isEmpty {
                var buffer = context.channel.allocator.buffer(
                    capacity: streams.count * (Self.bytesPerHeaderBlock + 32 + (streams.first?.1.body.readableBytes ?? 0))
                )
                for (streamID, request) in streams {
                    block.clear()
                    encoder.encode(request.headers, to: &block)
                    HTTP2FrameWriter.headers(streamID, block: block, maxFrameSize: sendWindow.maxFrameSize, to: &buffer)
                    sendWindow.send(streamID, request.body, to: &buffer)
                }
                write(buffer, context)
            }
            if !unanswered.isEmpty { report(.unanswered(unanswered, reason)) }
            if retired { report(.goingAway("its stream ids are used up")) }
            return true
        }
    }

    /// About what a request's header block takes once the table holds what repeats.
    static let bytesPerHeaderBlock = 160

    /// A write that fails leaves the connection unusable: it is closed, and every request still waiting on it comes
    /// back unanswered.
    private func write(_ buffer: ByteBuffer, _ context: ChannelHandlerContext) {
        guard prefaceSent else {
            var buffer = buffer
            if held == nil { held = buffer } else { held!.writeBuffer(&buffer) }
            return
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        promise.futureResult.whenFailure { error in
            loopBound.value.fail("not written: \(GatewayError.describe(error))")
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: promise)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var pending = unread {
            unread = nil  // one reference left: the append below does not copy it
            pending.writeBuffer(&bytes)
            bytes = pending
        }
        state.read(now: .now())
        var out = ByteBuffer()
        do throws(HTTP2ConnectionError) {
            while let frame = try reader.next(from: &bytes) {
                try handle(frame, replies: &out)
            }
        } catch {
            HTTP2FrameWriter.goAway(lastStreamID: .rootStream, error.code, to: &out)
            context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            fail(error.description)
            return
        }
        if bytes.readableBytes > 0 {
            bytes.discardReadBytes()
            unread = bytes
        }
        if out.readableBytes > 0 { write(out, context) }
    }

    private func handle(_ frame: HTTP2InboundFrame, replies: inout ByteBuffer) throws(HTTP2ConnectionError) {
        switch frame {
        case .headers(let streamID, let headers, let endStream):
            guard !state.isIdle(streamID) else {
                throw HTTP2ConnectionError(.protocolError, "HEADERS on stream \(streamID), which this client has not opened")
            }
            let status = headers.first(name: ":status").flatMap(Int.init)
            let retryAfter = status == 200 ? nil : headers.first(name: "retry-after")
            if let answer = state.headers(streamID, status: status, retryAfter: retryAfter, endStream: endStream) {
                sendWindow.drop(streamID)
                answered(answer)
            }
        case .data(let streamID, let bytes, let endStream, let flowControlled):
            guard !state.isIdle(streamID) else {
                throw HTTP2ConnectionError(.protocolError, "DATA on stream \(streamID), which this client has not opened")
            }
            receiveRemaining -= flowControlled
            guard receiveRemaining >= 0 else {
                throw HTTP2ConnectionError(.flowControlError, "DATA past the connection's receive window")
            }
            if let increment = receiveWindow.increment(remaining: receiveRemaining) {
                HTTP2FrameWriter.windowUpdate(.rootStream, increment: increment, to: &replies)
                receiveRemaining += increment
            }
            if let answer = state.data(streamID, bytes.readableBytesView, endStream: endStream) {
                sendWindow.drop(streamID)
                answered(answer)
            }
        case .rstStream(let streamID, let code):
            sendWindow.drop(streamID)
            if let request = state.reset(streamID) { report(.unanswered([request], "stream reset (\(code))")) }
        case .goAway(let lastStreamID, let code, let debug):
            let said = debug.isEmpty ? "GOAWAY (\(code))" : "GOAWAY (\(code), \(debug))"
            let requests = state.goAway(lastStreamID: lastStreamID)
            ending = ending ?? .orderly
            if !requests.isEmpty { report(.unanswered(requests, "\(said) before these streams were processed")) }
            report(.goingAway(said))
        case .settings(let settings):
            try spendControlBudget("SETTINGS")
            for (parameter, value) in settings {
                switch parameter {
                case 0x1: encoder.setPeerTableSize(Int(value))
                case 0x3:
                    state.maxConcurrentStreams(Int(value))
                    report(.maxStreams(Int(value)))
                default: break
                }
            }
            try sendWindow.settings(settings, to: &replies)
            HTTP2FrameWriter.settingsAck(to: &replies)
        case .settingsAck:
            break
        case .ping(_, ack: true):
            state.pingAnswered()
        case .ping(let data, ack: false):
            try spendControlBudget("PING")
            HTTP2FrameWriter.ping(data, ack: true, to: &replies)
        case .windowUpdate(let streamID, let increment):
            try sendWindow.windowUpdate(streamID, increment: increment, to: &replies)
        }
    }

    private func spendControlBudget(_ frame: String) throws(HTTP2ConnectionError) {
        guard controlBudget.spend(now: .now()) else {
            throw HTTP2ConnectionError(
                .enhanceYourCalm,
                "a flood of \(frame) frames (more than \(HTTP2ControlBudget.burst) at once or \(HTTP2ControlBudget.perSecond) a second)"
            )
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
        ending = ending ?? (GatewayError.isRefusal(error) ? .refused : .dropped)
        fail(GatewayError.describe(error))
    }

    /// Ends the connection: every request still waiting comes back unanswered.
    private func fail(_ reason: String) {
        finish(reason)
        context?.close(promise: nil)
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
        var out = ByteBuffer()
        if !action.expired.isEmpty {
            for (streamID, _) in action.expired {
                sendWindow.drop(streamID)
                HTTP2FrameWriter.rstStream(streamID, .cancel, to: &out)
            }
            report(.timedOut(action.expired.map(\.1), .nanoseconds(state.requestTimeout.nanoseconds)))
        }
        if let reason = action.close {
            ending = ending ?? .stalled
            fail(reason)
            return
        }
        if action.ping { HTTP2FrameWriter.ping(0, ack: false, to: &out) }
        if out.readableBytes > 0 { write(out, context) }
    }

    private func finish(_ reason: String) {
        guard let requests = state.finish() else { return }
        timer?.cancel()
        if !requests.isEmpty { report(.unanswered(requests, reason)) }
        report(.closed(reason, ending ?? .dropped))
        events.finish()
    }
}
