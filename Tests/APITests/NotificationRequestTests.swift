import Foundation
import HTTPTypes
import HummingbirdCore
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Storage

@Suite struct NotificationRequestTests {
    static let token = String(repeating: "ab", count: 32)

    static func request(_ body: String, transport: APNsTransport = .http2) throws(ProviderError) -> NotificationRequest {
        try NotificationRequest(body: Array(body.utf8), transport: transport, now: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func targetsAndDefaults() throws {
        let upper = String(repeating: "AB", count: 32)
        let tokens = try Self.request(#"{"to": {"tokens": ["\#(upper)", "\#(Self.token)"]}, "aps": {"alert": "hi"}}"#)
        #expect(tokens.target == .tokens([Self.token]), "lower-cased, each once")
        let month = try Self.request(#"{"to": {"all": true}, "aps": {"alert": "x"}, "expiration": 1802592000}"#)
        #expect(month.expiration == 1_802_592_000, "30 days ahead is the furthest accepted")
        #expect(tokens.pushType == .alert)
        #expect(tokens.priority == nil)
        #expect(tokens.expiration == nil)
        #expect(try Self.request(#"{"to": {"users": ["u1", "u2", "u1"]}, "aps": {"badge": 1}}"#).target == .users(["u1", "u2"]))
        #expect(
            try Self.request(#"{"to": {"udids": ["9F3A61C2-D4B8-4E0F-8A7B-6C5D4E3F2A1B"]}, "aps": {"badge": 1}}"#).target
                == .udids(["9f3a61c2d4b84e0f8a7b6c5d4e3f2a1b"])
        )
        #expect(try Self.request(#"{"to": {"room": "demo"}, "aps": {"badge": 1}}"#).target == .room("demo"))
        let silent = try Self.request(#"{"to": {"all": true}, "aps": {"content-available": 1}, "data": {"sync": 1}}"#)
        #expect(silent.target == .all)
        #expect(silent.pushType == .background)
        #expect(silent.priority == .considerate, "Apple wants 5 for background pushes")
        let full = try Self.request(
            #"{"to": {"tokens": ["\#(Self.token)"]}, "aps": {"alert": "x", "badge": 2}, "push_type": "alert", "priority": 5, "expiration": 0, "collapse_id": "c1", "topic": "com.example.app", "only_if_badge_changed": true}"#
        )
        #expect(full.priority == .considerate)
        #expect(full.expiration == 0)
        #expect(full.collapseID == "c1")
        #expect(full.topic == "com.example.app")
        #expect(full.onlyIfBadgeChanged)
    }

    @Test(arguments: [
        ("{", 400, nil),
        ("[]", 400, nil),
        (#"{"aps": {"alert": "x"}}"#, 400, "to"),
        (#"{"to": {}, "aps": {"alert": "x"}}"#, 400, "to"),
        (#"{"to": {"tokens": ["\#(token)"], "all": true}, "aps": {"alert": "x"}}"#, 400, "to"),
        (#"{"to": {"tokens": []}, "aps": {"alert": "x"}}"#, 400, "to.tokens"),
        (#"{"to": {"tokens": ["abc"]}, "aps": {"alert": "x"}}"#, 400, "to.tokens[0]"),
        (#"{"to": {"tokens": ["\#(token)", "\#(String(repeating: "zz", count: 32))"]}, "aps": {"alert": "x"}}"#, 400, "to.tokens[1]"),
        (#"{"to": {"all": false}, "aps": {"alert": "x"}}"#, 400, "to.all"),
        (#"{"to": {"udids": ["xyz"]}, "aps": {"alert": "x"}}"#, 400, "to.udids[0]"),
        (#"{"to": {"room": ""}, "aps": {"alert": "x"}}"#, 400, "to.room"),
        (#"{"to": {"room": "a\u0000b"}, "aps": {"alert": "x"}}"#, 400, "to.room"),
        (#"{"to": {"everyone": true}, "aps": {"alert": "x"}}"#, 400, "to.everyone"),
        (#"{"to": {"all": true}}"#, 400, "aps"),
        (#"{"to": {"all": true}, "aps": "hi"}"#, 400, "aps"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "data": {"aps": 1}}"#, 400, "data.aps"),
        (#"{"to": {"all": true}, "aps": {"badge": -1}}"#, 400, "aps.badge"),
        (#"{"to": {"all": true}, "aps": {"badge": 1.0}}"#, 400, "aps.badge"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "priority": 7}"#, 400, "priority"),
        (#"{"to": {"all": true}, "aps": {"content-available": 1}, "priority": 10}"#, 400, "priority"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "push_type": "shout"}"#, 400, "push_type"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "expiration": -1}"#, 400, "expiration"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "expiration": 1000}"#, 400, "expiration"),
        // More than 30 days after `now` (1,800,000,000): 2,592,001 s ahead; the year 9999 before.
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "expiration": 1802592001}"#, 400, "expiration"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "expiration": 253402300799}"#, 400, "expiration"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "collapse_id": "\#(String(repeating: "c", count: 65))"}"#, 400, "collapse_id"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "topic": "a b"}"#, 400, "topic"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "only_if_badge_changed": true}"#, 400, "only_if_badge_changed"),
        (#"{"to": {"all": true}, "aps": {"alert": "x"}, "extra": 1}"#, 400, "extra"),
    ])
    func refusalsNameTheField(body: String, status: Int, field: String?) {
        do {
            _ = try Self.request(body)
            Issue.record("accepted \(body)")
        } catch {
            #expect(Int(error.status.code) == status, "\(body): \(error)")
            #expect(error.field == field, "\(body): \(error)")
        }
    }

    @Test func payloadLimitsDependOnTheInterface() throws {
        func body(alert bytes: Int, pushType: String = "alert") -> String {
            // {"aps":{"alert":"…"}} is 20 bytes around the text.
            #"{"to": {"all": true}, "aps": {"alert": "\#(String(repeating: "x", count: bytes - 20))"}, "push_type": "\#(pushType)"}"#
        }
        #expect(try Self.request(body(alert: 4096)).payload.json.utf8.count == 4096)
        #expect(throws: ProviderError.self) { try Self.request(body(alert: 4097)) }
        #expect(try Self.request(body(alert: 5120, pushType: "voip")).payload.json.utf8.count == 5120)
        #expect(throws: ProviderError.self) { try Self.request(body(alert: 5121, pushType: "voip")) }
        #expect(try Self.request(body(alert: 2048), transport: .binary).payload.json.utf8.count == 2048)
        do {
            _ = try Self.request(body(alert: 2049), transport: .binary)
            Issue.record("accepted 2,049 bytes over the binary interface")
        } catch {
            #expect(error.status == .contentTooLarge)
            #expect(error.reason.contains("allows 2048"))
        }
    }

    @Test func deviceRegistration() throws {
        let device = try DeviceRegistration(
            body: Array(#"{"token": "\#(Self.token.uppercased())", "user": "u1", "client_info": "iOS 17"}"#.utf8)
        )
        #expect(device == DeviceRegistration(token: Self.token, user: "u1", clientInfo: "iOS 17"))
        #expect(throws: ProviderError.self) { try DeviceRegistration(body: Array(#"{"token": "12"}"#.utf8)) }
        #expect(throws: ProviderError.self) { try DeviceRegistration(body: Array(#"{"user": "u1"}"#.utf8)) }
        // Found by schemathesis: a NUL in client_info was a 500 (PostgreSQL's text cannot hold it).
        #expect(throws: ProviderError.self) {
            try DeviceRegistration(body: Array(#"{"token": "\#(Self.token)", "client_info": "a\u0000b"}"#.utf8))
        }
        let long = String(repeating: "u", count: 256)
        #expect(throws: ProviderError.self) {
            try DeviceRegistration(body: Array(#"{"token": "\#(Self.token)", "user": "\#(long)"}"#.utf8))
        }
    }

    @Test func errorsAnswerJSONWithReasonAndField() {
        let response = ProviderError.invalid("aps.badge", "badge \"x\"").response()
        #expect(response.status == .badRequest)
        #expect(response.headers[.contentType] == "application/json; charset=utf-8")
        let limited = ProviderError.tooManyRequests(.milliseconds(1500), "slow down").response()
        #expect(limited.headers[.retryAfter] == "2")
    }
}
