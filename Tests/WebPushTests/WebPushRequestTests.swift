import Crypto
import Foundation
import Testing

@testable import Support
@testable import WebPush

/// The tokens a key gives per origin, and a request as it goes on the wire.
@Suite struct WebPushRequestTests {
    @Test func oneTokenPerOriginReusedForHalfItsLife() throws {
        var cache = VAPIDTokenCache(key: VAPIDKey.generate(), subject: "mailto:ops@example.com")
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try cache.authorization(for: "https://fcm.googleapis.com", now: start)
        #expect(try cache.authorization(for: "https://fcm.googleapis.com", now: start.addingTimeInterval(6 * 3600 - 1)) == first)
        let other = try cache.authorization(for: "https://updates.push.services.mozilla.com", now: start)
        #expect(other != first)
        let renewed = try cache.authorization(for: "https://fcm.googleapis.com", now: start.addingTimeInterval(6 * 3600 + 1))
        #expect(renewed != first, "six hours before it expires, a new token")
        let read = try VAPIDToken.verify(
            authorization: renewed,
            audience: "https://fcm.googleapis.com",
            expectedKey: cache.key.publicKey,
            now: start.addingTimeInterval(7 * 3600)
        )
        #expect(read.subject == "mailto:ops@example.com" && read.expires == Int64(start.timeIntervalSince1970) + 6 * 3600 + 1 + 12 * 3600)
        cache.forget("https://fcm.googleapis.com")
        #expect(try cache.authorization(for: "https://fcm.googleapis.com", now: start.addingTimeInterval(6 * 3600 + 2)) != renewed)
        for index in 0..<(VAPIDTokenCache.maximumOrigins + 10) {
            _ = try cache.authorization(for: "https://push\(index).example", now: start)
        }
        #expect(cache.count == VAPIDTokenCache.maximumOrigins, "bounded")
    }

    @Test func theRequestOnTheWire() throws {
        let browser = P256.KeyAgreement.PrivateKey()
        let auth = Array(repeating: UInt8(7), count: 16)
        func subscription(_ endpoint: String) throws -> WebPushSubscription {
            try WebPushSubscription(endpoint: URL(string: endpoint)!, userAgentKey: browser.publicKey, authSecret: auth)
        }
        let headers = WebPushHeaders(timeToLive: 60, urgency: "high", topic: "room-1")
        let request = try WebPushRequest(
            message: Array("hello".utf8),
            subscription: try subscription("https://fcm.googleapis.com/fcm/send/abc:APA91b?x=1"),
            headers: headers,
            authorization: "vapid t=a.b.c, k=K"
        )
        #expect(request.authority == "fcm.googleapis.com" && request.path == "/fcm/send/abc:APA91b?x=1")
        let fields = Dictionary(uniqueKeysWithValues: request.headers)
        #expect(fields["ttl"] == "60" && fields["urgency"] == "high" && fields["topic"] == "room-1")
        #expect(fields["content-encoding"] == "aes128gcm" && fields["authorization"] == "vapid t=a.b.c, k=K")
        #expect(try ContentEncryption.decrypt(request.body, userAgentKey: browser, authSecret: auth) == Array("hello".utf8))
        let local = try WebPushRequest(
            message: [],
            subscription: try subscription("https://[::1]:8443/push/x%2Fy"),
            headers: headers,
            authorization: "v"
        )
        #expect(local.authority == "[::1]:8443" && local.path == "/push/x%2Fy")
    }
}
