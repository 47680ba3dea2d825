import APNs
import APNsTransport
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import Settings
import Support

/// The simulator's HTTP/2 provider API: what Apple's `api.push.apple.com` checks and answers, per stream.
///
/// Frames are handled inline on the connection (no child channel per stream), so the simulator is cheap enough to
/// measure a sender against.
final class HTTP2Handler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let options: SimulatorConfiguration.HTTP2Options
    let state: SimulatorState
    let faults: HTTP2FaultState
    let connection: Int
    let logger: Logger
    private var requests = HTTP2Requests()
    private var handled = 0
    private var goingAway = false
    private var accepted: [AcceptedNotification] = []
    private var clientCertificate: Bool?
    private var verifiedToken: (token: String, issuedAt: Double, keyID: String)?

    init(
        options: SimulatorConfiguration.HTTP2Options,
        state: SimulatorState,
        faults: HTTP2FaultState,
        connection: Int,
        logger: Logger
    ) {
        self.options = options
        self.state = state
        self.faults = faults
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

    private func complete(_ streamID: HTTP2StreamID, _ request: HTTP2Requests.Request, context: ChannelHandlerContext) {
        guard !goingAway else { return }
        handled += 1
        if clientCertificate == nil {
            clientCertificate = (try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self))?.peerCertificate != nil
        }
        let answer = faults.injected(token: Self.token(request.headers)) ?? answer(request)
        if let answer {
            if let delay = options.answerDelay {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(
                    in: TimeAmount.nanoseconds(delay.nanoseconds)
                ) {
                    let (handler, context) = loopBound.value
                    handler.respond(answer, on: streamID, context: context)
                    context.flush()
                }
            } else {
                respond(answer, on: streamID, context: context)
            }
        }
        if let limit = options.goAwayAfterStreams, handled >= limit {
            goingAway = true
            context.writeAndFlush(
                wrapOutboundOut(
                    HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil))
                ),
                promise: nil
            )
            let channel = context.channel
            context.eventLoop.scheduleTask(in: .milliseconds(200)) { channel.close(promise: nil) }
        }
    }

    /// What Apple would answer; `nil` never happens here (silence is a fault, injected above).
    private func answer(_ request: HTTP2Requests.Request) -> HTTP2FaultState.Answer? {
        let headers = request.headers
        guard headers.first(name: ":method") == "POST" else { return .init(status: 405, reason: "MethodNotAllowed") }
        let path = headers.first(name: ":path") ?? ""
        guard path.hasPrefix("/3/device/") else { return .init(status: 404, reason: "BadPath") }
        let token = String(path.dropFirst("/3/device/".count)).lowercased()
        guard token.count >= 16, token.count % 2 == 0, DeviceToken.bytes(hex: token) != nil else {
            return .init(status: 400, reason: "BadDeviceToken")
        }
        if clientCertificate != true {
            guard let authorization = headers.first(name: "authorization"), authorization.lowercased().hasPrefix("bearer ") else {
                return .init(status: 403, reason: "MissingProviderToken")
            }
            guard let verifier = options.verifiers.first else { return .init(status: 403, reason: "InvalidProviderToken") }
            // Like Apple, a token is verified once per connection and only its age checked on later requests.
            let token = String(authorization.dropFirst("bearer ".count))
            if verifiedToken?.token != token {
                // Any of the keys it knows (several apps, or a key per app): the token's kid and team pick one.
                guard
                    let (issuedAt, keyID) = options.verifiers.lazy.compactMap({ key in key.issuedAt(of: token).map { ($0, key.keyID) } })
                        .first
                else {
                    return .init(status: 403, reason: "InvalidProviderToken")
                }
                verifiedToken = (token, issuedAt, keyID)
            }
            if let verified = verifiedToken, let reason = verifier.check(issuedAt: verified.issuedAt) {
                return .init(status: 403, reason: reason)
            }
        }
        let topic = headers.first(name: "apns-topic")
        if clientCertificate != true, topic == nil { return .init(status: 400, reason: "MissingTopic") }
        // The app's bundle id, or it with a suffix of a push type (`.voip`, `.push-type.liveactivity`, …).
        if !options.topics.isEmpty, let topic, !options.topics.contains(where: { topic == $0 || topic.hasPrefix($0 + ".") }) {
            return .init(status: 400, reason: "BadTopic")
        }
        let pushType = headers.first(name: "apns-push-type") ?? "alert"
        guard let type = PushType(rawValue: pushType) else { return .init(status: 400, reason: "InvalidPushType") }
        var priority: UInt8 = 10
        if let text = headers.first(name: "apns-priority") {
            guard let value = UInt8(text), [1, 5, 10].contains(value) else { return .init(status: 400, reason: "BadPriority") }
            priority = value
        }
        var expiry: UInt32 = 0
        if let text = headers.first(name: "apns-expiration") {
            guard let value = UInt32(text) else { return .init(status: 400, reason: "BadExpirationDate") }
            expiry = value
        }
        if let collapse = headers.first(name: "apns-collapse-id"), collapse.utf8.count > 64 {
            return .init(status: 400, reason: "BadCollapseId")
        }
        var apnsID = UUID()
        if let text = headers.first(name: "apns-id") {
            guard let value = UUID(uuidString: text) else { return .init(status: 400, reason: "BadMessageId") }
            apnsID = value
        }
        let size = request.body.readableBytes
        guard size > 0 else { return .init(status: 400, reason: "PayloadEmpty") }
        let limit = type.payloadLimit
        guard size <= limit else { return .init(status: 413, reason: "PayloadTooLarge") }
        if options.otherEnvironment { return .init(status: 400, reason: "BadDeviceToken") }
        if state.isUnregistered(token) {
            return .init(status: 410, reason: "Unregistered", timestamp: Int64(Date().timeIntervalSince1970 * 1000) - 60_000)
        }
        var notification = AcceptedNotification(
            arrival: Date(),
            format: "http2",
            identifier: 0,
            token: token,
            payload: String(buffer: request.body),
            priority: priority,
            expiry: expiry,
            connection: connection
        )
        notification.pushType = pushType
        notification.topic = topic
        notification.collapseID = headers.first(name: "apns-collapse-id")
        notification.keyID = clientCertificate == true ? nil : verifiedToken?.keyID
        accepted.append(notification)
        return .init(status: 200, reason: nil, apnsID: apnsID)
    }

    private func respond(_ answer: HTTP2FaultState.Answer, on streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers: HPACKHeaders = [":status": "\(answer.status)"]
        if let apnsID = answer.apnsID { headers.add(name: "apns-id", value: apnsID.uuidString.lowercased(), indexing: .nonIndexable) }
        guard let reason = answer.reason else {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))),
                promise: nil
            )
            return
        }
        state.recordRejection("\(answer.status) \(reason)")
        headers.add(name: "content-type", value: "application/json")
        var body = #"{"reason":"\#(reason)""#
        if let timestamp = answer.timestamp { body += #","timestamp":\#(timestamp)"# }
        body += "}"
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: body)), endStream: true)))
            ),
            promise: nil
        )
        // Error answers carry a body: flushed one by one, their DATA frames leave in stream order (NIOHTTP2 makes the
        // DATA frames of one flush writable in the order of a hash set).
        context.flush()
    }

    private static func token(_ headers: HPACKHeaders) -> String {
        String((headers.first(name: ":path") ?? "").dropFirst("/3/device/".count)).lowercased()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/2 connection \(connection): \(error)")
        if let streamID = HTTP2StreamErrors.stream(of: error) {
            requests.drop(streamID)  // reset by NIOHTTP2; the connection carries on
            return
        }
        context.close(promise: nil)
    }
}

/// Faults shared by every HTTP/2 connection of one simulator: 503 bursts, 429 per token, silence.
final class HTTP2FaultState: Sendable {
    struct Answer: Sendable {
        var status: Int
        var reason: String?
        var timestamp: Int64?
        var apnsID: UUID?
    }

    private struct Storage {
        var unavailable: Int
        var silent: Int
        var throttled: Set<String>
    }

    private let storage: NIOLockedValueBox<Storage>

    init(_ options: SimulatorConfiguration.HTTP2Options) {
        storage = NIOLockedValueBox(
            Storage(
                unavailable: options.unavailableRequests,
                silent: options.silentRequests,
                throttled: Set(options.throttledTokens.map { $0.lowercased() })
            )
        )
    }

    /// `nil`: no fault, answer normally. An answer with status 0: stay silent.
    func injected(token: String) -> Answer?? {
        storage.withLockedValue { storage in
            if storage.silent > 0 {
                storage.silent -= 1
                return .some(nil)
            }
            if storage.unavailable > 0 {
                storage.unavailable -= 1
                return Answer(status: 503, reason: "ServiceUnavailable")
            }
            if storage.throttled.remove(token) != nil {
                return Answer(status: 429, reason: "TooManyRequests")
            }
            return nil
        }
    }
}
