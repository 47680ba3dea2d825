import Foundation
import Testing

@testable import APNs
@testable import Settings
@testable import Support

@Suite struct NotificationPayloadTests {
    /// Server Density's alert: an alert dictionary, a badge, a sound, and their own dictionary beside aps.
    @Test func serverDensitysAlertKeepsItsShapeByteForByte() throws {
        let aps = try JSON.parse(#"{"alert": {"title": "web1 down", "body": "No heartbeat for 5 min"}, "badge": 3, "sound": "alert.caf"}"#)
        let data = try JSON.parse(#"{"server": {"serverId": 1, "name": "web1"}}"#)
        let payload = try NotificationPayload(aps: aps, data: data)
        #expect(
            payload.json
                == #"{"aps":{"alert":{"title":"web1 down","body":"No heartbeat for 5 min"},"badge":3,"sound":"alert.caf"},"server":{"serverId":1,"name":"web1"}}"#
        )
        #expect(payload.badge == 3)
        #expect(!payload.isSilent)
    }

    @Test func contentAvailableAloneIsSilent() throws {
        let payload = try NotificationPayload(
            aps: try JSON.parse(#"{"content-available": 1}"#),
            data: try JSON.parse(#"{"sync": "inbox"}"#)
        )
        #expect(payload.isSilent)
        #expect(payload.json == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
        let shown = try NotificationPayload(aps: try JSON.parse(#"{"content-available": 1, "badge": 0}"#), data: nil)
        #expect(!shown.isSilent)
    }

    @Test(arguments: [
        (#"[]"#, nil, "aps", "aps must be an object"),
        (#"{}"#, nil, "aps", "nothing to deliver"),
        (#"{"category": "x"}"#, nil, "aps", "nothing to deliver"),
        (#"{"badge": -1}"#, nil, "aps.badge", "whole number from 0"),
        (#"{"badge": 1.5}"#, nil, "aps.badge", "whole number"),
        (#"{"badge": "3"}"#, nil, "aps.badge", "whole number"),
        (#"{"badge": 3000000000}"#, nil, "aps.badge", "whole number"),
        (#"{"alert": 5}"#, nil, "aps.alert", "string or an object"),
        (#"{"alert": {"title": 5}}"#, nil, "aps.alert.title", "must be a string"),
        (#"{"alert": {"loc-args": ["a", 1]}}"#, nil, "aps.alert.loc-args", "array of strings"),
        (#"{"alert": "x", "content-available": 0}"#, nil, "aps.content-available", "must be 1"),
        (#"{"alert": "x", "mutable-content": true}"#, nil, "aps.mutable-content", "must be 1"),
        (#"{"alert": "x", "sound": {"volume": 2}}"#, nil, "aps.sound.volume", "from 0.0 to 1.0"),
        (#"{"alert": "x", "interruption-level": "loud"}"#, nil, "aps.interruption-level", "must be one of"),
        (#"{"alert": "x", "conten-available": 1}"#, nil, "aps.conten-available", "unknown aps key"),
        (#"{"alert": "x"}"#, #"[1]"#, "data", "data must be an object"),
        (#"{"alert": "x"}"#, #"{"aps": {}}"#, "data.aps", "must not hold aps"),
    ])
    func badPayloadsAreRefusedNamingTheField(aps: String, data: String?, field: String, reason: String) throws {
        let apsValue = try JSON.parse(aps)
        let dataValue = try data.map { try JSON.parse($0) }
        do {
            _ = try NotificationPayload(aps: apsValue, data: dataValue)
            Issue.record("accepted \(aps) \(data ?? "")")
        } catch {
            #expect(error.field == field)
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
    }

    @Test func limitsFollowTheInterfaceAndPushType() {
        #expect(NotificationPayload.maximumBytes(transport: .binary, pushType: .alert) == 2048)
        #expect(NotificationPayload.maximumBytes(transport: .http2, pushType: .alert) == 4096)
        #expect(NotificationPayload.maximumBytes(transport: .http2, pushType: .voip) == 5120)
    }

    @Test func aRowWithoutATopicGetsTheBundleIDWithThePushTypesSuffix() throws {
        #expect(PushType.alert.topic(bundleID: "com.example.app") == "com.example.app")
        #expect(PushType.voip.topic(bundleID: "com.example.app") == "com.example.app.voip")
        #expect(PushType.voip.topic(bundleID: "com.example.app.voip") == "com.example.app.voip", "the suffix once")
        #expect(PushType.liveactivity.topic(bundleID: "com.example.app") == "com.example.app.push-type.liveactivity")
        #expect(PushType.pushtotalk.topic(bundleID: "com.example.app") == "com.example.app.voip-ptt")
        #expect(PushType.location.topic(bundleID: "com.example.app") == "com.example.app.location-query")
        #expect(PushType.fileprovider.topic(bundleID: "com.example.app") == "com.example.app.pushkit.fileprovider")
        #expect(PushType.complication.topic(bundleID: "com.example.app") == "com.example.app.complication")
        #expect(PushType.allCases.filter { $0.payloadLimit != 4096 } == [.voip])
        #expect(PushType.voip.payloadLimit == 5120)
        let row = QueuedNotification(messageID: 1, deviceToken: String(repeating: "ab", count: 32), payload: "{}", pushType: "voip")
        let request = try HTTP2Notification(row, topic: "com.example.app", defaultPriority: 10, defaultExpiry: 0, now: .now)
        #expect(request.headers.first { $0.0 == "apns-topic" }?.1 == "com.example.app.voip")
        let own = QueuedNotification(
            messageID: 2,
            deviceToken: String(repeating: "ab", count: 32),
            payload: "{}",
            topic: "com.example.app.complication"
        )
        let ownRequest = try HTTP2Notification(own, topic: "com.example.app", defaultPriority: 10, defaultExpiry: 0, now: .now)
        #expect(ownRequest.headers.first { $0.0 == "apns-topic" }?.1 == "com.example.app.complication", "the row's own topic")
        let other = QueuedNotification(messageID: 3, deviceToken: String(repeating: "ab", count: 32), payload: "{}", topic: "com.other")
        #expect(throws: UnsendableReason.self, "another app's topic") {
            try HTTP2Notification(other, topic: "com.example.app", defaultPriority: 10, defaultExpiry: 0, now: .now)
        }
    }
}
