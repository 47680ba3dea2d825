import APNs
import Foundation
import HTTP2Client
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOSSL
import Settings
import WebPush

/// One push message on its way: the HTTP/2 request for it, and the subscription it goes to (its origin picks the
/// connection; its host's addresses are checked before one is opened).
struct WebPushWire: Sendable {
    let subscription: WebPushSubscription
    let request: HTTP2Request
}

/// Browsers' push services as a ``Destination`` (RFC 8030, 8291, 8292): each row's message encrypted for its
/// browser's subscription (loaded with its claim), signed with the origin's VAPID token, POSTed to the endpoint on a
/// connection to its push service (``WebPushLink``); answers classified as ``WebPushAnswer`` says.
struct WebPushDestination: Destination {
    let connector: HTTP2Connector
    /// TLS and event loops for a push service that speaks only HTTP/1.1.
    let http1TLS: TLSConfiguration
    let http1Origins: HTTP1Origins
    let group: any EventLoopGroup
    let subscriptions: WebSubscriptions
    let vapid: VAPIDSigner
    let privateHosts: Set<String>
    let settings: PushSettings
    /// `webpush_max_connections`: idle push services' connections a link keeps at most.
    let maxConnections: Int
    /// `pushchat_webpush_connections{app}`.
    let connections: Meter
    let logger: Logger

    var endpoint: String { "browsers' push services" }

    /// Each claim's subscriptions read beside it.
    func rows(_ rows: any RowSource) -> any RowSource { SubscribedRows(base: rows, subscriptions: subscriptions) }
    var interface: String { " (Web Push)" }
    /// Each message's ECDH and key pair (about 100 µs) are encrypted on every core.
    var encodesInParallel: Bool { true }
    /// The link opens a push service's connection when a row first needs it, and logs `Connection OK (Web Push)` then.
    var linkOpenedLine: String { "Ready for browsers (Web Push): a push service's connection opens when a row needs it" }

    func withLink<Result: Sendable>(_ body: (WebPushLink) async -> Result) async throws -> Result {
        let link = WebPushLink(
            connector: connector,
            privateHosts: privateHosts,
            drainTimeout: settings.requestTimeout + .seconds(1),
            http1: .init(origins: http1Origins, tls: http1TLS, requestTimeout: settings.requestTimeout, group: group),
            limit: maxConnections,
            idle: settings.connectionIdle,
            connections: connections,
            logger: logger,
            verdict: verdict
        )
        let result = await body(link)
        await link.close()
        return result
    }

    func encode(_ row: QueuedNotification, now: Date) -> Encoding<WebPushWire> {
        guard WebPushSubscription.isToken(row.deviceToken) else { return .invalid("not a browser's token (web_…)") }
        let subscription: WebPushSubscription
        switch subscriptions.entry(row.deviceToken) {
        case .subscribed(let found): subscription = found
        case .gone: return .invalid("the browser's subscription is gone (unregistered)")
        case .unusable(let reason): return .invalid(reason)
        case nil: return .notNow("the browser's subscription was not read with its row")
        }
        // A row without a priority has the daemon's (`apns_priority`, 10: a chat message is urgent on every platform).
        let priority = row.priority ?? Int(settings.priority)
        let headers = WebPushHeaders(expiration: row.expiration, priority: priority, collapseID: row.collapseID, now: now)
        do {
            let authorization = try vapid.authorization(for: subscription.origin, now: now)
            let wire = try WebPushRequest(
                message: Array(row.payload.utf8),
                subscription: subscription,
                headers: headers,
                authorization: authorization
            )
            let block = HTTP2Request.headerBlock(
                path: wire.path,
                pathIsUnique: true,
                authority: wire.authority,
                headers: wire.headers,
                unique: ["ttl"],
                authorization: nil
            )
            let request = HTTP2Request(notification: row, headers: block, body: ByteBuffer(bytes: wire.body), tokenGeneration: 0)
            return .request(WebPushWire(subscription: subscription, request: request))
        } catch {
            return .invalid("unencodable: \(error.reason)")
        }
    }

    /// What a push service's answer means (``WebPushAnswer/verdict``).
    func verdict(_ answer: HTTP2Answer) -> Verdict {
        let web = WebPushAnswer(status: answer.status, body: answer.body, retryAfter: answer.retryAfter)
        let status = "\(web.status)"
        let reason = web.reason ?? "HTTP \(web.status)"
        switch web.verdict {
        case .sent:
            return .sent
        case .unregistered:
            return .unregistered(status: status, reason: reason, since: nil, source: "webpush \(status)")
        case .tooLarge:
            return .failed(Verdict.Failure(status: status, reason: "unencodable: \(reason)", kind: "unencodable"))
        case .failed:
            return .failed(Verdict.Failure(status: status, reason: reason, kind: "http_\(status)"))
        case .vapidRefused:
            // Never a deletion: the key, not the browser, is in question. Counted with the wrong-environment answers,
            // whose alarm says the credentials do not fit; the origin's next request signs a new token.
            if let authority = answer.request.headers.first(name: ":authority") { vapid.forget("https://" + authority.lowercased()) }
            return .failed(
                Verdict.Failure(status: status, reason: "VAPID refused: \(reason)", kind: "vapid_refused", wrongEnvironment: true)
            )
        case .retryLater(let after):
            guard let after else { return .retryLater(after: .seconds(1), status: status, reason: reason, growing: true) }
            return .retryLater(after: .seconds(after), status: status, reason: reason)
        }
    }
}

/// The VAPID tokens of one key, shared by a sender's connections (one signature per origin every six hours).
final class VAPIDSigner: Sendable {
    private let cache: NIOLockedValueBox<VAPIDTokenCache>

    init(key: VAPIDKey, subject: String) {
        cache = NIOLockedValueBox(VAPIDTokenCache(key: key, subject: subject))
    }

    func authorization(for origin: String, now: Date) throws(WebPushError) -> String {
        let result: Result<String, WebPushError> = cache.withLockedValue { cache in
            do {
                return .success(try cache.authorization(for: origin, now: now))
            } catch let error as WebPushError {
                return .failure(error)
            } catch {
                return .failure(WebPushError(code: .badVAPID, reason: "\(error)"))
            }
        }
        return try result.get()
    }

    func forget(_ origin: String) { cache.withLockedValue { $0.forget(origin) } }
}
