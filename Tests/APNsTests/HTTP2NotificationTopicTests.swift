import Foundation
import Testing

@testable import APNs

/// A row's own topic must be its app's: a token key signs for every app of the team, so a row written by a
/// compromised API could otherwise reach another app's users with this app's credentials.
@Suite struct HTTP2NotificationTopicTests {
    static func request(topic: String?) throws(UnsendableReason) -> HTTP2Notification {
        let row = QueuedNotification(
            messageID: 1,
            deviceToken: String(repeating: "ab", count: 32),
            payload: #"{"aps":{}}"#,
            topic: topic
        )
        return try HTTP2Notification(row, topic: "com.example.PushChat", defaultPriority: 10, defaultExpiry: 0, now: Date())
    }

    @Test(arguments: [nil, "com.example.PushChat", "com.example.PushChat.voip", "com.example.PushChat.push-type.liveactivity"])
    func theAppsTopicsAreSent(topic: String?) throws {
        let request = try Self.request(topic: topic)
        #expect(request.headers.first { $0.0 == "apns-topic" }?.1 == topic ?? "com.example.PushChat")
    }

    @Test(arguments: ["com.example.Other", "com.example.PushChatX", "com.example.PushChat.voipx", "com.example", "x.com.example.PushChat"])
    func anotherAppsTopicIsRefused(topic: String) {
        #expect(throws: UnsendableReason.self, "\(topic)") { try Self.request(topic: topic) }
    }
}
