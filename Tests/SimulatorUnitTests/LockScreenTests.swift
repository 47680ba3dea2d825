import Foundation
import Testing

@testable import Simulator

/// How the simulator's status page reads a payload, as a phone's lock screen would show it (no sockets).
@Suite struct LockScreenTests {
    static func accepted(_ payload: String, token: String = "ab", at seconds: TimeInterval = 0) -> AcceptedNotification {
        AcceptedNotification(
            arrival: Date(timeIntervalSince1970: 1_800_000_000 + seconds),
            format: "http2",
            identifier: 1,
            token: token,
            payload: payload,
            priority: 10,
            expiry: 0,
            connection: 1
        )
    }

    /// An FCM request as an Android phone shows it: the notification's title and body (a chat body split as on the
    /// iPhone), the sound, the data keys, the Firebase project as the app; data alone is silent.
    @Test func anFCMMessageShowsOnAnAndroidLockScreen() {
        var chat = Self.accepted(
            #"{"message":{"token":"t","notification":{"body":"Ann: hi"},"android":{"priority":"high","notification":{"sound":"default"}},"data":{"room":"r"}}}"#
        )
        chat = AcceptedNotification(
            arrival: chat.arrival,
            format: "fcm",
            identifier: 0,
            token: "t",
            payload: chat.payload,
            priority: 10,
            expiry: 0,
            connection: 1
        )
        chat.topic = "pushchat-dev"
        let item = LockScreenItem(chat)
        #expect(item.android && item.app == "pushchat-dev")
        #expect(item.title == "Ann" && item.body == "hi" && item.sound == "default" && item.customKeys == ["room"] && !item.silent)
        let data = LockScreenItem(
            AcceptedNotification(
                arrival: chat.arrival,
                format: "fcm",
                identifier: 0,
                token: "t",
                payload: #"{"message":{"token":"t","data":{"n":"1"}}}"#,
                priority: 10,
                expiry: 0,
                connection: 1
            )
        )
        #expect(data.silent && data.android)
    }

    @Test func aChatMessageShowsItsSenderAndText() {
        let item = LockScreenItem(Self.accepted(#"{"aps":{"alert":"Ann: see you at 5: ok?","sound":"default"}}"#))
        #expect(item.title == "Ann")
        #expect(item.body == "see you at 5: ok?")
        #expect(item.sound == "default")
        #expect(item.badge == nil)
        #expect(!item.silent)
    }

    @Test func anAlertDictionaryShowsTitleSubtitleBodyBadgeAndData() {
        let payload =
            #"{"aps":{"alert":{"title":"Server down","subtitle":"web1","body":"No answer for 5 min"},"badge":3,"sound":{"name":"alarm.caf","critical":1}},"server":{"serverId":1,"name":"web1"}}"#
        let item = LockScreenItem(Self.accepted(payload))
        #expect(item.title == "Server down")
        #expect(item.subtitle == "web1")
        #expect(item.body == "No answer for 5 min")
        #expect(item.badge == 3)
        #expect(item.sound == "alarm.caf")
        #expect(item.customKeys == ["server"])
    }

    @Test func contentAvailableAloneIsASilentPush() {
        #expect(LockScreenItem(Self.accepted(#"{"aps":{"content-available":1},"sync":true}"#)).silent)
        #expect(!LockScreenItem(Self.accepted(#"{"aps":{"content-available":1,"badge":0}}"#)).silent)
        #expect(LockScreenItem(Self.accepted("not json")).body == "not json")
    }

    @Test func screensGroupByTokenNewestFirstAndThePageEscapes() {
        let screens = LockScreen.screens([
            Self.accepted(#"{"aps":{"alert":"A: 1"}}"#, token: "aa", at: 1),
            Self.accepted(#"{"aps":{"alert":"B: 2"}}"#, token: "bb", at: 2),
            Self.accepted(#"{"aps":{"alert":"A: <3>"}}"#, token: "aa", at: 3),
        ])
        #expect(screens.map(\.token) == ["aa", "bb"])
        #expect(screens[0].items.map(\.body) == ["<3>", "1"])
        let html = StatusPage.phone(screens[0])
        #expect(html.contains("&lt;3&gt;"))
        #expect(!html.contains("<3>"))
    }

    /// With several apps on one server each lock screen notification names its app (the topic over HTTP/2).
    @Test func eachNotificationNamesItsApp() {
        var beta = Self.accepted(#"{"aps":{"alert":"Ann: hi"}}"#)
        beta.topic = "com.example.Beta"
        let item = LockScreenItem(beta)
        #expect(item.app == "com.example.Beta")
        #expect(LockScreenItem(Self.accepted(#"{"aps":{"alert":"Ann: hi"}}"#)).app == "PushChat", "binary: no topic on the wire")
        let html = StatusPage.notification(item)
        #expect(html.contains(#"<span class="app">com.example.Beta</span>"#))
    }
}
