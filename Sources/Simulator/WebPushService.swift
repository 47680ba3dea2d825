import Crypto
package import Foundation
import NIOConcurrencyHelpers
import Support
import WebPush

/// The simulator's browsers and the push service they subscribe through (RFC 8030): a browser subscribes (the status
/// page's `POST /browsers` gives what `PushSubscription.toJSON()` would: an endpoint on this listener, its own P-256
/// key and auth secret); `POST /push/ID` is checked as a push service checks it (VAPID for the endpoint's origin and,
/// when the subscription named one, for its key; `TTL`; `aes128gcm`; 4,096 bytes) and then opened as the browser
/// would, so the lock screen shows the title and body. A real push service cannot read the message; this one reports
/// a body that does not decrypt as 400, to show a sender's mistake at once.
package final class WebPushService: Sendable {
    /// One subscribed browser.
    struct Browser: Sendable {
        let key: P256.KeyAgreement.PrivateKey
        let auth: [UInt8]
        /// The `applicationServerKey` it subscribed with (base64url): requests signed by another key get 403.
        let applicationServerKey: String?
        /// The app whose page subscribed (shown on the lock screen).
        let app: String
        /// Unsubscribed: 410 Gone from now on.
        var gone = false
    }

    /// What the push service answers.
    package struct Answer: Sendable, Equatable {
        package var status: Int
        package var reason: String
        package var retryAfter: Int?
        /// The message as the browser reads it, when it was delivered.
        package var delivered: AcceptedNotification?
    }

    package let options: SimulatorConfiguration.WebPushOptions
    private let state = NIOLockedValueBox(Storage())

    private struct Storage {
        var browsers: [String: Browser] = [:]
        var origin = "https://127.0.0.1"
        var messages: UInt32 = 0
        /// `Authorization` headers whose token verified, with its expiry: a sender reuses one for hours, and a push
        /// service checks its signature once (bounded: cleared past 1,024).
        var verified: [String: Int64] = [:]
    }

    package init(options: SimulatorConfiguration.WebPushOptions) { self.options = options }

    /// The listener's origin (`https://127.0.0.1:PORT`), once it is bound: where endpoints point, and the audience a
    /// VAPID token must name.
    package var origin: String {
        get { state.withLockedValue { $0.origin } }
        set { state.withLockedValue { $0.origin = newValue } }
    }

    /// A new browser's subscription, as `PushSubscription.toJSON()` gives it.
    package func subscribe(app: String, applicationServerKey: String?) -> String {
        let id = Base64URL.encode(Array(SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }))
        let browser = Browser(
            key: P256.KeyAgreement.PrivateKey(),
            auth: SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) },
            applicationServerKey: applicationServerKey,
            app: app
        )
        let origin = state.withLockedValue { storage in
            storage.browsers[id] = browser
            return storage.origin
        }
        return
            #"{"endpoint":"\#(origin)/push/\#(id)","expirationTime":null,"keys":{"p256dh":"\#(Base64URL.encode(Array(browser.key.publicKey.x963Representation)))","auth":"\#(Base64URL.encode(browser.auth))"}}"#
    }

    /// The browser unsubscribed (or its user cleared the site's data): its endpoint answers 410 from now on. False when
    /// there is no such browser.
    package func unsubscribe(_ id: String) -> Bool {
        state.withLockedValue { storage in
            guard storage.browsers[id] != nil else { return false }
            storage.browsers[id]?.gone = true
            return true
        }
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// The answer to `POST path` with `headers` (lower-case names) and `body`.
    /// The VAPID token's audience must be the origin the request was sent to (`authority`, its `:authority`; the
    /// service's own origin when nil): behind a proxy on another port, that port's origin.
    package func receive(path: String, headers: [String: String], body: [UInt8], now: Date, authority: String? = nil) -> Answer {
        func refuse(_ status: Int, _ reason: String, retryAfter: Int? = nil) -> Answer {
            Answer(status: status, reason: reason, retryAfter: retryAfter, delivered: nil)
        }
        let prefix = "/push/"
        guard path.hasPrefix(prefix) else { return refuse(404, "no such push resource") }
        let id = String(path.dropFirst(prefix.count))
        let (found, ownOrigin) = state.withLockedValue { ($0.browsers[id], $0.origin) }
        let origin = authority.map { "https://" + ($0.hasSuffix(":443") ? String($0.dropLast(4)) : $0).lowercased() } ?? ownOrigin
        guard let browser = found else { return refuse(404, "no such subscription") }
        guard !browser.gone else { return refuse(410, "the subscription has expired or was unsubscribed") }
        if let status = options.answer {
            return refuse(status, "answering \(status) (--webpush-answer)", retryAfter: status == 429 || status == 503 ? 1 : nil)
        }
        guard let authorization = headers["authorization"] else { return refuse(401, "no VAPID Authorization") }
        let seconds = Int64(now.timeIntervalSince1970)
        if let expires = state.withLockedValue({ $0.verified[authorization] }), expires > seconds {
            // Verified before and not expired: the same token, the same answer.
        } else {
            let token: VAPIDToken
            do {
                token = try VAPIDToken.verify(authorization: authorization, audience: origin, now: now)
            } catch {
                return refuse(401, "VAPID: \(error.reason)")
            }
            state.withLockedValue { storage in
                if storage.verified.count >= 1_024 { storage.verified = [:] }
                storage.verified[authorization] = token.expires
            }
        }
        if let expected = browser.applicationServerKey, !authorization.hasSuffix("k=\(expected)") {
            return refuse(403, "VAPID: the key is not the one the subscription was made with")
        }
        guard let ttl = headers["ttl"], let seconds = Int(ttl), seconds >= 0 else { return refuse(400, "TTL is required (seconds)") }
        if let urgency = headers["urgency"], !["very-low", "low", "normal", "high"].contains(urgency) {
            return refuse(400, "Urgency is very-low, low, normal or high")
        }
        if let topic = headers["topic"], topic.isEmpty || topic.utf8.count > 32 || !topic.utf8.allSatisfy(Self.isBase64URL) {
            return refuse(400, "Topic is 1 to 32 characters of the base64url alphabet")
        }
        guard headers["content-encoding"] == "aes128gcm" else { return refuse(400, "Content-Encoding must be aes128gcm") }
        guard body.count <= ContentEncryption.maximumBody else {
            return refuse(413, "the body is \(body.count) bytes; at most \(ContentEncryption.maximumBody)")
        }
        var plaintext: [UInt8] = []
        if options.opensMessages {
            do {
                plaintext = try ContentEncryption.decrypt(body, userAgentKey: browser.key, authSecret: browser.auth)
            } catch {
                return refuse(400, "the browser cannot decrypt it: \(error.reason)")
            }
        }
        let number = state.withLockedValue { storage in
            storage.messages &+= 1
            return storage.messages
        }
        var accepted = AcceptedNotification(
            arrival: now,
            format: "web",
            identifier: number,
            token: id,
            payload: String(decoding: plaintext, as: UTF8.self),
            priority: headers["urgency"] == "high" ? 10 : 5,
            expiry: UInt32(clamping: Int(now.timeIntervalSince1970) + seconds),
            connection: 0
        )
        accepted.topic = browser.app
        accepted.collapseID = headers["topic"]
        return Answer(status: 201, reason: "", retryAfter: nil, delivered: accepted)
    }
}
