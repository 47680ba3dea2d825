import Foundation
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Storage
@testable import Support

/// Android beside the iPhones at the API: `platform=fcm` in the chat API, `platform` in `POST /v1/devices`, and what
/// `POST /v1/notifications` makes of a request for FCM.
@Suite struct AndroidRequestTests {
    static let udid = "0123456789abcdef0123456789abcdef01234567"
    static let fcmToken = "dGhpcyBpcyBh:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_" + String(repeating: "Q", count: 100)

    func parse(_ pairs: [String: String]) throws(APIRequestError) -> APIRequest {
        try APIRequest(fields: FormFields(pairs.mapValues { Array($0.utf8) }))
    }

    @Test func theChatAPITakesAnFCMTokenWithPlatformFCMAndKeepsItsCase() throws {
        let join = try parse(["cmd": "join", "udid": Self.udid, "token": Self.fcmToken, "name": "Ann", "code": "c", "platform": "fcm"])
        #expect(join == .join(udid: Self.udid, token: Self.fcmToken, name: "Ann", code: "c", platform: .fcm))
        let update = try parse(["cmd": "update", "udid": Self.udid, "token": Self.fcmToken, "platform": "fcm"])
        #expect(update == .update(udid: Self.udid, token: Self.fcmToken, platform: .fcm))
        #expect(throws: APIRequestError.invalidToken) {
            try parse(["cmd": "join", "udid": Self.udid, "token": Self.fcmToken, "name": "Ann", "code": "c"])
        }
        #expect(throws: APIRequestError.invalidToken) {
            try parse(["cmd": "update", "udid": Self.udid, "token": "short", "platform": "fcm"])
        }
        #expect(throws: APIRequestError.invalidPlatform) {
            try parse(["cmd": "update", "udid": Self.udid, "token": Self.fcmToken, "platform": "android"])
        }
    }

    @Test func aDeviceRegistrationNamesItsPlatform() throws {
        let android = try DeviceRegistration(body: Array(#"{"token": "\#(Self.fcmToken)", "platform": "fcm"}"#.utf8))
        #expect(android.platform == .fcm && android.token == Self.fcmToken)
        let iphone = try DeviceRegistration(body: Array(#"{"token": "\#(String(repeating: "AB", count: 32))"}"#.utf8))
        #expect(iphone.platform == .apns && iphone.token == String(repeating: "ab", count: 32))
        #expect(throws: ProviderError.self) { try DeviceRegistration(body: Array(#"{"token": "\#(Self.fcmToken)"}"#.utf8)) }
        #expect(throws: ProviderError.self) { try DeviceRegistration(body: Array(#"{"token": "x", "platform": "fcm"}"#.utf8)) }
        #expect(throws: ProviderError.self) {
            try DeviceRegistration(body: Array(#"{"token": "\#(Self.fcmToken)", "platform": "windows"}"#.utf8))
        }
    }

    static func request(_ body: String) throws(ProviderError) -> NotificationRequest {
        try NotificationRequest(body: Array(body.utf8), transport: .http2, now: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func theCrossPlatformNotificationIsTheIPhonesAlertAndTheAndroidNotification() throws {
        let request = try Self.request(
            #"{"to": {"all": true}, "notification": {"title": "Sale", "body": "50% off"}, "data": {"offer": "42"}, "priority": 5, "expiration": 1800003600, "collapse_id": "sale"}"#
        )
        #expect(request.payload.json == #"{"aps":{"alert":{"title":"Sale","body":"50% off"}},"offer":"42"}"#)
        #expect(
            request.android.payload
                == #"{"notification":{"title":"Sale","body":"50% off"},"data":{"offer":"42"},"android":{"priority":"normal","ttl":"3600s","collapse_key":"sale"}}"#
        )
    }

    @Test func anAPNsOnlyRequestStillReachesAndroidFromItsAlert() throws {
        let request = try Self.request(
            #"{"to": {"all": true}, "aps": {"alert": "hi", "sound": "default"}, "android": {"priority": "high"}}"#
        )
        #expect(request.android.payload == #"{"notification":{"body":"hi"},"android":{"priority":"high"}}"#)
        let badge = try Self.request(#"{"to": {"all": true}, "aps": {"badge": 3}}"#)
        #expect(badge.android.payload == nil && badge.android.refusal?.field == "notification")
    }

    @Test func dataThatIsNotStringsCannotGoToAndroidAndAMalformedAndroidObjectIsRefused() throws {
        let numbers = try Self.request(#"{"to": {"all": true}, "aps": {"alert": "x"}, "data": {"n": 1}}"#)
        #expect(numbers.android.payload == nil)
        #expect(numbers.android.refusal?.field == "data.n" && numbers.android.refusal?.reason.contains("string") == true)
        for body in [
            #"{"to": {"all": true}, "aps": {"alert": "x"}, "android": {"priority": "urgent"}}"#,
            #"{"to": {"all": true}, "aps": {"alert": "x"}, "android": {"ttl": "1h"}}"#,
            #"{"to": {"all": true}, "aps": {"alert": "x"}, "android": {"direct_boot_ok": true}}"#,
            #"{"to": {"all": true}, "notification": {"subtitle": "x"}}"#,
            #"{"to": {"all": true}, "notification": {"body": 1}}"#,
            #"{"to": {"all": true}}"#,
        ] {
            #expect(throws: ProviderError.self, "\(body)") { try Self.request(body) }
        }
    }

    /// FCM's 4,096 bytes hold for the whole message: an android.notification without a limit of its own went into
    /// every Android recipient's row whatever its size.
    @Test func anFCMMessageOverFCMsLimitIsRefusedWithItsSize() throws {
        let big = try Self.request(
            #"{"to": {"all": true}, "aps": {"alert": "x"}, "android": {"notification": {"body": "\#(String(repeating: "z", count: 5000))"}}}"#
        )
        #expect(big.android.payload == nil)
        #expect(big.android.refusal?.field == "android.notification")
        #expect(big.android.refusal?.reason.contains("4096") == true, "\(big.android.refusal?.reason ?? "")")
        #expect(big.payload.json == #"{"aps":{"alert":"x"}}"#, "the iPhones' payload is not affected")
        let fits = try Self.request(
            #"{"to": {"all": true}, "aps": {"alert": "x"}, "android": {"notification": {"body": "\#(String(repeating: "z", count: 3900))"}}}"#
        )
        #expect((fits.android.payload?.utf8.count ?? 0) > 3900 && fits.android.refusal == nil)
    }

    @Test func tokensListsTakeBothShapes() throws {
        let request = try Self.request(
            #"{"to": {"tokens": ["\#(Self.fcmToken)", "\#(String(repeating: "cd", count: 32))"]}, "aps": {"alert": "x"}}"#
        )
        #expect(request.target == .tokens([Self.fcmToken, String(repeating: "cd", count: 32)]))
    }
}
