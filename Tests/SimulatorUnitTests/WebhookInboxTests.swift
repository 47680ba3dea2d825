import Testing

@testable import Simulator

/// The simulator's receiver counts a large POST's events by a scan: strings (with brackets, commas and escaped quotes
/// in them) and nesting are followed, and anything but `{"events":[...]}` is refused.
@Suite struct WebhookInboxTests {
    @Test func aScanCountsTheEventsOfTheArray() {
        let body = #"{"events":[{"id":"evt_1","data":{"reason":"a \"quoted\" ]}, text","list":[1,2]}},{"id":"evt_2"}]}"#
        #expect(WebhookInbox.countEvents(Array(body.utf8)) == 2)
        #expect(WebhookInbox.countEvents(Array(#"{"events":[]}"#.utf8)) == 0)
        #expect(WebhookInbox.countEvents(Array(#"{"events":[{"id":"unterminated"#.utf8)) == nil)
        #expect(WebhookInbox.countEvents(Array(#"{"other":[{"id":"x"}]}"#.utf8)) == nil)
    }

    @Test func aLargePOSTIsCountedAndASmallOneListed() {
        let inbox = WebhookInbox(secrets: [])
        let event = #"{"id":"evt_1_sent","type":"notification.sent","data":{"token":"ab"}}"#
        let large = #"{"events":["# + Array(repeating: event, count: 1_000).joined(separator: ",") + "]}"
        #expect(large.utf8.count > WebhookInbox.decodedUpTo)
        #expect(inbox.receive(id: nil, timestamp: nil, signature: nil, body: Array(large.utf8)) == 204)
        #expect(
            inbox.receive(id: nil, timestamp: nil, signature: nil, body: Array(#"{"events":["#.utf8) + Array(event.utf8) + Array("]}".utf8))
                == 204
        )
        #expect(inbox.counters.events == 1_001 && inbox.counters.posts == 2)
        #expect(inbox.last.map(\.type) == ["notification.sent"])
        #expect(inbox.receive(id: nil, timestamp: nil, signature: nil, body: Array("not json".utf8)) == 400)
    }
}
