import Foundation
import Testing

@testable import Support
@testable import WebPush

/// The request's headers from the queue's fields, the declarative message, and what each answer means.
@Suite struct WebPushValuesTests {
    @Test func headersFromTheQueuesFields() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let none = WebPushHeaders(expiration: nil, priority: nil, collapseID: nil, now: now)
        #expect(none == WebPushHeaders(timeToLive: 0, urgency: nil, topic: nil), "no expiration: deliver now or drop")
        let hour = WebPushHeaders(expiration: now.addingTimeInterval(3600.7), priority: 10, collapseID: "room-42", now: now)
        #expect(hour == WebPushHeaders(timeToLive: 3600, urgency: "high", topic: "room-42"))
        #expect(WebPushHeaders(expiration: now.addingTimeInterval(-5), priority: 5, collapseID: nil, now: now).timeToLive == 0)
        #expect(
            WebPushHeaders(expiration: now.addingTimeInterval(1e8), priority: 1, collapseID: nil, now: now).timeToLive == 28 * 24 * 3600
        )
        #expect(WebPushHeaders.urgency(priority: 5) == "normal" && WebPushHeaders.urgency(priority: 1) == "low")
        let hashed = WebPushHeaders.topic(collapseID: "room 42: the long collapse identifier")
        #expect(hashed.utf8.count == 32 && Base64URL.decode(hashed)?.count == 24)
        #expect(hashed == WebPushHeaders.topic(collapseID: "room 42: the long collapse identifier"), "stable")
        #expect(WebPushHeaders.topic(collapseID: String(repeating: "a", count: 33)).utf8.count == 32)
        let fields = Dictionary(uniqueKeysWithValues: hour.fields)
        #expect(
            fields["ttl"] == "3600" && fields["content-encoding"] == "aes128gcm" && fields["urgency"] == "high"
                && fields["topic"] == "room-42"
        )
    }

    @Test func theDeclarativeMessage() throws {
        let message = WebPushMessage(
            title: "Ann",
            body: "Lunch at \"Joe's\"?",
            navigate: "https://chat.example/rooms/1",
            tag: "room-1",
            data: [JSON.Member("room", .string("1"))]
        )
        #expect(
            message.json
                == #"{"web_push":8030,"notification":{"title":"Ann","body":"Lunch at \"Joe's\"?","navigate":"https://chat.example/rooms/1","tag":"room-1","data":{"room":"1"}}}"#
        )
        #expect(WebPushMessage(json: Array(message.json.utf8)) == message)
        #expect(WebPushMessage(json: Array(#"{"notification":{"title":"x"}}"#.utf8)) == nil, "no web_push marker")
    }

    @Test func answers() {
        func verdict(_ status: Int, _ retryAfter: String? = nil) -> WebPushAnswer.Verdict {
            WebPushAnswer(status: status, body: [], retryAfter: retryAfter).verdict
        }
        #expect(verdict(201) == .sent && verdict(202) == .sent && verdict(200) == .sent)
        #expect(verdict(404) == .unregistered && verdict(410) == .unregistered)
        #expect(verdict(413) == .tooLarge)
        #expect(verdict(401) == .vapidRefused && verdict(403) == .vapidRefused)
        #expect(verdict(400) == .failed)
        #expect(verdict(429, "30") == .retryLater(after: 30) && verdict(503) == .retryLater(after: nil))
        #expect(verdict(500, "Wed, 21 Oct 2026 07:28:00 GMT") == .retryLater(after: nil), "an HTTP date is read as absent")
        #expect(verdict(429, "86400") == .retryLater(after: 3600), "at most an hour")
        #expect(
            WebPushAnswer(status: 400, body: Array("  UnauthorizedRegistration \n".utf8), retryAfter: nil).reason
                == "UnauthorizedRegistration"
        )
        #expect(WebPushAnswer(status: 400, body: [0, 1, 2, 255], retryAfter: nil).reason == nil, "binary bodies are not reasons")
    }
}
