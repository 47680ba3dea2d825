import APNs
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Settings
import Storage
import Support
import WebPush

/// The provider API (`/v1`): other backend code registers devices and sends notifications with `Authorization:
/// Bearer KEY`. Every answer is JSON; every refusal is ``ProviderError``'s `{"reason", "field"}`.
struct ProviderController: Sendable {
    static let idempotencyHeader = HTTPField.Name("Idempotency-Key")!
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    let store: ProviderStore
    /// The default app's interface (the configuration's): the payload limit (2,048 bytes binary, 4,096 HTTP/2) of a key
    /// whose app does not name its own.
    let transport: APNsTransport
    /// `apns_topic`: a notification's own topic must be it or it with one of Apple's suffixes (nil: not checked).
    let appTopic: String?
    let limits: APILimits
    let keyLimits = KeyLimits()
    /// What each app has waiting, against `api_app_max_backlog`.
    let backlog = AppBacklog()
    /// The per-address limiter the chat API uses. A request with a valid key is governed by the key's own limits
    /// (a backend sends everything from its one address); one without a valid key is charged here.
    let perIP: RateLimiter
    /// Failed authentications per address (a missing, malformed, unknown or revoked key, a disabled app): a stricter
    /// bucket of its own, checked before the key is looked up, so a flood of made-up keys costs at most its rate of
    /// database lookups per address.
    let failedAuth: RateLimiter
    /// Keys that authenticated lately pass ``failedAuth`` without waiting for it.
    let knownKeys = KnownKeys()
    let metrics: APIMetrics
    let logger: Logger
    /// The VAPID public key (`webpush_vapid_key_file`'s, base64url of the uncompressed point): the
    /// `applicationServerKey` a page subscribes with; nil when Web Push is not configured.
    var vapidPublicKey: String? = nil
    /// `webpush_private_hosts`: endpoints a browser's subscription may name inside the network.
    var webPushPrivateHosts: Set<String> = []

    func addRoutes(to router: Router<APIRequestContext>) {
        // Every answer counted by endpoint and status; each route behind its key's authentication, scope and limit.
        let v1 = router.group("/v1").add(middleware: RequestMetricsMiddleware(metrics: metrics))
        func route(_ name: String, _ scope: KeyScope, _ action: String) -> RouterGroup<APIRequestContext> {
            v1.group().add(middleware: KeyAuthenticationMiddleware(provider: self, name: name, scope: scope, action: action))
        }
        route("devices.register", .devicesWrite, "register devices").post("devices") { request, context in
            try await register(request, key: context.requireKey())
        }
        route("devices.list", .devicesRead, "list devices").get("devices") { request, context in
            try await devices(request, key: context.requireKey())
        }
        route("devices.unregister", .devicesWrite, "delete devices").delete("devices/:token") { _, context in
            try await unregister(context.parameters.get("token") ?? "", key: context.requireKey())
        }
        route("webpush.public_key", .devicesWrite, "read the Web Push public key").get("webpush/public-key") { _, context in
            Self.json(.ok, ["public_key": try publicKey(for: try context.requireKey())])
        }
        route("notifications.send", .send, "send notifications").post("notifications") { request, context in
            try await send(request, key: context.requireKey())
        }
        route("notifications.status", .status, "read notification status").get("notifications/:id") { _, context in
            try await status(context.parameters.get("id") ?? "", key: context.requireKey())
        }
        route("notifications.cancel", .send, "cancel notifications").delete("notifications/:id") { _, context in
            try await cancel(context.parameters.get("id") ?? "", key: context.requireKey())
        }
    }

    /// ``authenticate(_:hash:)`` behind the failed-authentication bucket: an address that has spent it gets 429 before any
    /// lookup; a failure is charged to it and to the per-address limiter; a valid key is charged to neither.
    func authenticateLimited(_ request: Request, address: String) async throws -> ProviderStore.Key {
        let presented = Self.presentedKey(request).map(APIKey.hash)
        let wait = failedAuth.wait(address, for: 1)
        guard wait == .zero || presented.map({ knownKeys.contains($0) }) == true else {
            _ = perIP.take(address)
            throw ProviderError.tooManyRequests(wait, "too many failed authentications from this address")
        }
        do {
            let key = try await authenticate(request, hash: presented)
            if let presented { knownKeys.insert(presented) }
            return key
        } catch let error as ProviderError where error.status == .unauthorized || error.status == .forbidden {
            _ = failedAuth.take(address)
            _ = perIP.take(address)
            throw error
        }
    }

    /// The key of `Authorization: Bearer KEY` as sent (nil: no such header, or not of that form).
    static func presentedKey(_ request: Request) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", parts[1].utf8.count <= 256 else { return nil }
        return String(parts[1]).trimmingWhitespace()
    }

    /// The unrevoked key named by `Authorization: Bearer KEY`, else 401. `hash`: the hash of ``presentedKey(_:)``,
    /// computed once by the caller (nil when the header has no key of that form).
    func authenticate(_ request: Request, hash: String?) async throws -> ProviderStore.Key {
        guard request.headers[.authorization] != nil else {
            throw ProviderError(.unauthorized, .unauthorized, "an API key is required: Authorization: Bearer KEY")
        }
        guard let hash else {
            throw ProviderError(.unauthorized, .unauthorized, "the Authorization header must be: Bearer KEY")
        }
        guard let key = try await store.key(hash: hash) else {
            throw ProviderError(.unauthorized, .unauthorized, "unknown or revoked API key")
        }
        guard !key.appDisabled else {
            throw ProviderError(.forbidden, .forbidden, "the key's app \(key.app) is disabled (pushchat-api apps enable \(key.app))")
        }
        return key
    }

    /// Runs a database call. No deadline of our own: the database client bounds the wait for a connection, and once
    /// a statement is sent the server's statement_timeout decides, so an error answer means nothing was written.
    func database<T: Sendable>(_ body: @escaping @Sendable (ProviderStore) async throws -> T) async throws -> T {
        try await body(store)
    }

    /// The body as bytes: JSON (or no content type), at most `api_max_json_body`.
    func body(_ request: Request) async throws -> [UInt8] {
        if let type = request.headers[.contentType] {
            let media = type.split(separator: ";").first.map { String($0).trimmingWhitespace().lowercased() } ?? ""
            guard media == "application/json" else {
                throw ProviderError(.unsupportedMediaType, .unsupportedMediaType, "the body must be application/json, not \(media)")
            }
        }
        let limit = limits.maxJSONBodyBytes
        let tooLarge = ProviderError(.tooLarge, .contentTooLarge, "the body is larger than \(limit) bytes (api_max_json_body)")
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit { throw tooLarge }
        do {
            return Array(buffer: try await request.body.collect(upTo: limit))
        } catch is NIOTooManyBytesError {
            // A chunked body (no Content-Length) that grew past the limit.
            throw tooLarge
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw tooLarge
        }
    }

    /// The `applicationServerKey` pages of the key's app subscribe with: the app's own VAPID key, or for the default
    /// app `webpush_vapid_key_file`'s (another app never signs with the default app's key).
    func publicKey(for key: ProviderStore.Key) throws(ProviderError) -> String {
        if let publicKey = key.webPushPublicKey { return publicKey }
        guard key.app == App.defaultName else {
            throw ProviderError(
                .notFound,
                .notFound,
                "Web Push is not configured for app \(key.app) (pushchat-api apps update \(key.app) --vapid-key-file FILE)"
            )
        }
        guard let vapidPublicKey else {
            throw ProviderError(.notFound, .notFound, "Web Push is not configured on this server (webpush_vapid_key_file)")
        }
        return vapidPublicKey
    }

    // MARK: devices

    func register(_ request: Request, key: ProviderStore.Key) async throws -> Response {
        let registration = try DeviceRegistration(body: try await body(request))
        var record: WebSubscriptionRecord?
        if let subscription = registration.subscription {
            do {
                record = try await WebSubscriptionRecord(checking: subscription, privateHosts: webPushPrivateHosts)
            } catch {
                throw ProviderError.invalid("subscription.endpoint", error.reason)
            }
        }
        let registered = try await database { [record] store in
            try await store.register(
                token: registration.token,
                user: registration.user,
                clientInfo: registration.clientInfo,
                platform: registration.platform,
                subscription: record,
                key: key
            )
        }
        guard let (device, created) = registered else {
            throw ProviderError(
                .conflict,
                .conflict,
                "this token is registered in another app (one app per token until the operator runs migrate --contract)",
                field: "token"
            )
        }
        return Self.json(created ? .created : .ok, DeviceJSON(device))
    }

    func devices(_ request: Request, key: ProviderStore.Key) async throws -> Response {
        guard let user = request.uri.queryParameters.get("user") else {
            throw ProviderError.invalid("user", "give the user whose devices to list: GET /v1/devices?user=REF")
        }
        let checked = try ProviderJSON.user(.string(user), "user")
        let devices = try await database { store in try await store.devices(user: checked, app: key.app) }
        return Self.json(.ok, ["devices": devices.map(DeviceJSON.init)])
    }

    func unregister(_ token: String, key: ProviderStore.Key) async throws -> Response {
        let token = try ProviderJSON.token(.string(token), "token")
        guard try await database({ store in try await store.unregister(token: token, app: key.app) }) else {
            throw ProviderError(.notFound, .notFound, "no device is registered with this token", field: "token")
        }
        return Response(status: .noContent)
    }

    // MARK: notifications

    func send(_ request: Request, key: ProviderStore.Key) async throws -> Response {
        let body = try await body(request)
        // The key's app's interface bounds the payload (2 KB binary, 4 KB HTTP/2), not the default app's.
        let checked = try NotificationRequest(body: body, transport: key.transport ?? transport)
        try allow(checked, key: key)
        let idempotencyKey = try Self.idempotencyKey(request)
        if limits.appMaxBacklog > 0 {
            let waiting = try await database { store in try await backlog.waiting(key.app, store: store) }
            guard waiting < limits.appMaxBacklog else {
                throw ProviderError.tooManyRequests(
                    .seconds(60),
                    "app \(key.app) has \(waiting) notifications waiting to be sent (api_app_max_backlog \(limits.appMaxBacklog)): "
                        + "try again once they have drained"
                )
            }
        }
        let requestHash = DeviceToken.hex(SHA256.hash(data: body))
        if let idempotencyKey, let answer = try await replay(key: key, idempotencyKey: idempotencyKey, requestHash: requestHash) {
            return answer
        }
        let notification = ProviderStore.Notification(
            id: UUID(),
            keyName: key.name,
            app: key.app,
            target: checked.target,
            payload: checked.payload.json,
            fcmPayload: checked.android.payload,
            webPayload: checked.web.payload,
            pushType: checked.pushType.rawValue,
            priority: checked.priority?.rawValue,
            expiration: checked.expiration,
            collapseID: checked.collapseID,
            topic: checked.topic,
            badge: checked.payload.badge,
            onlyIfBadgeChanged: checked.onlyIfBadgeChanged,
            idempotencyKey: idempotencyKey,
            requestHash: requestHash
        )
        let result = try await queueWithinBudget(notification, key: key)
        let (_, limiter) = keyLimits.limiters(for: key)
        let cap = Self.recipientCap(key, limits: limits)
        switch result {
        case .queued(let recipients), .accepted(let recipients):
            let background = if case .accepted = result { true } else { false }
            if !background { metrics.queued(recipients) }
            logger.info(
                background ? "Broadcast accepted, to be queued in the background" : "Notification queued",
                metadata: ["api.key": "\(key.name)", "notification.id": "\(notification.id)", "notification.recipients": "\(recipients)"]
            )
            var response = Self.json(.accepted, Accepted(id: notification.id, recipients: recipients))
            response.headers[.location] = "/v1/notifications/\(notification.id.uuidString.lowercased())"
            return response
        case .tooManyRecipients(let recipients):
            if let cap, recipients > cap {
                throw ProviderError.missing(.broadcast, for: "reach \(recipients) devices in one request (at most \(cap) without it)")
            }
            guard recipients <= key.recipientsPerMinute else {
                throw ProviderError(
                    .tooLarge,
                    .contentTooLarge,
                    "\(recipients) recipients exceed this key's limit of \(key.recipientsPerMinute) per minute",
                    field: "to"
                )
            }
            throw ProviderError.tooManyRequests(
                limiter.wait(key.name, for: recipients),
                "this key's limit of \(key.recipientsPerMinute) recipients per minute is spent"
            )
        case .notForAndroid(let devices):
            let refusal = checked.android.refusal
            throw ProviderError.invalid(
                refusal?.field,
                "\(refusal?.reason ?? "no message for Android devices") (\(devices) recipients are Android devices)"
            )
        case .notForBrowsers(let browsers):
            let refusal = checked.web.refusal
            throw ProviderError.invalid(
                refusal?.field,
                "\(refusal?.reason ?? "no message for browsers") (\(browsers) recipients are browsers)"
            )
        case .duplicate:
            if let idempotencyKey, let answer = try await replay(key: key, idempotencyKey: idempotencyKey, requestHash: requestHash) {
                return answer
            }
            throw ProviderError(.conflict, .conflict, "the same Idempotency-Key is being used by another request", field: "Idempotency-Key")
        }
    }

    /// Without the broadcast scope a request reaches at most as many devices as are queued at once
    /// (`api_background_recipients`): a list of 10,000 users with any number of devices each would otherwise become a
    /// background broadcast. Nil: no cap.
    static func recipientCap(_ key: ProviderStore.Key, limits: APILimits) -> Int? {
        key.allows(.broadcast) ? nil : limits.backgroundRecipients
    }

    /// Queues `notification` paid from the key's recipient budget: reserves what the budget holds, queues at most that
    /// many (and at most the cap without the broadcast scope), and gives back what was not used.
    func queueWithinBudget(_ notification: ProviderStore.Notification, key: ProviderStore.Key) async throws -> ProviderStore.QueueResult {
        let (_, limiter) = keyLimits.limiters(for: key)
        let cap = Self.recipientCap(key, limits: limits)
        let broadcasts = key.allows(.broadcast)
        let outcome = try await Reservation.withReservation(nil, from: LimiterBudget(limiter: limiter, key: key.name)) { reserved in
            try await database { store in
                try await store.queue(
                    notification,
                    maxRecipients: [limiter.isEnabled ? reserved : nil, cap].compactMap { $0 }.min(),
                    backgroundAbove: broadcasts ? limits.backgroundRecipients : nil
                )
            }
        } used: { result in
            switch result {
            case .queued(let recipients), .accepted(let recipients): recipients
            default: 0
            }
        }
        guard case .done(let result) = outcome else { preconditionFailure("taking everything a budget holds is never refused") }
        return result
    }

    /// What the key may send: a room, everyone or udids only with the broadcast scope; a topic only its app's bundle id
    /// (or it with one of Apple's suffixes).
    func allow(_ checked: NotificationRequest, key: ProviderStore.Key) throws(ProviderError) {
        switch checked.target {
        case .room, .all, .udids:
            // Reaches people the caller did not name (and a room's recipient count would confirm a guessed code).
            guard key.allows(.broadcast) else { throw ProviderError.missing(.broadcast, for: "send to a room, to all or to udids") }
        case .tokens, .users:
            break
        }
        // The key's app's bundle id (the configuration's apns_topic for the default app as migrated).
        guard let topic = checked.topic else { return }
        // No bundle id known (no apns_topic in the API's environment): a topic could name any app of the team.
        guard let bundleID = key.bundleID ?? appTopic else {
            throw ProviderError.invalid(
                "topic",
                "topic cannot be checked: the API knows no bundle id for app \(key.app) (set PUSHCHAT_APNS_TOPIC for the API); leave topic out"
            )
        }
        guard PushType.topic(topic, belongsTo: bundleID) else {
            throw ProviderError.invalid(
                "topic",
                "topic must be \(bundleID) or it with one of Apple's suffixes (\(PushType.topicSuffixes.joined(separator: ", ")))"
            )
        }
    }

    /// `Idempotency-Key`, when given: 1 to 255 printable ASCII characters.
    static func idempotencyKey(_ request: Request) throws(ProviderError) -> String? {
        guard let value = request.headers[idempotencyHeader] else { return nil }
        guard !value.isEmpty, value.utf8.count <= 255, value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw .invalid("Idempotency-Key", "Idempotency-Key must be 1 to 255 printable ASCII characters")
        }
        return value
    }

    /// The first answer to an idempotency key used within 24 hours, or 409 when it came with another body.
    func replay(key: ProviderStore.Key, idempotencyKey: String, requestHash: String) async throws -> Response? {
        guard let earlier = try await database({ store in try await store.earlier(keyName: key.name, idempotencyKey: idempotencyKey) })
        else {
            return nil
        }
        guard earlier.requestHash == requestHash else {
            throw ProviderError(
                .conflict,
                .conflict,
                "this Idempotency-Key was used in the last 24 hours with another request body",
                field: "Idempotency-Key"
            )
        }
        var response = Self.json(.accepted, Accepted(id: earlier.id, recipients: earlier.recipients))
        response.headers[.location] = "/v1/notifications/\(earlier.id.uuidString.lowercased())"
        response.headers[Self.replayedHeader] = "true"
        return response
    }

    /// A notification's status, for the key that queued it (another key's is 404, as an unknown id).
    func status(_ id: String, key: ProviderStore.Key) async throws -> Response {
        guard let uuid = UUID(uuidString: id),
            let status = try await database({ store in try await store.status(id: uuid, keyName: key.name) })
        else {
            throw ProviderError(.notFound, .notFound, "no notification with this id", field: "id")
        }
        // A failure's token is another user's device unless the caller named it (to.tokens) or may read devices.
        return Self.json(.ok, StatusJSON(status, showTokens: status.namedTokens || key.allows(.devicesRead)))
    }

    /// Cancels a notification of this key: a broadcast stops expanding and its rows no connection holds are failed as
    /// canceled (200 with its status); another key's is 404, as an unknown id.
    func cancel(_ id: String, key: ProviderStore.Key) async throws -> Response {
        guard let uuid = UUID(uuidString: id),
            case .canceled(let rows) = try await database({ store in try await store.cancel(id: uuid, keyName: key.name) })
        else {
            throw ProviderError(.notFound, .notFound, "no notification with this id", field: "id")
        }
        logger.info(
            "Notification canceled",
            metadata: ["api.key": "\(key.name)", "notification.id": "\(uuid)", "notification.canceled": "\(rows)"]
        )
        // The status body is what the status scope reads: without it, the cancellation alone.
        guard key.allows(.status) else { return Response(status: .noContent) }
        return try await status(id, key: key)
    }

    // MARK: answers

    /// 503 (JSON, `Retry-After`) when the database is away, did not answer in time or cancelled the statement (nothing
    /// was written; the outage is logged once by the probe, not per request), `outcome_unknown` when it took the
    /// statement and never answered (it may have been carried out), 500 when the statement failed otherwise.
    func databaseFailure(_ error: any Error, doing what: String) -> ProviderError {
        let detail = DatabaseError.describe(error)
        guard DatabaseError.isUnavailable(error) else {
            logger.error("\(what) failed: \(detail)", metadata: ["api.command": "\(what)"])
            return ProviderError(.init("database"), .internalServerError, "database error")
        }
        if DatabaseError.outcomeIsUnknown(error) {
            logger.warning("\(what): \(detail)", metadata: ["api.command": "\(what)"])
            return ProviderError(
                .outcomeUnknown,
                .serviceUnavailable,
                "the database did not answer in time: the request may have been carried out; "
                    + "send it again with the same Idempotency-Key to learn which",
                retryAfter: 2
            )
        }
        logger.debug("\(what) refused: \(detail)", metadata: ["api.command": "\(what)"])
        return ProviderError(.init("database"), .serviceUnavailable, "the database is unavailable; try again later", retryAfter: 2)
    }

    static func json(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }

    struct Accepted: Encodable {
        let id: String
        let recipients: Int

        init(id: UUID, recipients: Int) {
            self.id = id.uuidString.lowercased()
            self.recipients = recipients
        }
    }

    struct DeviceJSON: Encodable {
        let token: String
        let user: String?
        let client_info: String?
        let registered_at: Date
        let updated_at: Date
        let last_badge: Int?
        let platform: String

        init(_ device: ProviderStore.Device) {
            token = device.token
            user = device.user
            client_info = device.clientInfo
            registered_at = device.registeredAt
            updated_at = device.updatedAt
            last_badge = device.lastBadge
            platform = device.platform.rawValue
        }

        func encode(to encoder: any Encoder) throws {
            // Absent values are null, not missing: every device has the same keys.
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(token, forKey: .token)
            try container.encode(user, forKey: .user)
            try container.encode(client_info, forKey: .client_info)
            try container.encode(registered_at, forKey: .registered_at)
            try container.encode(updated_at, forKey: .updated_at)
            try container.encode(last_badge, forKey: .last_badge)
            try container.encode(platform, forKey: .platform)
        }

        enum CodingKeys: String, CodingKey {
            case token, user, client_info, registered_at, updated_at, last_badge, platform
        }
    }

    struct StatusJSON: Encodable {
        struct Failure: Encodable {
            /// Left out where the key may not see it (``ProviderController/status(_:key:)``).
            let token: String?
            let status: String?
            let reason: String
        }

        let id: String
        let state: String
        let recipients: Int
        let queued: Int
        let sent: Int
        let failed: Int
        let canceled: Int
        let pending: Int
        let failures: [Failure]

        init(_ status: ProviderStore.Status, showTokens: Bool) {
            id = status.id.uuidString.lowercased()
            state = status.state.rawValue
            recipients = status.recipients
            queued = status.queued
            sent = status.sent
            failed = status.failed
            canceled = status.canceled
            pending = status.pending
            failures = status.failures.map { Failure(token: showTokens ? $0.token : nil, status: $0.status, reason: $0.reason) }
        }
    }
}

/// Each key's request and recipient buckets (its own per-minute limits; 0: none), in this API process.
final class KeyLimits: Sendable {
    private struct Entry {
        let requestsPerMinute: Int
        let recipientsPerMinute: Int
        let requests: RateLimiter
        let recipients: RateLimiter
    }

    private let entries = NIOLockedValueBox([String: Entry]())

    /// A minute's worth at once, refilled at the per-minute rate.
    func limiters(for key: ProviderStore.Key) -> (requests: RateLimiter, recipients: RateLimiter) {
        entries.withLockedValue { entries in
            if let entry = entries[key.name], entry.requestsPerMinute == key.requestsPerMinute,
                entry.recipientsPerMinute == key.recipientsPerMinute
            {
                return (entry.requests, entry.recipients)
            }
            let entry = Entry(
                requestsPerMinute: key.requestsPerMinute,
                recipientsPerMinute: key.recipientsPerMinute,
                requests: RateLimiter(rate: Double(key.requestsPerMinute) / 60, burst: Double(key.requestsPerMinute), maximumKeys: 1),
                recipients: RateLimiter(rate: Double(key.recipientsPerMinute) / 60, burst: Double(key.recipientsPerMinute), maximumKeys: 1)
            )
            entries[key.name] = entry
            return (entry.requests, entry.recipients)
        }
    }
}
