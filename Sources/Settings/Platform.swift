/// Where a device's notifications go: Apple's push service, Firebase Cloud Messaging or a browser's push service (`devices.platform`,
/// `active_users.platform`, `push_queue.platform`).
package enum Platform: String, Sendable, CaseIterable, Hashable {
    /// An iPhone (every row from before Android).
    case apns
    /// An Android phone, by its FCM registration token.
    case fcm
    /// A browser, by its Web Push subscription (`web_subscriptions`; the token is derived from its endpoint).
    case web
}
