import APNs
import FCM
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import Support
import _CryptoExtras

/// The simulator's Google side on one HTTP/2 connection: the OAuth token endpoint (`POST /token`, which verifies the
/// RS256 assertion against the service account's public key) and FCM's `POST /v1/projects/ID/messages:send`, which
/// checks the bearer token, the project and the message, and answers as FCM does.
final class FCMHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let options: SimulatorConfiguration.FCMOptions
    let auth: FCMAuthState
    let state: SimulatorState
    let connection: Int
    let logger: Logger
    /// A message is small (FCM takes 4 kB of data): 64 kB per request is kept.
    private var requests = HTTP2Requests(maximumBody: 65_536)
    private var accepted: [AcceptedNotification] = []

    init(options: SimulatorConfiguration.FCMOptions, auth: FCMAuthState, state: SimulatorState, connection: Int, logger: Logger) {
        self.options = options
        self.auth = auth
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
        logger.debug("FCM connection \(connection): \(error)")
        if let streamID = HTTP2StreamErrors.stream(of: error) {
            requests.drop(streamID)
            return
        }
        context.close(promise: nil)
    }

    /// An answer: status, JSON body, and `Retry-After`.
    struct Answer: Sendable, Equatable {
        var status: Int
        var body: String
        var retryAfter: Int?
    }

    private func complete(_ streamID: HTTP2StreamID, _ request: HTTP2Requests.Request, context: ChannelHandlerContext) {
        let answer = self.answer(request)
        if answer.status != 200 { state.recordRejection("fcm \(answer.status)") }
        if let delay = options.answerDelay {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(delay.nanoseconds)) {
                let (handler, context) = loopBound.value
                handler.respond(answer, on: streamID, context: context)
            }
        } else {
            respond(answer, on: streamID, context: context)
        }
    }

    private func respond(_ answer: Answer, on streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers: HPACKHeaders = [":status": "\(answer.status)", "content-type": "application/json; charset=UTF-8"]
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: "\(retryAfter)") }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: answer.body)), endStream: true)))
            ),
            promise: nil
        )
        context.flush()
    }

    private func answer(_ request: HTTP2Requests.Request) -> Answer {
        let headers = request.headers
        let path = headers.first(name: ":path") ?? ""
        guard headers.first(name: ":method") == "POST" else { return Self.error(405, "METHOD_NOT_ALLOWED", nil, "POST only") }
        if path == "/token" { return token(request.body) }
        let prefix = "/v1/projects/"
        let suffix = "/messages:send"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.count > prefix.count + suffix.count else {
            return Self.error(404, "NOT_FOUND", nil, "no such method")
        }
        let project = String(path.dropFirst(prefix.count).dropLast(suffix.count))
        guard let authorization = headers.first(name: "authorization"), authorization.hasPrefix("Bearer ") else {
            return Self.error(401, "UNAUTHENTICATED", nil, "Request is missing required authentication credential.")
        }
        guard let granted = auth.project(ofToken: String(authorization.dropFirst("Bearer ".count)), now: Date()) else {
            return Self.error(401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials.")
        }
        guard granted == project else { return Self.error(403, "PERMISSION_DENIED", nil, "Permission denied for project \(project).") }
        if let fault = auth.injected() { return fault }
        guard let json = try? JSON.parse(request.body.readableBytesView), let message = json["message"],
            let token = message["token"]?.stringValue
        else {
            return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid JSON payload: no message.token")
        }
        guard FCMMessage.isToken(token) else {
            return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token")
        }
        if let data = message["data"] {
            guard let members = data.members, members.allSatisfy({ $0.value.stringValue != nil }) else {
                return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "data values must be strings")
            }
            guard members.reduce(0, { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }) <= FCMMessage.maximumDataBytes
            else {
                return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Message is too big")
            }
        }
        var priority: UInt8 = 10
        if let android = message["android"] {
            switch android["priority"]?.stringValue {
            case nil, "high", "HIGH": break
            case "normal", "NORMAL": priority = 5
            default: return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.android.priority'")
            }
        }
        if options.senderMismatchTokens.contains(token) {
            return Self.error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch")
        }
        if options.unregisteredTokens.contains(token) {
            return Self.error(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
        }
        var notification = AcceptedNotification(
            arrival: Date(),
            format: "fcm",
            identifier: 0,
            token: token,
            payload: String(buffer: request.body),
            priority: priority,
            expiry: 0,
            connection: connection
        )
        notification.topic = project
        accepted.append(notification)
        return Answer(status: 200, body: #"{"name":"projects/\#(project)/messages/\#(auth.nextMessageID())"}"#)
    }

    /// The token endpoint: `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…`.
    private func token(_ body: ByteBuffer) -> Answer {
        var form: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            form[String(parts[0]).removingPercentEncoding ?? ""] = String(parts[1]).removingPercentEncoding
        }
        guard form["grant_type"] == OAuthAssertion.grantType, let assertion = form["assertion"] else {
            return Answer(status: 400, body: #"{"error":"unsupported_grant_type","error_description":"Invalid grant_type"}"#)
        }
        return auth.grant(assertion: assertion, now: Date())
    }

    static func error(_ status: Int, _ canonical: String, _ code: String?, _ message: String, retryAfter: Int? = nil) -> Answer {
        let details =
            code.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        return Answer(
            status: status,
            body: #"{"error":{"code":\#(status),"message":\#(JSONText.quoted(message)),"status":"\#(canonical)"\#(details)}}"#,
            retryAfter: retryAfter
        )
    }
}

/// What every FCM connection of one simulator shares: the access tokens it issued, and the faults to inject.
package final class FCMAuthState: Sendable {
    private struct Storage {
        var tokens: [String: (project: String, expires: Date)] = [:]
        var issued = 0
        var requests = 0
        var refusing = false
        var messages = 0
        var quota: Int
        var unavailable: Int
    }

    let options: SimulatorConfiguration.FCMOptions
    private let storage: NIOLockedValueBox<Storage>

    init(_ options: SimulatorConfiguration.FCMOptions) {
        self.options = options
        self.storage = NIOLockedValueBox(Storage(quota: options.quotaExceededRequests, unavailable: options.unavailableRequests))
    }

    /// Access tokens issued so far (a test checks that the daemon asks once, not per message).
    package var tokensIssued: Int { storage.withLockedValue { $0.issued } }
    /// Requests to the token endpoint, granted or not.
    package var tokenRequests: Int { storage.withLockedValue { $0.requests } }

    /// Refuses every assertion from now on (`invalid_grant`, as for a deleted or disabled key), or takes them again.
    package func setRefusingGrants(_ refusing: Bool) { storage.withLockedValue { $0.refusing = refusing } }

    /// Forgets every token issued (as if they expired or were revoked): the next message is answered 401.
    package func revokeTokens() { storage.withLockedValue { $0.tokens.removeAll() } }

    func grant(assertion: String, now: Date) -> FCMHandler.Answer {
        let refusing = storage.withLockedValue { storage in
            storage.requests += 1
            return storage.refusing
        }
        if refusing {
            return FCMHandler.Answer(status: 400, body: #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        }
        var reasons: [String] = []
        for account in options.accounts {
            switch OAuthAssertion.verify(assertion, key: account.publicKey, tokenURI: account.tokenURI, now: now) {
            case .success(let claims) where claims.issuer == account.clientEmail:
                let token = "ya29.sim-" + UUID().uuidString.lowercased()
                storage.withLockedValue {
                    $0.tokens[token] = (account.projectID, now.addingTimeInterval(TimeInterval(options.accessTokenLifetime)))
                    $0.issued += 1
                }
                return FCMHandler.Answer(
                    status: 200,
                    body: #"{"access_token":"\#(token)","expires_in":\#(options.accessTokenLifetime),"token_type":"Bearer"}"#
                )
            case .success: reasons.append("iss is not the account's client_email")
            case .failure(let failure): reasons.append(failure.reason)
            }
        }
        return FCMHandler.Answer(
            status: 400,
            body: #"{"error":"invalid_grant","error_description":\#(JSONText.quoted(reasons.first ?? "no service account"))}"#
        )
    }

    /// The project a live token was issued for.
    func project(ofToken token: String, now: Date) -> String? {
        storage.withLockedValue { storage in
            guard let entry = storage.tokens[token], entry.expires > now else { return nil }
            return entry.project
        }
    }

    /// A quota or availability fault for the next message, if any are left.
    func injected() -> FCMHandler.Answer? {
        storage.withLockedValue { storage in
            if storage.quota > 0 {
                storage.quota -= 1
                return FCMHandler.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded", retryAfter: 1)
            }
            if storage.unavailable > 0 {
                storage.unavailable -= 1
                return FCMHandler.error(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
            }
            return nil
        }
    }

    func nextMessageID() -> Int {
        storage.withLockedValue {
            $0.messages += 1
            return $0.messages
        }
    }
}
