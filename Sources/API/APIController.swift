import Foundation
import HTTPServing
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Observability
import Settings
import Storage
import Support
import WebPush

/// `POST /api.php` (and `/api`): the PushChat app's commands.
struct APIController: Sendable {
    static let errorHeader = HTTPField.Name("X-Error-Description")!

    let store: ChatStore
    let mode: Mode
    let limits: APILimits
    let perIP: RateLimiter
    let perUDID: RateLimiter
    let fanOut: FanOutBudget
    /// Who a request is from (`X-Forwarded-For` of trusted proxies believed).
    let resolver: ClientAddressResolver
    /// Whether the database answers (the probe's last word): `/readyz` and the refusals while it is away.
    let health: DatabaseHealth
    let metrics: APIMetrics
    let logger: Logger
    /// `webpush_private_hosts`: endpoints a browser's subscription may name inside the network.
    var webPushPrivateHosts: Set<String> = []

    func addRoutes(to router: Router<APIRequestContext>) {
        // Cheap as they are, the probes pass the per-address limiter like every route: a flood of them is still a flood.
        let probes = router.group().add(middleware: AddressLimitMiddleware(limiter: perIP))
        probes.get("/healthz") { _, _ in Response.text(.ok, "ok") }
        probes.get("/readyz") { _, _ in await readiness() }
        // The app's commands, counted by command and status (a request refused before its command is known counts
        // as `unparsed`).
        let commands = router.group()
            .add(middleware: RequestMetricsMiddleware(metrics: metrics))
            .add(middleware: AddressLimitMiddleware(limiter: perIP))
        commands.post("/api.php") { request, context in try await handle(request, context: context) }
        commands.post("/api") { request, context in try await handle(request, context: context) }
    }

    /// The tutorial's database check, served with the test pages only.
    func addTestRoutes(to router: Router<APIRequestContext>) {
        router.get("/test/database") { _, _ in try await databaseCheck() }
    }

    /// Answers one command; a refused form or command (FormError, APIRequestError) is thrown as its 4xx answer.
    func handle(_ request: Request, context: APIRequestContext) async throws -> Response {
        do {
            return try await respond(request, context: context)
        } catch let error as any HTTPResponseError {
            context.logger.debug("Refused request", metadata: ["api.error": "\(error)"])
            throw error
        }
    }

    private func respond(_ request: Request, context: APIRequestContext) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limits.maxBodyBytes {
            return Self.error(.contentTooLarge, "Request body too large")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limits.maxBodyBytes)
        } catch is NIOTooManyBytesError {
            // A chunked body (no Content-Length) that grew past the limit.
            return Self.error(.contentTooLarge, "Request body too large")
        } catch let error as HTTPError where error.status == .contentTooLarge {
            return Self.error(.contentTooLarge, "Request body too large")
        }
        let fields = try FormFields.parse(body: body, contentType: request.headers[.contentType])
        let command = try APIRequest(fields: fields)
        context.label.value = command.command
        if let wait = perUDID.take(command.udid) {
            return Self.tooManyRequests(wait)
        }
        let subscription = try await Self.checkedSubscription(command, privateHosts: webPushPrivateHosts)
        do {
            // No deadline of our own: the database client bounds the wait for a connection, and once a statement is
            // sent the server's statement_timeout decides, so an error answer means nothing was written.
            return try await Self.perform(
                command,
                store: store,
                client: (context.client?.description, context.addressKey),
                maxRoomSize: limits.maxRoomSize,
                fanOut: fanOut,
                metrics: metrics,
                subscription: subscription
            )
        } catch {
            return databaseFailure(error, doing: command.command)
        }
    }

    /// A browser's subscription (`platform=web`) once its endpoint's addresses are checked, before anything is
    /// written; refused (400, the reason) when it points inside the network.
    static func checkedSubscription(
        _ command: APIRequest,
        privateHosts: Set<String>
    ) async throws(APIRequestError) -> WebSubscriptionRecord? {
        let subscription: WebPushSubscription
        switch command {
        case .join(_, _, _, _, _, let given?), .update(_, _, _, let given?): subscription = given
        default: return nil
        }
        do {
            return try await WebSubscriptionRecord(checking: subscription, privateHosts: privateHosts)
        } catch {
            throw .invalidSubscription(error.reason)
        }
    }

    static func perform(
        _ command: APIRequest,
        store: ChatStore,
        client: (address: String?, key: String),
        maxRoomSize: Int,
        fanOut: FanOutBudget,
        metrics: APIMetrics,
        subscription: WebSubscriptionRecord? = nil
    ) async throws -> Response {
        switch command {
        case .join(let udid, let token, let name, let code, let platform, _):
            guard
                try await store.join(
                    udid: udid,
                    token: token,
                    name: name,
                    code: code,
                    platform: platform,
                    subscription: subscription,
                    ipAddress: client.address,
                    maxRoomSize: maxRoomSize
                )
            else { return error(.forbidden, "Room is full") }
        case .leave(let udid):
            try await store.leave(udid: udid)
        case .update(let udid, let token, let platform, _):
            try await store.update(udid: udid, token: token, platform: platform, subscription: subscription)
        case .message(let udid, let text):
            // The fan-out budget pays for the recipients before anything is queued; the statement refuses a room
            // that grew past what was reserved, and what was not used goes back.
            let result: ChatStore.MessageResult
            if fanOut.isEnabled {
                switch try await messageWithinBudget(udid: udid, text: text, store: store, fanOut: fanOut, address: client.key) {
                case .refused(let wait): return tooManyRequests(wait)
                case .done(let done): result = done
                }
                if result.refused { return tooManyRequests(.seconds(1)) }
            } else {
                result = try await store.message(udid: udid, text: text)
            }
            metrics.queued(result.queued)
            if result.messageID == nil {
                // The udid is the device's only credential in the chat API: never at info.
                store.logger.info("Message from a device that is in no room: nothing queued")
                store.logger.debug("Message from a device that is in no room", metadata: ["api.udid": "\(udid)"])
            }
        case .fetch(let udid, let since):
            let messages = try await store.fetch(udid: udid, since: since)
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: FetchResponse(messages).json()))
            )
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: "OK"))
        )
    }

    /// `message` paid from the sender's fan-out budget: its last recipient count is reserved (a count query only the
    /// first time); a room that grew past it is refused by the statement and tried once more with its exact size.
    static func messageWithinBudget(
        udid: String,
        text: String,
        store: ChatStore,
        fanOut: FanOutBudget,
        address: String
    ) async throws -> Reservation.Outcome<ChatStore.MessageResult> {
        let sender = fanOut.sender(address: address, udid: udid)
        var estimate: Int
        if let known = fanOut.knownRecipients(udid) { estimate = known } else { estimate = try await store.recipientCount(udid: udid) }
        for attempt in 1...2 {
            let outcome = try await Reservation.withReservation(estimate, from: sender) { reserved in
                try await store.message(udid: udid, text: text, maxRecipients: reserved)
            } used: {
                $0.queued
            }
            guard case .done(let result) = outcome else { return outcome }
            fanOut.remember(result.recipients, for: udid)
            guard attempt == 1, result.refused, estimate < result.recipients else { return outcome }
            estimate = result.recipients
        }
        preconditionFailure("the second attempt always returns")
    }

    func databaseCheck() async throws -> Response {
        do {
            let count = try await store.userCount()
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "Database OK: \(count) active users\n"))
            )
        } catch {
            return databaseFailure(error, doing: "database check")
        }
    }

    /// Ready while the database answers (the probe's last word, one query a second whatever the traffic); 503
    /// otherwise (for load balancers and systemd checks).
    func readiness() async -> Response {
        if !health.isUp { await health.waitUntilSettled() }
        guard health.isUp else { return Response.text(.serviceUnavailable, "database unreachable") }
        return Response.text(.ok, "ready")
    }

    /// 503 with `Retry-After` when the database is away, did not answer in time or cancelled the statement (nothing was
    /// written; the outage is logged once by the probe, not per request), or took the statement and never answered
    /// (it may have been carried out: the answer says so); 500 when the statement failed otherwise. Details only in
    /// development mode.
    func databaseFailure(_ error: any Error, doing what: String) -> Response {
        let detail = DatabaseError.describe(error)
        guard DatabaseError.isUnavailable(error) else {
            logger.error("\(what) failed: \(detail)", metadata: ["api.command": "\(what)"])
            return Self.error(.internalServerError, mode == .development ? "Database error: \(detail)" : "Database error")
        }
        var response: Response
        if DatabaseError.outcomeIsUnknown(error) {
            // The one 503 after which something may have happened: said, in every mode, and logged.
            logger.warning("\(what): \(detail)", metadata: ["api.command": "\(what)"])
            let reason = Self.outcomeUnknown
            response = Self.error(.serviceUnavailable, mode == .development ? "\(reason) (\(detail))" : reason)
        } else {
            logger.debug("\(what) refused: \(detail)", metadata: ["api.command": "\(what)"])
            response = Self.error(
                .serviceUnavailable,
                mode == .development ? "Database unavailable: \(detail)" : "Database unavailable, try again later"
            )
        }
        response.headers[.retryAfter] = "2"
        return response
    }

    /// The reason of a 503 whose statement the database took and never answered (`outcomeUnknown`).
    static let outcomeUnknown = "Database did not answer in time: the request may have been carried out"

    /// 429 with `Retry-After` (whole seconds, at least 1).
    static func tooManyRequests(_ wait: Duration) -> Response {
        var response = error(.tooManyRequests, "Too many requests")
        let seconds = max(1, Int(wait.seconds.rounded(.up)))
        response.headers[.retryAfter] = "\(seconds)"
        return response
    }

    /// An error reply: the reason in `X-Error-Description` (as the tutorial's API did) and in the body.
    static func error(_ status: HTTPResponse.Status, _ description: String) -> Response {
        Response.text(status, description, headers: [errorHeader: description])
    }
}

/// The JSON answer to `cmd=fetch`: `{"messages":[{"id":1,"name":"Bob","text":"hi","time":"2026-…Z"}]}`.
struct FetchResponse: Encodable {
    struct Item: Encodable {
        let id: Int64
        let name: String
        let text: String
        let time: String
    }

    let messages: [Item]
    /// More messages follow: fetch again with `since` = the last id.
    let more: Bool

    init(_ messages: [ChatStore.StoredMessage]) {
        self.messages = messages.map {
            Item(id: $0.id, name: $0.name, text: $0.text, time: $0.createdAt.formatted(.iso8601))
        }
        self.more = messages.count == ChatStore.fetchLimit
    }

    func json() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(self)) ?? Data("{\"messages\":[]}".utf8))
    }
}
